//! Any bytes as a trace.dat file: open it and stream every event through the merge.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;

mod common;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("kstate-fuzz-{}.dat", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(data)
        .unwrap();
    common::open_and_read(&path);
});
