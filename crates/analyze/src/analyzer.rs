//! The analysis framework. Every analyzer has the same shape: which events it needs
//! ([`Analyzer::bind`] resolves them and their fields once per file), how it pairs them
//! ([`Analyzer::event`], usually with a [`crate::pair::Pairs`] table), and what key and value
//! it emits ([`Out::pair`] / [`Out::emit`] with a [`Sample`]). The driver ([`drive`]) does
//! the rest the same way for all of them: one time-ordered pass over only the events the
//! analyzer asked for, lost-event accounting per CPU within the selected time, dropping
//! pairs that span a loss, filters, per-key aggregation (`stats`, `hist`) or streaming
//! log rows to a [`LogSink`].
//!
//! Adding an analyzer: one file under `analyzers/` with a type implementing [`Analyzer`]
//! and its `INFO`, plus one line in `analyzers::ALL`.

use std::collections::BTreeMap;

use kstate_format::{Error, ErrorKind, EventFormat, Lost, Trace};

use crate::filter::{fmt_secs, Filters, TimeSel};
use crate::fxmap::FxMap;
use crate::stats::Agg;
use kstate_format::stream::merge::{Event, IdFilter, LossMark, Merger};

/// What `kstate analyze --list` shows, and how to run the analyzer.
#[derive(Clone, Copy)]
pub struct Info {
    pub name: &'static str,
    pub about: &'static str,
    /// The events it needs, as users would enable them.
    pub needs: &'static str,
    /// The `kstate record -e PRESET` that records them.
    pub preset: &'static str,
    /// Keyings offered by `--by` (name, meaning); the first is the default.
    pub by: &'static [(&'static str, &'static str)],
    /// Name of the column counting flagged values (e.g. "errors"), if the analyzer flags any.
    pub flag_column: Option<&'static str>,
    /// What the value is, for headers ("duration", "latency", ...).
    pub value: &'static str,
    /// What the value is measured in: names the value columns (`total_ns`, `avg_bytes`,
    /// `max_pages`) and how text output prints it.
    pub unit: Unit,
    /// What callers need to know about its results beyond their unit.
    pub traits: Traits,
    pub run: RunFn,
    /// Runs it on a recording in progress ([`crate::live`]); `None` for analyzers that
    /// read no events.
    pub live: Option<LiveFn>,
}

/// Facts about an analyzer's results that front ends and findings act on, declared by the
/// analyzer so that no caller matches analyzer names.
#[derive(Debug, Clone, Copy)]
pub struct Traits {
    /// Its durations are time spent on something (a call, a wait). False for lifetimes
    /// (`proc`): a process being alive explains no time, so findings skip them.
    pub time_spent: bool,
    /// What its level series (`Kind::Level` rows) measure, as findings name it.
    pub level: &'static str,
    /// It can report per time interval (`Config::interval`, `--interval`).
    pub per_interval: bool,
    /// Its values come from the recording's memory snapshots, not from events; charts draw
    /// them as memory over time.
    pub snapshots: bool,
    /// Each sample is a pair of events at or after its start, and nothing from earlier
    /// events changes it (its key, task or value): given a page index, a window query
    /// starts reading at the window and stops once no pair started in it is open
    /// ([`Analyzer::open_in`]).
    pub window_local: bool,
}

impl Traits {
    /// Durations are time spent, levels are named "level", one result for the whole
    /// selected time, values from events.
    pub const DEFAULT: Traits = Traits {
        time_spent: true,
        level: "level",
        per_interval: false,
        snapshots: false,
        window_local: false,
    };
}

/// The unit of an analyzer's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds (durations, latencies): printed as 1.234ms.
    Ns,
    /// Bytes: printed as a plain number.
    Bytes,
    /// A count of the things named (e.g. "pages", "len"): printed as a plain number.
    Count(&'static str),
}

impl Unit {
    /// Suffix of value column names: `total_ns`, `avg_bytes`, `max_len`.
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Bytes => "bytes",
            Unit::Count(what) => what,
        }
    }

    /// A value for humans.
    pub fn fmt(self, v: u64) -> String {
        match self {
            Unit::Ns => crate::filter::fmt_dur(v),
            Unit::Bytes | Unit::Count(_) => v.to_string(),
        }
    }
}

pub type RunFn = fn(&Trace, &Config, &mut dyn LogSink) -> Result<Outcome, Error>;

/// One analyzer bound to one file.
pub trait Analyzer: Sized {
    const INFO: Info;

    /// Finds the events and fields this analyzer reads in `trace`, keyed `by` (one of
    /// `INFO.by`). Returns the analyzer and the event ids to deliver, or the names of the
    /// missing events.
    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing>;

    /// Handles one event (only the ids `bind` returned are delivered).
    fn event(&mut self, ev: &Event<'_>, out: &mut Out);

    /// Called after the last event; returns how many pairs were still open.
    fn finish(&mut self, out: &mut Out) -> u64;

    /// Whether a pair that started in [from, to] (ns) is still open. Asked only of
    /// `window_local` analyzers, after the window.
    fn open_in(&self, _from: u64, _to: u64) -> bool {
        true
    }

    /// The key as printed.
    fn key_name(&self, key: u64, tasks: &Tasks) -> String;

    /// Extra tables for `--stat` (e.g. run-queue length per CPU).
    fn tables(&mut self, _out: &Out) -> Vec<Table> {
        Vec::new()
    }

    /// Facts about this run for the report's notes (e.g. events it did without).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Live analysis: the tables of the interval that ends at `end` (no event after it
    /// has been seen), after which what they accumulate starts again from empty, so that
    /// each interval's tables cover only it. Analyzers whose tables hold only
    /// per-interval facts need not override it.
    fn interval_tables(&mut self, out: &Out, _end: u64) -> Vec<Table> {
        self.tables(out)
    }
}

/// Events an analyzer needs and the file lacks, in words (`system:name` where it is an
/// event), and whether what it lacks is call chains (`kstate record --stacks`), which a
/// caller may do without by asking for another key.
#[derive(Debug, Clone)]
pub struct Missing {
    pub what: Vec<String>,
    pub stacks: bool,
}

impl Missing {
    /// Lacks the events (or fields) named in `what`.
    pub fn events(what: Vec<String>) -> Missing {
        Missing {
            what,
            stacks: false,
        }
    }
    /// Lacks call chains: `what` says which and how to record them.
    pub fn stacks(what: &str) -> Missing {
        Missing {
            what: vec![what.to_string()],
            stacks: true,
        }
    }
}

/// Looks up `system:name` (or `name`); records the name in `missing` when absent.
pub fn need<'t>(
    trace: &'t Trace,
    spec: &str,
    missing: &mut Vec<String>,
) -> Option<&'t EventFormat> {
    let ev = trace.events.find(spec);
    if ev.is_none() {
        missing.push(spec.to_string());
    }
    ev
}

/// How results are presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Stat,
    Dist(Buckets),
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buckets {
    Log2,
    Log10,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// One of the analyzer's `INFO.by` names; `None` for its default.
    pub by: Option<String>,
    pub mode: Mode,
    pub filters: Filters,
    /// Thread id -> thread-group id, where the trace records them (tracefs `saved_tgids`).
    pub tgids: FxMap<i32, i32>,
    /// Time-series step in ns, for analyzers that report per interval (`microstate`).
    pub interval: Option<u64>,
    /// The file's pages, indexed once by a front end that asks many questions of it: a
    /// pass then skips the pages it would read for nothing ([`kstate_format::stream::page_index`]).
    pub pages: Option<std::sync::Arc<kstate_format::stream::page_index::PageIndex>>,
    /// Threads a pass may use ([`crate::slices`], [`crate::piped`]); 1 reads the file
    /// in one pass on this thread.
    pub threads: usize,
    /// Stop at the first event of the analyzer's (a probe of whether it applies, see
    /// [`crate::Source::applies`]): the outcome covers that event only.
    pub probe: bool,
}

impl Config {
    pub fn new(mode: Mode) -> Config {
        Config {
            by: None,
            mode,
            filters: Filters::default(),
            tgids: FxMap::default(),
            interval: None,
            pages: None,
            threads: 1,
            probe: false,
        }
    }
}

/// Task names and thread groups, as far as the trace tells them: seeded from the saved
/// cmdlines (and tgids), from the process table kstate records with a trace (its
/// PROCESSES section), and kept current by analyzers that see comms or clones in events.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    comms: FxMap<i32, [u8; 16]>,
    tgids: FxMap<i32, i32>,
}

impl Tasks {
    pub fn new(trace: &Trace, tgids: &FxMap<i32, i32>) -> Tasks {
        let mut t = Tasks {
            comms: FxMap::default(),
            tgids: tgids.clone(),
        };
        for (pid, c) in &trace.comms {
            t.set_comm(*pid, c.as_bytes());
        }
        // kstate recordings: the process table taken when recording started. Threads
        // that start later are learned from events (task:task_newtask) where recorded.
        if let Some(b) = trace.extra(kstate_format::sections::ids::PROCESSES) {
            if let Ok(ps) = kstate_format::sections::decode_processes(b) {
                for p in ps {
                    if p.pid > 0 && p.tgid > 0 {
                        t.tgids.entry(p.pid).or_insert(p.tgid);
                    }
                }
            }
        }
        t
    }
    /// Forgets the names seeded from the file, for a pass over a later time slice: what
    /// it then holds was learned from its own events, and overlays the earlier slices'
    /// names ([`Tasks::overlay`]).
    pub(crate) fn forget_comms(&mut self) {
        self.comms.clear();
    }
    /// The names `later` learned replace these, as they would have in one pass.
    pub(crate) fn overlay(&mut self, later: Tasks) {
        self.comms.extend(later.comms);
    }
    /// Records that thread `tid` belongs to thread group `tgid`.
    pub fn set_tgid(&mut self, tid: i32, tgid: i32) {
        self.tgids.insert(tid, tgid);
    }
    /// task_newtask in `parent` made `child` with `clone_flags`: a thread joins the
    /// parent's group, a process leads its own. A parent whose group is unknown predates
    /// the trace and is taken to lead its own group.
    pub fn new_task(&mut self, parent: i32, child: i32, clone_flags: u64) {
        const CLONE_THREAD: u64 = 0x0001_0000;
        let group = if clone_flags & CLONE_THREAD != 0 {
            match self.tgid(parent) {
                Some(g) => g,
                None => {
                    self.set_tgid(parent, parent);
                    parent
                }
            }
        } else {
            child
        };
        if child > 0 {
            self.set_tgid(child, group);
        }
    }
    /// Records `tid`'s name (a `char[16]` field, NUL-padded or not).
    #[inline]
    pub fn set_comm(&mut self, tid: i32, comm: &[u8]) {
        let mut c = [0u8; 16];
        let n = comm
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(comm.len())
            .min(16);
        c[..n].copy_from_slice(&comm[..n]);
        match self.comms.get_mut(&tid) {
            Some(old) => *old = c,
            None => {
                self.comms.insert(tid, c);
            }
        }
    }
    /// Whether the name of `tid` is known (idle's always is).
    pub fn knows(&self, tid: i32) -> bool {
        tid == 0 || self.comms.contains_key(&tid)
    }

    pub fn comm(&self, tid: i32) -> String {
        if tid == 0 {
            return "<idle>".into();
        }
        match self.comms.get(&tid) {
            Some(c) => {
                let n = c.iter().position(|&b| b == 0).unwrap_or(16);
                String::from_utf8_lossy(&c[..n]).into_owned()
            }
            None => "<...>".into(),
        }
    }
    #[inline]
    fn comm_is(&self, tid: i32, want: &str) -> bool {
        self.comm(tid) == want
    }
    /// The thread group of `tid` if the trace recorded it.
    pub fn tgid(&self, tid: i32) -> Option<i32> {
        self.tgids.get(&tid).copied()
    }
    pub fn knows_tgids(&self) -> bool {
        !self.tgids.is_empty()
    }
    /// `comm-tid`, as trace-cmd prints tasks.
    pub fn label(&self, tid: i32) -> String {
        format!("{}-{}", self.comm(tid), tid)
    }
}

/// What an analyzer emits for one pair (or one measurement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the measured interval began (ns, trace clock).
    pub start: u64,
    /// Duration in ns (for [`Kind::Dur`]) or a level (for [`Kind::Level`]).
    pub value: u64,
    pub key: u64,
    /// The task the sample is about.
    pub tid: i32,
    pub cpu: u32,
    /// Counted in the analyzer's flag column (e.g. a failed system call).
    pub flag: bool,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A duration: aggregated per key, and a `--log` row.
    Dur,
    /// A level that changed at `start` (e.g. a run-queue length): `--log` rows only.
    Level,
    /// A point event whose value only informs (e.g. the child pid of a fork): `--log`
    /// rows only, never charted as a duration or a level.
    Mark,
}

/// Counters every analyzer reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Events delivered to the analyzer.
    pub events: u64,
    /// Pairs completed and selected by the filters.
    pub selected: u64,
    /// Pairs completed but outside the filters.
    pub filtered: u64,
    /// Pairs dropped because events were lost somewhere between their start and end.
    pub broken_by_loss: u64,
    /// Ends seen without a start (the start predates the trace), and starts replaced by a
    /// second start before any end.
    pub unmatched: u64,
    /// Pairs still open when the trace ended.
    pub open_at_end: u64,
    /// Switch-ins inferred because the kernel did not trace a CPU leaving idle
    /// ([`crate::analyzers::sched::IdleExits`]).
    pub inferred: u64,
}

/// Receives log rows as pairs complete.
pub trait LogSink {
    fn row(&mut self, row: &LogRow<'_>) -> std::io::Result<()>;
    /// Whether rows need their `comm` (a string made per row): sinks that bin rows by
    /// time and value (the UI's lanes) do without it, and save a pass an allocation a row.
    fn wants_comm(&self) -> bool {
        true
    }
}

/// A sink that drops rows (for `--stat` and `--dist`).
pub struct NoLog;

impl LogSink for NoLog {
    fn row(&mut self, _: &LogRow<'_>) -> std::io::Result<()> {
        Ok(())
    }
}

/// One `--log` row.
#[derive(Debug, Clone)]
pub struct LogRow<'a> {
    pub start: u64,
    pub key: &'a str,
    pub value: u64,
    pub kind: Kind,
    pub tid: i32,
    /// Thread group, where known.
    pub pid: Option<i32>,
    pub comm: &'a str,
    pub cpu: u32,
    pub flag: bool,
}

/// Where analyzers put their samples: applies the filters, then aggregates per key or
/// queues log rows for the driver to print.
pub struct Out {
    pub tasks: Tasks,
    mark: LossMark,
    now: u64,
    sel: TimeSel,
    pids: Vec<i32>,
    tids: Vec<i32>,
    comms: Vec<String>,
    cpus: Vec<u32>,
    min: u64,
    max: u64,
    /// Any filter besides time and duration.
    task_or_cpu_filter: bool,
    log: bool,
    decades: bool,
    index: FxMap<u64, u32>,
    /// Slots of keys below `SMALL_KEYS` (system call numbers, CPUs, states): no hashing.
    small: Vec<u32>,
    aggs: Vec<(u64, Agg)>,
    last: Option<(u64, u32)>,
    pending: Vec<Sample>,
    interval: Option<u64>,
    pub counts: Counts,
    /// One past the largest CPU number of the trace (see [`Out::cpu_field`]).
    cpu_limit: u32,
    /// What is wrong with the event being handled, reported with its place in the file.
    damaged: Option<String>,
}

/// Damaged records reported one by one; beyond this many, only counted.
const DAMAGED_REPORTED: u64 = 10;

impl Out {
    /// An `Out` with no filters at time `now`, for unit tests of pairing.
    #[cfg(test)]
    pub(crate) fn at(now: u64) -> Out {
        Out {
            tasks: Tasks::default(),
            mark: LossMark { gen: 0, open: 0 },
            now,
            sel: TimeSel::ALL,
            pids: Vec::new(),
            tids: Vec::new(),
            comms: Vec::new(),
            cpus: Vec::new(),
            min: 0,
            max: u64::MAX,
            task_or_cpu_filter: false,
            log: false,
            decades: false,
            index: FxMap::default(),
            small: vec![u32::MAX; SMALL_KEYS as usize],
            aggs: Vec::new(),
            last: None,
            pending: Vec::new(),
            interval: None,
            counts: Counts::default(),
            cpu_limit: 1,
            damaged: None,
        }
    }
    /// Moves a test's `Out` to time `now`.
    #[cfg(test)]
    pub(crate) fn set_now(&mut self, now: u64) {
        self.now = now;
    }
    /// A CPU number read from an event's fields, if the trace has that CPU. Per-CPU tables
    /// grow by these numbers, so a damaged one is refused: the event is reported as damaged
    /// (with its place in the file) and the analyzer skips it.
    pub fn cpu_field(&mut self, field: &str, v: u64) -> Option<u32> {
        if v < u64::from(self.cpu_limit) {
            return Some(v as u32);
        }
        let limit = self.cpu_limit;
        self.damaged
            .get_or_insert_with(|| format!("{field} {v} is beyond the trace's {limit} CPUs"));
        None
    }
    /// The loss mark of the event being handled; store it with a pair's start.
    #[inline]
    pub fn mark(&self) -> LossMark {
        self.mark
    }
    /// Time of the event being handled.
    #[inline]
    pub fn now(&self) -> u64 {
        self.now
    }
    /// The selected time (windows).
    pub fn sel(&self) -> TimeSel {
        self.sel
    }
    pub fn is_log(&self) -> bool {
        self.log
    }
    /// The time-series step asked for (`--interval`), in ns.
    pub fn interval(&self) -> Option<u64> {
        self.interval
    }

    /// A pair started at `start_mark` ends now: emitted if no events were lost anywhere
    /// in between, else counted in `broken_by_loss` and dropped.
    #[inline]
    pub fn pair(&mut self, start_mark: LossMark, s: Sample) {
        if start_mark.open != 0 || start_mark != self.mark {
            self.counts.broken_by_loss += 1;
            return;
        }
        self.emit(s);
    }

    /// An end without a start, or a start that replaced an unfinished one.
    #[inline]
    pub fn unmatched(&mut self) {
        self.counts.unmatched += 1;
    }

    /// Emits a sample that needs no pairing (or whose pairing the caller checked).
    // Once per pair: inlined into the analyzer with what is rare (a log row, a key not
    // seen before or too large for the small table) out of line.
    #[inline(always)]
    pub fn emit(&mut self, s: Sample) {
        if !self.sel.contains(s.start)
            || (s.kind == Kind::Dur && (s.value < self.min || s.value > self.max))
            || (self.task_or_cpu_filter && !self.task_selected(s.tid, s.cpu))
        {
            if s.kind == Kind::Dur {
                self.counts.filtered += 1;
            }
            return;
        }
        if self.log {
            return self.log_sample(s);
        }
        if s.kind != Kind::Dur {
            return;
        }
        self.counts.selected += 1;
        let slot = match self.last {
            Some((k, i)) if k == s.key => i,
            _ if s.key < SMALL_KEYS && self.small[s.key as usize] != u32::MAX => {
                self.small[s.key as usize]
            }
            _ => self.other_slot(s.key),
        };
        self.aggs[slot as usize]
            .1
            .add(s.value, s.flag, self.decades);
    }

    /// A sample kept for the log (`--log`), written after the event.
    #[inline(never)]
    fn log_sample(&mut self, s: Sample) {
        if s.kind == Kind::Dur {
            self.counts.selected += 1;
        }
        self.pending.push(s);
    }

    /// The aggregate of a key other than the last one that is not in the small table:
    /// found in the index, or made.
    #[inline(never)]
    fn other_slot(&mut self, key: u64) -> u32 {
        let n = self.aggs.len() as u32;
        if key < SMALL_KEYS {
            self.small[key as usize] = n;
            self.aggs.push((key, Agg::default()));
            return n;
        }
        let i = *self.index.entry(key).or_insert(n);
        if i == n {
            self.aggs.push((key, Agg::default()));
        }
        self.last = Some((key, i));
        i
    }

    /// Whether a sample of `tid` on `cpu` now would pass the time and task filters (for
    /// analyzers that count things outside samples, e.g. in their tables).
    pub fn selects(&self, tid: i32, cpu: u32) -> bool {
        self.sel.contains(self.now) && (!self.task_or_cpu_filter || self.task_selected(tid, cpu))
    }

    /// Whether the task filters (--pid, --tid, --comm; not --cpu) select `tid`.
    pub fn selects_task(&self, tid: i32) -> bool {
        !self.task_or_cpu_filter || self.task_selected_any_cpu(tid)
    }

    fn task_selected(&self, tid: i32, cpu: u32) -> bool {
        if !self.cpus.is_empty() && !self.cpus.contains(&cpu) {
            return false;
        }
        self.task_selected_any_cpu(tid)
    }

    fn task_selected_any_cpu(&self, tid: i32) -> bool {
        if !self.tids.is_empty() && !self.tids.contains(&tid) {
            return false;
        }
        if !self.pids.is_empty() {
            let pid = self.tasks.tgid(tid).unwrap_or(tid);
            if !self.pids.contains(&pid) {
                return false;
            }
        }
        if !self.comms.is_empty() && !self.comms.iter().any(|c| self.tasks.comm_is(tid, c)) {
            return false;
        }
        true
    }
}

impl Out {
    /// Adds the aggregates and counts of `later`, a pass over the time slice after this
    /// one's (see [`Pass::absorb`]); its task names replace these.
    fn absorb(&mut self, later: Out) {
        let c = later.counts;
        let n = &mut self.counts;
        n.events += c.events;
        n.selected += c.selected;
        n.filtered += c.filtered;
        n.broken_by_loss += c.broken_by_loss;
        n.unmatched += c.unmatched;
        n.inferred += c.inferred;
        for (key, agg) in later.aggs {
            self.merge_agg(key, agg);
        }
        self.last = None;
        if later.counts.events > 0 {
            self.now = later.now;
        }
        self.tasks.overlay(later.tasks);
    }

    /// Adds `agg` to the aggregate of `key`.
    fn merge_agg(&mut self, key: u64, agg: Agg) {
        let slot = match key < SMALL_KEYS {
            true => Some(self.small[key as usize]).filter(|&i| i != u32::MAX),
            false => self.index.get(&key).copied(),
        };
        match slot {
            Some(i) => self.aggs[i as usize].1.merge(&agg),
            None => {
                let i = self.aggs.len() as u32;
                if key < SMALL_KEYS {
                    self.small[key as usize] = i;
                } else {
                    self.index.insert(key, i);
                }
                self.aggs.push((key, agg));
            }
        }
    }

    /// Gives each aggregate key `k` below `map.len()` the key `map[k]` (aggregates that
    /// come to share a key are added).
    fn rekey(&mut self, map: &[u64]) {
        self.last = None;
        self.index.clear();
        for (k, _) in &self.aggs {
            if *k < SMALL_KEYS {
                self.small[*k as usize] = u32::MAX;
            }
        }
        for (k, agg) in std::mem::take(&mut self.aggs) {
            let k = map.get(k as usize).copied().unwrap_or(k);
            self.merge_agg(k, agg);
        }
    }
}

const SMALL_KEYS: u64 = 1024;

/// A small table an analyzer adds to its report.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// JSON member name, e.g. "runqueue".
    pub name: &'static str,
    pub title: String,
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Int(u64),
    Float(f64),
    Text(String),
}

/// One aggregated key.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: String,
    pub agg: Agg,
}

/// The result of one analysis pass.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub info: Info,
    pub by: &'static str,
    pub rows: Vec<Row>,
    /// First event of the whole trace (relative windows count from it).
    pub trace_start: Option<u64>,
    /// Time analysed: the selected window clipped to the events read.
    pub span: Option<(u64, u64)>,
    /// Events lost per CPU in the selected time; `None` where the kernel did not count.
    pub lost: BTreeMap<u32, Option<u64>>,
    pub counts: Counts,
    pub tables: Vec<Table>,
    /// Facts a reader must know (assumptions, fallbacks).
    pub notes: Vec<String>,
    /// Damaged data met on the way; the figures cover what was read.
    pub errors: Vec<Error>,
}

impl std::fmt::Debug for Info {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Outcome {
    pub fn any_loss(&self) -> bool {
        self.lost.values().any(|l| *l != Some(0))
    }
    /// Total counted losses, and whether some CPU lost an unknown number.
    pub fn lost_total(&self) -> (u64, bool) {
        let n = self.lost.values().map(|l| l.unwrap_or(0)).sum();
        (n, self.lost.values().any(Option::is_none))
    }
}

/// Columns rows can be sorted by.
pub const SORT_COLUMNS: [&str; 8] = ["key", "count", "total", "avg", "min", "max", "p50", "p99"];

/// Sorts rows by `column` (descending for numbers, ascending for the key; ties by key)
/// and keeps the first `top`.
pub fn sort_rows(
    rows: &mut Vec<Row>,
    column: &str,
    flag_column: Option<&str>,
    top: Option<usize>,
) -> Result<(), String> {
    let num: fn(&Agg) -> u64 = match column {
        "key" => |_| 0,
        "count" => |a| a.count,
        "total" => |a| a.total,
        "avg" => |a| a.avg(),
        "min" => |a| a.min(),
        "max" => |a| a.max,
        "p50" => |a| a.percentile(50.0),
        "p99" => |a| a.percentile(99.0),
        c if Some(c) == flag_column => |a| a.flagged,
        c => {
            let mut cols: Vec<&str> = SORT_COLUMNS.to_vec();
            cols.extend(flag_column);
            return Err(format!(
                "cannot sort by {c:?}: columns are {}",
                cols.join(", ")
            ));
        }
    };
    rows.sort_by(|a, b| {
        num(&b.agg)
            .cmp(&num(&a.agg))
            .then_with(|| a.key.cmp(&b.key))
    });
    if let Some(n) = top {
        rows.truncate(n);
    }
    Ok(())
}

/// The first event's time of the whole trace (all events, all CPUs).
pub(crate) fn trace_start(trace: &Trace) -> Result<Option<u64>, Error> {
    // Parquet directories know it: merging all their events would build every table.
    if let Some(ts) = trace.known_first_ts() {
        return Ok(Some(ts));
    }
    let mut m = Merger::new(trace, None, IdFilter::all())?;
    // A damaged first page is reported by the analysis pass itself.
    Ok(m.next().ok().flatten().map(|e| e.ts))
}

/// Runs analyzer `A` over `trace`: the one pass every analyzer shares.
pub fn drive<A: Analyzer>(
    trace: &Trace,
    cfg: &Config,
    log: &mut dyn LogSink,
) -> Result<Outcome, Error> {
    let (mut pass, ids) = Pass::<A>::new(trace, cfg, || trace_start(trace))?;
    let filter = IdFilter::only(ids.iter().copied());
    // With a page index, a window-local analyzer reads only around the window.
    let window = match (&cfg.pages, A::INFO.traits.window_local, pass.sel) {
        (Some(_), true, sel) if sel.exclude.is_none() && sel.include != (0, u64::MAX) => {
            Some(sel.include)
        }
        _ => None,
    };
    let mut merger = match &cfg.pages {
        Some(index) => Merger::indexed(trace, filter, index, window.map(|w| w.0))?,
        None => Merger::threaded(trace, None, filter, cfg.threads)?,
    };
    let mut stopped = None;
    let mut since_check = 0u32;
    loop {
        match merger.step() {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                pass.damaged(e);
                continue;
            }
        }
        let ev = merger.current();
        if let Some((from, to)) = window {
            if ev.ts > to {
                since_check += 1;
                if since_check >= 64 {
                    since_check = 0;
                    if !pass.a.open_in(from, to) {
                        stopped = Some(ev.ts);
                        break;
                    }
                }
            }
        }
        if let Some(msg) = pass.event(&ev, log)? {
            pass.damaged_record(merger.record_error(&msg));
        }
        if cfg.probe {
            break;
        }
    }
    for e in merger.no_format_errors() {
        pass.skipped(e);
    }
    if let (Some(w), true) = (window, stopped.is_some() || merger.seeked()) {
        pass.read_only(w, stopped);
    }
    if pass.out.counts.events == 0 && pass.errors.is_empty() {
        return Err(missing_events(trace, A::INFO, "holds none of those events"));
    }
    pass.finish(trace, log)
}

/// An analyzer's events are missing from `trace` (`what`: how). Where the file is
/// damaged the damage is named instead of advice to record them: it may be what hides
/// them (a perf.data whose data size runs past the end keeps its event descriptions out
/// of reach; an event format that does not parse leaves its events out). The damage that
/// names one of the events is named first.
fn missing_events(trace: &Trace, info: Info, what: &str) -> Error {
    let names: Vec<&str> = info
        .needs
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|n| n.contains(':'))
        .collect();
    let damage = trace
        .damage()
        .find(|e| e.event.as_deref().is_some_and(|ev| names.contains(&ev)))
        .or_else(|| trace.damage().next());
    let msg = match damage {
        Some(e) => format!(
            "analyzer {} needs {} but this trace {what}; the file is damaged, which may hide them: {e}",
            info.name, info.needs
        ),
        None => format!(
            "analyzer {} needs {} but this trace {what}; record them with `kstate record -e {} ...`",
            info.name, info.needs, info.preset
        ),
    };
    let kind = ErrorKind::NotApplicable {
        analyzer: info.name,
    };
    Error::new(kind, None, msg).in_file(&trace.path)
}

/// One analyzer's pass over a time-ordered stream of events: what [`drive`] runs over a
/// file, and what [`crate::live::Live`] runs over a recording in progress, taking the
/// aggregates every interval while the pairing state carries on.
pub(crate) struct Pass<A: Analyzer> {
    a: A,
    by: &'static str,
    ids: Vec<u32>,
    out: Out,
    sel: TimeSel,
    start: Option<u64>,
    lost: BTreeMap<u32, Option<u64>>,
    prev_ts: Vec<u64>,
    errors: Vec<Error>,
    per_id: Vec<u64>,
    first: Option<u64>,
    last: u64,
    /// Once a CPU's stream is damaged, its later events are unknown: a gap that never closes.
    damaged: u32,
    /// Records an analyzer found damaged (see [`Out::cpu_field`]).
    damaged_records: u64,
    key_filter: KeyFilter,
    notes: Vec<String>,
}

impl<A: Analyzer> Pass<A> {
    /// Binds `A` to `trace`'s events; `start` finds the trace's first event (relative
    /// windows count from it). Returns the pass and the event ids to deliver to it.
    pub(crate) fn new(
        trace: &Trace,
        cfg: &Config,
        start: impl FnOnce() -> Result<Option<u64>, Error>,
    ) -> Result<(Pass<A>, Vec<u32>), Error> {
        let info = A::INFO;
        let by = match &cfg.by {
            None => info.by[0].0,
            Some(b) => match info.by.iter().find(|(n, _)| n == b) {
                Some((n, _)) => *n,
                None => {
                    let names: Vec<&str> = info.by.iter().map(|b| b.0).collect();
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        None,
                        format!(
                            "analyzer {} cannot key by {b:?}: choose one of {}",
                            info.name,
                            names.join(", ")
                        ),
                    ));
                }
            },
        };
        let (a, ids) = A::bind(trace, by).map_err(|m| {
            let e = missing_events(trace, info, &format!("has no {}", m.what.join(", ")));
            if m.stacks {
                Error {
                    kind: ErrorKind::MissingStacks,
                    ..e
                }
            } else {
                e
            }
        })?;
        let start = start()?;
        let f = &cfg.filters;
        let t0 = start.unwrap_or(0);
        let sel = TimeSel {
            include: f.window.map_or((0, u64::MAX), |w| w.resolve(t0)),
            exclude: f.not_window.map(|w| w.resolve(t0)),
        };
        let mut notes = Vec::new();
        let tasks = Tasks::new(trace, &cfg.tgids);
        if !f.pids.is_empty() && !tasks.knows_tgids() {
            notes.push(
                "this trace records no thread-group ids: --pid matches thread ids".to_string(),
            );
        }
        let out = Out {
            tasks,
            mark: LossMark { gen: 0, open: 0 },
            now: 0,
            sel,
            pids: f.pids.clone(),
            tids: f.tids.clone(),
            comms: f.comms.clone(),
            cpus: f.cpus.clone(),
            min: f.min.unwrap_or(0),
            max: f.max.unwrap_or(u64::MAX),
            task_or_cpu_filter: !(f.pids.is_empty()
                && f.tids.is_empty()
                && f.comms.is_empty()
                && f.cpus.is_empty()),
            log: cfg.mode == Mode::Log,
            decades: cfg.mode == Mode::Dist(Buckets::Log10),
            index: FxMap::default(),
            small: vec![u32::MAX; SMALL_KEYS as usize],
            aggs: Vec::new(),
            last: None,
            pending: Vec::new(),
            interval: cfg.interval.filter(|&i| i > 0),
            counts: Counts::default(),
            cpu_limit: trace.cpu_limit(),
            damaged: None,
        };
        let pass = Pass {
            a,
            by,
            ids: ids.clone(),
            out,
            sel,
            start,
            lost: trace.cpu_data.iter().map(|c| (c.cpu, Some(0))).collect(),
            prev_ts: Vec::new(),
            errors: trace.damage().cloned().collect(),
            per_id: vec![0u64; trace.events.id_limit()],
            first: None,
            last: 0,
            damaged: 0,
            damaged_records: 0,
            key_filter: KeyFilter::new(&f.keys),
            notes,
        };
        Ok((pass, ids))
    }

    /// Hands one event (one of the ids `new` returned) to the analyzer; returns what is
    /// wrong with the record if the analyzer found it damaged (the caller names its place
    /// in the file: [`Merger::record_error`], then [`Pass::damaged_record`]).
    // Once per event: inlined into the loop that reads the events, with what is rare (a
    // CPU not seen yet, a loss, a log to write, a damaged record) out of line.
    #[inline(always)]
    pub(crate) fn event(
        &mut self,
        ev: &Event<'_>,
        log: &mut dyn LogSink,
    ) -> Result<Option<String>, Error> {
        let cpu = ev.cpu as usize;
        if cpu >= self.prev_ts.len() || ev.lost_before.is_some() {
            self.lost_before(ev);
        }
        self.prev_ts[cpu] = ev.ts;
        self.first.get_or_insert(ev.ts);
        self.last = ev.ts;
        let out = &mut self.out;
        out.mark = LossMark {
            gen: ev.loss.gen,
            open: ev.loss.open + self.damaged,
        };
        out.now = ev.ts;
        out.counts.events += 1;
        if let Some(n) = self.per_id.get_mut(ev.id as usize) {
            *n += 1;
        }
        self.a.event(ev, out);
        if out.damaged.is_none() && out.pending.is_empty() {
            return Ok(None);
        }
        self.after_event(log)
    }

    /// A CPU seen for the first time, or events lost before `ev`: counted when the loss
    /// may lie in the selected time.
    #[cold]
    #[inline(never)]
    fn lost_before(&mut self, ev: &Event<'_>) {
        let cpu = ev.cpu as usize;
        if cpu >= self.prev_ts.len() {
            self.prev_ts.resize(cpu + 1, 0);
        }
        if ev.lost_before.is_some() && self.sel.overlaps(self.prev_ts[cpu], ev.ts) {
            let e = self.lost.entry(ev.cpu).or_insert(Some(0));
            *e = match (*e, ev.lost_before) {
                (Some(n), Lost::Count(k)) => Some(n + k),
                _ => None,
            };
        }
    }

    /// The event gave samples to log, or was damaged.
    #[inline(never)]
    fn after_event(&mut self, log: &mut dyn LogSink) -> Result<Option<String>, Error> {
        let out = &mut self.out;
        let damaged = out.damaged.take();
        if !out.pending.is_empty() {
            flush_log(&self.a, out, log, &mut self.key_filter)?;
        }
        Ok(damaged)
    }

    /// A window-local pass read only the pages around `window` (and stopped before the
    /// event at `stopped`, if it did): the counts beside the samples cover that stretch.
    fn read_only(&mut self, window: (u64, u64), stopped: Option<u64>) {
        let from = self.first.unwrap_or(window.0);
        let to = stopped.map_or("the end".to_string(), |t| format!("@{}", fmt_secs(t)));
        self.notes.push(format!(
            "read from @{} to {to} (the pages around the window): events read, pairs outside the filters, unmatched and open count that stretch",
            fmt_secs(from)
        ));
    }

    /// A record the analyzer found damaged, with its place in the file.
    pub(crate) fn damaged_record(&mut self, e: Error) {
        self.damaged_records += 1;
        if self.damaged_records <= DAMAGED_REPORTED {
            self.errors.push(e);
        }
    }

    /// Records the merge skipped as damaged (their ids have no event format): the
    /// figures cover the rest, and pairs across them were dropped as across a loss.
    pub(crate) fn skipped(&mut self, e: Error) {
        if !self.errors.iter().any(|x| x.same_place(&e)) {
            self.errors.push(e);
        }
    }

    /// A CPU's stream failed: the figures cover what was read.
    pub(crate) fn damaged(&mut self, e: Error) {
        self.damaged = 1;
        self.errors.push(e);
    }

    /// The rows aggregated so far, named; the aggregates start again from empty.
    fn take_rows(&mut self) -> Vec<Row> {
        let out = &mut self.out;
        let mut rows = Vec::with_capacity(out.aggs.len());
        for (k, agg) in std::mem::take(&mut out.aggs) {
            if k < SMALL_KEYS {
                out.small[k as usize] = u32::MAX;
            }
            let key = self.a.key_name(k, &out.tasks);
            if self.key_filter.accepts(&key) {
                rows.push(Row { key, agg });
            } else {
                out.counts.selected -= agg.count;
                out.counts.filtered += agg.count;
            }
        }
        out.index.clear();
        out.last = None;
        rows
    }

    /// The outcome of the whole pass, after the last event.
    pub(crate) fn finish(mut self, trace: &Trace, log: &mut dyn LogSink) -> Result<Outcome, Error> {
        let info = A::INFO;
        if self.damaged_records > DAMAGED_REPORTED {
            self.errors.push(
                Error::new(
                    ErrorKind::Corrupt,
                    None,
                    format!(
                        "{} more damaged records skipped",
                        self.damaged_records - DAMAGED_REPORTED
                    ),
                )
                .in_file(&trace.path),
            );
        }
        if self.ids.len() <= 4 {
            for id in &self.ids {
                if self.per_id.get(*id as usize) == Some(&0) {
                    if let Some(ev) = trace.events.get(*id) {
                        self.notes.push(format!(
                            "no {}:{} events in this trace (record them with `kstate record -e {}`)",
                            ev.system, ev.name, info.preset
                        ));
                    }
                }
            }
        }
        self.out.counts.open_at_end = self.a.finish(&mut self.out);
        flush_log(&self.a, &mut self.out, log, &mut self.key_filter)?;
        let tables = self.a.tables(&self.out);
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(self.a.notes());
        if self.out.counts.inferred > 0 {
            notes.push(format!(
                "{} switch-ins inferred at the wake-up: this kernel did not trace some CPUs leaving idle (the tasks were first seen running there without a sched_switch putting them on)",
                self.out.counts.inferred
            ));
        }
        let rows = self.take_rows();
        let (sel, start, last) = (self.sel, self.start, self.last);
        let span = self.first.and_then(|f| {
            let lo = f.max(sel.include.0).max(start.unwrap_or(0));
            let hi = last.min(sel.include.1);
            (lo <= hi).then_some((lo, hi))
        });
        Ok(Outcome {
            info,
            by: self.by,
            rows,
            trace_start: start,
            span,
            lost: self.lost,
            counts: self.out.counts,
            tables,
            notes,
            errors: self.errors,
        })
    }

    /// Joins `next`, the pass over the time slice after this one's: its keys renumbered
    /// into this pass's where the passes number them apart
    /// ([`crate::slices::Sliced::rekey`], while this pass's task names are still those at
    /// the cut), then absorbed and stitched ([`Pass::absorb`]).
    pub(crate) fn join(&mut self, mut next: Pass<A>)
    where
        A: crate::slices::Sliced,
    {
        if let Some(map) = self.a.rekey(&mut next.a, &self.out.tasks) {
            next.out.rekey(&map);
        }
        self.absorb(next, |a, next, out| a.stitch(next, out));
    }

    /// The analyzer, to set it up for a time slice ([`crate::slices`]).
    pub(crate) fn analyzer_mut(&mut self) -> &mut A {
        &mut self.a
    }

    /// A pass over a later time slice ([`crate::slices`]) learns task names from its own
    /// events only, so that they overlay the earlier slices' names when absorbed.
    pub(crate) fn forget_comms(&mut self) {
        self.out.tasks.forget_comms();
    }

    /// Events handed over so far.
    pub(crate) fn events(&self) -> u64 {
        self.out.counts.events
    }

    /// Damage met so far beyond what the file declared when opened.
    pub(crate) fn met_damage(&self, declared: usize) -> bool {
        self.damaged != 0 || self.damaged_records > 0 || self.errors.len() > declared
    }

    /// Takes in the pass over the time slice that follows this pass's: its aggregates,
    /// counts and task names are added as if one pass had read both, and `stitch` joins
    /// the analyzers (pairs this pass left open with the ends the next one met first).
    /// Both passes met no loss and no damage ([`crate::slices`] checks).
    pub(crate) fn absorb(&mut self, next: Pass<A>, stitch: impl FnOnce(&mut A, A, &mut Out)) {
        let Pass {
            a,
            out,
            per_id,
            first,
            last,
            lost,
            ..
        } = next;
        self.out.absorb(out);
        stitch(&mut self.a, a, &mut self.out);
        for (n, m) in self.per_id.iter_mut().zip(per_id) {
            *n += m;
        }
        if first.is_some() {
            self.first = self.first.or(first);
            self.last = self.last.max(last);
        }
        for (cpu, l) in lost {
            let e = self.lost.entry(cpu).or_insert(Some(0));
            *e = match (*e, l) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
    }

    /// The outcome of `span` (whose events have all been handed over): the aggregates,
    /// counts, losses and tables since the last interval, which start again from empty;
    /// pairs still open carry on into the next interval.
    pub(crate) fn interval(&mut self, span: (u64, u64)) -> Outcome {
        let tables = self.a.interval_tables(&self.out, span.1);
        let rows = self.take_rows();
        let lost = self.lost.keys().map(|&c| (c, Some(0))).collect();
        Outcome {
            info: A::INFO,
            by: self.by,
            rows,
            trace_start: self.start.or(self.first),
            span: Some(span),
            lost: std::mem::replace(&mut self.lost, lost),
            counts: std::mem::take(&mut self.out.counts),
            tables,
            notes: Vec::new(),
            errors: std::mem::take(&mut self.errors),
        }
    }
}

/// One analyzer's pass, whatever the analyzer, for drivers that run several at once
/// ([`crate::live::Live`]).
pub trait AnyPass {
    /// See [`Pass::event`].
    fn event(&mut self, ev: &Event<'_>) -> Result<Option<String>, Error>;
    fn damaged_record(&mut self, e: Error);
    fn damaged(&mut self, e: Error);
    fn interval(&mut self, span: (u64, u64)) -> Outcome;
    fn finish(self: Box<Self>, trace: &Trace) -> Result<Outcome, Error>;
}

impl<A: Analyzer> AnyPass for Pass<A> {
    fn event(&mut self, ev: &Event<'_>) -> Result<Option<String>, Error> {
        Pass::event(self, ev, &mut NoLog)
    }
    fn damaged_record(&mut self, e: Error) {
        Pass::damaged_record(self, e)
    }
    fn damaged(&mut self, e: Error) {
        Pass::damaged(self, e)
    }
    fn interval(&mut self, span: (u64, u64)) -> Outcome {
        Pass::interval(self, span)
    }
    fn finish(self: Box<Self>, trace: &Trace) -> Result<Outcome, Error> {
        Pass::finish(*self, trace, &mut NoLog)
    }
}

/// Starts a live pass of analyzer `A` ([`Info::live`]): the pass and its event ids.
pub type LiveFn = fn(&Trace, &Config) -> Result<(Box<dyn AnyPass>, Vec<u32>), Error>;

/// [`LiveFn`] for every analyzer that implements [`Analyzer`].
pub fn live<A: Analyzer + 'static>(
    trace: &Trace,
    cfg: &Config,
) -> Result<(Box<dyn AnyPass>, Vec<u32>), Error> {
    let (pass, ids) = Pass::<A>::new(trace, cfg, || Ok(None))?;
    Ok((Box::new(pass), ids))
}

struct KeyFilter {
    keys: Vec<String>,
}

impl KeyFilter {
    fn new(keys: &[String]) -> KeyFilter {
        KeyFilter {
            keys: keys.to_vec(),
        }
    }
    fn accepts(&self, key: &str) -> bool {
        self.keys.is_empty() || self.keys.iter().any(|k| k == key)
    }
}

fn flush_log<A: Analyzer>(
    a: &A,
    out: &mut Out,
    log: &mut dyn LogSink,
    keys: &mut KeyFilter,
) -> Result<(), Error> {
    // Taken and given back, so that its allocation serves every event of the pass.
    let mut pending = std::mem::take(&mut out.pending);
    let wants_comm = log.wants_comm();
    for s in pending.drain(..) {
        let key = a.key_name(s.key, &out.tasks);
        if !keys.accepts(&key) {
            if s.kind == Kind::Dur {
                out.counts.selected -= 1;
                out.counts.filtered += 1;
            }
            continue;
        }
        let comm = if wants_comm {
            out.tasks.comm(s.tid)
        } else {
            String::new()
        };
        let row = LogRow {
            start: s.start,
            key: &key,
            value: s.value,
            kind: s.kind,
            tid: s.tid,
            pid: out.tasks.tgid(s.tid),
            comm: &comm,
            cpu: s.cpu,
            flag: s.flag,
        };
        log.row(&row)
            .map_err(|e| Error::new(ErrorKind::Io, None, format!("writing output: {e}")))?;
    }
    out.pending = pending;
    Ok(())
}
