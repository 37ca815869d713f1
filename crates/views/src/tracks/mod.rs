//! The timeline's tracks: what each CPU ran (its tasks, hard and soft interrupts), what
//! each thread did (running, runnable, sleeping in S or D with the system call it slept
//! in and who woke it; its system calls), and each block device's requests (queued,
//! then in the device), as slices on rows, served at any zoom as a bounded number of
//! drawables per pixel column.
//!
//! Level of detail. One pass when a front end opens the file ([`Tracks::build`]) keeps,
//! per row, the slices at least [`Tracks::quantum`] long (Δ, chosen so that about a
//! hundred events fall in one) one by one, and the shorter ones summed per Δ-wide bucket
//! (time covered, and the longest slice's kind and label). A view of `cols` columns
//! ([`Tracks::view`]) whose column is at least Δ wide is drawn from those summaries alone;
//! a narrower one (a zoom to less than `cols` × Δ) re-reads the events of its range (over
//! the page index: a few hundred thousand events at most) and draws the slices exactly.
//! Both go through the same state machine ([`machine`]), and every slice in progress when
//! a range opens either started less than Δ before it (the re-read starts Δ early) or is
//! one of the long ones kept. Each row's answer is at most one drawable per column: the
//! slice or summary that covers most of it, with the share of the column covered.
//!
//! Memory: the long slices (24 bytes each) and one bucket (20 bytes) per Δ in which a row
//! had short slices: for an 11 M-event system-call storm, about 10 MB.

mod lod;
mod machine;

pub mod list;

use std::sync::Arc;

use kstate_format::Trace;

use kstate_analyze::analyzer::Tasks;
use kstate_analyze::fxmap::FxMap;
use kstate_analyze::{Error, Source};
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::stream::page_index::PageIndex;

pub use lod::Draw;
use lod::RowSum;
use machine::{Machine, Names};

/// What a track follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackKey {
    Cpu(u32),
    Thread(i32),
    /// A block device, by the kernel's dev_t (major << 20 | minor).
    Device(u32),
}

impl TrackKey {
    /// `cpu:N`, `tid:N`, `dev:N` (what [`TrackKey::parse`] reads).
    pub fn id(&self) -> String {
        match self {
            TrackKey::Cpu(c) => format!("cpu:{c}"),
            TrackKey::Thread(t) => format!("tid:{t}"),
            TrackKey::Device(d) => format!("dev:{d}"),
        }
    }

    pub fn parse(s: &str) -> Option<TrackKey> {
        let (kind, n) = s.split_once(':')?;
        match kind {
            "cpu" => n.parse().ok().map(TrackKey::Cpu),
            "tid" => n.parse().ok().map(TrackKey::Thread),
            "dev" => n.parse().ok().map(TrackKey::Device),
            _ => None,
        }
    }

    /// The rows a track of this kind has, by name.
    pub fn row_names(&self) -> &'static [&'static str] {
        match self {
            TrackKey::Cpu(_) => &["task", "irq", "softirq"],
            TrackKey::Thread(_) => &["state", "syscall"],
            TrackKey::Device(_) => &["in device", "queued"],
        }
    }
}

/// One row of one track.
pub type RowKey = (TrackKey, u8);

pub const ROW_TASK: u8 = 0;
pub const ROW_IRQ: u8 = 1;
pub const ROW_SOFTIRQ: u8 = 2;
pub const ROW_STATE: u8 = 0;
pub const ROW_SYSCALL: u8 = 1;
pub const ROW_DEVICE: u8 = 0;
pub const ROW_QUEUED: u8 = 1;

/// What a slice is. The meaning of a slice's `label` and `arg` depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// On a CPU: label = the CPU.
    Running = 0,
    /// Woken, waiting for a CPU: label = the waker's tid ([`NONE`] unknown), arg = the CPU
    /// the wake-up ran on.
    Runnable = 1,
    /// Switched out still runnable (preempted), waiting for a CPU.
    Preempted = 2,
    /// Asleep in S (interruptible): label = the system call it slept in ([`NONE`]: none
    /// seen), arg = `prev_state`.
    Sleeping = 3,
    /// Asleep in D (uninterruptible), as [`Kind::Sleeping`].
    Blocked = 4,
    /// Asleep in I (an idle kernel thread), as [`Kind::Sleeping`].
    Idle = 5,
    /// Off the CPU in another state (stopped, traced, ...), as [`Kind::Sleeping`].
    Off = 6,
    /// A system call: label = its number, arg = its return value (saturated to i32).
    Syscall = 8,
    /// A task on a CPU: label = its tid.
    Task = 16,
    /// A hard interrupt handler: label = the IRQ number.
    Irq = 17,
    /// A soft interrupt: label = the vector.
    Softirq = 18,
    /// A block request inserted, not yet issued: label = its direction (R, W, D, F, N as
    /// 0..4), arg = its sectors.
    Queued = 24,
    /// A block request in the device (issue to completion), as [`Kind::Queued`].
    Device = 25,
}

impl Kind {
    /// Every kind and its name.
    pub const NAMES: [(Kind, &'static str); 13] = [
        (Kind::Running, "running"),
        (Kind::Runnable, "runnable"),
        (Kind::Preempted, "preempted"),
        (Kind::Sleeping, "sleeping"),
        (Kind::Blocked, "blocked"),
        (Kind::Idle, "idle"),
        (Kind::Off, "off"),
        (Kind::Syscall, "syscall"),
        (Kind::Task, "task"),
        (Kind::Irq, "irq"),
        (Kind::Softirq, "softirq"),
        (Kind::Queued, "queued"),
        (Kind::Device, "device"),
    ];

    pub fn name(self) -> &'static str {
        Kind::NAMES
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }

    /// Off a CPU, asleep (the kinds whose label is the system call slept in).
    pub fn is_sleep(self) -> bool {
        matches!(
            self,
            Kind::Sleeping | Kind::Blocked | Kind::Idle | Kind::Off
        )
    }
}

/// No label: an unknown waker, no system call.
pub const NONE: u32 = u32::MAX;

/// One stretch of time on a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// Trace-clock ns; `end` >= `start`.
    pub start: u64,
    pub end: u64,
    pub kind: Kind,
    pub label: u32,
    pub arg: i32,
}

impl Slice {
    pub fn dur(&self) -> u64 {
        self.end - self.start
    }
}

/// What the timeline knows of one track: its rows' names and how busy it was.
#[derive(Debug, Clone)]
pub struct TrackInfo {
    pub key: TrackKey,
    /// Rows that hold slices (row numbers of [`TrackKey::row_names`]).
    pub rows: Vec<u8>,
    /// Threads: the thread group (process) where known, and the last name.
    pub tgid: Option<i32>,
    pub comm: String,
    /// Slices on its rows and the time they cover (ns), for ordering tracks.
    pub slices: u64,
    pub busy_ns: u64,
    /// Its first and last slice.
    pub first: u64,
    pub last: u64,
}

/// One row's drawables for a view.
#[derive(Debug, Clone)]
pub struct RowView {
    pub key: RowKey,
    pub draws: Vec<Draw>,
}

/// The summaries of a recording's tracks.
pub struct Tracks {
    quantum: u64,
    /// First and last event of the file (trace-clock ns).
    pub span: (u64, u64),
    rows: FxMap<RowKey, RowSum>,
    tracks: Vec<TrackInfo>,
    names: Names,
    /// Events the recording lacks for some tracks, and what is then missing.
    pub missing: Vec<String>,
    pages: Option<Arc<PageIndex>>,
    /// Events read to build.
    pub events: u64,
}

/// How many events a bucket holds at most on average: the re-read of a narrow view reads
/// at most about this many events per column.
const EVENTS_PER_QUANTUM: u64 = 128;

/// The bucket width for a recording of `span` ns and about `events` events: a power of
/// two ns, so that a re-read covers a bounded number of events whatever the recording.
fn quantum(span: u64, events: u64) -> u64 {
    let q = (span as u128 * EVENTS_PER_QUANTUM as u128 / events.max(1) as u128) as u64;
    q.clamp(256, (span >> 10).max(256)).next_power_of_two()
}

/// An upper bound of the events a file holds: its bytes of event data over the smallest
/// record with a payload (compressed files are undercounted, and get coarser buckets).
fn events_bound(trace: &Trace) -> u64 {
    trace.cpu_data.iter().map(|c| c.file_bytes).sum::<u64>() / 24
}

impl Tracks {
    /// Reads the whole recording once. `cancelled` stops the pass (an error).
    pub fn build(source: &Source, cancelled: &dyn Fn() -> bool) -> Result<Tracks, Error> {
        let trace = source.trace();
        let tasks = Tasks::new(trace, source.tgids());
        let mut m = Machine::bind(trace, tasks);
        let span = match source.pages().and_then(|p| p.event_span()) {
            Some(s) => s,
            None => first_last(trace)?,
        };
        let q = quantum(span.1.saturating_sub(span.0).max(1), events_bound(trace));
        let mut sink = Summaries {
            quantum: q,
            rows: FxMap::default(),
        };
        let mut merge = match source.pages() {
            Some(index) => Merger::indexed(trace, m.filter(), index, None)?,
            None => Merger::new(trace, None, m.filter())?,
        };
        let mut events = 0u64;
        let mut last = span.0;
        while let Some(ev) = merge.next()? {
            events += 1;
            last = ev.ts;
            m.event(&ev, &mut sink);
            if events & 0xffff == 0 && cancelled() {
                return Err(Error::Query("cancelled".into()));
            }
        }
        m.finish(last.max(span.1), &mut sink);
        let mut tracks: FxMap<TrackKey, TrackInfo> = FxMap::default();
        for (key, sum) in &mut sink.rows {
            sum.seal();
            let t = tracks.entry(key.0).or_insert_with(|| TrackInfo {
                key: key.0,
                rows: Vec::new(),
                tgid: None,
                comm: String::new(),
                slices: 0,
                busy_ns: 0,
                first: u64::MAX,
                last: 0,
            });
            t.rows.push(key.1);
            t.slices += sum.slices;
            t.busy_ns += sum.covered;
            t.first = t.first.min(sum.first);
            t.last = t.last.max(sum.last);
        }
        let names = m.into_names();
        let mut tracks: Vec<TrackInfo> = tracks.into_values().collect();
        for t in &mut tracks {
            t.rows.sort_unstable();
            if let TrackKey::Thread(tid) = t.key {
                t.tgid = names.tasks.tgid(tid);
                t.comm = names.tasks.comm(tid);
            }
        }
        tracks.sort_by_key(|t| t.key);
        Ok(Tracks {
            quantum: q,
            span,
            rows: sink.rows,
            tracks,
            missing: names.missing.clone(),
            names,
            pages: source.pages().cloned(),
            events,
        })
    }

    /// Δ: the bucket width, and the longest slice a bucket sums (ns).
    pub fn quantum(&self) -> u64 {
        self.quantum
    }

    pub fn tracks(&self) -> &[TrackInfo] {
        &self.tracks
    }

    pub fn track(&self, key: TrackKey) -> Option<&TrackInfo> {
        self.tracks.iter().find(|t| t.key == key)
    }

    /// The drawables of `rows` over [from, to] in `cols` columns: at most one per column
    /// and row. A view narrower than `cols` Δ re-reads its events from `source`.
    pub fn view(
        &self,
        source: &Source,
        from: u64,
        to: u64,
        cols: usize,
        rows: &[RowKey],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<RowView>, Error> {
        let cols = cols.clamp(1, lod::MAX_COLS);
        if to <= from {
            return Err(Error::Query(format!(
                "empty time span {from}..{to}: it must end after it starts"
            )));
        }
        let col_ns = (to - from) as f64 / cols as f64;
        let mut rasters: Vec<lod::Raster> = rows
            .iter()
            .map(|_| lod::Raster::new(from, to, cols))
            .collect();
        let fine = col_ns < self.quantum as f64;
        // Long slices that started before what a re-read reads (all of them otherwise).
        let reread_from = from.saturating_sub(self.quantum);
        for (r, key) in rasters.iter_mut().zip(rows) {
            let Some(sum) = self.rows.get(key) else {
                continue;
            };
            for s in sum.long_in(from, to) {
                if !fine || s.start < reread_from {
                    r.add(s);
                }
            }
            if !fine {
                sum.add_buckets(r, self.quantum);
            }
        }
        if fine {
            let mut sink = RowPick {
                wanted: rows,
                rasters: &mut rasters,
                from: reread_from,
            };
            self.reread(source, reread_from, to, &mut sink, cancelled)?;
        }
        Ok(rows
            .iter()
            .zip(rasters)
            .map(|(k, r)| RowView {
                key: *k,
                draws: r.finish(),
            })
            .collect())
    }

    /// The slices of `row` that cover any of [from, to] (trace-clock ns), in order of
    /// their start, exact (re-read where short), at most `limit`.
    pub fn slices(
        &self,
        source: &Source,
        row: RowKey,
        from: u64,
        to: u64,
        limit: usize,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Slice>, Error> {
        let reread_from = from.saturating_sub(self.quantum);
        let mut out: Vec<Slice> = match self.rows.get(&row) {
            Some(sum) => sum
                .long_in(from, to)
                .filter(|s| s.start < reread_from)
                .copied()
                .collect(),
            None => Vec::new(),
        };
        let mut sink = Collect {
            row,
            from: reread_from,
            window: (from, to),
            out: &mut out,
        };
        // Read on past `to` for the ends of slices that start before it (short ones end
        // within Δ; long ones are not cut either, up to 64 Δ).
        let until = to.saturating_add(self.quantum.saturating_mul(64));
        self.reread(source, reread_from, until, &mut sink, cancelled)?;
        out.sort_by_key(|s| (s.start, s.end));
        out.dedup();
        out.retain(|s| s.end >= from && s.start <= to);
        out.truncate(limit);
        Ok(out)
    }

    /// Runs the state machine over the events of [from, to] (and on to the next event
    /// after `to`): slices that start at or after `from` reach `sink`, those still open at
    /// the end are cut there.
    fn reread(
        &self,
        source: &Source,
        from: u64,
        to: u64,
        sink: &mut dyn machine::Sink,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        let trace = source.trace();
        let mut m = Machine::bind(trace, self.names.tasks.clone());
        let mut last = from;
        walk(
            trace,
            self.pages.as_ref(),
            m.filter(),
            (from, to),
            cancelled,
            |ev| {
                last = ev.ts;
                m.event(ev, sink);
                true
            },
        )?;
        m.finish(last.max(to).min(self.span.1.max(from)), sink);
        Ok(())
    }

    /// What a slice's label and arg stand for, in words.
    pub fn describe(&self, row: RowKey, s: &Slice) -> Described {
        self.names.describe(row, s)
    }

    /// The name of thread `tid` (`comm`), as last seen.
    pub fn comm(&self, tid: i32) -> String {
        self.names.tasks.comm(tid)
    }

    /// The label of a drawable as text (for the page's legend and tooltips).
    pub fn label_text(&self, kind: Kind, label: u32) -> String {
        self.names.label_text(kind, label)
    }
}

/// A slice in words.
#[derive(Debug, Clone, Default)]
pub struct Described {
    /// What it is: `read`, `sleeping (S) in futex`, `kworker/0:1-42`, `IRQ 24 virtio0`.
    pub what: String,
    /// `name=value` facts: the waker, the CPU, the return value.
    pub facts: Vec<(String, String)>,
    /// The analyzers whose rows this slice belongs to, and the key of its row there.
    pub rows: Vec<(&'static str, String)>,
    /// A thread or CPU to draw an arrow from (the waker), and when.
    pub from: Option<(TrackKey, u64)>,
}

/// Walks the events of [from, to] that `filter` passes, in time order, reading from the
/// page before `from` over the page index (from the start without one), until `f`
/// returns false; `cancelled` is asked now and then (an error when it says so).
pub(crate) fn walk(
    trace: &Trace,
    pages: Option<&Arc<PageIndex>>,
    filter: IdFilter,
    (from, to): (u64, u64),
    cancelled: &dyn Fn() -> bool,
    mut f: impl FnMut(&kstate_format::stream::merge::Event<'_>) -> bool,
) -> Result<(), Error> {
    let mut merge = match pages {
        Some(index) => Merger::indexed(trace, filter, index, Some(from))?,
        None => Merger::new(trace, None, filter)?,
    };
    let mut n = 0u64;
    while let Some(ev) = merge.next()? {
        n += 1;
        if n & 0x3fff == 0 && cancelled() {
            return Err(Error::Query("cancelled".into()));
        }
        if ev.ts < from {
            continue;
        }
        if ev.ts > to || !f(&ev) {
            break;
        }
    }
    Ok(())
}

/// The first and last event of a file without a page index (a pass over it).
fn first_last(trace: &Trace) -> Result<(u64, u64), Error> {
    let mut m = Merger::new(trace, None, IdFilter::all())?;
    let mut span = None;
    while let Some(ev) = m.next()? {
        span.get_or_insert((ev.ts, ev.ts)).1 = ev.ts;
    }
    Ok(span.unwrap_or((0, 1)))
}

/// The build's sink: every slice into its row's summary.
struct Summaries {
    quantum: u64,
    rows: FxMap<RowKey, RowSum>,
}

impl machine::Sink for Summaries {
    fn slice(&mut self, row: RowKey, s: Slice) {
        let q = self.quantum;
        self.rows.entry(row).or_default().add(s, q);
    }
}

/// A view's re-read: the slices of the rows asked for, drawn.
struct RowPick<'a> {
    wanted: &'a [RowKey],
    rasters: &'a mut [lod::Raster],
    from: u64,
}

impl machine::Sink for RowPick<'_> {
    fn slice(&mut self, row: RowKey, s: Slice) {
        if s.start < self.from {
            return;
        }
        // Views ask for a few dozen rows: a scan beats a map.
        for (k, r) in self.wanted.iter().zip(self.rasters.iter_mut()) {
            if *k == row {
                r.add(&s);
            }
        }
    }
}

/// The slices of one row over a window.
struct Collect<'a> {
    row: RowKey,
    from: u64,
    window: (u64, u64),
    out: &'a mut Vec<Slice>,
}

impl machine::Sink for Collect<'_> {
    fn slice(&mut self, row: RowKey, s: Slice) {
        if row == self.row
            && s.start >= self.from
            && s.end >= self.window.0
            && s.start <= self.window.1
            && self.out.len() < 1 << 16
        {
            self.out.push(s);
        }
    }
}
