//! One CPU's events read straight from a perf.data's data section: the scan at open
//! (`perf_scan::scan`) found where the CPU's records lie; this walks those stretches
//! through a mapped window and hands out each tracepoint sample's raw record in place, so
//! an analysis reads perf.data at the speed it reads trace.dat (no page is built, nothing
//! is copied). Memory is one window per CPU.
//!
//! What it hands out is what the pages `perf_stream` builds would hold: the same samples
//! (those too large for a page are dropped by both), in time order where perf wrote a few
//! out of it (the stretches `perf_reorder` sorts, copied), and perf's lost-event records
//! as losses before the CPU's next event.

use std::path::Path;
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::Result;
use crate::events::{CpuEvents, Item};
use crate::layout::PageLayout;
use crate::page_builder::fits;
use crate::perf_records::Records;
use crate::perf_reorder::{Offer, Sorter};
use crate::perf_stream::{Layouts, PerfPages, RECORD_LOST, RECORD_SAMPLE};

pub(crate) struct PerfEvents {
    /// Raw records: stretches never hold compressed ones (the scan gives none then).
    records: Records,
    runs: Arc<[(u64, u64)]>,
    next_run: usize,
    /// The end of the stretch being read.
    end: u64,
    layouts: Layouts,
    cpu: u32,
    wanted: Option<Vec<bool>>,
    endian: Endian,
    layout: PageLayout,
    /// Puts the stretches where this CPU's records are out of time order in order; the
    /// last event came from it when `sorted` is set.
    sorter: Sorter,
    sorted: bool,
    /// Offset of the record last returned.
    last_at: u64,
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
            layouts: src.layouts.clone(),
            cpu,
            wanted: wanted.map(<[bool]>::to_vec),
            endian: src.layout.endian,
            layout: src.layout,
            sorter: Sorter::new(src.stretches(cpu)),
            sorted: false,
            last_at: 0,
        })
    }

    /// The next record of a sorted stretch, if one is being handed out.
    fn sorted_event(&mut self) -> Option<Item> {
        let (ts, start, len, at) = self.sorter.pop()?;
        self.sorted = true;
        self.last_at = at;
        Some(Item::Event { ts, start, len })
    }

    /// The next item in file order.
    fn in_file(&mut self) -> Result<Option<Item>> {
        loop {
            if self.records.position() >= self.end {
                let Some(&(start, end)) = self.runs.get(self.next_run) else {
                    return Ok(None);
                };
                self.next_run += 1;
                self.records.seek(start);
                self.end = end;
                continue;
            }
            let next = self.records.next_in_file();
            let Some((at, kind, _, size)) = next.map_err(|e| e.in_file(&self.records.path))? else {
                return Ok(None);
            };
            let (bytes, win_at) = self.records.window();
            let o = (at - win_at) as usize;
            let body = &bytes[o + 8..o + size];
            match kind {
                RECORD_SAMPLE => {
                    let Some(l) = self.layouts.for_sample(body) else {
                        continue;
                    };
                    // Inside a stretch, other CPUs' records may lie between this one's.
                    if l.cpu(body) != Some(self.cpu) {
                        continue;
                    }
                    let Some(raw) = l.sample(body).and_then(|s| Some((s.ts, s.raw?))) else {
                        continue;
                    };
                    let (ts, raw) = raw;
                    if let Some(w) = &self.wanted {
                        let id = self.endian.uint(raw, 0, 2).unwrap_or(u64::MAX) as usize;
                        if !w.get(id).copied().unwrap_or(false) {
                            continue;
                        }
                    }
                    if !fits(&self.layout, raw.len()) {
                        continue;
                    }
                    let start = o + 8 + (raw.as_ptr() as usize - body.as_ptr() as usize);
                    self.last_at = at;
                    return Ok(Some(Item::Event {
                        ts,
                        start,
                        len: raw.len(),
                    }));
                }
                RECORD_LOST => {
                    let Some(l) = self.layouts.for_other(body) else {
                        continue;
                    };
                    if l.trailer_cpu(body) == Some(self.cpu) && body.len() >= 16 {
                        let n = u64::from_le_bytes(body[8..16].try_into().unwrap());
                        if n > 0 {
                            return Ok(Some(Item::Lost(n)));
                        }
                    }
                }
                // The rest (pipe mode's tracing data included) the record reader passes.
                _ => {}
            }
        }
    }
}

impl CpuEvents for PerfEvents {
    fn next(&mut self) -> Result<Option<Item>> {
        loop {
            if let Some(e) = self.sorted_event() {
                return Ok(Some(e));
            }
            self.sorted = false;
            let item = self.in_file()?;
            match item {
                Some(Item::Event { ts, start, len }) => {
                    let record = &self.records.window().0[start..start + len];
                    if self.sorter.offer(ts, record, self.last_at) == Offer::Pass {
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

    #[inline]
    fn bytes(&self) -> &[u8] {
        match self.sorted {
            true => self.sorter.bytes(),
            false => self.records.window().0,
        }
    }

    fn at(&self) -> u64 {
        self.last_at
    }

    fn path(&self) -> &Path {
        &self.records.path
    }
}
