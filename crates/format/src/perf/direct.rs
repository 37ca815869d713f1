//! One CPU's events read straight from a perf.data's data section: the scan at open
//! (`scan::scan`) found where the CPU's records lie; this walks those stretches
//! through a mapped window and hands out each tracepoint sample's raw record in place, so
//! an analysis reads perf.data at the speed it reads trace.dat (no page is built, nothing
//! is copied). Memory is one window per CPU.
//!
//! What it hands out is what the pages `stream` builds would hold: the same samples
//! (those too large for a page are dropped by both), in time order where perf wrote a few
//! out of it (the stretches `reorder` sorts, copied), and perf's lost-event records
//! as losses before the CPU's next event.

use std::path::Path;
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::Result;
use crate::events::{CpuEvents, Item};
use crate::layout::PageLayout;
use crate::page_builder::fits;
use crate::perf::records::Records;
use crate::perf::reorder::{Offer, Sorter};
use crate::perf::stream::{Layouts, PerfPages, RECORD_LOST, RECORD_SAMPLE};

/// Items handed out per [`CpuEvents::fill`]: enough that the call costs little per
/// event, few enough to stay in the cache beside the window.
const BATCH: usize = 512;

pub(crate) struct PerfEvents {
    /// Raw records: stretches never hold compressed ones (the scan gives none then).
    records: Records,
    runs: Arc<[(u64, u64)]>,
    next_run: usize,
    /// The end of the stretch being read.
    end: u64,
    pick: Pick,
    /// Puts the stretches where this CPU's records are out of time order in order; the
    /// last batch came from it when `sorted` is set.
    sorter: Sorter,
    sorted: bool,
}

/// Which records are this CPU's wanted events, and where their raw record lies.
struct Pick {
    layouts: Layouts,
    cpu: u32,
    wanted: Option<Vec<bool>>,
    endian: Endian,
    layout: PageLayout,
}

impl Pick {
    /// The item the record at file offset `at` (at `o` in the window) gives this CPU's
    /// reader, if any.
    #[inline(always)]
    fn item(&self, at: u64, o: usize, kind: u32, body: &[u8]) -> Option<Item> {
        match kind {
            RECORD_SAMPLE => {
                let l = self.layouts.for_sample(body)?;
                // Inside a stretch, other CPUs' records may lie between this one's.
                if l.cpu(body) != Some(self.cpu) {
                    return None;
                }
                let s = l.sample(body)?;
                let raw = s.raw?;
                if let Some(w) = &self.wanted {
                    let id = self.endian.uint(raw, 0, 2).unwrap_or(u64::MAX) as usize;
                    if !w.get(id).copied().unwrap_or(false) {
                        return None;
                    }
                }
                if !fits(&self.layout, raw.len()) {
                    return None;
                }
                let start = o + 8 + (raw.as_ptr() as usize - body.as_ptr() as usize);
                Some(Item::Event {
                    ts: s.ts,
                    start,
                    len: raw.len(),
                    at,
                })
            }
            RECORD_LOST => {
                let l = self.layouts.for_other(body)?;
                if l.trailer_cpu(body) != Some(self.cpu) || body.len() < 16 {
                    return None;
                }
                let n = Endian::Little.r64(&body[8..]);
                (n > 0).then_some(Item::Lost(n))
            }
            // The rest (pipe mode's tracing data included) the record reader passes.
            _ => None,
        }
    }
}

impl PerfEvents {
    /// The CPU's events from the record at offset `from` (one of its marks), or from
    /// its first.
    pub(crate) fn open(
        src: &PerfPages,
        cpu: u32,
        runs: Arc<[(u64, u64)]>,
        wanted: Option<&[bool]>,
        from: Option<u64>,
    ) -> Result<PerfEvents> {
        // The scan at open walked these records; a file changed since reads as damage.
        let mut records = Records::open(&src.path, src.data.0, src.data.1)?.raw();
        let (mut next_run, mut end) = (0, 0);
        if let Some(at) = from {
            // The stretch holding the mark; the ones before lie wholly before it.
            next_run = runs.partition_point(|r| r.1 <= at);
            if let Some(r) = runs.get(next_run) {
                records.seek(at.max(r.0));
                (next_run, end) = (next_run + 1, r.1);
            }
        }
        Ok(PerfEvents {
            records,
            runs,
            next_run,
            end,
            pick: Pick {
                layouts: src.layouts.clone(),
                cpu,
                wanted: wanted.map(<[bool]>::to_vec),
                endian: src.layout.endian,
                layout: src.layout,
            },
            sorter: Sorter::new(src.stretches(cpu)),
            sorted: false,
        })
    }

    /// Moves to the next stretch holding this CPU's records once the current one is
    /// read; false where none is left.
    #[inline]
    fn in_run(&mut self) -> bool {
        if self.records.position() < self.end {
            return true;
        }
        let Some(&(start, end)) = self.runs.get(self.next_run) else {
            return false;
        };
        self.next_run += 1;
        self.records.seek(start);
        self.end = end;
        true
    }

    /// The items of the records lying whole in the window, up to the next stretch to
    /// sort: the way nearly every event comes.
    fn walk(&mut self, out: &mut Vec<Item>) {
        while out.len() < BATCH && self.in_run() {
            // Records from where a stretch to sort starts go through `one`.
            let Some(stretch) = self.sorter.clear_from(self.records.position()) else {
                return;
            };
            let pick = &self.pick;
            let took = self
                .records
                .walk(self.end.min(stretch), |at, o, kind, body| {
                    if out.len() >= BATCH {
                        return false;
                    }
                    if let Some(item) = pick.item(at, o, kind, body) {
                        out.push(item);
                    }
                    true
                });
            if !took {
                return;
            }
        }
    }

    /// The next item, a record at a time: what `walk` leaves (a window to move, a record
    /// to check and report, a stretch to sort, the end).
    fn one(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(e) = self.sorted_event() {
                return Ok(Some(e));
            }
            let item = self.in_file()?;
            match item {
                Some(Item::Event { ts, start, len, at }) => {
                    let record = &self.records.window().0[start..start + len];
                    if self.sorter.offer(ts, record, at) == Offer::Pass {
                        return Ok(item);
                    }
                }
                // Losses read inside a stretch come before its events.
                Some(Item::Lost(_)) => return Ok(item),
                None => {
                    self.sorter.finish();
                    return Ok(self.sorted_event());
                }
            }
        }
    }

    /// The next record of a sorted stretch, if one is being handed out.
    fn sorted_event(&mut self) -> Option<Item> {
        let (ts, start, len, at) = self.sorter.pop()?;
        self.sorted = true;
        Some(Item::Event { ts, start, len, at })
    }

    /// The next item in file order.
    fn in_file(&mut self) -> Result<Option<Item>> {
        loop {
            if !self.in_run() {
                return Ok(None);
            }
            let next = self.records.next_in_file();
            let Some((at, kind, _, size)) = next.map_err(|e| e.in_file(&self.records.path))? else {
                return Ok(None);
            };
            let (bytes, win_at) = self.records.window();
            let o = (at - win_at) as usize;
            if let Some(item) = self.pick.item(at, o, kind, &bytes[o + 8..o + size]) {
                return Ok(Some(item));
            }
        }
    }
}

impl CpuEvents for PerfEvents {
    fn fill(&mut self, out: &mut Vec<Item>) -> Result<()> {
        out.clear();
        self.sorted = false;
        self.walk(out);
        if out.is_empty() {
            // A window ends, or a stretch to sort starts: one item the careful way (it
            // may move the window, so only in a batch of its own).
            out.extend(self.one()?);
        }
        Ok(())
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        match self.sorted {
            true => self.sorter.bytes(),
            false => self.records.window().0,
        }
    }

    fn path(&self) -> &Path {
        &self.records.path
    }
}
