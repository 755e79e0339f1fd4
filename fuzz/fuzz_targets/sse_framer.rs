//! `cargo fuzz run sse_framer`: see checks/sse.rs for what is checked.
#![no_main]

#[path = "../checks/sse.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
