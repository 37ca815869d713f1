//! One thread per CPU moving ring-buffer pages from the kernel into a scratch file.
//!
//! Pages go kernel -> pipe -> file with `splice`: full pages are handed over without
//! being copied, into a file that bypasses the page cache (`scratch_file`), and no event
//! is looked at while recording. The thread sleeps in `poll` until the kernel reports the
//! buffer filled to the instance's `buffer_percent` watermark (or the recording stops),
//! then drains every full page.
//! When the recording stops it drains the rest, and finally reads the last, partly
//! filled pages with `read` (splice only moves whole pages).
//!
//! A CPU whose buffer has been quiet for a moment has its partly filled page read too, so
//! that what was traced reaches the disk within a second even when no page fills: a
//! recorder killed with SIGKILL then loses only the last moment (`kstate recover` reads
//! the rest). Each such read adds a whole page to the file, so a CPU where the reads keep
//! finding little waits twice as long before the next one, up to [`FLUSH_MAX`], and a
//! read while tracing goes on stops at the first partly filled page (see [`Until`]).
//!
//! Kernels or files where splice is refused fall back to page-sized `read`/`write`.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::scratch_file::ScratchFile;

/// Shared between the recorder and its reader threads.
pub struct Control {
    stopping: AtomicBool,
    /// eventfd that wakes every reader's poll at once.
    wake: OwnedFd,
    /// The first reader failure (a full disk, an I/O error); the recorder stops on it.
    failure: Mutex<Option<Error>>,
}

impl Control {
    pub fn new() -> Result<Arc<Control>> {
        Ok(Arc::new(Control {
            stopping: AtomicBool::new(false),
            wake: eventfd()?,
            failure: Mutex::new(None),
        }))
    }

    /// Tells every reader to drain what is left and finish.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        signal(&self.wake);
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Takes the first failure a reader reported, if any.
    pub fn failure(&self) -> Option<Error> {
        self.failure.lock().map(|mut f| f.take()).unwrap_or(None)
    }

    pub fn has_failed(&self) -> bool {
        self.failure.lock().map(|f| f.is_some()).unwrap_or(true)
    }

    /// Sleeps until a stop, one of `fds` becomes readable, a signal arrives, or `timeout`
    /// passes. The recorder's threads sleep only here: each wake-up of theirs shows in
    /// the sched events of a system-wide recording.
    pub(crate) fn wait(&self, fds: &[RawFd], timeout: Duration) {
        let mut polled: Vec<libc::pollfd> = fds
            .iter()
            .copied()
            .chain([self.wake.as_raw_fd()])
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: polled is a valid array of pollfd for the duration of the call.
        unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
    }

    pub(crate) fn fail(&self, e: Error) {
        if let Ok(mut f) = self.failure.lock() {
            if f.is_none() {
                *f = Some(e);
            }
        }
        self.stop();
    }
}

/// What a reader thread moved.
#[derive(Debug, Clone)]
pub struct CpuOutcome {
    pub cpu: u32,
    pub scratch: PathBuf,
    /// Bytes written to the scratch file (may end mid-page after a write failure).
    pub bytes: u64,
    /// Whether pages went through splice (false: the read/write fallback).
    pub spliced: bool,
}

pub struct CpuReader {
    handle: JoinHandle<CpuOutcome>,
    tap: Arc<Tap>,
    /// Where its pages go (a memory file's `/proc/self/fd/N`).
    path: PathBuf,
}

/// Where a reader puts the pages it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// A scratch file on disk (`scratch_file`), for the trace.dat at the end.
    Disk,
    /// A file in memory, read back and given back by a watcher (see
    /// [`ScratchFile::in_memory`]).
    Memory,
    /// A file in memory whose pages are given back as soon as they are written: pages
    /// nobody reads (a watch's completions beside a pid filter, when no trace.dat is
    /// written).
    Discard,
}

/// What a watcher of the recording (`kstate watch`) sees of one reader: how far its
/// scratch file is written, and a way to have it move everything traced so far, partly
/// filled pages too (see [`Tap::flush`]).
pub struct Tap {
    /// Bytes of whole pages in the scratch file.
    written: Arc<AtomicU64>,
    /// Wakes the reader for a flush.
    wake: OwnedFd,
    requested: AtomicU64,
    flushed: AtomicU64,
}

impl Tap {
    fn new() -> Result<Tap> {
        Ok(Tap {
            written: Arc::new(AtomicU64::new(0)),
            wake: eventfd()?,
            requested: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
        })
    }

    /// Bytes of whole pages in the scratch file so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// The count [`Tap::written`] reads, for a reader of the growing file.
    pub fn written_handle(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.written)
    }

    /// Asks the reader to move every event traced so far (request number `n`, growing).
    pub fn flush(&self, n: u64) {
        self.requested.store(n, Ordering::SeqCst);
        signal(&self.wake);
    }

    /// Whether the reader has moved everything traced before flush request `n` was made.
    pub fn flushed(&self, n: u64) -> bool {
        self.flushed.load(Ordering::Acquire) >= n
    }
}

fn eventfd() -> Result<OwnedFd> {
    // SAFETY: eventfd has no memory-safety preconditions; the fd is checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(Error::os("eventfd", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid u64 to an eventfd.
    unsafe {
        libc::write(
            fd.as_raw_fd(),
            (&one as *const u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
}

/// Whether an eventfd was signalled since the last call (and resets it).
fn take_signal(fd: &OwnedFd) -> bool {
    let mut n: u64 = 0;
    // SAFETY: reads 8 bytes into a valid u64 from a non-blocking eventfd.
    let r = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut n as *mut u64).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    r == std::mem::size_of::<u64>() as isize && n > 0
}

impl CpuReader {
    /// Opens `trace_pipe_raw` and the scratch file now (so errors surface before tracing
    /// starts) and starts the thread.
    pub fn start(
        cpu: u32,
        pipe_raw: &Path,
        scratch: &Path,
        page_size: usize,
        store: Store,
        ctl: Arc<Control>,
    ) -> Result<CpuReader> {
        let src = open_nonblock(pipe_raw)?;
        let dst = match store {
            Store::Disk => ScratchFile::create(scratch, page_size)?,
            Store::Memory | Store::Discard => {
                ScratchFile::in_memory(&format!("cpu{cpu}"), page_size)?
            }
        };
        let scratch = dst.path().to_path_buf();
        let path = scratch.clone();
        let tap = Arc::new(Tap::new()?);
        let reader_tap = Arc::clone(&tap);
        let handle = std::thread::Builder::new()
            .name(format!("kstate-cpu{cpu}"))
            .spawn(move || {
                let mut r = Mover {
                    cpu,
                    src,
                    dst,
                    page_size,
                    pipe: None,
                    splice_ok: true,
                    tap: reader_tap,
                    carried: 0,
                    discard: store == Store::Discard,
                };
                if let Err(e) = r.run(&ctl) {
                    ctl.fail(e);
                }
                CpuOutcome {
                    cpu,
                    scratch,
                    bytes: r.dst.written(),
                    spliced: r.splice_ok,
                }
            })
            .map_err(|e| Error::new(format!("starting the CPU {cpu} reader thread: {e}")))?;
        Ok(CpuReader { handle, tap, path })
    }

    /// Where the reader writes its pages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reader's progress, for a watcher.
    pub fn tap(&self) -> Arc<Tap> {
        Arc::clone(&self.tap)
    }

    pub fn join(self) -> Result<CpuOutcome> {
        self.handle
            .join()
            .map_err(|_| Error::new("a reader thread panicked"))
    }
}

fn open_nonblock(path: &Path) -> Result<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| Error::io("opening", path, e))
}

struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    size: usize,
}

struct Mover {
    cpu: u32,
    src: OwnedFd,
    dst: ScratchFile,
    page_size: usize,
    pipe: Option<Pipe>,
    splice_ok: bool,
    tap: Arc<Tap>,
    /// Event bytes already read from the page the kernel is writing (by reads of it
    /// while partly filled); 0 once a page has been handed over whole.
    carried: usize,
    /// Pages are given back as soon as they are written ([`Store::Discard`]).
    discard: bool,
}

/// The pipe between kernel and file: 1 MiB when the system allows it, so one splice moves
/// up to 256 pages.
const PIPE_SIZE: usize = 1 << 20;

/// Pages at least this large are moved one at a time. Splice hands out each page by
/// swapping a fresh page into the ring buffer, and the kernel zeroes every fresh page —
/// half the recorder's CPU — unless it can reuse the one page it keeps from the last
/// page given back. Moving one page through to the file before taking the next lets it
/// reuse that page every time. Smaller pages are batched to a pipe-full, as a write per
/// small page would cost more than the zeroing saved.
const ONE_PAGE_AT_A_TIME: usize = 256 << 10;

/// How long a CPU's buffer stays quiet (no full page) before its partly filled page is
/// read; doubled after each read that found less than an eighth of a page.
const FLUSH_FIRST: Duration = Duration::from_millis(200);
/// The longest wait between reads of a partly filled page.
pub const FLUSH_MAX: Duration = Duration::from_secs(16);

impl Mover {
    fn run(&mut self, ctl: &Control) -> Result<()> {
        self.pipe = make_pipe();
        if self.pipe.is_none() {
            self.splice_ok = false;
        }
        let mut quiet_since = Instant::now();
        let mut flush_after = FLUSH_FIRST;
        loop {
            // A watcher's flush: everything traced before the request, partly filled
            // pages too, reaches the file before the request is reported done.
            let flush =
                take_signal(&self.tap.wake).then(|| self.tap.requested.load(Ordering::SeqCst));
            let before = self.dst.written();
            self.drain_full_pages()?;
            if let Some(n) = flush {
                self.read_pages(Until::Partial)?;
                quiet_since = Instant::now();
                self.tap
                    .written
                    .store(self.dst.written(), Ordering::Release);
                self.tap.flushed.store(n, Ordering::Release);
            }
            if self.dst.written() > before {
                quiet_since = Instant::now();
                flush_after = FLUSH_FIRST;
            } else if quiet_since.elapsed() >= flush_after {
                let data = self.read_pages(Until::Partial)?;
                quiet_since = Instant::now();
                if data < self.page_size / 8 {
                    flush_after = (flush_after * 2).min(FLUSH_MAX);
                }
            }
            if self.discard {
                self.dst.discard_written();
            }
            self.tap
                .written
                .store(self.dst.written(), Ordering::Release);
            if ctl.stopping() {
                break;
            }
            // Until the kernel signals data past the watermark, the recording stops, a
            // watcher asks for a flush or the next read of a partly filled page is due.
            let due = flush_after.saturating_sub(quiet_since.elapsed());
            ctl.wait(
                &[self.src.as_raw_fd(), self.tap.wake.as_raw_fd()],
                due.clamp(Duration::from_millis(10), Duration::from_millis(500)),
            );
        }
        // Tracing is off: take the full pages left, then the partly filled last ones.
        self.drain_full_pages()?;
        self.read_pages(Until::Empty)?;
        self.tap
            .written
            .store(self.dst.written(), Ordering::Release);
        self.tap.flushed.store(u64::MAX, Ordering::Release);
        Ok(())
    }

    fn drain_full_pages(&mut self) -> Result<()> {
        if self.splice_ok {
            match self.splice_pages() {
                Ok(Spliced::All) => return Ok(()),
                // Splice takes a fresh (large) page for every page it hands out; when
                // memory is too fragmented for one, `read` still works: it copies through
                // one page the kernel keeps per reader.
                Ok(Spliced::ShortOfMemory) => {}
                // First splice refused (no splice support here): fall back for good.
                Err(e) if e.os_errno() == Some(libc::EINVAL) && self.dst.written() == 0 => {
                    self.splice_ok = false;
                }
                Err(e) => return Err(e),
            }
        }
        self.read_pages(Until::Partial).map(drop)
    }

    fn splice_pages(&mut self) -> Result<Spliced> {
        let pipe = self.pipe.as_ref().expect("splice needs the pipe");
        let chunk = if self.page_size >= ONE_PAGE_AT_A_TIME {
            self.page_size
        } else {
            (pipe.size - pipe.size % self.page_size).max(self.page_size)
        };
        let (pipe_r, pipe_w) = (pipe.r.as_raw_fd(), pipe.w.as_raw_fd());
        loop {
            // SAFETY: valid fds; null offsets mean "current position".
            let n = unsafe {
                libc::splice(
                    self.src.as_raw_fd(),
                    std::ptr::null_mut(),
                    pipe_w,
                    std::ptr::null_mut(),
                    chunk,
                    libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
                )
            };
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM) {
                return Ok(Spliced::ShortOfMemory);
            }
            let n = match from_kernel(n, || format!("splicing CPU {} pages", self.cpu))? {
                Got::Bytes(n) => n,
                Got::Nothing => return Ok(Spliced::All),
                Got::Interrupted => continue,
            };
            self.dst
                .splice_from(pipe_r, n)
                .map_err(|e| e.context(format_args!("CPU {}", self.cpu)))?;
            self.carried = 0;
        }
    }

    /// Page-sized reads until the buffer is empty, or (`Until::Partial`) until a page
    /// comes back partly filled. `read` also hands out partly filled pages (splice does
    /// not), so the fallback writes smaller pages while tracing.
    /// Returns the bytes of event data the pages held.
    fn read_pages(&mut self, until: Until) -> Result<usize> {
        let mut data = 0;
        loop {
            let page = self.dst.page_buf();
            // SAFETY: page is a valid writable buffer of page_size bytes.
            let n = unsafe {
                libc::read(
                    self.src.as_raw_fd(),
                    page.as_mut_ptr().cast(),
                    self.page_size,
                )
            };
            let n = match from_kernel(n, || format!("reading CPU {} pages", self.cpu))? {
                Got::Bytes(n) => n,
                Got::Nothing => return Ok(data),
                Got::Interrupted => continue,
            };
            // The kernel returns whole pages; anything else would break the page stream.
            if n != self.page_size {
                self.dst.page_buf()[n..].fill(0);
            }
            let in_page = page_data_bytes(self.dst.page_buf());
            data += in_page;
            self.dst
                .write_page()
                .map_err(|e| e.context(format_args!("CPU {}", self.cpu)))?;
            if until == Until::Empty {
                continue;
            }
            // A page read in part before and filled since comes back with only its
            // rest: the page the kernel writes now follows it.
            if in_page + self.carried >= self.page_size / 2 {
                self.carried = 0;
                continue;
            }
            self.carried += in_page;
            return Ok(data);
        }
    }
}

/// How far [`Mover::read_pages`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Until {
    /// Until the kernel has nothing more: only once tracing is off, as while it is on
    /// there may always be more.
    Empty,
    /// Until a page comes back less than half filled (counting what earlier reads took
    /// of it): the page the kernel was writing, which holds everything traced up to the
    /// read. Reading on would only chase events traced since, and while tracing goes on
    /// there always are some (the recorder's own writes switch tasks on its CPU): each
    /// read would add a whole page to the file for a handful of events, hundreds of MiB
    /// a second with 512 KiB pages. A full page is more than half filled unless one
    /// event takes more than half a page, and stopping early on such a page only leaves
    /// the rest for the next read. Once the page being written is more than half read,
    /// one more read follows: at most one extra page per half page of events.
    Partial,
}

/// The bytes of events in a ring-buffer page: its header's `commit` (after the u64
/// timestamp, a `long`, whose top bits flag missed events).
fn page_data_bytes(page: &[u8]) -> usize {
    const FLAGS: u64 = 3 << 30;
    let commit = match std::mem::size_of::<libc::c_long>() {
        8 => page
            .get(8..16)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default())),
        _ => page
            .get(8..12)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()) as u64),
    };
    (commit.unwrap_or(0) & !FLAGS).min(page.len() as u64) as usize
}

/// How far a round of splicing got.
enum Spliced {
    /// Every full page there was.
    All,
    /// The kernel had no memory for the pages it hands out; the rest must be read.
    ShortOfMemory,
}

/// What a `read` or `splice` from `trace_pipe_raw` returned.
enum Got {
    Bytes(usize),
    /// Nothing more for now (EAGAIN) or ever (end of file).
    Nothing,
    /// A signal interrupted the call: try again.
    Interrupted,
}

fn from_kernel(n: isize, what: impl Fn() -> String) -> Result<Got> {
    if n > 0 {
        return Ok(Got::Bytes(n as usize));
    }
    if n == 0 {
        return Ok(Got::Nothing);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Ok(Got::Nothing),
        Some(libc::EINTR) => Ok(Got::Interrupted),
        _ => Err(Error::os(format!("{} from the kernel", what()), e)),
    }
}

fn make_pipe() -> Option<Pipe> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: both descriptors are fresh and owned here.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on our own pipe; failure leaves the default size.
    let size = unsafe {
        libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE as libc::c_int);
        libc::fcntl(w.as_raw_fd(), libc::F_GETPIPE_SZ)
    };
    if size <= 0 {
        return None;
    }
    Some(Pipe {
        r,
        w,
        size: size as usize,
    })
}
