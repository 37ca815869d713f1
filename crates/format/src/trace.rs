//! An opened trace, whatever its container: the metadata every reader yields plus one
//! page source per CPU. Readers of the containers (`tracedat`, `rawdir`, `perf`) fill
//! this in; `open` picks the reader; `pages` reads the pages; everything downstream sees
//! only `Trace`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::event_format::EventFormat;
use crate::events::CpuEvents;
use crate::layout::PageLayout;
use crate::pages::{PackedPages, PageSource, PlainPages};
use crate::spool::Spool;
use crate::timeshift::TimeShift;

/// The most CPUs a trace may name. Per-CPU tables are sized by CPU number, so a damaged
/// number must not size one: Linux builds for at most 8192 (`CONFIG_NR_CPUS`), and this
/// bound leaves room for growth while keeping such a table a few MB at worst.
pub const MAX_CPUS: u32 = 1 << 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Container {
    /// trace-cmd's file; `compression` is the algorithm name in v7 files ("zstd", "zlib").
    TraceDat {
        version: u32,
        compression: Option<String>,
    },
    /// A directory with header_page, event format files and per-CPU raw pages.
    RawDir,
    /// perf's `perf.data` with tracepoint samples (see `perf`).
    PerfData,
    /// kstate's own Parquet tables (`kstate convert --to parquet`, read by `kstate-export`).
    Parquet,
}

/// Maps the ring buffer's raw timestamps to nanoseconds the way trace-cmd does:
/// `ns = ((raw - tsc_offset) * mult) >> shift) + offset` (mult 0 means no scaling).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockMap {
    pub mult: u32,
    pub shift: u32,
    pub tsc_offset: u64,
    pub offset: i64,
}

impl ClockMap {
    #[inline]
    pub fn to_ns(&self, raw: u64) -> u64 {
        let scaled = if self.mult != 0 {
            (((raw.wrapping_sub(self.tsc_offset)) as u128 * self.mult as u128) >> self.shift) as u64
        } else {
            raw
        };
        scaled.wrapping_add(self.offset as u64)
    }
    pub fn is_identity(&self) -> bool {
        self.mult == 0 && self.offset == 0
    }
}

/// Where one CPU's pages live.
#[derive(Debug, Clone)]
pub enum DataLoc {
    /// Uncompressed pages in `path` from `offset`, `size` bytes.
    Plain {
        path: PathBuf,
        offset: u64,
        size: u64,
    },
    /// Pages a container packs its own way (trace.dat v7's compressed chunks), opened by
    /// the reader that found them.
    Compressed(std::sync::Arc<dyn PackedPages>),
    /// Pages built on demand from a container that holds events rather than pages.
    Built(std::sync::Arc<dyn BuildPages>),
}

/// A container that holds events, not ring-buffer pages (kstate's Parquet directory): it
/// builds pages when a reader asks, and only for the events the reader wants, so a
/// reader that needs two event types does not pay for decoding all of them.
pub trait BuildPages: Send + Sync + std::fmt::Debug {
    /// The pages of `cpu` holding at least the events whose ids are set in `wanted`
    /// (all events when None); other events may be present too.
    fn pages(&self, cpu: u32, wanted: Option<&[bool]>) -> Result<Box<dyn PageSource>>;
    /// The time of the trace's first event, known without building any pages.
    fn first_ts(&self) -> Option<u64>;
    /// `cpu`'s events straight from the container, without pages, where it can give them
    /// (only the events set in `wanted`, all when None), from mark `from` on (0: from the
    /// first; see [`BuildPages::marks`]).
    fn events(
        &self,
        _cpu: u32,
        _wanted: Option<&[bool]>,
        _from: usize,
    ) -> Option<Result<Box<dyn CpuEvents>>> {
        None
    }
    /// Raw times of the places `events` can start `cpu`'s events from, the first event
    /// first, non-decreasing, and no event before a mark later than it (so a time slice
    /// starts at the last mark before its start, as at a trace.dat's page).
    fn marks(&self, _cpu: u32) -> Option<Vec<u64>> {
        None
    }
}

#[derive(Debug, Clone)]
pub struct CpuData {
    pub cpu: u32,
    /// Bytes this CPU's data occupies in the file (compressed size where compressed).
    pub file_bytes: u64,
    pub loc: DataLoc,
}

/// Table of event formats indexed by event id.
#[derive(Debug, Clone, Default)]
pub struct EventTable {
    by_id: Vec<Option<EventFormat>>,
}

impl EventTable {
    pub fn insert(&mut self, ev: EventFormat) {
        let id = ev.id as usize;
        if id >= self.by_id.len() {
            self.by_id.resize(id + 1, None);
        }
        self.by_id[id] = Some(ev);
    }
    #[inline]
    pub fn get(&self, id: u32) -> Option<&EventFormat> {
        self.by_id.get(id as usize).and_then(|e| e.as_ref())
    }
    pub fn iter(&self) -> impl Iterator<Item = &EventFormat> {
        self.by_id.iter().flatten()
    }
    /// Finds an event by `name` or `system:name`.
    pub fn find(&self, spec: &str) -> Option<&EventFormat> {
        match spec.split_once(':') {
            Some((sys, name)) => self.iter().find(|e| e.system == sys && e.name == name),
            None => self.iter().find(|e| e.name == spec),
        }
    }
    /// One past the largest id, for tables indexed by id.
    pub fn id_limit(&self) -> usize {
        self.by_id.len()
    }
}

#[derive(Debug, Clone)]
pub struct Trace {
    pub path: PathBuf,
    pub container: Container,
    pub endian: Endian,
    /// Size of the traced machine's `long` in bytes.
    pub long_size: usize,
    pub layout: PageLayout,
    pub events: EventTable,
    /// The metadata as the file holds it, for writing it out again (`writer`): the
    /// `header_page` text, and every event format file with its system.
    pub header_page: Option<Vec<u8>>,
    pub format_texts: Vec<(String, Vec<u8>)>,
    /// pid -> comm from the saved cmdlines.
    pub comms: HashMap<i32, String>,
    pub clock: Option<String>,
    pub clock_map: ClockMap,
    /// A guest's clock mapped to its host's (trace-cmd's TIME_SHIFT option): applied per
    /// CPU to raw timestamps before `clock_map`.
    pub time_shift: Option<Arc<TimeShift>>,
    pub uname: Option<String>,
    /// The recording tool's version string, where the file carries one.
    pub tool_version: Option<String>,
    pub kallsyms: Option<Vec<u8>>,
    pub printk_formats: Option<Vec<u8>>,
    /// CPU count the file declares (may exceed `cpu_data.len()` when some CPUs recorded nothing).
    pub cpu_count: u32,
    pub cpu_data: Vec<CpuData>,
    /// Options (trace.dat option id, payload) this reader does not interpret; kstate's own
    /// extra sections are found here.
    pub extra_options: Vec<(u16, Vec<u8>)>,
    /// Why trace-cmd 3.1 cannot open this file although kstate reads it, where the layout
    /// shows it (see `writer`: event formats past 2 GiB).
    pub trace_cmd_unreadable: Option<String>,
    /// Set when the container ended early; holds the error that stopped reading.
    pub truncated: Option<Error>,
    /// Set when the recording itself ended early and says so (kstate's RECORDING section:
    /// the disk filled): the file is whole, but lacks what came after.
    pub cut_short: Option<Error>,
    /// Metadata lost to damage: sections the events do not need (kallsyms, printk
    /// formats, saved cmdlines), and event formats that do not parse (their events are
    /// left out). The trace is read without them, and this says which and where.
    pub lost_sections: Vec<Error>,
    /// The unnamed copy the trace is read from when it was compressed or came through a
    /// pipe (see `spool`); None for a file read in place.
    pub spool: Option<Arc<Spool>>,
    /// A perf.data's header and records, for what reads its samples (`kstate profile`).
    pub perf: Option<std::sync::Arc<crate::perf::file::PerfFile>>,
}

impl Trace {
    /// The bound every per-CPU table may rely on: one past the largest CPU number the
    /// trace holds data for or declares.
    pub fn cpu_limit(&self) -> u32 {
        let data = self.cpu_data.iter().map(|c| c.cpu + 1).max().unwrap_or(0);
        self.cpu_count.max(data)
    }

    /// The payload of the first option `id` this reader kept uninterpreted, e.g. one of
    /// kstate's sections (`sections::ids`).
    pub fn extra(&self, id: u16) -> Option<&[u8]> {
        self.extra_options
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, p)| p.as_slice())
    }

    /// What makes the trace incomplete: where the container ended early, a recording cut
    /// short, and the metadata lost to damage. Every front end reports these beside what
    /// it read.
    pub fn damage(&self) -> impl Iterator<Item = &Error> {
        self.truncated
            .iter()
            .chain(&self.cut_short)
            .chain(&self.lost_sections)
    }

    /// The file the readers open: the unnamed copy when there is one, else `path`.
    fn data_path(&self) -> &std::path::Path {
        self.spool.as_ref().map_or(&self.path, |s| &s.path)
    }

    /// The name a data file goes by in messages: the user's name for the unnamed copy.
    fn shown(&self, data: &std::path::Path) -> std::path::PathBuf {
        if data == self.data_path() {
            self.path.clone()
        } else {
            data.to_path_buf()
        }
    }

    /// A reader of the pages of `cpu_data[index]`.
    pub fn pages(&self, index: usize) -> Result<Box<dyn PageSource>> {
        self.pages_for(index, None)
    }

    /// Like [`Trace::pages`], for a reader that needs only the events whose ids are set
    /// in `wanted`: containers that build pages build only those (others may be present).
    pub fn pages_for(&self, index: usize, wanted: Option<&[bool]>) -> Result<Box<dyn PageSource>> {
        let cd = &self.cpu_data[index];
        match &cd.loc {
            DataLoc::Plain { path, offset, size } => Ok(Box::new(
                PlainPages::open(path, *offset, *size, self.layout.page_size)
                    .map_err(|e| e.renamed(path, &self.shown(path)))?
                    .named(self.shown(path)),
            )),
            DataLoc::Compressed(c) => c
                .open(self.data_path(), &self.path, self.layout.page_size)
                .map_err(|e| e.renamed(self.data_path(), &self.path)),
            DataLoc::Built(b) => b.pages(cd.cpu, wanted),
        }
    }

    /// The events of `cpu_data[index]` straight from its container, for a reader that
    /// needs events rather than pages, from mark `from` on ([`Trace::marks`]; 0: from the
    /// first); None where the container holds pages (read them with
    /// [`Trace::pages_for`]) or has no such mark.
    pub fn events_for(
        &self,
        index: usize,
        wanted: Option<&[bool]>,
        from: usize,
    ) -> Option<Result<Box<dyn CpuEvents>>> {
        let cd = &self.cpu_data[index];
        match &cd.loc {
            DataLoc::Built(b) => b.events(cd.cpu, wanted, from),
            _ => None,
        }
    }

    /// Raw times of the places [`Trace::events_for`] can start `cpu_data[index]`'s events
    /// from (see [`BuildPages::marks`]); None where the container holds pages.
    pub fn marks(&self, index: usize) -> Option<Vec<u64>> {
        let cd = &self.cpu_data[index];
        match &cd.loc {
            DataLoc::Built(b) => b.marks(cd.cpu),
            _ => None,
        }
    }

    /// The time of the first event where the container knows it without reading pages
    /// (kstate's Parquet directory), so finding it costs no pass over every event.
    pub fn known_first_ts(&self) -> Option<u64> {
        self.cpu_data.iter().find_map(|c| match &c.loc {
            DataLoc::Built(b) => b.first_ts(),
            _ => None,
        })
    }
}
