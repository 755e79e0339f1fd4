//! `cargo fuzz run http_response`: see checks/http_response.rs for what is checked.
#![no_main]

#[path = "../checks/http_response.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
