//! Any bytes as a perf.data whose tracepoint samples are read straight from the file (the
//! direct decoder the analyses use): it must return events or an error, never panic, and
//! give what the page path gives for the same CPU — the same events (payloads, times), in
//! the same order, and the same losses. Read from any of its marks (where a time slice
//! starts), a CPU gives the same events from that place on. Opened with its records
//! scanned in parts on several threads, the file gives what one scan gives: the same
//! error, or the same CPUs, names and events. Seed the corpus with small real perf.data files
//! (`perf record -e raw_syscalls:* ...`); run with `-rss_limit_mb=2048`.
#![no_main]
use kstate_format::page::{read_header, PageCursor};
use kstate_format::{Item, Lost, Trace};
use libfuzzer_sys::fuzz_target;
use std::io::Write;

/// Events (ts, payload) and the lost count of one CPU, the first `cap` of them.
type Seen = (Vec<(u64, Vec<u8>)>, u64, bool);

fn direct(trace: &Trace, i: usize, cap: usize) -> Option<Seen> {
    direct_from(trace, i, 0, cap)
}

fn direct_from(trace: &Trace, i: usize, mark: usize, cap: usize) -> Option<Seen> {
    let mut ev = trace.events_for(i, None, mark)?.ok()?;
    let (mut out, mut lost, mut items) = (Vec::new(), 0u64, Vec::new());
    while out.len() < cap {
        if ev.fill(&mut items).is_err() {
            return Some((out, lost, false));
        }
        if items.is_empty() {
            return Some((out, lost, true));
        }
        for &item in &items {
            if out.len() >= cap {
                return Some((out, lost, false));
            }
            match item {
                Item::Event { ts, start, len, .. } => {
                    out.push((ts, ev.bytes()[start..start + len].to_vec()))
                }
                Item::Lost(n) => lost += n,
            }
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
    std::fs::File::create(&path)
        .unwrap()
        .write_all(data)
        .unwrap();
    kstate_format::set_open_threads(1);
    let one = Trace::open(&path);
    // Parts of 64 bytes and more, on 3 threads.
    std::env::set_var(kstate_format::PART_BYTES_ENV, "64");
    kstate_format::set_open_threads(3);
    let parts = Trace::open(&path);
    std::env::remove_var(kstate_format::PART_BYTES_ENV);
    match (&one, &parts) {
        (Ok(a), Ok(b)) => {
            let cpus = |t: &Trace| {
                t.cpu_data
                    .iter()
                    .map(|c| (c.cpu, c.file_bytes))
                    .collect::<Vec<_>>()
            };
            assert_eq!(cpus(a), cpus(b), "CPUs scanned in parts");
            assert_eq!(a.comms, b.comms, "names scanned in parts");
            for i in 0..a.cpu_data.len() {
                assert_eq!(
                    direct(a, i, 10_000),
                    direct(b, i, 10_000),
                    "CPU {i} scanned in parts"
                );
            }
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "errors scanned in parts"),
        (a, b) => panic!(
            "one scan: {:?}; in parts: {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }
    if let Ok(trace) = one {
        for i in 0..trace.cpu_data.len() {
            let Some((d, d_lost, d_whole)) = direct(&trace, i, 100_000) else {
                continue;
            };
            // From a mark on: the events from the mark's record on, the first of them no
            // later than any after.
            let marks = trace.marks(i).unwrap_or_default();
            for (k, &t) in marks
                .iter()
                .enumerate()
                .skip(1)
                .step_by(marks.len() / 4 + 1)
            {
                let Some((m, _, _)) = direct_from(&trace, i, k, 64) else {
                    continue;
                };
                let at = d.iter().position(|e| Some(e) == m.first());
                if let (Some(j), true) = (at, d_whole) {
                    let n = m.len().min(d.len() - j);
                    assert_eq!(&d[j..j + n], &m[..n], "CPU {i} from mark {k}");
                    assert!(
                        d[..j].iter().all(|e| e.0 <= t),
                        "CPU {i}: an event before mark {k} is later"
                    );
                }
            }
            let (p, p_lost, p_whole) = paged(&trace, i, 100_000);
            if !(d_whole && p_whole) {
                continue;
            }
            assert_eq!(d.len(), p.len(), "CPU {i}: events");
            assert_eq!(d_lost, p_lost, "CPU {i}: lost");
            for (k, ((dt, dp), (pt, pp))) in d.iter().zip(&p).enumerate() {
                // Pages pad a record to 4 bytes.
                assert_eq!(
                    &pp[..dp.len().min(pp.len())],
                    &dp[..dp.len().min(pp.len())],
                    "CPU {i} event {k}"
                );
                assert_eq!(pp.len(), (dp.len() + 3) & !3, "CPU {i} event {k}: length");
                assert_eq!(dt, pt, "CPU {i} event {k}: time");
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
