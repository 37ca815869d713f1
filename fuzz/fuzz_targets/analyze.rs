//! Any bytes as a trace file (trace.dat, perf.data: the reader is chosen by magic, as the
//! CLI does): open it, then run what `kstate report` runs on it — every analyzer's
//! statistics, distribution and log passes, the findings and the HTML — so that a damaged
//! number anywhere (a CPU, a count, a length, an id) is caught where it would size memory.
//! Also classify's figures (system-wide and scoped to a task), and the short time slices
//! `kstate dump` formats on several threads, each walked to its end; and the merge with
//! each CPU decoded on its own thread (perf.data), which must give the one-thread merge's
//! events in its order.
//! Run with `-rss_limit_mb=2048`: growing past that is a finding.
#![no_main]
use kstate_analyze::fxmap::FxMap;
use kstate_format::Trace;
use kstate_analyze::survey::survey;
use kstate_render::html;
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("kstate-fuzz-analyze-{}", std::process::id()));
    std::fs::File::create(&path).unwrap().write_all(data).unwrap();
    if let Ok(trace) = Trace::open(&path) {
        let r = survey(&trace, "fuzz", &FxMap::default());
        let _ = html::render(&r, None);
        let _ = kstate_analyze::classify::figures(&trace, None);
        let _ = kstate_analyze::classify::figures(&trace, Some(&[1].into_iter().collect()));
        if let Some(s) = kstate_analyze::slices::ShortSlices::plan(&trace, 8192) {
            for k in 0..s.len() {
                if let Ok(mut w) = s.walk(&trace, kstate_analyze::merge::IdFilter::all(), k) {
                    while let Ok(Some(_)) = w.next() {}
                }
            }
        }
        let merged = |threads| {
            let mut out = Vec::new();
            let all = kstate_analyze::merge::IdFilter::all();
            let Ok(mut m) = kstate_analyze::merge::Merger::threaded(&trace, None, all, threads)
            else {
                return None;
            };
            while let Ok(Some(e)) = m.next() {
                out.push((e.ts, e.cpu, e.payload.to_vec(), format!("{:?}", e.lost_before)));
            }
            Some(out)
        };
        assert_eq!(merged(1), merged(2), "threaded merge differs");
    }
});
