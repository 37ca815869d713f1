//! Time-ordered merge of per-CPU streams.
//!
//! Each CPU's ring buffer is already in time order, so the merge only decides which CPU
//! goes next. It keeps delivering from the current CPU while that CPU's next record is
//! earlier than every other CPU's head ("runs" are long in real traces), and rescans the
//! heads only on a switch. Ties go to the lower CPU, as in trace-cmd.
//!
//! Nothing is decoded here beyond the 2-byte event id: an `Event` is a timestamp, a CPU
//! and a borrowed payload; analyzers read the fields they need from it. Memory is one
//! read buffer per CPU, whatever the trace size.

use std::sync::Arc;

use crate::page::{read_header, PageCursor};

use crate::prefetch::prefetched;
use crate::{
    ClockMap, CpuEvents, Endian, Error, Item, Lost, PageLayout, PageSource, Result, SharedPage,
    TimeShift, Trace,
};

use super::page_index::{id_bits, PageIndex};

/// One event, borrowed from the page it lives in; valid until the next call to `next`.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// Nanoseconds on the trace clock (after the file's clock mapping).
    pub ts: u64,
    pub cpu: u32,
    /// Event id (`common_type`).
    pub id: u32,
    /// The record, common fields included.
    pub payload: &'a [u8],
    pub endian: Endian,
    /// Events the kernel dropped on this CPU just before this one.
    pub lost_before: Lost,
    /// Loss gaps around this event (see [`Merger::loss_mark`]).
    pub loss: LossMark,
}

/// Offset of `common_pid` in every event since Linux 2.6.31 (after type, flags, preempt count).
const COMMON_PID_OFFSET: usize = 4;

impl Event<'_> {
    #[inline]
    pub fn pid(&self) -> i32 {
        self.endian
            .uint(self.payload, COMMON_PID_OFFSET, 4)
            .unwrap_or(0) as u32 as i32
    }
}

/// Which events a merge delivers; the rest are skipped inside the per-CPU stream, before
/// they cost a comparison.
#[derive(Debug, Clone, Default)]
pub struct IdFilter {
    /// Indexed by event id; None means every event.
    wanted: Option<Vec<bool>>,
    /// Per id, what the stream does with a record (`WANTED`, `SKIP`, `NO_FORMAT`): made
    /// from `wanted` and the trace's formats when a merge starts ([`IdFilter::bind`]).
    verdicts: Vec<u8>,
}

/// A record of an event the merge delivers.
const WANTED: u8 = 0;
/// A record of an event the merge skips.
const SKIP: u8 = 1;
/// A record whose id has no event format: skipped too, but it is damage (a record of
/// some event, perhaps a wanted one, whose id was overwritten) and is reported.
const NO_FORMAT: u8 = 2;

impl IdFilter {
    pub fn all() -> IdFilter {
        IdFilter {
            wanted: None,
            verdicts: Vec::new(),
        }
    }
    pub fn only(ids: impl IntoIterator<Item = u32>) -> IdFilter {
        let mut wanted = Vec::new();
        for id in ids {
            let id = id as usize;
            if id >= wanted.len() {
                wanted.resize(id + 1, false);
            }
            wanted[id] = true;
        }
        IdFilter {
            wanted: Some(wanted),
            verdicts: Vec::new(),
        }
    }
    /// Makes the verdicts for `trace`'s formats. A filter that takes every event (`all`)
    /// delivers records without a format too: its reader says what they are.
    fn bind(&mut self, trace: &Trace) {
        let Some(w) = &self.wanted else { return };
        self.verdicts = (0..trace.events.id_limit().max(w.len()))
            .map(|id| match (w.get(id), trace.events.get(id as u32)) {
                (_, None) => NO_FORMAT,
                (Some(true), Some(_)) => WANTED,
                _ => SKIP,
            })
            .collect();
    }
    #[inline]
    fn verdict(&self, id: u32) -> u8 {
        match &self.wanted {
            None => WANTED,
            Some(_) => self.verdicts.get(id as usize).copied().unwrap_or(NO_FORMAT),
        }
    }
}

/// Records of one CPU whose id has no event format: how many, and the first one's file
/// and place.
#[derive(Debug, Clone, Default)]
struct NoFormat {
    records: u64,
    first: Option<(std::path::PathBuf, RecordPlace, u32)>,
}

impl NoFormat {
    /// Counts a record of id `id` at byte `at` of `src`'s current page.
    #[cold]
    #[inline(never)]
    fn note_in_page(&mut self, src: &dyn PageSource, at: usize, id: u32) {
        let place = RecordPlace::InPage {
            page: src.page_offset(),
            at,
        };
        self.note(src.path(), place, id);
    }

    fn note(&mut self, path: &std::path::Path, place: RecordPlace, id: u32) {
        self.records += 1;
        if self.first.is_none() {
            self.first = Some((path.to_path_buf(), place, id));
        }
    }
}

/// Where a record lies in its file: at a byte of a ring-buffer page, or (a container that
/// holds records, not pages: perf.data) at a file offset of its own.
#[derive(Debug, Clone, Copy)]
pub enum RecordPlace {
    InPage { page: u64, at: usize },
    At(u64),
}

/// The error that reports `n` records without an event format on `cpu` of the file at
/// `path`, the first of id `id` at `place`: one wording for every reader that meets them
/// (a pass that skips them, `info` that counts them).
pub fn no_format_error(
    path: &std::path::Path,
    cpu: u32,
    n: u64,
    id: u32,
    place: RecordPlace,
) -> Error {
    let what = if n == 1 {
        "1 event has an id with no event format".to_string()
    } else {
        format!("{n} events have an id with no event format")
    };
    let (offset, first) = match place {
        RecordPlace::InPage { page, at } => (
            page,
            format!("the first, id {id}, is the record at byte {at} of this page"),
        ),
        RecordPlace::At(at) => (at, format!("the first, id {id}, is the record here")),
    };
    Error::corrupt(offset, format!("{what} ({first})"))
        .on_cpu(cpu)
        .in_file(path)
}

/// Per-CPU totals gathered while streaming.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTotals {
    pub pages: u64,
    /// Sum of the counts the kernel stored.
    pub lost_counted: u64,
    /// Pages whose loss flag came without a count.
    pub lost_unknown: u64,
    /// The CPU's events came straight from a container that holds no pages (perf.data):
    /// `pages` counts nothing.
    pub direct: bool,
}

/// Where the events of a direct stream's batch lie: what `CpuEvents::bytes` returned
/// after the `fill` that gave the batch. Kept as a pointer so that each event's payload
/// is found without a call through `dyn` (5 % of a perf.data analysis's time).
#[derive(Clone, Copy)]
struct BatchBytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: a read-only view of bytes the same stream's source owns; it moves between
// threads only with that source.
unsafe impl Send for BatchBytes {}

impl Default for BatchBytes {
    fn default() -> BatchBytes {
        BatchBytes::of(&[])
    }
}

impl BatchBytes {
    fn of(b: &[u8]) -> BatchBytes {
        BatchBytes {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }

    /// The bytes.
    // Only read while the batch's event is the stream's head: `CpuEvents` keeps the
    // bytes of its last `fill` in place until its next `fill`, which needs the stream
    // mutably, and the stream drops its source only after clearing its head (`fail`).
    #[inline(always)]
    fn get(&self) -> &[u8] {
        // SAFETY: see above: the source that gave these bytes holds them unchanged for
        // as long as `&self` (borrowed from the stream) lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

struct CpuStream {
    cpu: u32,
    src: Box<dyn PageSource>,
    /// The CPU's events straight from a container that holds events (perf.data), read
    /// instead of `src` (then empty).
    direct: Option<Box<dyn CpuEvents>>,
    /// The items `direct` handed out last, and the next to take.
    batch: Vec<Item>,
    batch_next: usize,
    /// The bytes those items point into, as `direct` gave them after its last `fill`.
    batch_bytes: BatchBytes,
    /// For `direct`: the file offset of `head`'s record.
    head_at: u64,
    /// The current page, read here at every record rather than asked of `src` (a call
    /// through `dyn`) each time: a share of the window `src` mapped it in, or (when `src`
    /// maps nothing) a copy in `copy`. Copying the pages whose records are mostly
    /// delivered once measured faster; now, on a fresh and on a just-written page cache,
    /// reading every page in place is 8-11 % faster for `syscall --stat` and 2-3 % slower
    /// for `microstate` (one pass over sched, irq and system-call events).
    shared: Option<SharedPage>,
    copy: Vec<u8>,
    cursor: PageCursor,
    /// The record waiting to be delivered: raw timestamp (after the guest-to-host time
    /// shift, if any), payload range.
    head: Option<(u64, usize, usize)>,
    /// The event id of `head`, read from a page's record to filter it (a record straight
    /// from the container has its id read when delivered).
    head_id: u32,
    /// Loss flagged by the page `head` came from, not yet reported.
    pending_lost: Lost,
    head_lost: Lost,
    totals: CpuTotals,
    /// The stream's pages as indexed ([`PageIndex::pages`]), if they are.
    index: Option<(Arc<PageIndex>, usize)>,
    /// Pages advanced over so far.
    page_no: usize,
    /// Pages at the start not read at all ([`Merger::indexed`], [`Merger::from_seeks`]).
    seek_pages: usize,
    /// Records skipped for having no event format.
    no_format: NoFormat,
}

pub struct Merger {
    streams: Vec<CpuStream>,
    layout: PageLayout,
    clock: ClockMap,
    /// A guest's per-CPU mapping to host time, applied before `clock` (and before the
    /// merge compares CPUs, since it may move each CPU differently).
    shift: Option<Arc<TimeShift>>,
    filter: IdFilter,
    /// Stream whose head was handed out last and must be advanced before the next pick.
    delivered: Option<usize>,
    /// Stream currently being drained and the (ts, index) it may run up to.
    current: usize,
    limit: (u64, usize),
    /// An error met while priming, reported by the first `next`.
    deferred: Option<Error>,
    /// Loss gaps opened so far (see [`Merger::loss_gen`]).
    loss_gen: u64,
    /// CPUs currently inside a loss gap.
    gaps_open: u32,
    /// Live streams ([`Merger::live`]): a stream out of pages may get more later.
    live: bool,
    /// Raw time past which nothing is delivered yet ([`Merger::set_horizon`]).
    horizon: u64,
    /// The filter's ids as indexed pages record them ([`id_bits`]).
    filter_bits: u64,
}

/// Where the merge stands with respect to lost events, for pairing: a pair whose start
/// and end see the same `LossMark` with `open == 0` spans no loss on any CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LossMark {
    /// Number of loss gaps that have opened so far.
    pub gen: u64,
    /// Number of CPUs whose next event follows a loss, i.e. whose gap covers "now".
    pub open: u32,
}

impl Merger {
    /// Merges the CPUs of `trace` (all of them, or those in `cpus`), delivering events
    /// accepted by `filter`.
    pub fn new(trace: &Trace, cpus: Option<&[u32]>, filter: IdFilter) -> Result<Merger> {
        Merger::threaded(trace, cpus, filter, 1)
    }

    /// [`Merger::new`], with `threads` > 1 decoding each CPU whose events come straight
    /// from the container (perf.data) on a thread of its own ([`prefetched`]), while this
    /// one merges.
    pub fn threaded(
        trace: &Trace,
        cpus: Option<&[u32]>,
        filter: IdFilter,
        threads: usize,
    ) -> Result<Merger> {
        let wrap = |events| match threads {
            0 | 1 => events,
            _ => prefetched(events),
        };
        let (sources, direct) = Merger::sources(trace, cpus, &filter, |_| 0, wrap)?;
        Ok(Merger::start(trace, sources, filter, false, |m| {
            for (s, d) in m.streams.iter_mut().zip(direct) {
                s.totals.direct = d.is_some();
                s.direct = d;
            }
        }))
    }

    /// Each CPU's stream (all, or those in `cpus`): its events straight from the
    /// container, from mark `from(i)` on and passed through `wrap`, where the container
    /// holds events (perf.data; the page source is then empty), else its pages.
    /// Containers that build pages on demand build only the wanted events.
    #[allow(clippy::type_complexity)]
    fn sources(
        trace: &Trace,
        cpus: Option<&[u32]>,
        filter: &IdFilter,
        from: impl Fn(usize) -> usize,
        wrap: impl Fn(Box<dyn CpuEvents>) -> Box<dyn CpuEvents>,
    ) -> Result<(
        Vec<(u32, Box<dyn PageSource>)>,
        Vec<Option<Box<dyn CpuEvents>>>,
    )> {
        let mut sources: Vec<(u32, Box<dyn PageSource>)> = Vec::new();
        let mut direct = Vec::new();
        for (i, cd) in trace.cpu_data.iter().enumerate() {
            if cpus.is_some_and(|c| !c.contains(&cd.cpu)) {
                continue;
            }
            let wanted = filter.wanted.as_deref();
            match trace.events_for(i, wanted, from(i)) {
                Some(events) => {
                    direct.push(Some(wrap(events?)));
                    sources.push((cd.cpu, Box::new(Exhausted)));
                }
                None => {
                    direct.push(None);
                    sources.push((cd.cpu, trace.pages_for(i, wanted)?));
                }
            }
        }
        Ok((sources, direct))
    }

    /// [`Merger::new`] over every CPU, reading only the pages `index` says hold a wanted
    /// event and, with `from` (trace-clock ns), starting each CPU at the last page that
    /// begins before it: events earlier than `from` may still come (from that page), and
    /// a loss flagged on a page never read is not reported.
    pub fn indexed(
        trace: &Trace,
        filter: IdFilter,
        index: &Arc<PageIndex>,
        from: Option<u64>,
    ) -> Result<Merger> {
        let mut sources = Vec::new();
        for (i, cd) in trace.cpu_data.iter().enumerate() {
            sources.push((cd.cpu, trace.pages_for(i, filter.wanted.as_deref())?));
        }
        let filter_bits = match &filter.wanted {
            None => u64::MAX,
            Some(w) => id_bits((0..w.len() as u32).filter(|&id| w[id as usize])),
        };
        Ok(Merger::start(trace, sources, filter, false, |m| {
            m.filter_bits = filter_bits;
            for (i, s) in m.streams.iter_mut().enumerate() {
                s.index = Some((index.clone(), i));
                s.seek_pages = from.map_or(0, |t| index.seek(i, t));
            }
        }))
    }

    /// [`Merger::new`] over every CPU, passing over the first `seeks[i]` pages of CPU
    /// stream `i` (as in `trace.cpu_data`) unread: a time slice's merge
    /// ([`super::slice_plan`]). A loss flagged on a page passed over is not reported.
    /// For a container that holds events (perf.data), `seeks[i]` is the mark to start
    /// from ([`Trace::marks`]).
    pub fn from_seeks(trace: &Trace, filter: IdFilter, seeks: &[usize]) -> Result<Merger> {
        let from = |i: usize| seeks.get(i).copied().unwrap_or(0);
        let (sources, direct) = Merger::sources(trace, None, &filter, from, |e| e)?;
        Ok(Merger::start(trace, sources, filter, false, |m| {
            for ((s, &n), d) in m.streams.iter_mut().zip(seeks).zip(direct) {
                s.totals.direct = d.is_some();
                match d {
                    Some(d) => s.direct = Some(d),
                    None => s.seek_pages = n,
                }
            }
        }))
    }

    /// Where each CPU stream's next event lies (in the order of the streams): its page
    /// (counted from the stream's first, pages passed over included) and its place in the
    /// page, or for events straight from the container its record's offset in the file;
    /// `None` for a stream with no event left. Two merges of one trace that give
    /// the same places have delivered the same events of every CPU.
    pub fn heads(&self) -> Vec<Option<(usize, usize)>> {
        self.streams
            .iter()
            .map(|s| {
                let (_, start, _) = s.head?;
                Some(match &s.direct {
                    // A direct stream's place is the record's offset in the file.
                    Some(_) => (usize::MAX, s.head_at as usize),
                    None => (s.page_no, start),
                })
            })
            .collect()
    }

    /// Merges per-CPU page streams that are still growing (a recording in progress): a
    /// stream that runs out of pages waits for more ([`Merger::refill`]) instead of
    /// ending, and nothing later than the horizon is delivered ([`Merger::set_horizon`]),
    /// so that an event is only handed out once every CPU has delivered all its earlier
    /// ones. `trace` gives the page layout and clock.
    pub fn live(
        trace: &Trace,
        sources: Vec<(u32, Box<dyn PageSource>)>,
        filter: IdFilter,
    ) -> Merger {
        let mut m = Merger::build(trace, sources, filter, true);
        m.horizon = 0;
        m
    }

    fn build(
        trace: &Trace,
        sources: Vec<(u32, Box<dyn PageSource>)>,
        filter: IdFilter,
        live: bool,
    ) -> Merger {
        Merger::start(trace, sources, filter, live, |_| {})
    }

    /// Builds the merge, lets `setup` adjust it, then primes every stream.
    fn start(
        trace: &Trace,
        sources: Vec<(u32, Box<dyn PageSource>)>,
        filter: IdFilter,
        live: bool,
        setup: impl FnOnce(&mut Merger),
    ) -> Merger {
        let streams = sources
            .into_iter()
            .map(|(cpu, src)| CpuStream {
                cpu,
                src,
                direct: None,
                batch: Vec::new(),
                batch_next: 0,
                batch_bytes: BatchBytes::default(),
                head_at: 0,
                shared: None,
                copy: Vec::new(),
                head_id: 0,
                cursor: PageCursor::default(),
                head: None,
                pending_lost: Lost::None,
                head_lost: Lost::None,
                totals: CpuTotals::default(),
                index: None,
                page_no: 0,
                seek_pages: 0,
                no_format: NoFormat::default(),
            })
            .collect();
        let mut filter = filter;
        filter.bind(trace);
        let mut m = Merger {
            streams,
            layout: trace.layout,
            clock: trace.clock_map,
            shift: trace.time_shift.clone(),
            filter,
            delivered: None,
            current: 0,
            limit: (0, 0),
            deferred: None,
            loss_gen: 0,
            gaps_open: 0,
            live,
            horizon: u64::MAX,
            filter_bits: u64::MAX,
        };
        setup(&mut m);
        // Prime every stream; a stream that fails here reports its error on the first `next`.
        let mut first_err = None;
        for i in 0..m.streams.len() {
            if let Err(e) = m.advance(i) {
                first_err.get_or_insert(e);
            }
        }
        m.pick();
        m.deferred = first_err;
        m
    }

    /// Live streams: every CPU has delivered all its events up to raw time `ts`, so the
    /// merge may hand out events up to it.
    pub fn set_horizon(&mut self, ts: u64) {
        self.horizon = self.horizon.max(ts);
    }

    /// Live streams: looks again for pages in the streams that had run out.
    pub fn refill(&mut self) -> Result<()> {
        let mut first_err = None;
        if let Some(i) = self.delivered.take() {
            if let Err(e) = self.advance(i) {
                first_err.get_or_insert(e);
            }
        }
        for i in 0..self.streams.len() {
            if self.streams[i].head.is_none() {
                if let Err(e) = self.advance(i) {
                    first_err.get_or_insert(e);
                }
            }
        }
        self.pick();
        first_err.map_or(Ok(()), Err)
    }

    /// Live streams: no more pages will come; what is left is delivered whatever the
    /// horizon, and a loss flagged after a stream's last record becomes a gap to the end.
    pub fn end_live(&mut self) -> Result<()> {
        self.live = false;
        self.horizon = u64::MAX;
        self.refill()
    }

    /// Lost-event gaps around the event just delivered.
    ///
    /// A CPU whose next record carries a loss flag is "in a gap" from the moment its
    /// previous record was delivered until that record is: the lost events lie somewhere in
    /// between. Because every CPU's head is read ahead, the merge knows about a gap before
    /// any event inside it is delivered, so `open > 0` exactly when the current time lies
    /// in some CPU's gap, and `gen` counts gaps opened so far. An interval of events
    /// [s, e] overlaps no gap iff the marks at s and e are equal and have `open == 0`.
    /// A stream that ends with a loss flag stays in its gap to the end of the trace.
    #[inline]
    pub fn loss_mark(&self) -> LossMark {
        LossMark {
            gen: self.loss_gen,
            open: self.gaps_open,
        }
    }

    /// Whether some CPU started past its first page ([`Merger::indexed`]).
    pub fn seeked(&self) -> bool {
        self.streams.iter().any(|s| s.seek_pages > 0)
    }

    /// Totals per CPU so far (complete once `next` has returned None).
    pub fn totals(&self) -> Vec<(u32, CpuTotals)> {
        self.streams.iter().map(|s| (s.cpu, s.totals)).collect()
    }

    /// Per CPU, the records skipped so far for having no event format, as errors naming
    /// the first one's place (empty for a merge of every event, which delivers them).
    pub fn no_format_errors(&self) -> Vec<Error> {
        self.streams
            .iter()
            .filter_map(|s| {
                let (path, place, id) = s.no_format.first.as_ref()?;
                Some(no_format_error(
                    path,
                    s.cpu,
                    s.no_format.records,
                    *id,
                    *place,
                ))
            })
            .collect()
    }

    /// Counts the event [`Merger::next`] returned last as one whose id `id` has no event
    /// format, for a merge of every event (which delivers such records: its reader finds
    /// them out); [`Merger::no_format_errors`] then reports them with those it skipped.
    pub fn count_no_format(&mut self, id: u32) {
        if let Some(s) = self.delivered.and_then(|i| self.streams.get_mut(i)) {
            if let Some((_, start, _)) = s.head {
                s.count_no_format(start, id);
            }
        }
    }

    /// Whether records were skipped for having no event format.
    pub fn met_no_format(&self) -> bool {
        self.streams.iter().any(|s| s.no_format.records > 0)
    }

    /// The next event in time order. After an error the failing CPU is dropped and the
    /// merge can go on with the others (so `info` can report what a damaged file holds).
    // Not an `Iterator`: each event borrows the page it lives in, so it must be dropped
    // before the next call (a lending iterator, which std's trait cannot express).
    //
    // Inlined into every loop that reads events: called out of line it hands the event
    // back through memory, and the loop reads it straight back (a sixth of a one-thread
    // `analyze syscall --stat`). The hottest loops call `step` and `current` instead,
    // which build the event where it is used rather than in a `Result<Option<_>>`.
    #[allow(clippy::should_implement_trait)]
    #[inline(always)]
    pub fn next(&mut self) -> Result<Option<Event<'_>>> {
        Ok(match self.step()? {
            true => Some(self.current()),
            false => None,
        })
    }

    /// Moves to the next event in time order: false at the end, else [`Merger::current`]
    /// is that event until the next step.
    #[inline(always)]
    pub fn step(&mut self) -> Result<bool> {
        self.settle()?;
        let i = self.current;
        let Some(s) = self.streams.get(i) else {
            return Ok(false);
        };
        let Some((ts, _, _)) = s.head else {
            return Ok(false);
        };
        if ts > self.horizon {
            return Ok(false);
        }
        self.delivered = Some(i);
        Ok(true)
    }

    /// The time of [`Merger::current`]'s event, without building the event.
    #[inline(always)]
    pub fn current_ts(&self) -> u64 {
        let (ts, _, _) = self.streams[self.current]
            .head
            .expect("step moved to an event");
        self.clock.to_ns(ts)
    }

    /// The event the last [`Merger::step`] moved to (only after it returned true).
    #[inline(always)]
    pub fn current(&self) -> Event<'_> {
        let s = &self.streams[self.current];
        let (ts, start, len) = s.head.expect("step moved to an event");
        let endian = self.layout.endian;
        let (payload, id) = match &s.direct {
            Some(_) => {
                let payload = &s.batch_bytes.get()[start..start + len];
                (
                    payload,
                    endian.uint(payload, 0, 2).unwrap_or(u64::MAX) as u32,
                )
            }
            None => (&s.page()[start..start + len], s.head_id),
        };
        Event {
            ts: self.clock.to_ns(ts),
            cpu: s.cpu,
            id,
            payload,
            endian,
            lost_before: s.head_lost,
            loss: LossMark {
                gen: self.loss_gen,
                open: self.gaps_open,
            },
        }
    }

    /// The time of the event the next call to `next` returns (None at the end), without
    /// delivering it: what a merge of several files compares.
    pub fn peek_ts(&mut self) -> Result<Option<u64>> {
        self.settle()?;
        Ok(match self.streams.get(self.current).and_then(|s| s.head) {
            Some((ts, _, _)) if ts <= self.horizon => Some(self.clock.to_ns(ts)),
            _ => None,
        })
    }

    /// The event the next call to `next` returns (None at the end), without delivering it;
    /// the event delivered before is no longer valid.
    pub fn peek(&mut self) -> Result<Option<Event<'_>>> {
        Ok(self.peek_ts()?.map(|_| self.current()))
    }

    /// Reports an error met while priming, and moves past the event delivered last.
    // Once per event, from `next`: inlined there with the walk through the page.
    #[inline(always)]
    fn settle(&mut self) -> Result<()> {
        // (Tested before taken: a `take` per event would move the whole error slot.)
        if self.deferred.is_some() {
            return Err(self.deferred.take().expect("checked"));
        }
        if let Some(i) = self.delivered.take() {
            let advanced = self.advance(i);
            match self.streams[i].head {
                Some((ts, _, _)) if (ts, i) < self.limit => {}
                _ => self.pick(),
            }
            advanced?;
        }
        Ok(())
    }

    /// An error about the event `next` returned last, naming its CPU, file and page offset.
    pub fn record_error(&self, problem: &str) -> Error {
        let Some(s) = self.delivered.and_then(|i| self.streams.get(i)) else {
            return Error::corrupt(0, problem.to_string());
        };
        let at = s.head.map_or(0, |(_, start, _)| start);
        if let Some(d) = &s.direct {
            return Error::corrupt(s.head_at, problem.to_string())
                .on_cpu(s.cpu)
                .in_file(d.path());
        }
        Error::corrupt(
            s.src.page_offset(),
            format!("the record at byte {at} of this page: {problem}"),
        )
        .on_cpu(s.cpu)
        .in_file(s.src.path())
    }

    /// Finds the stream with the earliest head and the head it may run up to.
    fn pick(&mut self) {
        let mut best = (u64::MAX, usize::MAX);
        let mut second = (u64::MAX, usize::MAX);
        for (i, s) in self.streams.iter().enumerate() {
            if let Some((ts, _, _)) = s.head {
                let k = (ts, i);
                if k < best {
                    second = best;
                    best = k;
                } else if k < second {
                    second = k;
                }
            }
        }
        self.current = if best.1 == usize::MAX {
            self.streams.len()
        } else {
            best.1
        };
        self.limit = second;
    }

    /// Moves stream `i` to its next accepted record, loading pages as needed.
    ///
    /// The walk through the current page is the hot path of every pass (once per record):
    /// it stays small enough to inline with the page cursor, and what happens once per
    /// page (index, skipping, loss flags, live streams) is in `next_page`.
    #[inline(always)]
    fn advance(&mut self, i: usize) -> Result<()> {
        if self.streams[i].direct.is_some() {
            return self.advance_direct(i);
        }
        let endian = self.layout.endian;
        loop {
            let Merger {
                streams,
                filter,
                shift,
                loss_gen,
                gaps_open,
                ..
            } = self;
            let s = &mut streams[i];
            if s.head_lost.is_some() {
                // The record that closed this CPU's gap has been delivered.
                *gaps_open -= 1;
                s.head_lost = Lost::None;
            }
            s.head = None;
            let page = match &s.shared {
                Some(p) => p.bytes(),
                None => &s.copy,
            };
            loop {
                let r = match s.cursor.next(page, endian) {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => return Err(s.fail(e)),
                };
                let id = endian.uint(page, r.start, 2).unwrap_or(u64::MAX) as u32;
                let verdict = filter.verdict(id);
                if verdict != WANTED {
                    if verdict == NO_FORMAT {
                        // Skipped, and taken as an event lost on this CPU so that no
                        // pair spans it: it may have been any event (the switch that
                        // ended a wait, the exit of a call).
                        s.no_format.note_in_page(&*s.src, r.start, id);
                        s.pending_lost = merge_lost(s.pending_lost, Lost::Count(1));
                    }
                    continue;
                }
                let ts = match shift {
                    None => r.ts,
                    Some(t) => t.apply(s.cpu, r.ts),
                };
                s.head = Some((ts, r.start, r.len));
                s.head_id = id;
                if s.pending_lost.is_some() {
                    s.head_lost = std::mem::take(&mut s.pending_lost);
                    *loss_gen += 1;
                    *gaps_open += 1;
                }
                return Ok(());
            }
            if !self.next_page(i)? {
                return Ok(());
            }
        }
    }

    /// Moves stream `i` to its next page that may hold a wanted record; false when there
    /// is none (for a live stream: none yet).
    #[inline(never)]
    /// [`Merger::advance`] for a CPU whose events come straight from the container.
    fn advance_direct(&mut self, i: usize) -> Result<()> {
        let Merger {
            streams,
            shift,
            loss_gen,
            gaps_open,
            ..
        } = self;
        let s = &mut streams[i];
        if s.head_lost.is_some() {
            // The record that closed this CPU's gap has been delivered.
            *gaps_open -= 1;
            s.head_lost = Lost::None;
        }
        s.head = None;
        let Some(d) = s.direct.as_mut() else {
            return Ok(());
        };
        loop {
            let Some(&item) = s.batch.get(s.batch_next) else {
                s.batch_next = 0;
                if let Err(e) = d.fill(&mut s.batch) {
                    s.batch.clear();
                    return Err(s.fail(e));
                }
                s.batch_bytes = BatchBytes::of(d.bytes());
                if s.batch.is_empty() {
                    if s.pending_lost.is_some() {
                        // Lost events after the last record: a gap to the end.
                        s.pending_lost = Lost::None;
                        *loss_gen += 1;
                        *gaps_open += 1;
                    }
                    return Ok(());
                }
                continue;
            };
            s.batch_next += 1;
            match item {
                Item::Event { ts, start, len, at } => {
                    let ts = shift.as_deref().map_or(ts, |t| t.apply(s.cpu, ts));
                    s.head = Some((ts, start, len));
                    s.head_at = at;
                    if s.pending_lost.is_some() {
                        s.head_lost = std::mem::take(&mut s.pending_lost);
                        *loss_gen += 1;
                        *gaps_open += 1;
                    }
                    return Ok(());
                }
                // As a page's loss flag: reported with the CPU's next event.
                Item::Lost(n) => {
                    s.totals.lost_counted += n;
                    s.pending_lost = merge_lost(s.pending_lost, Lost::Count(n));
                }
            }
        }
    }

    fn next_page(&mut self, i: usize) -> Result<bool> {
        let layout = self.layout;
        let live = self.live;
        let filter_bits = self.filter_bits;
        let (loss_gen, gaps_open) = (&mut self.loss_gen, &mut self.gaps_open);
        let s = &mut self.streams[i];
        // Let go of the page first: the window it lies in is unmapped when the source
        // moves past it, not kept beside the next one.
        s.shared = None;
        let n = match &s.index {
            Some((ix, si)) => ix.skippable(*si, s.page_no, s.seek_pages, filter_bits),
            None => s.seek_pages.saturating_sub(s.page_no),
        };
        if n > 0 {
            // Pages before the window or the slice, or holding none of the wanted events
            // and no loss: passed over unread.
            let skipped = match s.src.skip(n as u64) {
                Ok(k) => k as usize,
                Err(e) => return Err(s.fail(e)),
            };
            s.page_no += skipped;
            s.totals.pages += skipped as u64;
        }
        match s.src.advance() {
            Ok(true) => {}
            // More pages may come: a loss flagged so far waits for them.
            Ok(false) if live => return Ok(false),
            Ok(false) => {
                if s.pending_lost.is_some() {
                    // Lost events after the last record: a gap to the end.
                    s.pending_lost = Lost::None;
                    *loss_gen += 1;
                    *gaps_open += 1;
                }
                return Ok(false);
            }
            Err(e) => return Err(s.fail(e)),
        }
        let k = s.page_no;
        s.page_no += 1;
        s.shared = s.src.shared_page();
        if s.shared.is_none() {
            s.copy.clear();
            s.copy.extend_from_slice(s.src.page());
        }
        let header = match read_header(s.page(), &layout) {
            Ok(h) => h,
            Err(e) => return Err(s.fail(e)),
        };
        s.totals.pages += 1;
        match header.lost {
            Lost::None => {}
            Lost::Unknown => s.totals.lost_unknown += 1,
            Lost::Count(n) => s.totals.lost_counted += n,
        }
        s.pending_lost = merge_lost(s.pending_lost, header.lost);
        let holds = |(ix, i): &(Arc<PageIndex>, usize)| {
            ix.pages(*i)
                .and_then(|p| p.get(k))
                .is_none_or(|p| p.ids & filter_bits != 0)
        };
        s.cursor = if s.index.as_ref().is_none_or(holds) {
            PageCursor::new(&header, &layout)
        } else {
            // None of the wanted events: nothing to walk.
            PageCursor::default()
        };
        Ok(true)
    }
}

impl CpuStream {
    /// The current page (empty before the first).
    #[inline(always)]
    fn page(&self) -> &[u8] {
        match &self.shared {
            Some(p) => p.bytes(),
            None => &self.copy,
        }
    }

    /// Counts a record without an event format: its id `id`, at `at` of the current
    /// page (or, for a direct stream, the head's record).
    fn count_no_format(&mut self, at: usize, id: u32) {
        match &self.direct {
            Some(d) => self
                .no_format
                .note(d.path(), RecordPlace::At(self.head_at), id),
            None => self.no_format.note_in_page(&*self.src, at, id),
        }
    }

    /// Ends this stream and turns a page-relative error into one naming the file offset.
    fn fail(&mut self, e: Error) -> Error {
        self.head = None;
        self.cursor = PageCursor::default();
        self.shared = None;
        self.copy.clear();
        let e = if e.path.is_none() {
            e.shifted(self.src.page_offset()).in_file(self.src.path())
        } else {
            e
        };
        self.src = Box::new(Exhausted);
        self.direct = None;
        self.batch.clear();
        self.batch_bytes = BatchBytes::default();
        e.on_cpu(self.cpu)
    }
}

fn merge_lost(a: Lost, b: Lost) -> Lost {
    match (a, b) {
        (Lost::None, x) | (x, Lost::None) => x,
        (Lost::Count(x), Lost::Count(y)) => Lost::Count(x + y),
        _ => Lost::Unknown,
    }
}

/// What a failed stream is replaced with: no more pages.
struct Exhausted;

impl PageSource for Exhausted {
    fn advance(&mut self) -> Result<bool> {
        Ok(false)
    }
    fn page(&self) -> &[u8] {
        &[]
    }
    fn page_offset(&self) -> u64 {
        0
    }
    fn path(&self) -> &std::path::Path {
        std::path::Path::new("")
    }
}

/// Several recordings on one timeline, as `trace-cmd report -i host.dat -i guest.dat`
/// shows a host and its guests: each file keeps its own merge (its CPUs, clock and
/// guest time shift), and the file whose next event is earliest goes next; ties go to
/// the file named first. Nothing is read ahead beyond each file's own heads.
pub struct FileMerge {
    files: Vec<Merger>,
}

impl FileMerge {
    pub fn new(files: Vec<Merger>) -> FileMerge {
        FileMerge { files }
    }

    /// The next event of all the files, with the index of its file.
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<Option<(usize, Event<'_>)>> {
        let best = if self.files.len() == 1 {
            0
        } else {
            let mut best: Option<(u64, usize)> = None;
            for (i, m) in self.files.iter_mut().enumerate() {
                match (m.peek_ts()?, best) {
                    (Some(ts), Some((b, _))) if ts >= b => {}
                    (Some(ts), _) => best = Some((ts, i)),
                    (None, _) => {}
                }
            }
            match best {
                Some((_, i)) => i,
                None => return Ok(None),
            }
        };
        Ok(self.files[best].next()?.map(|ev| (best, ev)))
    }

    /// File `i`'s next event, without delivering it (see [`Merger::peek`]).
    pub fn peek_file(&mut self, i: usize) -> Result<Option<Event<'_>>> {
        self.files[i].peek()
    }

    /// Delivers file `i`'s next event (the one [`FileMerge::peek_file`] showed) unseen.
    pub fn skip_file(&mut self, i: usize) -> Result<()> {
        self.files[i].step().map(|_| ())
    }

    /// The merge of file `i`, e.g. to name the record behind an error.
    pub fn file(&self, i: usize) -> &Merger {
        &self.files[i]
    }

    /// The merge of file `i`, to count the record it delivered last as damaged
    /// ([`Merger::count_no_format`]).
    pub fn file_mut(&mut self, i: usize) -> &mut Merger {
        &mut self.files[i]
    }
}
