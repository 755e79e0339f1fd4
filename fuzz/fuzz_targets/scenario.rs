//! `cargo fuzz run scenario`: see checks/scenario.rs for what is checked.
#![no_main]

#[path = "../checks/scenario.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
