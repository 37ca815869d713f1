//! An opened trace, whatever its container: the metadata every reader yields plus one
//! page source per CPU. Readers of the containers (`tracedat`, `rawdir`) fill this in;
//! everything downstream sees only `Trace`.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::bytes::Endian;
use crate::error::{Error, ErrorKind, Result};
use crate::event_format::EventFormat;
use crate::layout::{whole_pages, PageLayout};
use crate::mapped::Window;
use crate::tracedat;

/// The most CPUs a trace may name. Per-CPU tables are sized by CPU number, so a damaged
/// number must not size one: Linux builds for at most 8192 (`CONFIG_NR_CPUS`), and this
/// bound leaves room for growth while keeping such a table a few MB at worst.
pub const MAX_CPUS: u32 = 1 << 16;

/// Event ids are the ring buffer's 16-bit `common_type`; tables indexed by id stay this small.
pub const MAX_EVENT_ID: u32 = u16::MAX as u32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Container {
    /// trace-cmd's file; `compression` is the algorithm name in v7 files ("zstd", "zlib").
    TraceDat {
        version: u32,
        compression: Option<String>,
    },
    /// A directory with header_page, event format files and per-CPU raw pages.
    RawDir,
    /// perf's `perf.data` with tracepoint samples (see `perfdata`).
    PerfData,
    /// kstate's own Parquet tables (`kstate convert --to parquet`, read by `kstate-export`).
    Parquet,
}

/// A scratch directory removed when the last [`Trace`] holding it is dropped (the pages
/// kstate builds for containers that have none, such as perf.data).
#[derive(Debug)]
pub struct ScratchDir {
    pub path: PathBuf,
}

impl ScratchDir {
    pub fn create() -> Result<ScratchDir> {
        let tmp = std::env::temp_dir();
        let prefix = format!("kstate-{}-", std::process::id());
        let path = crate::output::private_dir(&tmp, &prefix, "").map_err(|e| Error::io(&tmp, e))?;
        Ok(ScratchDir { path })
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
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
    /// trace.dat v7 compressed chunks.
    Compressed(tracedat::CompressedData),
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
    /// Set when the container ended early; holds the error that stopped reading.
    pub truncated: Option<Error>,
    /// Where pages built for this trace live (perf.data); removed with the last clone.
    pub scratch: Option<std::sync::Arc<ScratchDir>>,
}

impl Trace {
    /// Opens a trace.dat file, a perf.data file or a raw capture directory (kstate's
    /// Parquet directories are opened by `kstate_export::open`).
    pub fn open(path: &Path) -> Result<Trace> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            return crate::rawdir::open(path)?.checked();
        }
        let mut magic = [0u8; 8];
        let n = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut magic))
            .map_err(|e| Error::io(path, e))?;
        if n == 8 && &magic == crate::perfdata::MAGIC {
            return crate::perfdata::open(path)?.checked();
        }
        tracedat::open(path)?.checked()
    }

    /// The bound every per-CPU table may rely on: one past the largest CPU number the
    /// trace holds data for or declares.
    pub fn cpu_limit(&self) -> u32 {
        let data = self.cpu_data.iter().map(|c| c.cpu + 1).max().unwrap_or(0);
        self.cpu_count.max(data)
    }

    /// Refuses CPU numbers that would size per-CPU tables beyond [`MAX_CPUS`] (each reader
    /// checks where it reads them, naming the offset; this holds for every container).
    /// Readers outside this crate (kstate's Parquet tables) call it too.
    pub fn checked(self) -> Result<Trace> {
        let worst = self
            .cpu_data
            .iter()
            .map(|c| c.cpu)
            .chain([self.cpu_count.saturating_sub(1)])
            .max();
        match worst {
            Some(cpu) if cpu >= MAX_CPUS => Err(Error::new(
                ErrorKind::Corrupt,
                None,
                format!("CPU number {cpu} is implausible (Linux builds for at most 8192 CPUs)"),
            )
            .in_file(&self.path)),
            _ => Ok(self),
        }
    }

    /// The payload of the first option `id` this reader kept uninterpreted, e.g. one of
    /// kstate's sections (`extras::ids`).
    pub fn extra(&self, id: u16) -> Option<&[u8]> {
        self.extra_options
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, p)| p.as_slice())
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
            DataLoc::Plain { path, offset, size } => Ok(Box::new(PlainPages::open(
                path,
                *offset,
                *size,
                self.layout.page_size,
            )?)),
            DataLoc::Compressed(c) => Ok(Box::new(tracedat::CompressedPages::open(
                &self.path,
                c,
                self.layout.page_size,
            )?)),
            DataLoc::Built(b) => b.pages(cd.cpu, wanted),
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

/// A sequence of whole pages of one CPU. Shaped as advance-then-look so a consumer can
/// parse the current page in place, without copying it out of the reader's buffer.
pub trait PageSource: Send {
    /// Moves to the next page; false at the end of the data. A short final page is an
    /// error of kind `Truncated`.
    fn advance(&mut self) -> Result<bool>;
    /// The current page, exactly one page size long (empty before the first `advance`).
    fn page(&self) -> &[u8];
    /// File offset of the current page (for compressed data: of its chunk), for messages.
    fn page_offset(&self) -> u64;
    /// The file the pages come from.
    fn path(&self) -> &Path;
}

/// Reads uncompressed pages a window at a time: mapped where the file can be mapped (no
/// copy; see `mapped`), else with large positioned reads into a reused buffer. Memory
/// stays bounded by the window whatever the trace size.
pub struct PlainPages {
    file: File,
    path: PathBuf,
    /// The file's size when opened: windows never reach past it.
    file_len: u64,
    next_read: u64,
    end: u64,
    page_size: usize,
    /// The current window when mapped; `buf` holds it otherwise.
    window: Option<Window>,
    mapping_works: bool,
    buf: Vec<u8>,
    buf_len: usize,
    buf_pos: usize,
    /// End of the current page in the window (== buf_pos when there is none).
    cur_end: usize,
    buf_file_offset: u64,
    last_offset: u64,
    /// (where the file ended, where the header said the data ends) once a read came up short.
    short: Option<(u64, u64)>,
}

/// Bytes mapped at a time: large enough that mapping costs little per page.
const MAP_WINDOW: usize = 4 << 20;
/// Bytes read at a time where mapping fails: large enough to amortise the syscall, small
/// enough to stay in L2.
const READ_WINDOW: usize = 256 << 10;

impl PlainPages {
    pub fn open(path: &Path, offset: u64, size: u64, page_size: usize) -> Result<PlainPages> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(PlainPages {
            file,
            path: path.to_path_buf(),
            file_len,
            next_read: offset,
            end: offset.saturating_add(size),
            page_size,
            window: None,
            mapping_works: true,
            buf: Vec::new(),
            buf_len: 0,
            buf_pos: 0,
            cur_end: 0,
            buf_file_offset: offset,
            last_offset: offset,
            short: None,
        })
    }

    fn refill(&mut self) -> Result<()> {
        self.window = None;
        let left = self.end - self.next_read;
        let mut got = 0;
        let mut want = 0;
        if self.mapping_works {
            want = (left.min(whole_pages(self.page_size, MAP_WINDOW) as u64)) as usize;
            got = (self.file_len.saturating_sub(self.next_read)).min(want as u64) as usize;
            self.window = Window::map(&self.file, self.next_read, got);
            self.mapping_works = self.window.is_some() || got == 0;
        }
        if !self.mapping_works {
            want = (left.min(whole_pages(self.page_size, READ_WINDOW) as u64)) as usize;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            got = 0;
            while got < want {
                match self
                    .file
                    .read_at(&mut self.buf[got..want], self.next_read + got as u64)
                {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io(&self.path, e)),
                }
            }
        }
        self.buf_file_offset = self.next_read;
        self.next_read += got as u64;
        self.buf_len = got;
        self.buf_pos = 0;
        self.cur_end = 0;
        if got < want {
            // The file is shorter than its header says: stop after the whole pages we have.
            self.short = Some((self.next_read, self.end));
            self.end = self.next_read;
        }
        Ok(())
    }

    fn data(&self) -> &[u8] {
        match &self.window {
            Some(w) => w.bytes(),
            None => &self.buf[..self.buf_len],
        }
    }
}

impl PageSource for PlainPages {
    fn advance(&mut self) -> Result<bool> {
        self.buf_pos = self.cur_end;
        if self.buf_pos >= self.buf_len {
            if self.next_read >= self.end {
                return match self.short.take() {
                    None => Ok(false),
                    Some((at, want)) => Err(Error::new(
                        ErrorKind::Truncated,
                        Some(at),
                        format!(
                            "CPU data ends here, {} bytes before the end the file header gives",
                            want - at
                        ),
                    )
                    .in_file(&self.path)),
                };
            }
            self.refill()?;
        }
        let avail = self.buf_len - self.buf_pos;
        if avail == 0 {
            return Ok(false);
        }
        let at = self.buf_file_offset + self.buf_pos as u64;
        if avail < self.page_size {
            self.cur_end = self.buf_len;
            self.short = None;
            return Err(Error::new(
                ErrorKind::Truncated,
                Some(at),
                format!(
                    "last page is {avail} bytes, not a whole page of {}",
                    self.page_size
                ),
            )
            .in_file(&self.path));
        }
        self.last_offset = at;
        self.cur_end = self.buf_pos + self.page_size;
        Ok(true)
    }
    fn page(&self) -> &[u8] {
        &self.data()[self.buf_pos..self.cur_end]
    }
    fn page_offset(&self) -> u64 {
        self.last_offset
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
