//! Any bytes as a SAMPLES section: decoding, walking every perf record and counting must
//! return an error or a value, never panic.
#![no_main]
use kstate_format::samples::{count, decode, records};
use libfuzzer_sys::fuzz_target;

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

fuzz_target!(|data: &[u8]| {
    walk(data);
    // Behind a valid version line and header, so the fuzzer reaches the records at once.
    let attr = kstate_format::samples::Attr {
        type_: 1,
        sample_type: 0x1a7, // IP TID TIME CPU PERIOD CALLCHAIN
        flags: 1 << 18,     // sample_id_all
        ..Default::default()
    };
    let mut b = kstate_format::samples::encode_header("mono", "cpu-clock", &attr.to_bytes());
    // And a second event, so 'S' records (event 1's rings) are reached too.
    b.extend(kstate_format::samples::encode_event("page-faults", &attr.to_bytes()));
    b.extend(data);
    walk(&b);
    // Samples with user registers and a stack copy (`--stack-bytes`).
    let attr = kstate_format::samples::Attr {
        sample_type: 0x1a7 | 1 << 12 | 1 << 13, // ... REGS_USER STACK_USER
        sample_regs_user: kstate_format::samples::regs::UNWIND_MASK,
        sample_stack_user: 64,
        ..attr
    };
    let mut b = kstate_format::samples::encode_header("mono", "cpu-clock", &attr.to_bytes());
    b.extend(data);
    walk(&b);
});
