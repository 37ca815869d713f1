//! perf.data's data section read in place: each CPU's tracepoint samples are taken from the
//! file as a reader asks for them and packed into ring-buffer pages in memory, one page at
//! a time. Nothing is copied to disk, so a reader that dies leaves nothing behind, and
//! memory is one mapped window and one page per CPU whatever the file's size.
//!
//! This relies on one property of perf.data written from per-CPU ring buffers: one CPU's
//! records appear in the file in time order (perf drains each CPU's buffer in order), but
//! for a few records written twice, whose stretches of the file are sorted (`perf_reorder`).
//! `scan` measures it for every CPU; a file where it does not hold is read by the sorting
//! path in `perfdata`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::events::CpuEvents;
use crate::layout::PageLayout;
use crate::page_builder::PageBuilder;
use crate::pages::PageSource;
use crate::perf_direct::PerfEvents;
use crate::perf_records::Records;
use crate::perf_reorder::{Disorder, Offer, Sorter, Stretches};
use crate::trace::BuildPages;

pub(crate) const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
pub(crate) const RECORD_SAMPLE: u32 = 9;

// perf_event_attr.sample_type bits (linux/perf_event.h).
const S_IP: u64 = 1 << 0;
const S_TID: u64 = 1 << 1;
const S_TIME: u64 = 1 << 2;
const S_ADDR: u64 = 1 << 3;
const S_READ: u64 = 1 << 4;
const S_CALLCHAIN: u64 = 1 << 5;
const S_ID: u64 = 1 << 6;
const S_CPU: u64 = 1 << 7;
const S_PERIOD: u64 = 1 << 8;
const S_STREAM_ID: u64 = 1 << 9;
const S_RAW: u64 = 1 << 10;
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

impl SampleLayout {
    pub(crate) fn new(sample_type: u64, read_format: u64, sample_id_all: bool) -> SampleLayout {
        let mut l = SampleLayout {
            sample_type,
            read_format,
            sample_id_all,
            time_at: None,
            cpu_at: None,
            fixed: 0,
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
    #[inline]
    pub(crate) fn sample<'a>(&self, b: &'a [u8]) -> Option<Sample<'a>> {
        let st = self.sample_type;
        let ts = match self.time_at {
            Some(at) => u64_at(b, at)?,
            None => 0,
        };
        let cpu = self.cpu(b)?;
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
        let raw = if st & S_RAW != 0 {
            let size = u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?) as usize;
            Some(b.get(at + 4..at.checked_add(4)?.checked_add(size)?)?)
        } else {
            None
        };
        Some(Sample { ts, cpu, raw })
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
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().unwrap()))
    }
}

/// How records find their attribute: one layout for all, or by the IDENTIFIER perf puts
/// first in samples and last in other records.
#[derive(Debug, Clone)]
pub(crate) enum Layouts {
    One(SampleLayout),
    ById(HashMap<u64, SampleLayout>),
}

impl Layouts {
    #[inline]
    pub(crate) fn for_sample(&self, b: &[u8]) -> Option<&SampleLayout> {
        match self {
            Layouts::One(l) => Some(l),
            Layouts::ById(m) => m.get(&u64::from_le_bytes(b.get(..8)?.try_into().unwrap())),
        }
    }
    pub(crate) fn for_other(&self, b: &[u8]) -> Option<&SampleLayout> {
        match self {
            Layouts::One(l) => Some(l),
            Layouts::ById(m) => {
                let at = b.len().checked_sub(8)?;
                m.get(&u64::from_le_bytes(b[at..].try_into().unwrap()))
            }
        }
    }
}

/// What one pass over the records found before any analysis: which CPUs hold samples, the
/// command names, whether every CPU's records are in time order, and where each CPU's
/// records lie in the file.
pub(crate) struct Scan {
    /// CPUs with samples or losses, and the bytes their samples take in the file.
    pub cpus: Vec<(u32, u64)>,
    pub comms: HashMap<i32, String>,
    /// Whether every CPU's records are in time order, or near enough to sort stretches.
    pub in_order: bool,
    /// The CPUs whose records are near time order but not in it, and the stretches of the
    /// file a reader sorts to put them in it.
    pub stretches: HashMap<u32, Stretches>,
    /// Per CPU of `cpus`, the stretches of the data section holding its records (see
    /// [`RUN_GAP`]); None where the records were compressed, and offsets in the file do
    /// not locate them.
    pub runs: Option<Runs>,
}

/// Per CPU, the [start, end) offsets of the stretches of the data section holding its
/// records, in file order.
pub(crate) type Runs = HashMap<u32, Arc<[(u64, u64)]>>;

/// Two stretches of one CPU's records closer than this in the file are kept as one, with
/// the other CPUs' records between them passed over when it is read. perf writes each
/// CPU's buffer out in chunks, so stretches are long in real files; in a file whose CPUs
/// alternate record by record this bounds the index to one entry per 64 KiB per CPU
/// instead of one per record.
const RUN_GAP: u64 = 64 << 10;

/// One CPU's part of the scan.
#[derive(Default, Clone)]
struct CpuScan {
    order: Disorder,
    bytes: u64,
    runs: Vec<(u64, u64)>,
}

impl CpuScan {
    fn covers(&mut self, at: u64, end: u64) {
        match self.runs.last_mut() {
            Some(r) if at.saturating_sub(r.1) <= RUN_GAP => r.1 = end,
            _ => self.runs.push((at, end)),
        }
    }
}

/// The CPUs seen so far. Only those get an entry (a header may claim any number of
/// CPUs), found through the last one used, since records come in long runs of one CPU.
#[derive(Default)]
struct Slots {
    seen: Vec<(u32, CpuScan)>,
    index: HashMap<u32, usize>,
    last: Option<(u32, usize)>,
}

impl Slots {
    #[inline]
    fn get(&mut self, cpu: u32) -> &mut CpuScan {
        let i = match self.last {
            Some((c, i)) if c == cpu => i,
            _ => {
                let seen = &mut self.seen;
                let i = *self.index.entry(cpu).or_insert_with(|| {
                    seen.push((cpu, CpuScan::default()));
                    seen.len() - 1
                });
                self.last = Some((cpu, i));
                i
            }
        };
        &mut self.seen[i].1
    }
}

/// Reads every record header once; CPU numbers are checked against `cpu_limit` here, with
/// the record's offset, before any table is sized by them.
pub(crate) fn scan(
    path: &Path,
    data: (u64, u64),
    layouts: &Layouts,
    cpu_limit: u32,
) -> Result<Scan> {
    let mut r = Records::open(path, data.0, data.1)?;
    let mut slots = Slots::default();
    let mut comms = HashMap::new();
    let check = |cpu: u32, at: u64, what: &str| -> Result<u32> {
        if cpu < cpu_limit {
            return Ok(cpu);
        }
        Err(Error::corrupt(
            at,
            format!(
                "perf.data: {what} record names CPU {cpu}, but the file records {cpu_limit} CPUs"
            ),
        ))
    };
    while let Some((at, kind, b)) = r.next()? {
        let end = at + 8 + b.len() as u64;
        match kind {
            RECORD_SAMPLE => {
                let Some(s) = layouts.for_sample(b).and_then(|l| l.sample(b)) else {
                    continue;
                };
                if s.raw.is_none() {
                    continue;
                }
                let cpu = check(s.cpu, at, "sample")?;
                let c = slots.get(cpu);
                c.order.see(s.ts, at);
                c.bytes += 8 + b.len() as u64;
                c.covers(at, end);
            }
            RECORD_LOST => {
                if let Some(cpu) = layouts.for_other(b).and_then(|l| l.trailer_cpu(b)) {
                    slots.get(check(cpu, at, "lost-events")?).covers(at, end);
                }
            }
            RECORD_COMM if b.len() >= 8 => {
                let tid = i32::from_le_bytes(b[4..8].try_into().unwrap());
                let name = &b[8..];
                let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                comms.insert(tid, String::from_utf8_lossy(name).into_owned());
            }
            _ => {}
        }
    }
    let mut cpus_seen = slots.seen;
    cpus_seen.sort_by_key(|c| c.0);
    let cpus: Vec<(u32, u64)> = cpus_seen.iter().map(|(c, e)| (*c, e.bytes)).collect();
    let mut in_order = true;
    let mut stretches = HashMap::new();
    for (c, e) in &cpus_seen {
        match e.order.stretches() {
            None => in_order = false,
            Some(s) if s.is_empty() => {}
            Some(s) => {
                stretches.insert(*c, Stretches::from(s));
            }
        }
    }
    let runs = (!r.inflated()).then(|| {
        cpus_seen
            .into_iter()
            .map(|(c, e)| (c, Arc::from(e.runs)))
            .collect()
    });
    Ok(Scan {
        cpus,
        comms,
        in_order,
        stretches,
        runs,
    })
}

/// The data section, giving each CPU's pages on demand.
#[derive(Debug)]
pub(crate) struct PerfPages {
    pub path: PathBuf,
    pub data: (u64, u64),
    pub layouts: Layouts,
    pub layout: PageLayout,
    /// Where each CPU's records lie ([`Scan::runs`]): what lets a CPU's events be read
    /// straight from the file.
    pub runs: Option<Runs>,
    /// Where CPUs' records are out of time order ([`Scan::stretches`]).
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
    fn events(&self, cpu: u32, wanted: Option<&[bool]>) -> Option<Result<Box<dyn CpuEvents>>> {
        let runs = self.runs.as_ref()?.get(&cpu)?.clone();
        Some(PerfEvents::open(self, cpu, runs, wanted).map(|e| Box::new(e) as Box<dyn CpuEvents>))
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
                        let n = u64::from_le_bytes(b[8..16].try_into().unwrap());
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

    /// One SAMPLE record (TIME, CPU, RAW) on `cpu`.
    fn sample(cpu: u32, ts: u64) -> Vec<u8> {
        let raw = [1u8, 0, 0, 0, 7, 0, 0, 0];
        let mut b = Vec::new();
        b.extend_from_slice(&RECORD_SAMPLE.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&((8 + 8 + 8 + 4 + raw.len() + 4) as u16).to_le_bytes());
        b.extend_from_slice(&ts.to_le_bytes());
        b.extend_from_slice(&cpu.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(raw.len() as u32 + 4).to_le_bytes());
        b.extend_from_slice(&raw);
        b.extend_from_slice(&[0; 4]);
        b
    }

    /// A file whose header claims 2^32 CPUs and whose samples name CPU 2^31 and 3: the
    /// scan's tables hold the two CPUs seen, not one entry per CPU number (the fuzzer's
    /// perfdirect target ran out of memory on such a file), and each CPU's stretches are
    /// where its records are.
    #[test]
    fn scan_sizes_its_tables_by_the_cpus_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let mut b = sample(1 << 31, 10);
        let one = b.len() as u64;
        b.extend(sample(3, 20));
        b.extend(sample(1 << 31, 30));
        std::fs::write(&path, &b).unwrap();
        let layouts = Layouts::One(SampleLayout::new(S_TIME | S_CPU | S_RAW, 0, false));
        let s = scan(&path, (0, b.len() as u64), &layouts, u32::MAX).unwrap();
        assert_eq!(s.cpus, vec![(3, one), (1 << 31, 2 * one)]);
        assert!(s.in_order);
        let runs = s.runs.unwrap();
        assert_eq!(&runs[&3][..], &[(one, 2 * one)]);
        // The other CPU's one record between its two is passed over, not a new stretch.
        assert_eq!(&runs[&(1 << 31)][..], &[(0, 3 * one)]);
    }
}
