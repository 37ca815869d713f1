//! perf.data's data section read in place: each CPU's tracepoint samples are taken from the
//! file as a reader asks for them and packed into ring-buffer pages in memory, one page at
//! a time. Nothing is copied to disk, so a reader that dies leaves nothing behind, and
//! memory is one mapped window and one page per CPU whatever the file's size.
//!
//! This relies on one property of perf.data written from per-CPU ring buffers: one CPU's
//! records appear in the file in time order (perf drains each CPU's buffer in order), but
//! for a few records written twice, whose stretches of the file are sorted (`reorder`).
//! `scan` measures it for every CPU; a file where it does not hold is read by the sorting
//! path in `perf`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::bytes::Endian;
use crate::error::Result;
use crate::events::CpuEvents;
use crate::fxmap::FxMap;
use crate::layout::PageLayout;
use crate::page_builder::PageBuilder;
use crate::pages::PageSource;
use crate::perf::direct::PerfEvents;
use crate::perf::records::Records;
use crate::perf::reorder::{Offer, Sorter, Stretches};
use crate::perf::scan::Places;
use crate::trace::BuildPages;

pub(crate) const RECORD_LOST: u32 = 2;
pub(crate) const RECORD_COMM: u32 = 3;
pub(crate) const RECORD_SAMPLE: u32 = 9;

// perf_event_attr.sample_type bits (linux/perf_event.h).
const S_IP: u64 = 1 << 0;
const S_TID: u64 = 1 << 1;
pub(crate) const S_TIME: u64 = 1 << 2;
const S_ADDR: u64 = 1 << 3;
const S_READ: u64 = 1 << 4;
const S_CALLCHAIN: u64 = 1 << 5;
const S_ID: u64 = 1 << 6;
pub(crate) const S_CPU: u64 = 1 << 7;
const S_PERIOD: u64 = 1 << 8;
const S_STREAM_ID: u64 = 1 << 9;
pub(crate) const S_RAW: u64 = 1 << 10;
const S_IDENTIFIER: u64 = 1 << 16;
// read_format bits.
const R_ENABLED: u64 = 1 << 0;
const R_RUNNING: u64 = 1 << 1;
const R_ID: u64 = 1 << 2;
const R_GROUP: u64 = 1 << 3;
const R_LOST: u64 = 1 << 4;

/// Where an attribute's samples keep what kstate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleLayout {
    sample_type: u64,
    read_format: u64,
    sample_id_all: bool,
    /// Offsets in the body of the time and the CPU, where the samples have them.
    time_at: Option<usize>,
    cpu_at: Option<usize>,
    /// Offset of the fields that follow the fixed ones (READ, CALLCHAIN, RAW).
    fixed: usize,
    /// Where the raw record's size lies, where no field of variable length comes first
    /// (`Some(fixed)`, with RAW and without READ and CALLCHAIN): most files.
    raw_at: Option<usize>,
}

/// A sample's time, CPU and raw tracepoint record (None where the event has no raw data).
pub(crate) struct Sample<'a> {
    pub ts: u64,
    pub cpu: u32,
    pub raw: Option<&'a [u8]>,
}

#[inline]
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The RAW field at `at`: a u32 size, then that many bytes.
#[inline(always)]
fn raw_field(b: &[u8], at: usize) -> Option<&[u8]> {
    let size = u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?) as usize;
    b.get(at + 4..at.checked_add(4)?.checked_add(size)?)
}

impl SampleLayout {
    pub(crate) fn new(sample_type: u64, read_format: u64, sample_id_all: bool) -> SampleLayout {
        let mut l = SampleLayout {
            sample_type,
            read_format,
            sample_id_all,
            time_at: None,
            cpu_at: None,
            fixed: 0,
            raw_at: None,
        };
        for bit in [
            S_IDENTIFIER,
            S_IP,
            S_TID,
            S_TIME,
            S_ADDR,
            S_ID,
            S_STREAM_ID,
            S_CPU,
            S_PERIOD,
        ] {
            if sample_type & bit != 0 {
                if bit == S_TIME {
                    l.time_at = Some(l.fixed);
                } else if bit == S_CPU {
                    l.cpu_at = Some(l.fixed);
                }
                l.fixed += 8;
            }
        }
        if sample_type & (S_READ | S_CALLCHAIN) == 0 && sample_type & S_RAW != 0 {
            l.raw_at = Some(l.fixed);
        }
        l
    }

    /// The CPU of a SAMPLE record's body (0 where samples do not record it).
    #[inline]
    pub(crate) fn cpu(&self, b: &[u8]) -> Option<u32> {
        match self.cpu_at {
            Some(at) => Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?)),
            None => Some(0),
        }
    }

    /// Decodes a SAMPLE record's body (after the 8-byte header); None where it is too short.
    #[inline(always)]
    pub(crate) fn sample<'a>(&self, b: &'a [u8]) -> Option<Sample<'a>> {
        let ts = match self.time_at {
            Some(at) => u64_at(b, at)?,
            None => 0,
        };
        let cpu = self.cpu(b)?;
        let raw = match self.raw_at {
            Some(at) => Some(raw_field(b, at)?),
            None => self.variable(b)?,
        };
        Some(Sample { ts, cpu, raw })
    }

    /// The raw record of a sample whose fields before it may vary in length (or which
    /// has none): Some(None) where it has none, None where the body is too short.
    #[inline(never)]
    fn variable<'a>(&self, b: &'a [u8]) -> Option<Option<&'a [u8]>> {
        let st = self.sample_type;
        let mut at = self.fixed;
        if st & S_READ != 0 {
            let rf = self.read_format;
            let times = 8 * ((rf & R_ENABLED != 0) as usize + (rf & R_RUNNING != 0) as usize);
            let per_value = 8 * (1 + (rf & R_ID != 0) as usize + (rf & R_LOST != 0) as usize);
            at += if rf & R_GROUP != 0 {
                let nr = usize::try_from(u64_at(b, at)?).ok()?;
                8usize
                    .checked_add(times)?
                    .checked_add(nr.checked_mul(per_value)?)?
            } else {
                per_value + times
            };
        }
        if st & S_CALLCHAIN != 0 {
            let nr = usize::try_from(u64_at(b, at)?).ok()?;
            at = at.checked_add(8)?.checked_add(nr.checked_mul(8)?)?;
        }
        match st & S_RAW != 0 {
            true => Some(Some(raw_field(b, at)?)),
            false => Some(None),
        }
    }

    /// The CPU of a non-sample record, from the sample id perf appends to it.
    pub(crate) fn trailer_cpu(&self, b: &[u8]) -> Option<u32> {
        let st = self.sample_type;
        if !self.sample_id_all || st & S_CPU == 0 {
            return None;
        }
        let fields = [S_TID, S_TIME, S_ID, S_STREAM_ID, S_CPU, S_IDENTIFIER];
        let len = 8 * fields.iter().filter(|&&f| st & f != 0).count();
        let start = b.len().checked_sub(len)?;
        let before = 8 * [S_TID, S_TIME, S_ID, S_STREAM_ID]
            .iter()
            .filter(|&&f| st & f != 0)
            .count();
        let at = start + before;
        Some(Endian::Little.r32(b.get(at..at + 4)?))
    }
}

/// How records find their attribute: one layout for all, or by the IDENTIFIER perf puts
/// first in samples and last in other records (looked up for every record: `perf record
/// -a` adds a tracking event of its own layout, so most system-wide files need the ids).
#[derive(Debug, Clone)]
pub(crate) enum Layouts {
    One(SampleLayout),
    ById(ById),
}

/// Sample ids to their layouts. The kernel numbers events from one counter, so a file's
/// ids nearly always lie in a short range: a table indexed by the id's distance from the
/// least, with a map where they are spread wide.
#[derive(Debug, Clone)]
pub(crate) struct ById {
    /// The distinct layouts.
    layouts: Vec<SampleLayout>,
    index: IdIndex,
}

/// Where an id's layout lies in [`ById::layouts`].
#[derive(Debug, Clone)]
enum IdIndex {
    /// For id `base + k`, `slots[k]` is 1 + the layout's index (0: no such id).
    Table { base: u64, slots: Vec<u8> },
    /// Ids too far apart for a table.
    Map(FxMap<u64, usize>),
}

/// The widest range of ids the table covers (one byte per id).
const ID_TABLE_SPAN: u64 = 1 << 16;

impl ById {
    pub(crate) fn new(ids: impl IntoIterator<Item = (u64, SampleLayout)>) -> ById {
        let mut layouts: Vec<SampleLayout> = Vec::new();
        let mut of_id: Vec<(u64, usize)> = Vec::new();
        for (id, l) in ids {
            let k = match layouts.iter().position(|x| *x == l) {
                Some(k) => k,
                None => {
                    layouts.push(l);
                    layouts.len() - 1
                }
            };
            of_id.push((id, k));
        }
        let base = of_id.iter().map(|s| s.0).min().unwrap_or(0);
        let max = of_id.iter().map(|s| s.0).max().unwrap_or(0);
        let index = if max - base < ID_TABLE_SPAN && layouts.len() < u8::MAX as usize {
            let mut slots = vec![0u8; (max - base + 1) as usize];
            for (id, k) in of_id {
                slots[(id - base) as usize] = k as u8 + 1;
            }
            IdIndex::Table { base, slots }
        } else {
            IdIndex::Map(of_id.into_iter().collect())
        };
        ById { layouts, index }
    }

    #[inline]
    fn get(&self, id: u64) -> Option<&SampleLayout> {
        let k = match &self.index {
            IdIndex::Table { base, slots } => {
                let slot = *slots.get(id.wrapping_sub(*base) as usize)?;
                (slot as usize).checked_sub(1)?
            }
            IdIndex::Map(m) => *m.get(&id)?,
        };
        self.layouts.get(k)
    }
}

impl Layouts {
    #[inline]
    pub(crate) fn for_sample(&self, b: &[u8]) -> Option<&SampleLayout> {
        match self {
            Layouts::One(l) => Some(l),
            Layouts::ById(m) => m.get(Endian::Little.r64(b.get(..8)?)),
        }
    }
    pub(crate) fn for_other(&self, b: &[u8]) -> Option<&SampleLayout> {
        match self {
            Layouts::One(l) => Some(l),
            Layouts::ById(m) => {
                let at = b.len().checked_sub(8)?;
                m.get(Endian::Little.r64(&b[at..]))
            }
        }
    }
}

/// The data section, giving each CPU's pages on demand.
#[derive(Debug)]
pub(crate) struct PerfPages {
    pub path: PathBuf,
    pub data: (u64, u64),
    pub layouts: Layouts,
    pub layout: PageLayout,
    /// Where each CPU's records lie ([`crate::perf::scan::Scan::places`]): what lets a CPU's events be read
    /// straight from the file.
    pub places: Option<HashMap<u32, Places>>,
    /// Where CPUs' records are out of time order ([`crate::perf::scan::Scan::stretches`]).
    pub stretches: HashMap<u32, Stretches>,
}

impl PerfPages {
    /// The stretches of the file where `cpu`'s records are to be sorted.
    pub(crate) fn stretches(&self, cpu: u32) -> Stretches {
        self.stretches
            .get(&cpu)
            .cloned()
            .unwrap_or_else(|| Stretches::from([]))
    }
}

impl BuildPages for PerfPages {
    fn pages(&self, cpu: u32, wanted: Option<&[bool]>) -> Result<Box<dyn PageSource>> {
        Ok(Box::new(CpuPages {
            records: Records::open(&self.path, self.data.0, self.data.1)?,
            src: self.layouts.clone(),
            cpu,
            wanted: wanted.map(<[bool]>::to_vec),
            endian: self.layout.endian,
            builder: PageBuilder::new(self.layout),
            sorter: Sorter::new(self.stretches(cpu)),
            ready: std::collections::VecDeque::new(),
            spare: Vec::new(),
            page: Vec::new(),
            page_at: self.data.0,
            first_at: None,
            done: false,
        }))
    }
    fn first_ts(&self) -> Option<u64> {
        None
    }
    fn events(
        &self,
        cpu: u32,
        wanted: Option<&[bool]>,
        from: usize,
    ) -> Option<Result<Box<dyn CpuEvents>>> {
        let places = self.places.as_ref()?.get(&cpu)?;
        let from = match from {
            0 => None,
            k => Some(places.marks.get(k)?.1),
        };
        let e = PerfEvents::open(self, cpu, places.runs.clone(), wanted, from);
        Some(e.map(|e| Box::new(e) as Box<dyn CpuEvents>))
    }
    fn marks(&self, cpu: u32) -> Option<Vec<u64>> {
        let places = self.places.as_ref()?.get(&cpu)?;
        Some(places.marks.iter().map(|m| m.0).collect())
    }
}

/// One CPU's pages, packed from its samples as the reader advances.
struct CpuPages {
    records: Records,
    src: Layouts,
    cpu: u32,
    wanted: Option<Vec<bool>>,
    endian: Endian,
    builder: PageBuilder,
    /// Puts the stretches where this CPU's records are out of time order in order.
    sorter: Sorter,
    /// Finished pages not yet handed out, with the offset of their first record.
    ready: std::collections::VecDeque<(u64, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
    page: Vec<u8>,
    page_at: u64,
    /// Offset of the first record on the page being filled.
    first_at: Option<u64>,
    done: bool,
}

impl CpuPages {
    /// The records of a sorted stretch onto pages.
    fn sorted(sorter: &mut Sorter, builder: &mut PageBuilder, full: &mut dyn FnMut(&[u8])) {
        while let Some((ts, at, len, _)) = sorter.pop() {
            builder.push(ts, &sorter.bytes()[at..at + len], full);
        }
    }

    fn take(&mut self, page: &[u8], at: u64) {
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(page);
        self.ready.push_back((at, v));
    }
}

impl PageSource for CpuPages {
    fn advance(&mut self) -> Result<bool> {
        while self.ready.is_empty() && !self.done {
            let Some((at, kind, b)) = self.records.next()? else {
                let mut out = Vec::new();
                self.sorter.finish();
                Self::sorted(&mut self.sorter, &mut self.builder, &mut |p: &[u8]| {
                    out.push(p.to_vec())
                });
                self.builder.finish(&mut |p: &[u8]| out.push(p.to_vec()));
                let first = self.first_at.unwrap_or(self.records.end);
                for p in out {
                    self.take(&p, first);
                }
                self.done = true;
                break;
            };
            match kind {
                RECORD_SAMPLE => {
                    let Some(l) = self.src.for_sample(b) else {
                        continue;
                    };
                    // Most records are other CPUs': look at the CPU alone first.
                    if l.cpu(b) != Some(self.cpu) {
                        continue;
                    }
                    let Some(s) = l.sample(b) else { continue };
                    let Some(raw) = s.raw else { continue };
                    if let Some(w) = &self.wanted {
                        let id = self.endian.uint(raw, 0, 2).unwrap_or(u64::MAX) as usize;
                        if !w.get(id).copied().unwrap_or(false) {
                            continue;
                        }
                    }
                    let mut full: Vec<Vec<u8>> = Vec::new();
                    let mut keep = |p: &[u8]| full.push(p.to_vec());
                    match self.sorter.offer(s.ts, raw, at) {
                        // A payload larger than a page cannot be a tracepoint record;
                        // skipped.
                        Offer::Pass => {
                            self.builder.push(s.ts, raw, &mut keep);
                        }
                        Offer::Held => {}
                        Offer::Ready => {
                            Self::sorted(&mut self.sorter, &mut self.builder, &mut keep)
                        }
                    }
                    for p in full {
                        let first = self.first_at.replace(at).unwrap_or(at);
                        self.take(&p, first);
                    }
                    self.first_at.get_or_insert(at);
                }
                RECORD_LOST => {
                    let Some(l) = self.src.for_other(b) else {
                        continue;
                    };
                    if l.trailer_cpu(b) == Some(self.cpu) && b.len() >= 16 {
                        let n = Endian::Little.r64(&b[8..]);
                        if n > 0 {
                            self.builder.lost(n);
                        }
                    }
                }
                _ => {}
            }
        }
        match self.ready.pop_front() {
            Some((at, p)) => {
                let old = std::mem::replace(&mut self.page, p);
                self.spare.push(old);
                self.page_at = at;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn page(&self) -> &[u8] {
        &self.page
    }
    fn page_offset(&self) -> u64 {
        self.page_at
    }
    fn path(&self) -> &Path {
        &self.records.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample body that starts with `id` (perf's IDENTIFIER).
    fn body(id: u64) -> Vec<u8> {
        let mut b = id.to_le_bytes().to_vec();
        b.extend([0u8; 24]);
        b
    }

    /// The table (ids close together) and the map (ids spread wide) find the same
    /// layouts, and no layout for an id the file does not hold.
    #[test]
    fn ids_find_their_layout_near_and_far() {
        let a = SampleLayout::new(S_TIME | S_CPU | S_RAW | S_IDENTIFIER, 0, true);
        let b = SampleLayout::new(S_TIME | S_CPU | S_IDENTIFIER, 0, true);
        for far in [false, true] {
            let step = if far { ID_TABLE_SPAN } else { 3 };
            let ids: Vec<(u64, SampleLayout)> = (0..6u64)
                .map(|k| (1000 + k * step, if k % 3 == 2 { b } else { a }))
                .collect();
            let by = Layouts::ById(ById::new(ids.clone()));
            if let Layouts::ById(m) = &by {
                assert_eq!(m.layouts.len(), 2, "distinct layouts kept once");
                assert_eq!(matches!(m.index, IdIndex::Map(_)), far);
            }
            for (id, l) in &ids {
                assert_eq!(by.for_sample(&body(*id)), Some(l), "id {id}");
                let mut other = vec![0u8; 16];
                other.extend(id.to_le_bytes());
                assert_eq!(by.for_other(&other), Some(l), "id {id} at the end");
            }
            for missing in [0, 999, 1001, 1000 + 6 * step, u64::MAX] {
                assert_eq!(by.for_sample(&body(missing)), None, "id {missing}");
            }
        }
    }
}
