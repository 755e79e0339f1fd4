//! `cargo fuzz run openai_events`: see checks/openai.rs for what is checked.
#![no_main]

#[path = "../checks/openai.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
