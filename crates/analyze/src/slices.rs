//! One analysis on several threads: the recording is cut into time slices at page
//! boundaries, each slice is read and analysed by its own pass (merging its CPUs' pages
//! in time order, as one pass does), and the passes are then joined in time order.
//!
//! Why slices and not CPUs: pairs cross CPUs (a task migrates in the middle of a system
//! call, a wake-up on one CPU is answered by a switch on another), so each slice still
//! merges all CPUs; what crosses a cut is only the pairs open there, which the join
//! closes exactly as one pass would ([`Sliced::stitch`]).
//!
//! Exactness: a slice holds the events with `cut[k] <= ts < cut[k+1]`, so the slices
//! in order are the one pass's event order (ties between CPUs never straddle a cut); each
//! slice notes where it began and ended in every CPU's stream ([`Seams`]), so that two
//! slices are joined only where one ends exactly where the next begins, whatever the
//! plan ([`kstate_format::stream::slice_plan`]) guessed from a few pages' times. A
//! pass over a later slice starts knowing nothing; its analyzer records, for each key
//! whose state an earlier slice may hold (a thread, a CPU), what the first event of the
//! slice did to it, and [`Sliced::stitch`] replays that against the open state the
//! earlier slices left. Samples, counts and distributions add exactly (log-linear
//! buckets). Where that cannot hold, the analysis runs on one thread: traces with lost
//! events (a loss gap opened in one slice and closed in the next), damaged pages,
//! per-CPU streams out of time order, `--log` (rows in completion order), windows over a
//! page index (they read only around the window), and analyzers or keyings that read
//! state learned from earlier events in a way a slice cannot replay (they do not
//! implement [`Sliced`], or refuse in [`Sliced::sliceable`]). `--interval` and comm
//! filters (names are learned from events as the pass goes) run one pass fed by decoder
//! threads ([`crate::piped`]).
//!
//! Memory: a slice holds at most a fixed amount of the recording's pages (more slices as
//! recordings grow, [`kstate_format::stream::slice_plan`]), and at most two per thread wait to be joined;
//! what a slice's analyzer keeps for the join is bounded by its slice.

use std::sync::{Arc, Mutex};

use kstate_format::{Error, ErrorKind, Trace};

use crate::analyzer::Pass;
use crate::analyzer::{drive, trace_start, Analyzer, Config, LogSink, Mode, NoLog, Out, Outcome};
use kstate_format::stream::merge::{Event, IdFilter, Merger};
use kstate_format::stream::slice_plan::{Plan, Size};

/// An analyzer whose pass can be cut into time slices.
pub(crate) trait Sliced: Analyzer + Send {
    /// Whether this binding (its keying) can be sliced.
    fn sliceable(&self) -> bool {
        true
    }
    /// This analyzer will read a slice that is not the first: from now on it records
    /// what the first event of each key does, for [`Sliced::stitch`].
    fn record_heads(&mut self);
    /// Renumbers the keys of `next`, the analyzer of the slice after the ones `self` has
    /// read, into `self`'s, for keys each pass numbers as it meets them; `tasks` are the
    /// task names `self`'s pass knows at the cut. Returns the new key of each of
    /// `next`'s aggregate keys (by index), or `None` where keys mean the same in every
    /// pass.
    fn rekey(&mut self, _next: &mut Self, _tasks: &crate::analyzer::Tasks) -> Option<Vec<u64>> {
        None
    }
    /// Joins `next`, the analyzer of the slice after the ones `self` has read: the open
    /// state `self` holds meets the first events `next` recorded (samples and counts go
    /// to `out`, correcting what `next` counted not knowing it), then `self` takes over
    /// `next`'s state, as if one pass had read both.
    fn stitch(&mut self, next: Self, out: &mut Out);
}

/// Slices per thread: smaller slices even out threads that the machine runs unequally.
const SLICES_PER_THREAD: usize = 4;

/// Runs analyzer `A` over `trace` on `cfg.threads` threads where its results stay those
/// of one pass ([`drive`]); otherwise, or if a slice meets what slicing cannot join
/// exactly, runs the one pass.
pub(crate) fn drive_sliced<A: Sliced>(
    trace: &Trace,
    cfg: &Config,
    log: &mut dyn LogSink,
) -> Result<Outcome, Error> {
    if cfg.threads <= 1
        || cfg.mode == Mode::Log
        || cfg.pages.is_some()
        || trace.damage().next().is_some()
    {
        return drive::<A>(trace, cfg, log);
    }
    if cfg.interval.is_some() || !cfg.filters.comms.is_empty() {
        // One pass still, its decoding on the threads.
        return crate::piped::drive_piped::<A>(trace, cfg, log);
    }
    match run_slices::<A>(trace, cfg)? {
        Some(o) => Ok(o),
        None => drive::<A>(trace, cfg, log),
    }
}

/// Where to cut `trace` for `threads` threads; `None` when it cannot be cut.
pub(crate) fn plan(trace: &Trace, threads: usize) -> Option<Arc<Plan>> {
    kstate_format::stream::slice_plan::plan(trace, Size::Slices(threads * SLICES_PER_THREAD))
        .map(Arc::new)
}

/// One slice's pass, or why it cannot be joined.
type SliceResult<A> = Result<Option<(Pass<A>, Seams)>, Error>;

fn run_slices<A: Sliced>(trace: &Trace, cfg: &Config) -> Result<Option<Outcome>, Error> {
    // Binding first: an analyzer whose events are missing says so as one pass does.
    let (mut probe, _) = Pass::<A>::new(trace, cfg, || Ok(None))?;
    if !probe.analyzer_mut().sliceable() {
        return Ok(None);
    }
    drop(probe);
    let Some(plan) = plan(trace, cfg.threads) else {
        return Ok(None);
    };
    let n = plan.cuts.len();
    let start = trace_start(trace)?;
    // Joined in time order as they come, each at once: a slice that cannot be joined (or
    // fails) stops the rest, and the one pass runs (or the error is reported).
    let mut joined: Option<(Pass<A>, Seams)> = None;
    let mut outcome = Ok(true);
    ordered(
        n,
        cfg.threads,
        2 * cfg.threads,
        || (),
        |_, k| run_slice::<A>(trace, cfg, start, &plan, k),
        |_, r| {
            let step = match (r, joined.take()) {
                (Ok(Some((p, next))), Some((mut all, seams))) => {
                    if !seams.meet(&next) {
                        Ok(None)
                    } else {
                        all.join(p);
                        Ok(Some((all, next)))
                    }
                }
                (r, _) => r,
            };
            match step {
                Ok(Some(j)) => {
                    joined = Some(j);
                    true
                }
                Ok(None) => {
                    outcome = Ok(false);
                    false
                }
                Err(e) => {
                    outcome = Err(e);
                    false
                }
            }
        },
    );
    if !outcome? {
        return Ok(None);
    }
    let (all, _) = joined.expect("at least two slices");
    if all.measured_events() == 0 {
        // No events at all: the one pass words the error.
        return Ok(None);
    }
    let o = all.finish(trace, &mut NoLog)?;
    count_sliced_run();
    Ok(Some(o))
}

thread_local! {
    static SLICED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) fn count_sliced_run() {
    SLICED.with(|n| n.set(n.get() + 1));
}

/// Analyses this thread has run on several threads so far, cut in time slices here or
/// in [`crate::piped`] (for tests: a result equal to the one-thread result proves
/// nothing if the analysis fell back to one pass).
pub fn sliced_runs() -> u64 {
    SLICED.with(|n| n.get())
}

/// The pass over slice `k`: the events with `cuts[k] <= ts < cuts[k + 1]`, and where it
/// began and ended. `None` when the slice met what a join cannot take (damage, a loss,
/// a CPU's events out of time order).
fn run_slice<A: Sliced>(
    trace: &Trace,
    cfg: &Config,
    start: Option<u64>,
    plan: &Arc<Plan>,
    k: usize,
) -> SliceResult<A> {
    let (mut pass, ids) = Pass::<A>::new(trace, cfg, || Ok(start))?;
    let declared = trace.damage().count();
    if k > 0 {
        pass.forget_comms();
        pass.analyzer_mut().record_heads();
    }
    let mut walk = SliceWalk::new(trace, IdFilter::only(ids.iter().copied()), plan, k)?;
    loop {
        match walk.step() {
            Ok(true) => {}
            Ok(false) => break,
            Err(Cannot) => return Ok(None),
        }
        if pass.event(&walk.current(), &mut NoLog)?.is_some() {
            return Ok(None);
        }
    }
    let Ok(seams) = walk.seams() else {
        return Ok(None);
    };
    if pass.met_damage(declared) {
        return Ok(None);
    }
    Ok(Some((pass, seams)))
}

/// A slice met what only the one-thread pass reports right: damage, a loss, a CPU's
/// events out of time order.
#[derive(Debug)]
pub struct Cannot;

/// The events of slice `k` (`cuts[k] <= ts < cuts[k + 1]`) in time order, read from the
/// page before the cut on (a CPU's first page in the slice may start before it).
pub struct SliceWalk {
    merger: Merger,
    /// The time of the last event: a step back means some CPU's events are out of order
    /// (the merge of CPUs in order is in order, and a CPU that steps back makes it step
    /// back right after), which one check per event finds without a table of CPUs.
    last: u64,
    from: u64,
    to: u64,
    /// Where the walk began in each CPU's stream, once past the events before the cut.
    begin: Option<Vec<Option<(usize, usize)>>>,
}

/// Where a slice's walk began and ended in each CPU's stream ([`Merger::heads`]). Two
/// slices join exactly when the one ends where the next begins, for every CPU: each
/// event then went to one of them, none to both or neither, whatever the plan guessed
/// of the pages' times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seams {
    begin: Vec<Option<(usize, usize)>>,
    end: Vec<Option<(usize, usize)>>,
}

impl Seams {
    /// Whether the slice after this one begins where this one ended.
    pub fn meet(&self, next: &Seams) -> bool {
        self.end == next.begin
    }
}

impl SliceWalk {
    pub(crate) fn new(
        trace: &Trace,
        filter: IdFilter,
        plan: &Plan,
        k: usize,
    ) -> Result<SliceWalk, Error> {
        let merger = match k {
            0 => Merger::new(trace, None, filter)?,
            _ => Merger::from_seeks(trace, filter, &plan.seeks[k])?,
        };
        Ok(SliceWalk {
            merger,
            last: 0,
            from: plan.cuts[k],
            to: plan.cuts.get(k + 1).copied().unwrap_or(u64::MAX),
            begin: None,
        })
    }

    /// The slice's next event; `Ok(None)` at its end. (Not an `Iterator`: the event
    /// borrows the walk's page.)
    #[inline(always)]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Event<'_>>, Cannot> {
        Ok(match self.step()? {
            true => Some(self.current()),
            false => None,
        })
    }

    /// Moves to the slice's next event: false at its end, else [`SliceWalk::current`] is
    /// that event until the next step.
    #[inline(always)]
    pub fn step(&mut self) -> Result<bool, Cannot> {
        if self.begin.is_none() {
            self.start()?;
        }
        match self.merger.step() {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(_) => return Err(Cannot),
        }
        // Only the time and the loss count are checked here: the pass builds the event.
        let ts = self.merger.current_ts();
        in_order(&mut self.last, ts, self.merger.loss_mark().gen)?;
        Ok(ts < self.to)
    }

    /// The event the last [`SliceWalk::step`] moved to (only after it returned true).
    #[inline(always)]
    pub fn current(&self) -> Event<'_> {
        self.merger.current()
    }

    /// Passes over the events before the cut (on the pages it falls in), their order
    /// checked all the same.
    // Once per slice: out of line, so that the walk inlined in each pass stays small.
    #[inline(never)]
    fn start(&mut self) -> Result<(), Cannot> {
        loop {
            match self.merger.peek_ts() {
                Ok(Some(ts)) if ts < self.from => {}
                Ok(_) => break,
                Err(_) => return Err(Cannot),
            }
            let ev = self.merger.next().map_err(|_| Cannot)?.ok_or(Cannot)?;
            in_order(&mut self.last, ev.ts, ev.loss.gen)?;
        }
        self.begin = Some(self.merger.heads());
        Ok(())
    }

    /// Where the walk began and ended, once `next` has said the slice is over; `Cannot`
    /// if a loss lies anywhere it read (also where no event was delivered after it).
    pub fn seams(&self) -> Result<Seams, Cannot> {
        if self.merger.loss_mark().gen != 0 {
            return Err(Cannot);
        }
        Ok(Seams {
            begin: self.begin.clone().ok_or(Cannot)?,
            end: self.merger.heads(),
        })
    }
}

/// Checks that an event at `ts` comes no earlier than the event before it, with no loss
/// before it: a gap opened anywhere so far counts (`loss_gen`; a record after a loss
/// opens one).
#[inline(always)]
fn in_order(last: &mut u64, ts: u64, loss_gen: u64) -> Result<(), Cannot> {
    if ts < *last || loss_gen != 0 {
        return Err(Cannot);
    }
    *last = ts;
    Ok(())
}

/// A recording cut into short time slices, for work on several threads whose results are
/// used in time order (`kstate dump`): the slices in order hold the one pass's events in
/// its order where each meets the next ([`Seams::meet`]), and slices of a few hundred
/// pages keep what waits to be used small.
pub struct ShortSlices {
    plan: Plan,
}

impl ShortSlices {
    /// Slices of about `bytes` of pages (all CPUs together; at least two pages). `None`
    /// when the trace cannot be cut (pages built on demand or unreadable) or is too short
    /// for two.
    pub fn plan(trace: &Trace, bytes: usize) -> Option<ShortSlices> {
        let pages = bytes / trace.layout.page_size.max(1);
        let plan = kstate_format::stream::slice_plan::plan(trace, Size::Pages(pages))?;
        Some(ShortSlices { plan })
    }

    pub fn len(&self) -> usize {
        self.plan.cuts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.plan.cuts.is_empty()
    }

    /// The events `filter` passes of slice `k`, in time order.
    pub fn walk(&self, trace: &Trace, filter: IdFilter, k: usize) -> Result<SliceWalk, Error> {
        SliceWalk::new(trace, filter, &self.plan, k)
    }
}

/// Runs `work` for each `k` in `0..n` on `threads` threads, each with its own state made by
/// `init` on that thread, and hands the results to `sink` on the calling thread in the
/// order of `k`, with at most `ahead` results made and not yet handed over (memory stays
/// bounded). `sink` returning false stops the work: no later result is handed over. A
/// panic in `work` is resumed on the calling thread.
pub fn ordered<S, R: Send>(
    n: usize,
    threads: usize,
    ahead: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) -> R + Sync,
    mut sink: impl FnMut(usize, R) -> bool,
) {
    use std::collections::BTreeMap;
    use std::sync::Condvar;

    type Made<R> = std::thread::Result<R>;
    struct State<R> {
        next: usize,
        handed: usize,
        made: BTreeMap<usize, Made<R>>,
        stop: bool,
    }
    let state = Mutex::new(State {
        next: 0,
        handed: 0,
        made: BTreeMap::new(),
        stop: false,
    });
    let (room, ready) = (Condvar::new(), Condvar::new());
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let ahead = ahead.max(1);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| {
                let mut st = init();
                loop {
                    let k = {
                        let mut g = lock();
                        while !g.stop && g.next < n && g.next >= g.handed + ahead {
                            g = room.wait(g).unwrap_or_else(|e| e.into_inner());
                        }
                        if g.stop || g.next >= n {
                            return;
                        }
                        g.next += 1;
                        g.next - 1
                    };
                    let r =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut st, k)));
                    let failed = r.is_err();
                    lock().made.insert(k, r);
                    ready.notify_all();
                    if failed {
                        return;
                    }
                }
            });
        }
        for k in 0..n {
            let r = {
                let mut g = lock();
                loop {
                    if let Some(r) = g.made.remove(&k) {
                        break r;
                    }
                    g = ready.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            };
            let go_on = match r {
                Ok(r) => sink(k, r),
                Err(panic) => {
                    lock().stop = true;
                    room.notify_all();
                    std::panic::resume_unwind(panic);
                }
            };
            let mut g = lock();
            g.handed = k + 1;
            if !go_on {
                g.stop = true;
            }
            drop(g);
            room.notify_all();
            if !go_on {
                break;
            }
        }
    });
}

/// Every core this process may run on.
pub fn all_cores() -> usize {
    kstate_format::cores::all_cores()
}

/// The thread count a user asked for (`--threads`), or when not asked the cores no other
/// task is running on ([`kstate_format::cores::free_cores`]).
pub fn threads(asked: Option<usize>) -> Result<usize, Error> {
    match asked {
        Some(n) => check_threads(n),
        None => Ok(kstate_format::cores::free_cores()),
    }
}

/// Refuses a thread count of 0.
pub fn check_threads(n: usize) -> Result<usize, Error> {
    if n == 0 {
        return Err(Error::new(
            ErrorKind::Unsupported,
            None,
            "--threads needs at least 1".to_string(),
        ));
    }
    Ok(n)
}
