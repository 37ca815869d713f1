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
/// trace when a CPU leaves idle (see [`crate::analyzers::sched::IdleExits`]): a task
/// switched out on a CPU that no traced switch put on it, though it was woken onto that
/// CPU, ran from the later of that wake-up and the CPU's last traced switch. Up to a
/// CPU's first switch in the chunk its task is not known here, and nothing is inferred.
/// Returns how many switches it put back.
pub fn infer_switch_ins(recs: &mut Vec<Rec>) -> u64 {
    use super::events::Kind;
    use crate::fxmap::FxMap;
    let mut current: Vec<Option<(i32, u64, usize)>> = Vec::new();
    let mut woken: FxMap<i32, (u32, u64, usize)> = FxMap::default();
    let mut put: Vec<(usize, Rec)> = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        match r.kind {
            Kind::Wake { pid, target, .. } if pid != 0 => {
                woken.entry(pid).or_insert((target, r.ts, i));
            }
            Kind::Switch { prev, next, .. } => {
                let c = r.cpu as usize;
                if c >= current.len() {
                    current.resize(c + 1, None);
                }
                if let (Some((on, last, last_i)), Some(&(to, woke, woke_i))) =
                    (current[c], woken.get(&prev))
                {
                    if prev != 0 && on != prev && to == r.cpu {
                        let (ts, after) = match woke_i > last_i {
                            true => (woke, woke_i),
                            false => (last, last_i),
                        };
                        put.push((
                            after + 1,
                            Rec {
                                ts,
                                cpu: r.cpu,
                                pid: on,
                                flags: 0,
                                lost: kstate_format::Lost::None,
                                kind: Kind::Switch {
                                    prev: on,
                                    next: prev,
                                    prev_runnable: true,
                                    prev_dead: false,
                                },
                            },
                        ));
                    }
                }
                current[c] = Some((next, r.ts, i));
                if !woken.is_empty() {
                    woken.remove(&prev);
                    woken.remove(&next);
                }
            }
            _ => {}
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
