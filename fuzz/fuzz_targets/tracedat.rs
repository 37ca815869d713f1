//! Any bytes as a trace.dat file: open it and stream every event through the merge.
#![no_main]
use kstate_analyze::merge::{IdFilter, Merger};
use kstate_format::Trace;
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("kstate-fuzz-{}.dat", std::process::id()));
    std::fs::File::create(&path).unwrap().write_all(data).unwrap();
    if let Ok(trace) = Trace::open(&path) {
        if let Ok(mut m) = Merger::new(&trace, None, IdFilter::all()) {
            // Errors end a CPU's stream; the loop must still terminate.
            for _ in 0..1_000_000 {
                match m.next() {
                    Ok(Some(_)) | Err(_) => {}
                    Ok(None) => break,
                }
            }
        }
    }
});
