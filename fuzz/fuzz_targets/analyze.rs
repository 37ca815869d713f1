//! Any bytes as a trace file (trace.dat, perf.data: the reader is chosen by magic, as the
//! CLI does): open it, then run what `kstate report` runs on it — every analyzer's
//! statistics, distribution and log passes, the findings and the HTML — so that a damaged
//! number anywhere (a CPU, a count, a length, an id) is caught where it would size memory.
//! Also classify's figures (system-wide and scoped to a task), and the short time slices
//! `kstate dump` formats on several threads, each walked to its end (where they all meet,
//! they must hold the one pass's events in its order); the merge with
//! each CPU decoded on its own thread (perf.data), which must give the one-thread merge's
//! events in its order; and every analyzer on several threads, which must give its
//! one-thread outcome; and `kstate why`'s critical path of the busiest thread, whole and
//! cut into marker requests, whose segments must cover its window.
//! Run with `-rss_limit_mb=2048`: growing past that is a finding.
#![no_main]
use kstate_analyze::fxmap::FxMap;
use kstate_format::Trace;
use kstate_render::html;
use libfuzzer_sys::fuzz_target;
use std::io::Write;

/// `kstate why` on the thread switched most: no panic, and the path covers its window.
fn why(trace: &Trace) {
    use kstate_analyze::critical::{select, SpanSpec, WalkQuery, Who};
    let Ok(found) = select::candidates(trace, &FxMap::default(), None, None, None) else {
        return;
    };
    let Some(tid) = found.first().map(|c| c.tid) else {
        return;
    };
    for span in [None, Some(SpanSpec::Marker { begin: "b".into(), end: "e".into() })] {
        let mut q = WalkQuery::new(Who::Tid(tid));
        q.span = span;
        if let Ok(w) = kstate_views::why::view(trace, &q) {
            let total: u64 = w.path.by_state.iter().map(|s| s.1).sum();
            assert_eq!(total, w.path.wall_ns, "the path does not cover its window");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("kstate-fuzz-analyze-{}", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(data)
        .unwrap();
    if let Ok(trace) = Trace::open(&path) {
        let source = kstate_analyze::Source::new(trace, "fuzz".into());
        let trace = source.trace();
        let r = kstate_views::survey::of(&source);
        let _ = html::render(&r, None);
        let _ = kstate_views::classify::figures(trace, None);
        why(trace);
        let _ = kstate_views::classify::figures(trace, Some(&[1].into_iter().collect()));
        if let Some(s) = kstate_analyze::slices::ShortSlices::plan(trace, 8192) {
            // Slices that all meet ([`Seams::meet`]) hold the one pass's events, in order.
            let all = kstate_format::stream::merge::IdFilter::all;
            let mut joined = Some(Vec::new());
            let mut before: Option<kstate_analyze::slices::Seams> = None;
            for k in 0..s.len() {
                let Ok(mut w) = s.walk(trace, all(), k) else {
                    joined = None;
                    continue;
                };
                loop {
                    match w.next() {
                        Ok(Some(e)) => {
                            if let Some(j) = &mut joined {
                                j.push((e.ts, e.cpu, e.payload.to_vec()));
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            joined = None;
                            break;
                        }
                    }
                }
                match w.seams() {
                    Ok(seams) if !before.as_ref().is_some_and(|b| !b.meet(&seams)) => {
                        before = Some(seams)
                    }
                    _ => joined = None,
                }
            }
            let one = || {
                let mut m = kstate_format::stream::merge::Merger::new(trace, None, all()).ok()?;
                let mut out = Vec::new();
                while let Some(e) = m.next().ok()? {
                    out.push((e.ts, e.cpu, e.payload.to_vec()));
                }
                Some(out)
            };
            if let (Some(j), Some(one)) = (joined, one()) {
                assert!(
                    j == one,
                    "slices that meet hold other events than the one pass"
                );
            }
        }
        let merged = |threads| {
            let mut out = Vec::new();
            let all = kstate_format::stream::merge::IdFilter::all();
            let Ok(mut m) =
                kstate_format::stream::merge::Merger::threaded(trace, None, all, threads)
            else {
                return None;
            };
            while let Ok(Some(e)) = m.next() {
                out.push((
                    e.ts,
                    e.cpu,
                    e.payload.to_vec(),
                    format!("{:?}", e.lost_before),
                ));
            }
            Some(out)
        };
        assert_eq!(merged(1), merged(2), "threaded merge differs");
        // Every analyzer on several threads (time slices joined, or decoded for one pass)
        // gives the one-thread outcome.
        for info in kstate_analyze::analyzers::ALL {
            if info.name == "sysinfo" {
                continue;
            }
            let run = |threads| {
                let mut q = kstate_analyze::Query::of(info).mode(kstate_analyze::Mode::Stat);
                q.threads = threads;
                source.run(&q, &mut kstate_analyze::analyzer::NoLog).map(|o| {
                    let mut rows: Vec<_> = o
                        .rows
                        .iter()
                        .map(|r| {
                            let a = &r.agg;
                            (r.key.clone(), a.count, a.total, a.min(), a.max, a.flagged)
                        })
                        .collect();
                    rows.sort();
                    let errors: Vec<String> = o.errors.iter().map(|e| e.to_string()).collect();
                    (rows, format!("{:?}", o.counts), o.span, o.lost, errors)
                })
            };
            let one = run(1).map_err(|e| e.to_string());
            let many = run(3).map_err(|e| e.to_string());
            assert_eq!(one, many, "{} on 3 threads differs from one", info.name);
        }
    }
});
