//! The events of a stretch of time handed over backward, latest first, without holding
//! the stretch: the file's page index ([`PageIndex`]) cuts time at page starts, and each
//! chunk (some [`PAGES_PER_CHUNK`] pages of all CPUs) is read forward from its first page
//! ([`Merger::indexed`]) into records, which the walk then takes in reverse. Every event
//! is decoded once; the pages where chunks meet are read twice.
//!
//! A file whose pages are not indexed (a perf.data read straight, a Parquet directory)
//! is read in one forward pass instead and its stretch held whole: the walk's note says
//! so.

use std::sync::Arc;

use kstate_format::Trace;

use super::events::{Bound, Rec};
use crate::error::Error;
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::stream::page_index::PageIndex;

/// Pages (of all CPUs together) per chunk: with 512 KiB pages about 10 k events each.
pub const PAGES_PER_CHUNK: usize = 16;

/// Hands the events of `[floor, end]` over in chunks, latest chunk first.
pub struct Backward<'t> {
    trace: &'t Trace,
    filter: Vec<u32>,
    /// Where the pages are indexed: every page's start, sorted.
    index: Option<(Arc<PageIndex>, Vec<u64>)>,
    /// The next chunk ends before this (ns); `None` once the start was handed over.
    hi: Option<u64>,
    floor: u64,
    /// Damage met, reported once.
    pub errors: Vec<kstate_format::Error>,
    /// Events decoded.
    pub read: u64,
    /// The whole stretch held in memory (no page index).
    pub held_whole: bool,
}

impl<'t> Backward<'t> {
    /// The events with the ids `filter`, from `end` (included) back to `floor` (the walk
    /// may stop asking earlier). `index`: the file's page index where a front end made it.
    pub fn new(
        trace: &'t Trace,
        filter: Vec<u32>,
        index: Option<Arc<PageIndex>>,
        end: u64,
        floor: u64,
    ) -> Result<Backward<'t>, Error> {
        let index = match index {
            Some(i) => Some(i),
            None => PageIndex::build(trace).ok().map(Arc::new),
        };
        // Every CPU's pages must be indexed for a seek to start each at the right page.
        let index = index.filter(|i| (0..trace.cpu_data.len()).all(|c| i.pages(c).is_some()));
        let index = index.map(|i| {
            let mut starts: Vec<u64> = (0..trace.cpu_data.len())
                .flat_map(|c| i.pages(c).unwrap_or(&[]).iter().map(|p| p.first_ns))
                .collect();
            starts.sort_unstable();
            (i, starts)
        });
        Ok(Backward {
            trace,
            filter,
            index,
            hi: Some(end.saturating_add(1)),
            floor,
            errors: Vec::new(),
            read: 0,
            held_whole: false,
        })
    }

    /// The next chunk (just before the last one handed over), in time order, into `out`
    /// (cleared first); false when the stretch is done.
    pub fn next(
        &mut self,
        bound: &mut Bound,
        comm: &mut dyn FnMut(i32, &[u8]),
        out: &mut Vec<Rec>,
    ) -> Result<bool, Error> {
        out.clear();
        let Some(hi) = self.hi else {
            return Ok(false);
        };
        if hi <= self.floor {
            self.hi = None;
            return Ok(false);
        }
        let (lo, mut merger) = match &self.index {
            Some((index, starts)) => {
                let at = starts.partition_point(|&s| s < hi);
                let lo = match at > PAGES_PER_CHUNK {
                    true => starts[at - PAGES_PER_CHUNK],
                    false => 0,
                }
                .max(self.floor);
                let m = Merger::indexed(
                    self.trace,
                    IdFilter::only(self.filter.iter().copied()),
                    index,
                    Some(lo),
                )?;
                (lo, m)
            }
            None => {
                self.held_whole = true;
                let m = Merger::new(
                    self.trace,
                    None,
                    IdFilter::only(self.filter.iter().copied()),
                )?;
                (self.floor, m)
            }
        };
        loop {
            match merger.step() {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    if self.errors.len() < 10 {
                        self.errors.push(e);
                    }
                    continue;
                }
            }
            let ev = merger.current();
            if ev.ts >= hi {
                break;
            }
            if ev.ts < lo {
                continue;
            }
            self.read += 1;
            if let Some(r) = bound.decode(&ev, &mut *comm) {
                out.push(r);
            }
        }
        self.hi = (lo > self.floor && lo > 0).then_some(lo);
        Ok(true)
    }
}

/// Puts back, in a chunk's records (in time order), the switches some kernels do not
/// trace (see [`crate::analyzers::sched::IdleExits`]; this VM's 6.18 kernel misses the
/// switch out of idle, and now and then one between two tasks): a task switched out on
/// a CPU where no traced switch put it was switched in after everything else seen there
/// — the CPU's last traced switch, the last event there of another task (or of the idle
/// task), and its own wake-up if it was woken since it last ran — and is put there at
/// the latest of those. Whichever CPU the wake-up named: sched_waking's `target_cpu` is
/// where the task last ran, before the kernel chose where to wake it (a sleeper woken by
/// its timer on CPU 0 runs on idle CPU 1). Nothing is inferred where events were lost
/// on the CPU since that point, nor where nothing of the CPU came before the task's own
/// events in the chunk. Returns how many switches it put back.
pub fn infer_switch_ins(recs: &mut Vec<Rec>) -> u64 {
    use super::events::Kind;
    /// What a chunk showed of one CPU so far.
    #[derive(Clone, Copy, Default)]
    struct Seen {
        /// The task the last traced switch put there, when and where in the records.
        switched: Option<(i32, u64, usize)>,
        /// The last event there and the last one before it of another task.
        last: Option<(i32, u64, usize)>,
        before: Option<(i32, u64, usize)>,
        /// Where in the records events were last lost on it.
        lost: Option<usize>,
    }
    let mut cpus: Vec<Seen> = Vec::new();
    let mut woken = Woken::default();
    let mut put: Vec<(usize, Rec)> = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let c = r.cpu as usize;
        if c >= cpus.len() {
            cpus.resize(c + 1, Seen::default());
        }
        let seen = &mut cpus[c];
        if r.lost != kstate_format::Lost::None {
            seen.lost = Some(i);
        }
        match r.kind {
            Kind::Wake { pid, .. } if pid != 0 => woken.note(pid, r.ts, i),
            Kind::Switch { prev, next, .. } => {
                // The last sign of another task on the CPU before `prev` ran there.
                let other = match seen.last {
                    Some(l) if l.0 == prev => seen.before,
                    l => l,
                };
                let untraced = prev != 0
                    && match seen.switched {
                        Some(s) => s.0 != prev,
                        None => other.is_some_and(|o| o.0 != prev),
                    };
                if untraced {
                    let bounds = [
                        seen.switched.filter(|s| s.0 != prev),
                        other.filter(|o| o.0 != prev),
                        woken.get(prev).map(|(ts, at)| (prev, ts, at)),
                    ];
                    let from = seen.switched.map_or(other.map_or(0, |o| o.0), |s| s.0);
                    if let Some(&(_, ts, at)) = bounds.iter().flatten().max_by_key(|b| b.2) {
                        if seen.lost.is_none_or(|l| l <= at) {
                            put.push((at + 1, switch_in(ts, r.cpu, from, prev)));
                        }
                    }
                }
                seen.switched = Some((next, r.ts, i));
                seen.last = None;
                seen.before = None;
                woken.forget(prev);
                woken.forget(next);
            }
            _ => {}
        }
        if !matches!(r.kind, Kind::Switch { .. }) {
            match seen.last {
                Some(l) if l.0 == r.pid => {}
                l => seen.before = l,
            }
            seen.last = Some((r.pid, r.ts, i));
        }
    }
    let n = put.len() as u64;
    if n > 0 {
        put.sort_by_key(|p| p.0);
        let old = std::mem::take(recs);
        let mut put = put.into_iter().peekable();
        for (i, r) in old.into_iter().enumerate() {
            while let Some((_, p)) = put.next_if(|p| p.0 == i) {
                recs.push(p);
            }
            recs.push(r);
        }
        recs.extend(put.map(|p| p.1));
    }
    n
}

/// Each task's first wake-up (time, index in the chunk's records) since it was last
/// switched in or out. Few tasks are woken and not yet switched at any moment: they are
/// looked up in a short list, which moves into a map where a chunk holds many (a wake-up
/// and two switches per event pair of a pipe ping-pong made the map 14 % of `why`).
#[derive(Default)]
struct Woken {
    few: Vec<(i32, u64, usize)>,
    many: Option<crate::fxmap::FxMap<i32, (u64, usize)>>,
}

impl Woken {
    const FEW: usize = 16;

    /// `pid` woken at `ts` (records' index `at`), unless it was already since its switch.
    fn note(&mut self, pid: i32, ts: u64, at: usize) {
        if let Some(m) = &mut self.many {
            m.entry(pid).or_insert((ts, at));
        } else if !self.few.iter().any(|w| w.0 == pid) {
            self.few.push((pid, ts, at));
            if self.few.len() > Self::FEW {
                self.many = Some(self.few.drain(..).map(|(p, t, a)| (p, (t, a))).collect());
            }
        }
    }

    fn get(&self, pid: i32) -> Option<(u64, usize)> {
        match &self.many {
            Some(m) => m.get(&pid).copied(),
            None => self.few.iter().find(|w| w.0 == pid).map(|w| (w.1, w.2)),
        }
    }

    /// `pid` was switched: a later wake-up is its first again.
    fn forget(&mut self, pid: i32) {
        match &mut self.many {
            Some(m) => {
                m.remove(&pid);
            }
            None => {
                if let Some(i) = self.few.iter().position(|w| w.0 == pid) {
                    self.few.swap_remove(i);
                }
            }
        }
    }
}

/// The switch from `from` to `to` on `cpu` at `ts` that the trace lacks.
fn switch_in(ts: u64, cpu: u32, from: i32, to: i32) -> Rec {
    Rec {
        ts,
        cpu,
        pid: from,
        flags: 0,
        lost: kstate_format::Lost::None,
        kind: super::events::Kind::Switch {
            prev: from,
            next: to,
            prev_runnable: true,
            prev_dead: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::events::Kind;
    use super::*;

    fn rec(ts: u64, cpu: u32, pid: i32, kind: Kind) -> Rec {
        Rec {
            ts,
            cpu,
            pid,
            flags: 0,
            lost: kstate_format::Lost::None,
            kind,
        }
    }

    fn wake(ts: u64, cpu: u32, pid: i32, whom: i32, target: u32) -> Rec {
        let kind = Kind::Wake {
            pid: whom,
            new: false,
            target,
        };
        rec(ts, cpu, pid, kind)
    }

    fn switch(ts: u64, cpu: u32, prev: i32, next: i32) -> Rec {
        let kind = Kind::Switch {
            prev,
            next,
            prev_runnable: false,
            prev_dead: false,
        };
        rec(ts, cpu, prev, kind)
    }

    fn idle_irq(ts: u64, cpu: u32) -> Rec {
        rec(ts, cpu, 0, Kind::SoftEntry { vec: 7 })
    }

    /// A sleeper woken by its timer on CPU 0 (sched_waking names CPU 0, where it slept)
    /// runs on idle CPU 1 untraced; the switch that idled CPU 1 lies in an earlier chunk.
    /// CPU 1's last event, in the idle task's context, says it was idle then: the
    /// sleeper ran from the later of that and its wake-up. Without an event of CPU 1 in
    /// idle nothing says what ran there: nothing is inferred.
    #[test]
    fn a_task_switched_out_where_the_cpu_was_idle_ran_from_its_wake_up() {
        let mut recs = vec![
            idle_irq(40, 1),
            switch(50, 0, 7, 8),
            wake(100, 0, 8, 42, 0),
            switch(200, 1, 42, 0),
        ];
        assert_eq!(infer_switch_ins(&mut recs), 1);
        let at: Vec<(u64, u32)> = recs.iter().map(|r| (r.ts, r.cpu)).collect();
        assert_eq!(at, [(40, 1), (50, 0), (100, 0), (100, 1), (200, 1)]);
        assert!(matches!(
            recs[3].kind,
            Kind::Switch {
                prev: 0,
                next: 42,
                ..
            }
        ));
        // CPU 1 still idle after the wake-up (an interrupt at 150): it ran from there.
        let mut later = vec![
            wake(100, 0, 8, 42, 0),
            idle_irq(150, 1),
            switch(200, 1, 42, 0),
        ];
        assert_eq!(infer_switch_ins(&mut later), 1);
        assert_eq!(later[2].ts, 150);
        let mut unknown = vec![wake(100, 0, 7, 42, 1), switch(200, 1, 42, 0)];
        assert_eq!(infer_switch_ins(&mut unknown), 0);
        assert_eq!(unknown.len(), 2);
    }

    /// Many tasks woken and not yet switched (past the short list, in the map): the one
    /// switched out untraced still ran from its own first wake-up, and a task switched in
    /// since it was woken counts as not woken.
    #[test]
    fn among_many_woken_tasks_each_keeps_its_first_wake_up() {
        let mut recs = vec![idle_irq(10, 1)];
        for p in 100..140 {
            recs.push(wake(20 + p as u64, 0, 8, p, 0));
        }
        recs.push(wake(500, 0, 8, 110, 0));
        recs.push(switch(600, 0, 8, 120));
        recs.push(switch(700, 1, 110, 0));
        recs.push(switch(800, 1, 0, 9));
        recs.push(switch(900, 1, 120, 0));
        assert_eq!(infer_switch_ins(&mut recs), 2);
        let put: Vec<(u64, i32)> = recs
            .iter()
            .filter_map(|r| match r.kind {
                Kind::Switch { next, .. } if r.cpu == 1 && (next == 110 || next == 120) => {
                    Some((r.ts, next))
                }
                _ => None,
            })
            .collect();
        // 110 from its first wake-up (130), not the second (500); 120 was switched in on
        // CPU 0 at 600, so on CPU 1 it ran from the CPU's last switch (800), which put 9 there.
        assert_eq!(put, [(130, 110), (800, 120)]);
    }

    /// The CPU's last traced switch put another task there; the woken task is switched
    /// out there: it ran from its wake-up, whatever CPU sched_waking named.
    #[test]
    fn a_task_woken_on_another_cpu_ran_from_its_wake_up() {
        let mut recs = vec![
            switch(50, 1, 9, 0),
            wake(100, 0, 8, 42, 0),
            switch(200, 1, 42, 0),
        ];
        assert_eq!(infer_switch_ins(&mut recs), 1);
        assert_eq!((recs[2].ts, recs[2].cpu), (100, 1));
    }
}
