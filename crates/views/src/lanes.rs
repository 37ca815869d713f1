//! The overview's lanes for any stretch of a recording, binned at query time to the number
//! of bins asked for (the browser asks for its chart's width in pixels, so it never
//! receives more points than it can draw): CPU busy per CPU, run-queue length per CPU,
//! block requests in flight per device, system-call durations as a density scatter (the
//! LKST log scatter), and events lost per CPU. [`crate::timeline`] bins a whole recording
//! to a fixed 1000 bins for findings; this answers a zoomed window at any width.
//!
//! Levels (queue lengths) are read from the start of the trace whatever the window, so
//! the level held when the window opens is known; a bin shows the largest level held in
//! it. CPU busy is the share of the bin a CPU ran a task other than idle (pid 0),
//! from sched_switch. Lost events are counted where the kernel reports them, on the next
//! sched_switch of that CPU (a recording without sched_switch has neither lane).

use std::collections::BTreeMap;

use kstate_analyze::analyzer::{Kind, LogRow, LogSink};
use kstate_analyze::filter::{Filters, TimeSpec, WindowSpec};
use kstate_analyze::{Error, Query, Source};
use kstate_format::stream::merge::{IdFilter, Merger};

mod summary;
pub use summary::Summary;

/// Most bins one request may ask for.
pub const MAX_BINS: usize = 8192;

/// Duration rows of the scatter per decade (log scale).
pub const ROWS_PER_DECADE: u32 = 4;

/// The stretch of time asked for: [from, to] in trace-clock ns, cut into `bins`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    pub from: u64,
    pub to: u64,
    pub bins: usize,
}

impl Span {
    /// Checks the bounds; `bins` is clamped to 1..=[`MAX_BINS`].
    pub fn new(from: u64, to: u64, bins: usize) -> Result<Span, Error> {
        if to <= from {
            return Err(Error::Query(format!(
                "empty time span {from}..{to}: it must end after it starts"
            )));
        }
        Ok(Span {
            from,
            to,
            bins: bins.clamp(1, MAX_BINS),
        })
    }

    fn bin_ns(&self) -> f64 {
        (self.to - self.from) as f64 / self.bins as f64
    }

    fn bin(&self, ts: u64) -> Option<usize> {
        if ts < self.from || ts > self.to {
            return None;
        }
        Some((((ts - self.from) as f64 / self.bin_ns()) as usize).min(self.bins - 1))
    }

    /// Adds the share of each bin that [a, b) covers.
    fn cover(&self, v: &mut [f64], a: u64, b: u64) {
        let (a, b) = (a.max(self.from), b.min(self.to));
        if b <= a {
            return;
        }
        let w = self.bin_ns();
        let (ia, ib) = (
            self.bin(a).unwrap_or(0),
            self.bin(b).unwrap_or(self.bins - 1),
        );
        for (i, c) in v.iter_mut().enumerate().take(ib + 1).skip(ia) {
            let lo = (self.from as f64 + i as f64 * w).max(a as f64);
            let hi = (self.from as f64 + (i + 1) as f64 * w).min(b as f64);
            if hi > lo {
                *c += (hi - lo) / w;
            }
        }
    }

    /// Raises bins overlapping [a, b] to at least `level`.
    fn hold(&self, v: &mut [f64], a: u64, b: u64, level: f64) {
        let (a, b) = (a.max(self.from), b.min(self.to));
        if b < a {
            return;
        }
        let (ia, ib) = (
            self.bin(a).unwrap_or(0),
            self.bin(b).unwrap_or(self.bins - 1),
        );
        for x in &mut v[ia..=ib] {
            *x = x.max(level);
        }
    }
}

/// One series over the span's bins.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub name: String,
    /// Per bin: busy share (0..=1), the largest level held, or events lost.
    pub values: Vec<f64>,
    /// The largest value, and the start of the first bin that holds it.
    pub peak: (f64, u64),
}

impl Lane {
    fn new(name: String, values: Vec<f64>, span: &Span) -> Lane {
        let mut peak = (0.0, span.from);
        for (i, v) in values.iter().enumerate() {
            if *v > peak.0 {
                peak = (*v, span.from + (i as f64 * span.bin_ns()) as u64);
            }
        }
        Lane { name, values, peak }
    }
}

/// Durations over time as a density: per bin and per duration row (log scale,
/// [`ROWS_PER_DECADE`] rows a decade), how many calls started there.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scatter {
    /// (bin, row, count), rows counted from `row0`.
    pub cells: Vec<(u32, u32, u32)>,
    /// Row r holds durations in [10^((row0 + r) / ROWS_PER_DECADE), the next row) ns.
    pub row0: i32,
    pub rows: u32,
    /// Per bin, the longest call and its key.
    pub longest: Vec<Option<(u64, String)>>,
    pub calls: u64,
}

/// What the overview shows for one span.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// The first event of the trace: windows count from it, as on the command line.
    pub trace_start: u64,
    pub span: Span,
    pub busy: Vec<Lane>,
    pub runq: Vec<Lane>,
    pub blk: Vec<Lane>,
    pub syscalls: Option<Scatter>,
    pub lost: Vec<Lane>,
    /// Lanes the recording cannot give, and why.
    pub missing: Vec<String>,
}

/// The absolute window of `span`, as a filter.
fn window_of(span: &Span) -> WindowSpec {
    WindowSpec {
        from: Some(TimeSpec::Abs(span.from)),
        to: Some(TimeSpec::Abs(span.to)),
    }
}

/// The lanes of `source` over `span`, for `filters` (their window is replaced by the
/// span): the system calls of the scatter as `kstate analyze syscall` selects them (keys
/// and durations too); the run-queue and block lanes as `kstate analyze runq` and
/// `blkqueue` do with the task and CPU filters; CPU busy and losses on the CPUs selected,
/// busy counting only the time a selected task ran. Each call reads the file:
/// [`Summary`] answers the same from one pass.
pub fn overview(source: &Source, span: Span, filters: &Filters) -> Result<Overview, Error> {
    let mut o = Overview::new(span);
    busy_and_lost(source, &mut o, filters)?;
    for name in LEVEL_LANES {
        let mut levels = Levels::new(span);
        let read = source.run(&level_query(name, filters)?, &mut levels);
        let read = read.map(|out| (out.trace_start, out.span));
        o.put_levels(name, read.map_err(|e| first_line(&e)), levels);
    }
    syscall_lane(source, &mut o, filters)?;
    Ok(o)
}

/// The analyzers whose levels are lanes: run-queue lengths, then block requests in flight.
const LEVEL_LANES: [&str; 2] = ["runq", "blkqueue"];

/// What a level lane's pass said: the trace's first event and the span it read, or the
/// first line of its error.
type LevelRead = Result<(Option<u64>, Option<(u64, u64)>), String>;

/// The pass of a level lane: from the start of the trace (the level when the span opens
/// is known), with the task and CPU filters only (keys and durations are the syscall
/// panel's).
fn level_query(name: &str, filters: &Filters) -> Result<Query, Error> {
    let mut q = Query::new(name)?;
    q.mode = kstate_analyze::Mode::Log;
    q.filters = Filters {
        pids: filters.pids.clone(),
        tids: filters.tids.clone(),
        comms: filters.comms.clone(),
        cpus: filters.cpus.clone(),
        ..Filters::default()
    };
    Ok(q)
}

/// The system-call scatter of `o.span` from a pass over the span (the page index reads
/// only around it).
fn syscall_lane(source: &Source, o: &mut Overview, filters: &Filters) -> Result<(), Error> {
    let mut q = Query::new("syscall")?;
    q.mode = kstate_analyze::Mode::Log;
    q.filters = filters.clone();
    q.filters.window = Some(window_of(&o.span));
    q.filters.not_window = None;
    let mut sc = ScatterSink::new(o.span);
    match source.run(&q, &mut sc) {
        Ok(out) => {
            o.trace_start = out.trace_start.unwrap_or(o.trace_start);
            o.syscalls = Some(sc.finish());
        }
        Err(e) => o.missing.push(format!("syscall: {}", first_line(&e))),
    }
    Ok(())
}

impl Overview {
    fn new(span: Span) -> Overview {
        Overview {
            trace_start: 0,
            span,
            busy: Vec::new(),
            runq: Vec::new(),
            blk: Vec::new(),
            syscalls: None,
            lost: Vec::new(),
            missing: Vec::new(),
        }
    }

    /// The lanes `levels` followed in the pass of `name` (one of [`LEVEL_LANES`]).
    fn put_levels(&mut self, name: &str, read: LevelRead, levels: Levels) {
        match read {
            Ok((start, read)) => {
                self.trace_start = start.unwrap_or(self.trace_start);
                let lanes = levels.finish(read);
                if name == LEVEL_LANES[0] {
                    self.runq = lanes;
                } else {
                    self.blk = lanes;
                }
            }
            Err(e) => self.missing.push(format!("{name}: {e}")),
        }
    }
}

fn first_line(e: &Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

/// What the overview says without sched_switch events.
const NO_SWITCHES: &str =
    "CPU busy and losses over time: no sched:sched_switch events (record -e sched)";

/// CPU busy from sched_switch, and losses, in one pass: on the CPUs `filters` selects,
/// busy while a task it selects runs.
fn busy_and_lost(source: &Source, o: &mut Overview, filters: &Filters) -> Result<(), Error> {
    let trace = source.trace();
    let mut missing = Vec::new();
    let sw = kstate_analyze::analyzers::sched::switch(trace, &mut missing);
    // Losses are counted on the way through sched_switch; without it, reading every
    // event just for them would cost a whole pass (the panels' headers still count them).
    let Some(s) = sw else {
        o.missing.push(NO_SWITCHES.into());
        return Ok(());
    };
    let filter = IdFilter::only([s.id]);
    let mut busy = Busy::new(o.span, trace.cpu_count.max(1) as usize);
    let mut m = match source.pages() {
        Some(index) => Merger::indexed(trace, filter, index, None)?,
        None => Merger::new(trace, None, filter)?,
    };
    let tasks_filtered =
        !(filters.pids.is_empty() && filters.tids.is_empty() && filters.comms.is_empty());
    let mut tasks = kstate_analyze::analyzer::Tasks::new(trace, source.tgids());
    while let Some(ev) = m.next()? {
        busy.switch(ev.ts, ev.cpu, ev.lost_before, &filters.cpus, || {
            let next = s.next_pid.get_i64(ev.payload, ev.endian).unwrap_or(0) as i32;
            if tasks_filtered {
                tasks.set_comm(
                    next,
                    kstate_analyze::analyzers::sched::bytes(ev.payload, s.next_comm),
                );
            }
            (
                next,
                !tasks_filtered || task_selected(filters, &tasks, next),
            )
        });
    }
    busy.finish(o, trace.known_first_ts());
    Ok(())
}

/// CPU busy and losses, switch by switch: what the pass over sched_switch and the
/// replay of its [`summary`] both feed.
struct Busy {
    span: Span,
    busy: Vec<Vec<f64>>,
    lost: Vec<Vec<f64>>,
    any_lost: Vec<bool>,
    /// Per CPU: since when it ran a task (not idle), if it does.
    running: Vec<Option<u64>>,
    seen: Vec<bool>,
    first: Option<u64>,
    last: u64,
}

impl Busy {
    fn new(span: Span, cpus: usize) -> Busy {
        Busy {
            span,
            busy: vec![vec![0.0; span.bins]; cpus],
            lost: vec![vec![0.0; span.bins]; cpus],
            any_lost: vec![false; cpus],
            running: vec![None; cpus],
            seen: vec![false; cpus],
            first: None,
            last: 0,
        }
    }

    /// A switch at `ts` on `cpu` after `lost` events; `next` tells the task switched to
    /// and whether the task filters select it (asked only on the CPUs `cpus` selects).
    fn switch(
        &mut self,
        ts: u64,
        cpu: u32,
        lost: kstate_format::Lost,
        cpus: &[u32],
        next: impl FnOnce() -> (i32, bool),
    ) {
        self.first.get_or_insert(ts);
        self.last = ts;
        let c = cpu as usize;
        if c >= self.busy.len() || (!cpus.is_empty() && !cpus.contains(&cpu)) {
            return;
        }
        match lost {
            kstate_format::Lost::None => {}
            l => {
                self.any_lost[c] = true;
                if let Some(b) = self.span.bin(ts) {
                    // An uncounted loss shows as one.
                    self.lost[c][b] += match l {
                        kstate_format::Lost::Count(n) => n as f64,
                        _ => 1.0,
                    };
                }
            }
        }
        if let Some(since) = self.running[c] {
            self.span.cover(&mut self.busy[c], since, ts);
        }
        self.seen[c] = true;
        let (next, selected) = next();
        self.running[c] = (next != 0 && selected).then_some(ts);
    }

    /// The lanes, into `o`; `known_first` is the trace's first event where the file
    /// knows it without reading.
    fn finish(mut self, o: &mut Overview, known_first: Option<u64>) {
        let span = self.span;
        if o.trace_start == 0 {
            o.trace_start = known_first.or(self.first).unwrap_or(0);
        }
        for (c, r) in self.running.iter().enumerate() {
            if let Some(since) = r {
                span.cover(&mut self.busy[c], *since, self.last);
            }
        }
        for (c, v) in self.busy.into_iter().enumerate() {
            if self.seen[c] {
                o.busy.push(Lane::new(format!("cpu{c}"), v, &span));
            }
        }
        for (c, v) in self.lost.into_iter().enumerate() {
            if self.any_lost[c] {
                o.lost.push(Lane::new(format!("cpu{c}"), v, &span));
            }
        }
    }
}

/// Whether the task filters (pid, tid, comm) select thread `tid`, as the analyzers'.
fn task_selected(f: &Filters, tasks: &kstate_analyze::analyzer::Tasks, tid: i32) -> bool {
    (f.tids.is_empty() || f.tids.contains(&tid))
        && (f.pids.is_empty() || f.pids.contains(&tasks.tgid(tid).unwrap_or(tid)))
        && (f.comms.is_empty() || f.comms.iter().any(|c| *c == tasks.comm(tid)))
}

/// Per bin the largest level held, and the last change seen (time, level).
type LevelBins = (Vec<f64>, Option<(u64, u64)>);

/// Follows each key's level over the span.
struct Levels {
    span: Span,
    keys: BTreeMap<String, LevelBins>,
}

impl Levels {
    fn new(span: Span) -> Levels {
        Levels {
            span,
            keys: BTreeMap::new(),
        }
    }

    /// The lanes, given the span the pass read (first and last event).
    fn finish(mut self, read: Option<(u64, u64)>) -> Vec<Lane> {
        let end = read.map_or(self.span.to, |s| s.1).min(self.span.to);
        let span = self.span;
        let mut lanes = Vec::new();
        for (key, (mut v, last)) in std::mem::take(&mut self.keys) {
            if let Some((t, l)) = last {
                if end >= t {
                    span.hold(&mut v, t, end, l as f64);
                }
            }
            lanes.push(Lane::new(key, v, &span));
        }
        lanes
    }
}

impl LogSink for Levels {
    fn wants_comm(&self) -> bool {
        false
    }

    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        if r.kind != Kind::Level {
            return Ok(());
        }
        let bins = self.span.bins;
        let (v, last) = self
            .keys
            .entry(r.key.to_string())
            .or_insert_with(|| (vec![0.0; bins], None));
        if let Some((t, l)) = *last {
            if r.start >= t {
                self.span.hold(v, t, r.start, l as f64);
            }
        }
        if last.is_none_or(|(t, _)| t <= r.start) {
            *last = Some((r.start, r.value));
        }
        Ok(())
    }
}

/// Bins durations into the scatter: a count per (bin, row) in one flat table, not a map
/// (a whole 11 M-event recording's 5.5 M calls spent a fifth of the lane's pass in map
/// insertions).
struct ScatterSink {
    span: Span,
    /// `bins` counts per scatter row ([`scatter_row`] of 1 ns is row 0).
    counts: Vec<u32>,
    longest: Vec<Option<(u64, String)>>,
    calls: u64,
}

/// Rows from 1 ns (row 0) past u64::MAX ns (row 77 at 4 a decade).
const SCATTER_ROWS: usize = 20 * ROWS_PER_DECADE as usize;

impl ScatterSink {
    fn new(span: Span) -> ScatterSink {
        ScatterSink {
            span,
            counts: vec![0; span.bins * SCATTER_ROWS],
            longest: vec![None; span.bins],
            calls: 0,
        }
    }

    fn finish(self) -> Scatter {
        let bins = self.span.bins;
        let used = |r: usize| self.counts[r * bins..(r + 1) * bins].iter().any(|&n| n > 0);
        let lo = (0..SCATTER_ROWS).find(|&r| used(r)).unwrap_or(0);
        let hi = (0..SCATTER_ROWS).rev().find(|&r| used(r)).unwrap_or(lo);
        // By bin, then row: the order the map gave.
        let mut cells = Vec::new();
        for b in 0..bins {
            for r in lo..=hi {
                let n = self.counts[r * bins + b];
                if n > 0 {
                    cells.push((b as u32, (r - lo) as u32, n));
                }
            }
        }
        Scatter {
            cells,
            row0: lo as i32,
            rows: (hi - lo + 1) as u32,
            longest: self.longest,
            calls: self.calls,
        }
    }
}

/// The scatter row of a duration: floor(log10(ns) * ROWS_PER_DECADE).
pub fn scatter_row(ns: u64) -> i32 {
    ((ns.max(1) as f64).log10() * ROWS_PER_DECADE as f64).floor() as i32
}

impl LogSink for ScatterSink {
    fn wants_comm(&self) -> bool {
        false
    }

    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        if r.kind != Kind::Dur {
            return Ok(());
        }
        let Some(b) = self.span.bin(r.start) else {
            return Ok(());
        };
        self.calls += 1;
        let row = scatter_row(r.value).clamp(0, SCATTER_ROWS as i32 - 1);
        self.counts[row as usize * self.span.bins + b] += 1;
        let l = &mut self.longest[b];
        if l.as_ref().is_none_or(|(v, _)| r.value > *v) {
            *l = Some((r.value, r.key.to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstate_analyze::analyzer::Cell;

    #[test]
    fn cover_and_hold() {
        let s = Span::new(1000, 2000, 10).unwrap();
        let mut v = vec![0.0; 10];
        s.cover(&mut v, 1050, 1250);
        assert_eq!(v[0], 0.5);
        assert_eq!(v[1], 1.0);
        assert!((v[2] - 0.5).abs() < 1e-9);
        assert_eq!(v[3], 0.0);
        // Outside the span: nothing.
        s.cover(&mut v, 0, 999);
        assert_eq!(v.iter().sum::<f64>(), 2.0);
        let mut l = vec![0.0; 10];
        s.hold(&mut l, 0, 1150, 3.0);
        s.hold(&mut l, 1150, 1300, 1.0);
        assert_eq!(&l[..4], &[3.0, 3.0, 1.0, 1.0]);
        assert!(Span::new(5, 5, 10).is_err());
        assert_eq!(Span::new(0, 10, 0).unwrap().bins, 1);
        assert_eq!(scatter_row(1_000_000), 24);
        assert_eq!(scatter_row(999_999), 23);
    }

    #[test]
    fn lanes_of_a_real_trace() {
        let path = kstate_testdata::path("lisa-sched_load/trace.dat");
        let source = Source::open(&path).unwrap();
        let q = Query::new("runq").unwrap();
        let out = source.aggregate(&q).unwrap();
        let (a, b) = out.span.unwrap();
        let span = Span::new(a, b, 200).unwrap();
        let o = overview(&source, span, &Filters::default()).unwrap();
        assert!(!o.busy.is_empty() && !o.runq.is_empty());
        for l in &o.busy {
            assert!(
                l.values.iter().all(|v| (0.0..=1.0 + 1e-9).contains(v)),
                "{}",
                l.name
            );
        }
        // The run-queue peak per CPU is what runq --stat reports as max_queued.
        let table = out
            .tables
            .iter()
            .find(|t| t.name == "queue" || !t.rows.is_empty());
        let table = table.unwrap();
        let col = |n: &str| table.columns.iter().position(|c| *c == n).unwrap();
        let (cpu_col, max_col) = (col("cpu"), col("max_queued"));
        for row in &table.rows {
            let (Cell::Int(cpu), Cell::Int(max)) = (&row[cpu_col], &row[max_col]) else {
                panic!("cells {row:?}");
            };
            let lane = o.runq.iter().find(|l| l.name == format!("rq/cpu{cpu}"));
            // A queue that never changed has no lane.
            assert_eq!(lane.map_or(0.0, |l| l.peak.0), *max as f64, "cpu {cpu}");
        }
    }
}
