//! Any bytes behind each compressed container's magic (gzip, zstd, xz; the first byte
//! picks), opened as a trace: unpacking into an unnamed copy and the readers behind it must
//! return an error or a trace, never panic or hang.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;

mod common;

const MAGICS: [&[u8]; 3] = [b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\xfd7zXZ\x00"];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let path = std::env::temp_dir().join(format!("kstate-fuzz-packed-{}", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(MAGICS[pick as usize % MAGICS.len()]).unwrap();
    f.write_all(rest).unwrap();
    drop(f);
    common::open_and_read(&path);
});
