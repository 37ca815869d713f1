//! The driver: one time-ordered pass over the events an analyzer asked for, with loss
//! accounting, filters and aggregation the same for every analyzer.

use std::collections::BTreeMap;

use kstate_format::stream::merge::{Event, IdFilter, LossMark, Merger};
use kstate_format::{Error, ErrorKind, Lost, Trace};

use super::out::{DAMAGED_REPORTED, SMALL_KEYS};
use super::{
    Analyzer, Buckets, Config, Counts, Info, Kind, LogRow, LogSink, Mode, NoLog, Out, Outcome, Row,
    Tasks,
};
use crate::filter::{fmt_secs, TimeSel};
use crate::fxmap::FxMap;

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
pub(crate) fn drive<A: Analyzer>(
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
        // A probe asks whether the analyzer has anything: its first own event says so
        // (not a helper's, such as the switches that name tasks).
        if cfg.probe && pass.a.measures(ev.id) {
            break;
        }
    }
    for e in merger.no_format_errors() {
        pass.skipped(e);
    }
    if let (Some(w), true) = (window, stopped.is_some() || merger.seeked()) {
        pass.read_only(w, stopped);
    }
    if pass.measured_events() == 0 && pass.errors.is_empty() {
        let windowed = pass.sel.include != (0, u64::MAX) || pass.sel.exclude.is_some();
        let what = match windowed {
            true => "holds none of those events in the time --window asks for",
            false => "holds none of those events",
        };
        return Err(missing_events(trace, A::INFO, what));
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
    /// Events read of the kinds the analyzer measures (see [`Analyzer::measures`]).
    pub(crate) fn measured_events(&self) -> u64 {
        self.ids
            .iter()
            .filter(|&&id| self.a.measures(id))
            .filter_map(|&id| self.per_id.get(id as usize))
            .sum()
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
pub(crate) type LiveFn = fn(&Trace, &Config) -> Result<(Box<dyn AnyPass>, Vec<u32>), Error>;

/// [`LiveFn`] for every analyzer that implements [`Analyzer`].
pub(crate) fn live<A: Analyzer + 'static>(
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
