//! Live analysis: the analyzers run over a recording while it is being made, and report
//! per interval.
//!
//! A live source looks to the analyzers like a file: a time-ordered stream of pages. The
//! difference is in the merge ([`Merger::live`]): each CPU's pages arrive when its reader
//! moves them, so a CPU that has delivered nothing lately may still deliver events older
//! than another CPU's newest. The recorder therefore says how far every CPU is complete
//! (the *horizon*: every event up to it has been moved, on every CPU, as trace-cmd's and
//! perf's readers track with their watermarks), and the merge hands out nothing later.
//!
//! Each analyzer is the same [`crate::analyzer::Pass`] that [`crate::analyzer::drive`]
//! runs over a file; every interval its aggregates are taken and start again from empty
//! while its pairing state (calls in progress, tasks waiting) carries on. A sample belongs
//! to the interval in which it completes (a system call to the interval of its exit).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kstate_format::{Lost, PageSource, Trace};

use crate::analyzer::{AnyPass, Outcome};
use crate::error::Error;
use crate::fxmap::FxMap;
use crate::Query;
use kstate_format::stream::merge::{IdFilter, Merger};

/// Pages of one CPU in a file that grows while it is read: whole pages up to the length
/// the writer has published in `limit` (bytes after `base`).
pub struct GrowingPages {
    file: File,
    path: PathBuf,
    page_size: usize,
    base: u64,
    limit: Arc<AtomicU64>,
    /// A window of whole pages read ahead; `buf[at..at + page_size]` is the current page.
    buf: Vec<u8>,
    at: usize,
    filled: usize,
    /// Offset (after `base`) of `buf[0]`.
    buf_off: u64,
    started: bool,
    /// Bytes of the file (from its start) read into memory so far: a watcher that alone
    /// reads the file may give back the space before it.
    read: Arc<AtomicU64>,
    /// The most written and not yet read this keeps: an analysis that cannot keep up
    /// skips the oldest unread pages past it (counted in `skipped`), so that what waits
    /// for it stays bounded. None: it waits for everything (the file is kept anyway).
    backlog_max: Option<u64>,
    skipped: Arc<AtomicU64>,
    /// Offset (from the file's start) before which another reader of the file (a flight
    /// recorder held to its size) has given the pages back: they read as zeros and are
    /// skipped unread (counted in `skipped`). It is raised before the space is given back.
    given_back: Option<Arc<AtomicU64>>,
}

/// Read-ahead: enough pages per read that a storm costs few system calls.
const WINDOW: usize = 1 << 20;

impl GrowingPages {
    /// Pages of `path` from byte `base`, as far as `limit` says they are written.
    pub fn open(
        path: &Path,
        base: u64,
        page_size: usize,
        limit: Arc<AtomicU64>,
    ) -> Result<GrowingPages, Error> {
        let file = File::open(path).map_err(|e| kstate_format::Error::io(path, e))?;
        Ok(GrowingPages {
            file,
            path: path.to_path_buf(),
            page_size,
            base,
            limit,
            buf: Vec::new(),
            at: 0,
            filled: 0,
            buf_off: 0,
            started: false,
            read: Arc::new(AtomicU64::new(base)),
            backlog_max: None,
            skipped: Arc::new(AtomicU64::new(0)),
            given_back: None,
        })
    }

    /// Bounds what waits unread (see `backlog_max`): at most `bytes` (whole pages, at
    /// least one).
    pub fn with_backlog_limit(mut self, bytes: u64) -> GrowingPages {
        self.backlog_max = Some(bytes.max(self.page_size as u64));
        self
    }

    /// Skips the pages another reader gave back (see `given_back`).
    pub fn with_given_back(mut self, offset: Arc<AtomicU64>) -> GrowingPages {
        self.given_back = Some(offset);
        self
    }

    /// Where pages given back end, as an offset after `base`.
    fn given_back(&self) -> u64 {
        self.given_back
            .as_ref()
            .map_or(0, |g| g.load(Ordering::Acquire).saturating_sub(self.base))
    }

    /// Bytes of pages skipped unread so far (see [`GrowingPages::with_backlog_limit`]).
    pub fn skipped_handle(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.skipped)
    }

    /// How far the file has been read (see `read`), as it grows.
    pub fn read_handle(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.read)
    }
}

impl PageSource for GrowingPages {
    fn advance(&mut self) -> kstate_format::Result<bool> {
        let next = if self.started {
            self.at + self.page_size
        } else {
            0
        };
        if next + self.page_size <= self.filled {
            self.at = next;
            self.started = true;
            return Ok(true);
        }
        // Read the next window of whole pages, as far as they are written.
        let mut from = self.buf_off + next as u64;
        let written = self.limit.load(Ordering::Acquire);
        if let Some(max) = self.backlog_max {
            let behind = written.saturating_sub(from);
            if behind > max {
                // Half the bound left to read: skipping is rare, not every window.
                let ps = self.page_size as u64;
                let to = written.saturating_sub(max / 2) / ps * ps;
                self.skipped.fetch_add(to - from, Ordering::Relaxed);
                from = to;
            }
        }
        let ps = self.page_size as u64;
        let gone = self.given_back().div_ceil(ps) * ps;
        if gone > from {
            self.skipped
                .fetch_add(gone.min(written).saturating_sub(from), Ordering::Relaxed);
            from = from.max(gone.min(written / ps * ps));
        }
        let pages = (written.saturating_sub(from) as usize / self.page_size)
            .min((WINDOW / self.page_size).max(1));
        if pages == 0 {
            return Ok(false);
        }
        let mut len = pages * self.page_size;
        self.buf.resize(len, 0);
        self.file
            .read_exact_at(&mut self.buf[..len], self.base + from)
            .map_err(|e| kstate_format::Error::io(&self.path, e))?;
        // Pages given back while they were read may be zeros: they go too.
        let gone = (self.given_back().div_ceil(ps) * ps).saturating_sub(from);
        if gone > 0 {
            let cut = (gone as usize).min(len);
            self.buf.drain(..cut);
            self.skipped.fetch_add(cut as u64, Ordering::Relaxed);
            from += cut as u64;
            len -= cut;
            if len == 0 {
                self.filled = 0;
                self.buf_off = from;
                self.started = false;
                self.read.store(self.base + from, Ordering::Release);
                return self.advance();
            }
        }
        self.buf_off = from;
        self.filled = len;
        self.at = 0;
        self.started = true;
        self.read
            .store(self.base + from + len as u64, Ordering::Release);
        Ok(true)
    }
    fn page(&self) -> &[u8] {
        match self.started {
            true => &self.buf[self.at..self.at + self.page_size],
            false => &[],
        }
    }
    fn page_offset(&self) -> u64 {
        self.base + self.buf_off + self.at as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// What one CPU delivered in an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuActivity {
    pub cpu: u32,
    /// Events of every kind, analysed or not.
    pub events: u64,
    /// Ring-buffer bytes those events took (records with their headers).
    pub bytes: u64,
    /// Events the kernel dropped on this CPU; `None` where it did not count them.
    pub lost: Option<u64>,
}

/// One interval's results.
#[derive(Debug, Clone)]
pub struct Interval {
    /// [start, end) in ns on the trace clock.
    pub start: u64,
    pub end: u64,
    /// One per analyzer, in the order they were asked for.
    pub outcomes: Vec<Outcome>,
    pub cpus: Vec<CpuActivity>,
    /// The last interval, cut short by the end of the recording: shorter than the
    /// others (never empty: it ends where the recording stopped).
    pub partial: bool,
}

/// Analyzers running over growing per-CPU page streams, reporting per interval.
pub struct Live {
    trace: Trace,
    merger: Merger,
    /// Event id -> the passes that take it.
    route: Vec<Vec<u16>>,
    iv: Intervals,
}

/// The passes and what they are filling: kept apart from the merge, whose events borrow it.
struct Intervals {
    passes: Vec<Box<dyn AnyPass>>,
    interval: u64,
    /// Start of the interval being filled.
    start: u64,
    cpus: BTreeMap<u32, CpuActivity>,
    /// Intervals ended, not yet returned.
    closed: Vec<Interval>,
}

/// Bytes a record takes in the ring buffer besides its payload (the 4-byte header).
const RECORD_HEADER: u64 = 4;

impl Live {
    /// Runs `analyzers` (each with its configuration) over `sources`, one growing page
    /// stream per CPU of a recording whose metadata (event formats, page layout, clock)
    /// `trace` holds, in intervals of `interval` ns from `start`. Analyzers whose events
    /// `trace` lacks are refused with the reason.
    pub fn new(
        mut trace: Trace,
        sources: Vec<(u32, Box<dyn PageSource>)>,
        analyzers: &[Query],
        start: u64,
        interval: u64,
    ) -> Result<Live, Error> {
        // The CPUs come from the streams: a capture's files may still be empty.
        let cpus = sources.iter().map(|(c, _)| c + 1).max().unwrap_or(0);
        trace.cpu_count = trace.cpu_count.max(cpus);
        let mut passes = Vec::new();
        let mut route: Vec<Vec<u16>> = vec![Vec::new(); trace.events.id_limit()];
        for (i, query) in analyzers.iter().enumerate() {
            let (pass, ids) = Live::pass(&trace, query)?;
            for id in ids {
                if let Some(r) = route.get_mut(id as usize) {
                    r.push(i as u16);
                }
            }
            passes.push(pass);
        }
        let cpus = sources.iter().map(|(cpu, _)| (*cpu, idle(*cpu))).collect();
        // Every event, not only the analyzers': the per-CPU rates count them all.
        let merger = Merger::live(&trace, sources, IdFilter::all());
        Ok(Live {
            trace,
            merger,
            route,
            iv: Intervals {
                passes,
                interval: interval.max(1),
                start,
                cpus,
                closed: Vec::new(),
            },
        })
    }

    /// `query`'s pass over a recording being made (`trace`: its metadata), and the event
    /// ids it reads; an error where the analyzer reads no events or `trace` lacks them.
    fn pass(trace: &Trace, query: &Query) -> Result<(Box<dyn AnyPass>, Vec<u32>), Error> {
        query.check()?;
        let Some(live) = query.analyzer.live else {
            return Err(Error::Query(format!(
                "analyzer {} reads no events and cannot run live",
                query.analyzer.name
            )));
        };
        Ok(live(trace, &query.config(&FxMap::default()))?)
    }

    /// Whether `query` can run live on a recording whose metadata `trace` holds (its
    /// analyzer reads events, and `trace` has them).
    pub fn applies(trace: &Trace, query: &Query) -> bool {
        Live::pass(trace, query).is_ok()
    }

    /// The recording's metadata.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Where the analysis stands: the start of the interval being filled (ns); nothing
    /// before it is read again.
    pub fn position(&self) -> u64 {
        self.iv.start
    }

    /// Every CPU has delivered its events up to `horizon` (raw trace clock): analyses
    /// them, and returns the intervals that ended by then.
    pub fn advance(&mut self, horizon: u64) -> Result<Vec<Interval>, Error> {
        self.advance_until(horizon, None)
    }

    /// [`Live::advance`], stopping early at `deadline` (the rest is analysed by the next
    /// call), so that a caller that falls behind still gets to do other things.
    pub fn advance_until(
        &mut self,
        horizon: u64,
        deadline: Option<std::time::Instant>,
    ) -> Result<Vec<Interval>, Error> {
        self.merger.set_horizon(horizon);
        if let Err(e) = self.merger.refill() {
            self.iv.damaged(e);
        }
        let mut n = 0u32;
        let mut last = None;
        let mut caught_up = true;
        while let Some(ts) = self.next_event()? {
            last = Some(ts);
            n = n.wrapping_add(1);
            if n.is_multiple_of(4096) && deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                caught_up = false;
                break;
            }
        }
        // Not caught up: complete only up to the last event analysed.
        let now = match (caught_up, last) {
            (true, _) => self.trace.clock_map.to_ns(horizon),
            (false, Some(ts)) => ts,
            (false, None) => 0,
        };
        while self.iv.end() <= now {
            self.iv.close();
        }
        Ok(std::mem::take(&mut self.iv.closed))
    }

    /// The recording has ended (at `stop`, ns on the trace clock; 0 where unknown) and
    /// every page is in: analyses the rest and returns the intervals left, the last one
    /// cut short where the recording stopped (or its events end, if later), marked
    /// [`Interval::partial`] and never of zero length, so that rates divide by the time
    /// it really covers.
    pub fn finish(mut self, stop: u64) -> Result<Vec<Interval>, Error> {
        if let Err(e) = self.merger.end_live() {
            self.iv.damaged(e);
        }
        let mut last = None;
        while let Some(ts) = self.next_event()? {
            last = Some(ts);
        }
        let iv = &mut self.iv;
        let end = last
            .map_or(0, |ts| ts.saturating_add(1))
            .max(stop)
            .max(iv.start.saturating_add(1));
        let span = (iv.start, end);
        let cpus = iv.take_cpus();
        let mut done = std::mem::take(&mut iv.closed);
        let outcomes = std::mem::take(&mut iv.passes)
            .into_iter()
            .map(|p| {
                p.finish(&self.trace).map(|mut o| {
                    o.span = Some(span);
                    o
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        done.push(Interval {
            start: span.0,
            end: span.1,
            outcomes,
            cpus,
            partial: true,
        });
        Ok(done)
    }

    /// Hands the next event up to the horizon to the analyzers that take it, after
    /// closing the intervals it lies past; its time, or None when none is ready.
    fn next_event(&mut self) -> Result<Option<u64>, Error> {
        let iv = &mut self.iv;
        loop {
            let ev = match self.merger.next() {
                Ok(Some(ev)) => ev,
                Ok(None) => return Ok(None),
                Err(e) => {
                    iv.damaged(e);
                    continue;
                }
            };
            // Events from before the first interval (in the buffer as tracing began)
            // count in it.
            while ev.ts >= iv.end() {
                iv.close();
            }
            let c = iv.cpus.entry(ev.cpu).or_insert_with(|| idle(ev.cpu));
            c.events += 1;
            c.bytes += ev.payload.len() as u64 + RECORD_HEADER;
            if ev.lost_before.is_some() {
                c.lost = match (c.lost, ev.lost_before) {
                    (Some(n), Lost::Count(k)) => Some(n + k),
                    _ => None,
                };
            }
            let ts = ev.ts;
            let mut damaged = Vec::new();
            if let Some(r) = self.route.get(ev.id as usize) {
                for &i in r {
                    if let Some(msg) = iv.passes[i as usize].event(&ev)? {
                        damaged.push((i, msg));
                    }
                }
            }
            for (i, msg) in damaged {
                let e = self.merger.record_error(&msg);
                iv.passes[i as usize].damaged_record(e);
            }
            return Ok(Some(ts));
        }
    }
}

fn idle(cpu: u32) -> CpuActivity {
    CpuActivity {
        cpu,
        lost: Some(0),
        ..CpuActivity::default()
    }
}

impl Intervals {
    fn end(&self) -> u64 {
        self.start.saturating_add(self.interval)
    }

    fn damaged(&mut self, e: kstate_format::Error) {
        for p in &mut self.passes {
            p.damaged(e.clone());
        }
    }

    fn take_cpus(&mut self) -> Vec<CpuActivity> {
        self.cpus
            .values_mut()
            .map(|c| std::mem::replace(c, idle(c.cpu)))
            .collect()
    }

    /// Ends the interval being filled.
    fn close(&mut self) {
        let span = (self.start, self.end());
        let outcomes = self.passes.iter_mut().map(|p| p.interval(span)).collect();
        let cpus = self.take_cpus();
        self.closed.push(Interval {
            start: span.0,
            end: span.1,
            outcomes,
            cpus,
            partial: false,
        });
        self.start = span.1;
    }
}
