//! Any bytes as a perf.data whose tracepoint samples are read straight from the file (the
//! direct decoder the analyses use): it must return events or an error, never panic, and
//! give what the page path gives for the same CPU — the same events (payloads, times), in
//! the same order, and the same losses. Seed the corpus with small real perf.data files
//! (`perf record -e raw_syscalls:* ...`); run with `-rss_limit_mb=2048`.
#![no_main]
use kstate_format::page::{read_header, PageCursor};
use kstate_format::{Item, Lost, Trace};
use libfuzzer_sys::fuzz_target;
use std::io::Write;

/// Events (ts, payload) and the lost count of one CPU, the first `cap` of them.
type Seen = (Vec<(u64, Vec<u8>)>, u64, bool);

fn direct(trace: &Trace, i: usize, cap: usize) -> Option<Seen> {
    let mut ev = trace.events_for(i, None)?.ok()?;
    let (mut out, mut lost) = (Vec::new(), 0u64);
    while out.len() < cap {
        match ev.next() {
            Ok(Some(Item::Event { ts, start, len })) => {
                out.push((ts, ev.bytes()[start..start + len].to_vec()))
            }
            Ok(Some(Item::Lost(n))) => lost += n,
            Ok(None) => return Some((out, lost, true)),
            Err(_) => return Some((out, lost, false)),
        }
    }
    Some((out, lost, false))
}

fn paged(trace: &Trace, i: usize, cap: usize) -> Seen {
    let (mut out, mut lost) = (Vec::new(), 0u64);
    let Ok(mut src) = trace.pages(i) else {
        return (out, lost, false);
    };
    loop {
        match src.advance() {
            Ok(true) => {}
            Ok(false) => return (out, lost, true),
            Err(_) => return (out, lost, false),
        }
        let page = src.page();
        let Ok(h) = read_header(page, &trace.layout) else {
            return (out, lost, false);
        };
        if let Lost::Count(n) = h.lost {
            lost += n;
        }
        let mut c = PageCursor::new(&h, &trace.layout);
        while let Ok(Some(r)) = c.next(page, trace.layout.endian) {
            if out.len() >= cap {
                return (out, lost, false);
            }
            out.push((r.ts, page[r.start..r.start + r.len].to_vec()));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("kstate-fuzz-perfdirect-{}", std::process::id()));
    std::fs::File::create(&path).unwrap().write_all(data).unwrap();
    if let Ok(trace) = Trace::open(&path) {
        for i in 0..trace.cpu_data.len() {
            let Some((d, d_lost, d_whole)) = direct(&trace, i, 100_000) else {
                continue;
            };
            let (p, p_lost, p_whole) = paged(&trace, i, 100_000);
            if !(d_whole && p_whole) {
                continue;
            }
            assert_eq!(d.len(), p.len(), "CPU {i}: events");
            assert_eq!(d_lost, p_lost, "CPU {i}: lost");
            let mut prev = 0u64;
            for (k, ((dt, dp), (pt, pp))) in d.iter().zip(&p).enumerate() {
                // Pages pad a record to 4 bytes.
                assert_eq!(&pp[..dp.len().min(pp.len())], &dp[..dp.len().min(pp.len())], "CPU {i} event {k}");
                assert_eq!(pp.len(), (dp.len() + 3) & !3, "CPU {i} event {k}: length");
                // A page stores a gap in time of up to 2^59 ns.
                if dt.wrapping_sub(prev) < 1 << 59 {
                    assert_eq!(dt, pt, "CPU {i} event {k}: time");
                }
                prev = *dt;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
