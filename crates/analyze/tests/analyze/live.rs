//! The live driver over a recording that arrives a few pages at a time, CPUs at
//! different moments, against the file driver over the whole recording.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kstate_analyze::analyzer::{LogRow, LogSink, Mode};
use kstate_analyze::live::{GrowingPages, Interval, Live};
use kstate_analyze::{Query, Source};
use kstate_format::page::read_header;
use kstate_format::{DataLoc, PageSource, Trace};

const TRACES: [&str; 2] = ["lisa-sched_load", "lisa-rtapp"];
/// Analyzer and keying: these traces hold switches but no wake-ups.
const ANALYZERS: [(&str, &str); 3] = [("offcpu", "pid"), ("offcpu", "state"), ("runq", "pid")];

fn fixture(name: &str) -> std::path::PathBuf {
    kstate_testdata::path(&format!("{name}/trace.dat"))
}

/// One CPU's pages in the file, published to the live reader a few at a time.
struct Feed {
    limit: Arc<AtomicU64>,
    /// Raw timestamp of each page's header.
    page_ts: Vec<u64>,
    published: usize,
}

/// Feeds `trace` to a live driver in uneven steps per CPU, the horizon being what the
/// unpublished pages cannot undercut; returns every interval.
fn run_live(path: &Path, interval: u64) -> (Vec<Interval>, u64) {
    let trace = Trace::open(path).unwrap();
    let ps = trace.layout.page_size;
    let mut feeds = Vec::new();
    let mut sources: Vec<(u32, Box<dyn PageSource>)> = Vec::new();
    for cd in &trace.cpu_data {
        let DataLoc::Plain { path, offset, size } = &cd.loc else {
            panic!("fixture is not uncompressed");
        };
        let mut pages = trace
            .pages(trace.cpu_data.iter().position(|c| c.cpu == cd.cpu).unwrap())
            .unwrap();
        let mut page_ts = Vec::new();
        while pages.advance().unwrap() {
            page_ts.push(read_header(pages.page(), &trace.layout).unwrap().timestamp);
        }
        assert_eq!(page_ts.len() as u64 * ps as u64, *size);
        let limit = Arc::new(AtomicU64::new(0));
        sources.push((
            cd.cpu,
            Box::new(GrowingPages::open(path, *offset, ps, Arc::clone(&limit)).unwrap()),
        ));
        feeds.push(Feed {
            limit,
            page_ts,
            published: 0,
        });
    }
    let start = Source::open(path)
        .unwrap()
        .aggregate(&Query::new("runq").unwrap())
        .unwrap()
        .trace_start
        .unwrap();
    let queries: Vec<_> = ANALYZERS
        .iter()
        .map(|(a, by)| Query::new(a).unwrap().keyed(Some(by)))
        .collect();
    let mut live = Live::new(trace.clone(), sources, &queries, start, interval).unwrap();
    let mut out = Vec::new();
    let mut step = 0usize;
    while feeds.iter().any(|f| f.published < f.page_ts.len()) {
        // CPUs deliver unevenly: one page here, three there, none elsewhere.
        for (i, f) in feeds.iter_mut().enumerate() {
            let n = (step + i * 2) % 4;
            f.published = (f.published + n).min(f.page_ts.len());
            f.limit.store((f.published * ps) as u64, Ordering::Release);
        }
        step += 1;
        let horizon = feeds
            .iter()
            .filter_map(|f| f.page_ts.get(f.published))
            .min()
            .map(|ts| ts.saturating_sub(1));
        if let Some(h) = horizon {
            out.extend(live.advance(h).unwrap());
        }
    }
    out.extend(live.finish(0).unwrap());
    (out, start)
}

#[derive(Default)]
struct Rows(Vec<(String, u64, u64)>);

impl LogSink for Rows {
    fn row(&mut self, row: &LogRow<'_>) -> std::io::Result<()> {
        if row.kind == kstate_analyze::analyzer::Kind::Dur {
            self.0.push((row.key.to_string(), row.start, row.value));
        }
        Ok(())
    }
}

/// Per key: count, total, max.
type Sums = BTreeMap<String, (u64, u64, u64)>;

/// Keys by task compared by pid: a log row names the task as it was then, an interval
/// as it was when the interval ended (an exec between renames it).
fn task(key: &str, by: &str) -> String {
    match by {
        "pid" => key.rsplit('-').next().unwrap().to_string(),
        _ => key.to_string(),
    }
}

#[test]
fn live_intervals_add_up_to_the_file_pass_and_hold_what_ended_in_them() {
    let interval = 50_000_000;
    for name in TRACES {
        let path = fixture(name);
        let (intervals, start) = run_live(&path, interval);
        assert!(intervals.len() > 3, "{name}: {} intervals", intervals.len());
        // Consecutive, each `interval` long but the last.
        for w in intervals.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(w[0].end - w[0].start, interval);
        }
        assert_eq!(intervals[0].start, start);
        let source = Source::open(&path).unwrap();
        let mut checked = 0;
        for (ai, (a, by)) in ANALYZERS.iter().enumerate() {
            let query = || {
                let mut q = Query::new(a).unwrap();
                q.by = Some(by.to_string());
                q
            };
            // The whole recording: the file driver's rows.
            let whole = source.aggregate(&query()).unwrap();
            let mut want: Sums = BTreeMap::new();
            for r in &whole.rows {
                let e = want.entry(task(&r.key, by)).or_default();
                e.0 += r.agg.count;
                e.1 += r.agg.total;
                e.2 = e.2.max(r.agg.max);
            }
            let mut got: Sums = BTreeMap::new();
            for iv in &intervals {
                for r in &iv.outcomes[ai].rows {
                    let e = got.entry(task(&r.key, by)).or_default();
                    e.0 += r.agg.count;
                    e.1 += r.agg.total;
                    e.2 = e.2.max(r.agg.max);
                }
            }
            assert_eq!(got, want, "{name} {a}: intervals summed vs the file pass");
            let total_events: u64 = intervals.iter().map(|i| i.outcomes[ai].counts.events).sum();
            assert_eq!(total_events, whole.counts.events, "{name} {a}");

            // Each interval: the file pass's pairs that ended in it (start + duration).
            let mut q = query();
            q.mode = Mode::Log;
            let mut rows = Rows::default();
            source.run(&q, &mut rows).unwrap();
            for iv in &intervals[..intervals.len() - 1] {
                let mut want: Sums = BTreeMap::new();
                for (key, s, v) in &rows.0 {
                    let end = s + v;
                    if end >= iv.start && end < iv.end {
                        let e = want.entry(task(key, by)).or_default();
                        e.0 += 1;
                        e.1 += v;
                        e.2 = e.2.max(*v);
                    }
                }
                let got: Sums = iv.outcomes[ai].rows.iter().fold(Sums::new(), |mut m, r| {
                    let e = m.entry(task(&r.key, by)).or_default();
                    e.0 += r.agg.count;
                    e.1 += r.agg.total;
                    e.2 = e.2.max(r.agg.max);
                    m
                });
                assert_eq!(got, want, "{name} {a} interval {}..{}", iv.start, iv.end);
                checked += got.len();
            }
        }
        assert!(checked > 10, "{name}: only {checked} keyed rows checked");
        // Every event is counted on its CPU once.
        let trace = Trace::open(&path).unwrap();
        let events: u64 = intervals
            .iter()
            .flat_map(|i| &i.cpus)
            .map(|c| c.events)
            .sum();
        let mut m = kstate_format::stream::merge::Merger::new(
            &trace,
            None,
            kstate_format::stream::merge::IdFilter::all(),
        )
        .unwrap();
        let mut n = 0u64;
        while m.next().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(events, n, "{name}: events per CPU");
    }
}
