//! `cargo fuzz run dataset`: see checks/dataset.rs for what is checked.
#![no_main]

#[path = "../checks/dataset.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
