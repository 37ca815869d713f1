//! Where to cut a recording into time slices (the engine's `slices`), found by reading a few
//! pages rather than all of them: the slices cannot start before the plan is made, so
//! every page read here is time no other thread works (walking all page headers of an
//! 11 M-event trace took a tenth of a two-thread analysis).
//!
//! Pages a file stores plainly are read where they lie: a sample of pages spread over
//! each CPU gives the cut times (about as many pages between each), then a bisection
//! finds, per cut and CPU, the last page that begins before the cut. Pages stored packed
//! (compressed) can only be read in order: their times are read once, all of them. A
//! perf.data read straight from the file has no pages: the scan at open kept marks, one
//! record every page's worth of a CPU's samples, and they stand for pages here.
//!
//! Nothing here needs to be right for the slices to be exact: a CPU whose pages are out
//! of time order may give a seek too early or too late, and the slices' seams
//! (`Seam`s) then show that two slices do not meet, and the one pass runs.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::page::first_time;
use crate::trace::{ClockMap, DataLoc};
use crate::{PageLayout, TimeShift, Trace};

/// Fewer pages than this per slice are not worth a thread (each slice may read one page
/// per CPU that the slice before also reads).
const MIN_PAGES_PER_SLICE: usize = 2;

/// Bytes of pages a slice holds at most, however few the threads: a slice's analyzer may
/// keep what only the join can settle until then (runq keeps its queue changes), and
/// memory stays bounded as recordings grow.
const MAX_SLICE_BYTES: usize = 64 << 20;

/// Pages sampled per CPU for each slice wanted: enough that slices come out within a
/// few percent of equal.
const SAMPLES_PER_SLICE: usize = 16;

/// Bytes read of a page to find its first record: the header and the record (a page
/// begins with a record, or with a time extend and then one).
const PREFIX: usize = 256;

/// Slice start times and where each slice starts reading.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Slice start times, trace-clock ns; the first is 0.
    pub cuts: Vec<u64>,
    /// Per slice, per CPU stream (as in `trace.cpu_data`): the pages before the last
    /// one that begins before the slice's start, passed over unread (for events straight
    /// from the container, perf.data: the mark to start from, [`Trace::marks`]).
    pub seeks: Vec<Vec<usize>>,
}

/// How many slices to cut.
#[derive(Debug, Clone, Copy)]
pub enum Size {
    /// About this many, or more where they would hold more than [`MAX_SLICE_BYTES`].
    Slices(usize),
    /// About this many pages each (all CPUs together).
    Pages(usize),
}

/// Slices of about equal pages (all CPUs together, at least [`MIN_PAGES_PER_SLICE`]
/// each); `None` when the trace cannot be cut: pages built on demand, a page that cannot
/// be read, or too few pages for two slices.
pub fn plan(trace: &Trace, size: Size) -> Option<Plan> {
    let mut cpus = Vec::with_capacity(trace.cpu_data.len());
    for i in 0..trace.cpu_data.len() {
        cpus.push(CpuTimes::open(trace, i)?);
    }
    let total: usize = cpus.iter().map(|c| c.pages).sum();
    let most = (MAX_SLICE_BYTES / trace.layout.page_size.max(1)).max(1);
    let n = match size {
        Size::Slices(n) => n.max(total / most),
        Size::Pages(p) => total / p.max(1),
    }
    .min(total / MIN_PAGES_PER_SLICE);
    if n < 2 {
        return None;
    }
    // Each sampled page stands for the pages up to the next sample.
    let mut samples: Vec<(u64, usize)> = Vec::new();
    for c in &mut cpus {
        let s = (n * SAMPLES_PER_SLICE).min(c.pages);
        // (Products in u128: a damaged file may claim any number of pages.)
        let pages = c.pages;
        let at = |j: usize| (j as u128 * pages as u128 / s as u128) as usize;
        for j in 0..s {
            let (a, b) = (at(j), at(j + 1));
            samples.push((c.time(a)?, b - a));
        }
    }
    samples.sort_unstable();
    let mut cuts = vec![0];
    let (mut below, mut k) = (0, 1);
    for (t, w) in samples {
        if k < n && below as u128 >= k as u128 * total as u128 / n as u128 {
            if t > *cuts.last().expect("starts with 0") {
                cuts.push(t);
            }
            k += 1;
        }
        below += w;
    }
    if cuts.len() < 2 {
        return None;
    }
    let mut seeks = vec![vec![0; cpus.len()]];
    for &cut in &cuts[1..] {
        let mut at = Vec::with_capacity(cpus.len());
        for c in &mut cpus {
            at.push(c.seek(cut)?);
        }
        seeks.push(at);
    }
    Some(Plan { cuts, seeks })
}

/// The first-record times of one CPU's pages (or marks).
struct CpuTimes {
    pages: usize,
    how: Reader,
    /// Times read so far (a bisection comes back to the pages it started from).
    known: HashMap<usize, u64>,
    layout: PageLayout,
    clock: ClockMap,
    /// A guest's per-CPU mapping to host time, applied before `clock` (as the merge does).
    shift: Option<Arc<TimeShift>>,
    cpu: u32,
}

enum Reader {
    /// Pages read where they lie: page `k` at `offset + k * page_size`.
    Plain {
        file: File,
        offset: u64,
        page_size: u64,
        buf: Vec<u8>,
    },
    /// All of them, read in order (raw times).
    Listed(Vec<u64>),
}

impl CpuTimes {
    fn open(trace: &Trace, i: usize) -> Option<CpuTimes> {
        let cd = &trace.cpu_data[i];
        let layout = trace.layout;
        let page_size = layout.page_size.max(1) as u64;
        let (pages, how) = match &cd.loc {
            // Events straight from the container: its marks stand for pages.
            DataLoc::Built(_) => {
                let marks = trace.marks(i)?;
                (marks.len() as u64, Reader::Listed(marks))
            }
            DataLoc::Plain { path, offset, size } => {
                let file = File::open(path).ok()?;
                // Pages a damaged header claims past the end of the file are not there.
                let there = file.metadata().ok()?.len().saturating_sub(*offset);
                let reader = Reader::Plain {
                    file,
                    offset: *offset,
                    page_size,
                    buf: vec![0; PREFIX.min(page_size as usize)],
                };
                ((*size).min(there) / page_size, reader)
            }
            DataLoc::Compressed(_) => {
                let mut src = trace.pages_for(i, None).ok()?;
                let mut times = Vec::new();
                while src.advance().ok()? {
                    times.push(first_time(src.page(), &layout)?);
                }
                (times.len() as u64, Reader::Listed(times))
            }
        };
        Some(CpuTimes {
            pages: usize::try_from(pages).ok()?,
            how,
            known: HashMap::new(),
            layout,
            clock: trace.clock_map,
            shift: trace.time_shift.clone(),
            cpu: cd.cpu,
        })
    }

    /// The time of page `k`'s first record (trace-clock ns); `None` when it cannot be read.
    fn time(&mut self, k: usize) -> Option<u64> {
        if let Some(&t) = self.known.get(&k) {
            return Some(t);
        }
        let raw = match &mut self.how {
            Reader::Listed(times) => *times.get(k)?,
            Reader::Plain {
                file,
                offset,
                page_size,
                buf,
            } => {
                let at = offset.checked_add((k as u64).checked_mul(*page_size)?)?;
                file.read_exact_at(buf, at).ok()?;
                first_time(buf, &self.layout)?
            }
        };
        let raw = self.shift.as_ref().map_or(raw, |s| s.apply(self.cpu, raw));
        let t = self.clock.to_ns(raw);
        self.known.insert(k, t);
        Some(t)
    }

    /// Pages before the last one that begins before `cut` (0 when the first does not):
    /// by bisection, as if the pages' times never went back.
    fn seek(&mut self, cut: u64) -> Option<usize> {
        let (mut lo, mut hi) = (1, self.pages.max(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.time(mid)? < cut {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some(lo - 1)
    }
}
