//! What an analyzer emits and where it goes: samples aggregated per key, or log rows streamed.

use kstate_format::stream::merge::LossMark;

use super::Tasks;
use crate::filter::TimeSel;
use crate::fxmap::FxMap;
use crate::stats::Agg;

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
    pub(crate) tasks: Tasks,
    pub(super) mark: LossMark,
    pub(super) now: u64,
    pub(super) sel: TimeSel,
    pub(super) pids: Vec<i32>,
    pub(super) tids: Vec<i32>,
    pub(super) comms: Vec<String>,
    pub(super) cpus: Vec<u32>,
    pub(super) min: u64,
    pub(super) max: u64,
    /// Any filter besides time and duration.
    pub(super) task_or_cpu_filter: bool,
    pub(super) log: bool,
    pub(super) decades: bool,
    pub(super) index: FxMap<u64, u32>,
    /// Slots of keys below `SMALL_KEYS` (system call numbers, CPUs, states): no hashing.
    pub(super) small: Vec<u32>,
    pub(super) aggs: Vec<(u64, Agg)>,
    pub(super) last: Option<(u64, u32)>,
    pub(super) pending: Vec<Sample>,
    pub(super) interval: Option<u64>,
    pub counts: Counts,
    /// One past the largest CPU number of the trace (see [`Out::cpu_field`]).
    pub(super) cpu_limit: u32,
    /// What is wrong with the event being handled, reported with its place in the file.
    pub(super) damaged: Option<String>,
}

/// Damaged records reported one by one; beyond this many, only counted.
pub(super) const DAMAGED_REPORTED: u64 = 10;

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
    pub(super) fn absorb(&mut self, later: Out) {
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
    pub(super) fn rekey(&mut self, map: &[u64]) {
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

pub(super) const SMALL_KEYS: u64 = 1024;
