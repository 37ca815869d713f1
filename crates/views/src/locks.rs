//! Locks across analyzers: the `top-locks` summary (futex waits per lock and caller, with
//! pthread-mutex hold times where the recording has `--holds`' probes), shared by `kstate
//! top-locks` and `kstate bench malloc --locks`, and what a file says about kernel lock
//! hold times.
//!
//! A lock's wait share is its total wait time (time in futex wait calls on it, which
//! includes the wait for a CPU after the wake-up) / (the threads that waited on it x the
//! time analysed): their lifetimes are not in futex events, so the whole span stands for
//! them. Its hold share is its total hold time over the same denominator.
//!
//! Holds are `None`, not zero, for a lock the probes cannot see: `--holds` probes the
//! pthread mutex entry points, and glibc's internal locks (malloc's arenas) never go
//! through them; and for every lock when the recording has no probes at all.

use std::collections::BTreeMap;

use kstate_analyze::analyzer::{LogRow, LogSink, Mode, Outcome};
use kstate_analyze::analyzers;
use kstate_analyze::analyzers::lockwait::kernel_holds_note;
use kstate_analyze::filter::Filters;
use kstate_analyze::{Error, Query, Source};

/// The note for a lock waited on whose holds the probes did not see.
pub const HOLD_NOT_SEEN: &str =
    "not seen by the probes (they see pthread mutexes only; glibc's malloc arenas and other internal locks are not)";

/// One lock waited on.
#[derive(Debug, Default, Clone)]
pub struct Lock {
    /// As the futex analyzer names it: a data symbol, `file+0xoffset` or the address,
    /// with `@PID`.
    pub name: String,
    pub waits: u64,
    pub wait_ns: u64,
    /// The threads that waited on it, with their names.
    pub threads: BTreeMap<i32, String>,
    /// (caller, waits, wait time), longest waits first; empty without call chains.
    pub callers: Vec<(String, u64, u64)>,
    /// (holds, hold time) where the probes saw the lock; None where they could not.
    pub hold: Option<(u64, u64)>,
}

impl Lock {
    /// The share of the waiting threads' time spent waiting on it, in %.
    pub fn wait_pct(&self, span_ns: u64) -> f64 {
        self.share(self.wait_ns, span_ns)
    }

    /// The share of the waiting threads' time it was held, in %, where holds were seen.
    pub fn hold_pct(&self, span_ns: u64) -> Option<f64> {
        self.hold.map(|(_, ns)| self.share(ns, span_ns))
    }

    fn share(&self, ns: u64, span_ns: u64) -> f64 {
        let d = self.threads.len() as f64 * span_ns as f64;
        if d > 0.0 {
            ns as f64 * 100.0 / d
        } else {
            0.0
        }
    }
}

/// The summary: every lock waited on, most waited first.
#[derive(Debug)]
pub struct TopLocks {
    pub locks: Vec<Lock>,
    /// Time analysed (ns).
    pub span_ns: u64,
    /// Whether the recording has `--holds`' probes.
    pub holds_recorded: bool,
    /// What qualifies the figures (chains unwound, holds not recorded, kernel locks).
    pub notes: Vec<String>,
    /// The futex analyzer's outcome (losses, errors).
    pub futex: Outcome,
}

#[derive(Default)]
struct Acc {
    waits: u64,
    wait_ns: u64,
    threads: BTreeMap<i32, String>,
    callers: BTreeMap<String, (u64, u64)>,
}

/// Sums the futex analyzer's wait rows per lock and caller.
#[derive(Default)]
struct Sum {
    locks: BTreeMap<String, Acc>,
}

impl LogSink for Sum {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        // `LOCK wait` (by lock) or `LOCK wait from CALLER` (by caller).
        let (lock, caller) = match r.key.split_once(" wait from ") {
            Some((l, c)) => (l, Some(c)),
            None => match r.key.strip_suffix(" wait") {
                Some(l) => (l, None),
                None => return Ok(()),
            },
        };
        let l = self.locks.entry(lock.to_string()).or_default();
        l.waits += 1;
        l.wait_ns += r.value;
        l.threads.entry(r.tid).or_insert_with(|| r.comm.to_string());
        if let Some(c) = caller {
            let e = l.callers.entry(c.to_string()).or_default();
            e.0 += 1;
            e.1 += r.value;
        }
        Ok(())
    }
}

/// Sums the lockhold analyzer's holds per lock (`LOCK@PID`): count and time.
#[derive(Default)]
struct Holds {
    locks: BTreeMap<String, (u64, u64)>,
}

impl LogSink for Holds {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        let e = self.locks.entry(r.key.to_string()).or_default();
        e.0 += 1;
        e.1 += r.value;
        Ok(())
    }
}

/// Hold times per lock where the recording has `--holds`' probes; None where not.
fn holds(source: &Source, filters: &Filters) -> Result<Option<Holds>, Error> {
    if source
        .trace()
        .events
        .find(analyzers::lockhold::LOCK)
        .is_none()
    {
        return Ok(None);
    }
    let info = analyzers::find("lockhold").expect("lockhold analyzer");
    let mut h = Holds::default();
    let query = Query::of(info).mode(Mode::Log).filters(filters.clone());
    source.run(&query, &mut h)?;
    Ok(Some(h))
}

/// Futex waits per lock (by caller where the trace has the call chains) and holds where
/// it has the probes, for the threads and time `filters` select.
pub fn top_locks(source: &Source, filters: &Filters) -> Result<TopLocks, Error> {
    let trace = source.trace();
    let info = analyzers::find("futex").expect("futex analyzer");
    let mut sum = Sum::default();
    let by_lock = Query::of(info).mode(Mode::Log).filters(filters.clone());
    let futex = match source.run(&by_lock.clone().keyed(Some("caller")), &mut sum) {
        Ok(o) => o,
        // No call chains: by lock alone.
        Err(e) if e.not_applicable().is_some() => {
            sum = Sum::default();
            source.run(&by_lock, &mut sum)?
        }
        Err(e) => return Err(e),
    };
    let held = holds(source, filters)?;
    let mut notes = futex.notes.clone();
    if held.is_none() {
        notes.push("hold times: not recorded (kstate record --holds)".into());
    }
    notes.push(kernel_holds_note(trace));
    let mut locks: Vec<Lock> = sum
        .locks
        .into_iter()
        .map(|(name, a)| {
            let mut callers: Vec<(String, u64, u64)> = a
                .callers
                .into_iter()
                .map(|(c, (n, ns))| (c, n, ns))
                .collect();
            callers.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(&y.0)));
            Lock {
                hold: held.as_ref().and_then(|h| h.locks.get(&name).copied()),
                name,
                waits: a.waits,
                wait_ns: a.wait_ns,
                threads: a.threads,
                callers,
            }
        })
        .collect();
    locks.sort_by(|x, y| y.wait_ns.cmp(&x.wait_ns).then(x.name.cmp(&y.name)));
    Ok(TopLocks {
        locks,
        span_ns: futex.span.map_or(0, |(lo, hi)| hi - lo),
        holds_recorded: held.is_some(),
        notes,
        futex,
    })
}
