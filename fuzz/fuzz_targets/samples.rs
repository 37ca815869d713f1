//! Any bytes as a SAMPLES section, and as a perf.data (file and pipe layouts): decoding,
//! walking every perf record, counting and profiling must return an error or a value,
//! never panic, and stay within the memory limit.
#![no_main]
use kstate_format::perf::decode::{count_source, records, RecordSource};
use kstate_format::perf::file::PerfFile;
use kstate_format::sections::samples::{count, decode};
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fn walk(b: &[u8]) {
    if let Ok(s) = decode(b) {
        for ch in &s.chunks {
            for r in records(ch.data, s.header_of(ch)).take(100_000) {
                if r.is_err() {
                    break;
                }
            }
        }
    }
    let _ = count(b);
}

/// The bytes as a perf.data file: its header, every record parsed, the counts, and a
/// profile of the trace it opens as.
fn perf(data: &[u8], name: &str) {
    let path = std::env::temp_dir().join(format!("kstate-fuzz-{}-{name}", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(data)
        .unwrap();
    if let Ok(pf) = PerfFile::open(&path) {
        let events = pf.events().to_vec();
        let mut n = 0u32;
        let _ = pf.visit(&mut |r| {
            n += 1;
            if n > 100_000 {
                return Err(kstate_format::Error::corrupt(0, "enough"));
            }
            let _ = r.parse(&events);
            Ok(())
        });
        let _ = count_source(&pf);
        let _ = pf.cmdline();
        let _ = pf.build_ids();
    }
    if let Ok(trace) = kstate_format::Trace::open(&path) {
        let _ = kstate_views::profile::profile(&trace, &Default::default());
    }
    let _ = std::fs::remove_file(&path);
}

fuzz_target!(|data: &[u8]| {
    walk(data);
    // Behind a valid version line and header, so the fuzzer reaches the records at once.
    let attr = kstate_format::perf::decode::Attr {
        type_: 1,
        sample_type: 0x1a7, // IP TID TIME CPU PERIOD CALLCHAIN
        flags: 1 << 18,     // sample_id_all
        ..Default::default()
    };
    let mut b =
        kstate_format::sections::samples::encode_header("mono", "cpu-clock", &attr.to_bytes());
    // And a second event, so 'S' records (event 1's rings) are reached too.
    b.extend(kstate_format::sections::samples::encode_event(
        "page-faults",
        &attr.to_bytes(),
    ));
    b.extend(data);
    walk(&b);
    // Samples with user registers and a stack copy (`--stack-bytes`).
    let attr = kstate_format::perf::decode::Attr {
        sample_type: 0x1a7 | 1 << 12 | 1 << 13, // ... REGS_USER STACK_USER
        sample_regs_user: kstate_format::perf::decode::regs::UNWIND_MASK,
        sample_stack_user: 64,
        ..attr
    };
    let mut b =
        kstate_format::sections::samples::encode_header("mono", "cpu-clock", &attr.to_bytes());
    b.extend(data);
    walk(&b);

    // As a perf.data as it is (the corpus holds real ones), and as the records of a
    // pipe-mode one after an attribute record, so the fuzzer reaches the records at once.
    if data.starts_with(b"PERFILE2") {
        perf(data, "file");
    } else {
        let mut p = b"PERFILE2".to_vec();
        p.extend_from_slice(&16u64.to_le_bytes());
        let a = attr.to_bytes();
        p.extend_from_slice(&64u32.to_le_bytes());
        p.extend_from_slice(&0u16.to_le_bytes());
        p.extend_from_slice(&((8 + a.len() + 8) as u16).to_le_bytes());
        p.extend_from_slice(&a);
        p.extend_from_slice(&7u64.to_le_bytes()); // its id
        p.extend_from_slice(data);
        perf(&p, "pipe");
    }
});
