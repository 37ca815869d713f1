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
//! Callers are the functions the call chains name. Waits without a chain (lost while
//! recording) or whose chain shows only lock machinery are counted apart, never shown as
//! a caller: the top caller is the top known one, with the share of waits that had none.
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
    /// (caller, waits, wait time), longest waits first: the functions the chains name;
    /// empty without call chains.
    pub callers: Vec<(String, u64, u64)>,
    /// With call chains: the waits that had none (lost while recording), and those whose
    /// chain showed only lock machinery, each as (waits, wait time).
    pub no_chain: (u64, u64),
    pub unknown_caller: (u64, u64),
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

    /// The share of its waits (by count) that had no call chain, in %; None where the
    /// recording has no chains at all.
    pub fn no_chain_pct(&self) -> Option<f64> {
        self.of_waits(self.no_chain.0)
    }

    /// The share of its waits (by count) whose chain showed no caller, in %.
    pub fn unknown_caller_pct(&self) -> Option<f64> {
        self.of_waits(self.unknown_caller.0)
    }

    fn of_waits(&self, n: u64) -> Option<f64> {
        let chained: u64 = self.callers.iter().map(|c| c.1).sum::<u64>() + self.unknown_caller.0;
        (chained + self.no_chain.0 > 0 && self.waits > 0)
            .then(|| n as f64 * 100.0 / self.waits as f64)
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
            let hold = held.as_ref().and_then(|h| h.locks.get(&name).copied());
            lock(name, a, hold)
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

/// What the callers shown leave out, for a line under the lock: `callers: 68.0 % of the
/// waits had no call chain (lost while recording), 2.0 % showed only lock machinery`;
/// None where nothing was left out.
pub fn uncalled_line(l: &Lock) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(p) = l.no_chain_pct().filter(|_| l.no_chain.0 > 0) {
        parts.push(format!(
            "{p:.1} % of the waits had no call chain (lost while recording)"
        ));
    }
    if let Some(p) = l.unknown_caller_pct().filter(|_| l.unknown_caller.0 > 0) {
        parts.push(format!("{p:.1} % showed only lock machinery"));
    }
    if parts.is_empty() {
        return None;
    }
    let known = match l.callers.is_empty() {
        true => "; no caller named",
        false => "; the callers named are of the rest",
    };
    Some(format!("callers: {}{known}", parts.join(", ")))
}

/// One lock's sums: its callers, longest waits first, without the waits that name none.
fn lock(name: String, a: Acc, hold: Option<(u64, u64)>) -> Lock {
    let mut callers: Vec<(String, u64, u64)> = a
        .callers
        .into_iter()
        .map(|(c, (n, ns))| (c, n, ns))
        .collect();
    let mut apart = |label: &str| {
        let i = callers.iter().position(|c| c.0 == label)?;
        let (_, n, ns) = callers.remove(i);
        Some((n, ns))
    };
    let no_chain = apart(analyzers::futex::NO_CHAIN).unwrap_or_default();
    let unknown_caller = apart(analyzers::futex::UNKNOWN_CALLER).unwrap_or_default();
    callers.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(&y.0)));
    Lock {
        name,
        waits: a.waits,
        wait_ns: a.wait_ns,
        threads: a.threads,
        callers,
        no_chain,
        unknown_caller,
        hold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sums `n` waits of `ns` each under the futex analyzer's `key`.
    fn add(sum: &mut Sum, key: &str, n: u64, ns: u64) {
        for _ in 0..n {
            let r = LogRow {
                start: 0,
                key,
                value: ns,
                kind: kstate_analyze::analyzer::Kind::Dur,
                tid: 1,
                pid: Some(7),
                comm: "mallocfight",
                cpu: 0,
                flag: false,
            };
            sum.row(&r).unwrap();
        }
    }

    /// The case: most waits lost their chain; the top caller shown is the function
    /// the others name, and the lost share is said apart.
    #[test]
    fn waits_without_a_chain_are_never_a_caller() {
        let mut sum = Sum::default();
        add(&mut sum, "main_arena@7 wait from [no chain]", 68, 1000);
        add(&mut sum, "main_arena@7 wait from alloc_worker", 30, 400);
        add(&mut sum, "main_arena@7 wait from [unknown caller]", 2, 10);
        let (name, acc) = sum.locks.pop_first().unwrap();
        let l = lock(name, acc, None);
        assert_eq!(l.waits, 100);
        assert_eq!(l.callers, vec![("alloc_worker".to_string(), 30, 12_000)]);
        assert_eq!((l.no_chain, l.unknown_caller), ((68, 68_000), (2, 20)));
        assert_eq!(l.no_chain_pct(), Some(68.0));
        assert_eq!(
            uncalled_line(&l).as_deref(),
            Some(
                "callers: 68.0 % of the waits had no call chain (lost while recording), \
                 2.0 % showed only lock machinery; the callers named are of the rest"
            )
        );
        // Without chains at all, nothing is said of them.
        let mut plain = Sum::default();
        add(&mut plain, "0x10@7 wait", 3, 5);
        let (name, acc) = plain.locks.pop_first().unwrap();
        let l = lock(name, acc, None);
        assert_eq!((l.no_chain_pct(), uncalled_line(&l)), (None, None));
    }
}
