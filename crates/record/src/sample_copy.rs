//! Moving a sampler's perf rings into its scratch file while recording: two threads, so
//! that the rings are drained on time whatever the disk does.
//!
//! The copier empties every ring into memory when the kernel wakes it (a ring filled to
//! its watermark) and hands the chunks to the writer, which appends them to the file. A
//! write can stall for a moment (the page cache full of other programs' dirty pages, the
//! filesystem's journal), and a copier that wrote itself lost what the kernel could not
//! put in a ring meanwhile: a lock storm's call chains, some 200 MB/s, lost 12-15 % of
//! them in 3 of 4 recordings to a disk the other programs on the machine kept busy, and
//! none to /dev/shm. The chunks waiting for the writer are bounded
//! ([`MAX_QUEUED_BYTES`]): past that the copier leaves the records to the kernel, which
//! counts what it drops.
//!
//! The copier also runs at the highest nice level ([`first_in_line`]): woken at the
//! watermark, it runs before the traced threads that fill its rings, even when they keep
//! every CPU busy.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::reader::Control;
use crate::sampler::Ring;

/// The most bytes of records the copier holds for the writer: at a lock storm's
/// 200 MB/s, a writer stalled for a second and more.
const MAX_QUEUED_BYTES: u64 = 256 << 20;

/// How long the copier waits for the writer to catch up once it holds
/// [`MAX_QUEUED_BYTES`], before it looks at the rings again.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(5);

/// The copier and writer threads, and the fds to enable and disable.
pub struct Running {
    copier: JoinHandle<()>,
    writer: JoinHandle<Result<PathBuf>>,
    fds: Vec<i32>,
}

const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;

impl Running {
    fn ioctl_all(&self, req: libc::c_ulong) {
        for &fd in &self.fds {
            // SAFETY: the fds stay open while the copier (which owns them) runs; it only
            // ends after the recorder's stop, which comes after the disable.
            unsafe { libc::ioctl(fd, req, 0) };
        }
    }
    pub fn enable(&self) {
        self.ioctl_all(IOC_ENABLE);
    }
    pub fn disable(&self) {
        self.ioctl_all(IOC_DISABLE);
    }
    /// Waits for both threads (after [`Control::stop`]); the scratch file is complete.
    pub fn finish(self) -> Result<PathBuf> {
        self.copier
            .join()
            .map_err(|_| Error::new("the sampling thread panicked"))?;
        self.writer
            .join()
            .map_err(|_| Error::new("the sample writer thread panicked"))?
    }
}

/// Starts the writer (appending to `out`, the file at `path`) and the copier of `rings`
/// (`others` write into them and stay open as long); returns them with their thread ids,
/// to keep out of the trace. A write failure fails the recording through `ctl`.
pub(crate) fn start(
    rings: Vec<Ring>,
    others: Vec<OwnedFd>,
    out: BufWriter<File>,
    path: PathBuf,
    ctl: Arc<Control>,
) -> Result<(Running, Vec<i32>)> {
    let fds: Vec<i32> = rings
        .iter()
        .map(|r| r.fd())
        .chain(others.iter().map(|f| f.as_raw_fd()))
        .collect();
    let queued = Arc::new(AtomicU64::new(0));
    let (to_writer, chunks) = channel::<Vec<u8>>();
    let (to_copier, spares) = channel::<Vec<u8>>();
    let (tids, tid) = channel();

    let (q, wctl, wtid) = (Arc::clone(&queued), Arc::clone(&ctl), tids.clone());
    let writer = std::thread::Builder::new()
        .name("kstate-samples-w".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = wtid.send(unsafe { libc::gettid() });
            let r = write(out, &path, chunks, to_copier, &q);
            if let Err(e) = &r {
                wctl.fail(e.clone());
            }
            r.map(|()| path)
        })
        .map_err(|e| Error::new(format!("starting the sample writer thread: {e}")))?;
    let copier = std::thread::Builder::new()
        .name("kstate-samples".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = tids.send(unsafe { libc::gettid() });
            first_in_line();
            copy(&rings, &ctl, to_writer, spares, &queued);
            drop(others);
        })
        .map_err(|e| Error::new(format!("starting the sampling thread: {e}")))?;
    let ids = [tid.recv().unwrap_or(0), tid.recv().unwrap_or(0)];
    Ok((
        Running {
            copier,
            writer,
            fds,
        },
        ids.into_iter().filter(|&t| t > 0).collect(),
    ))
}

/// The copier: drains every ring when one reaches its watermark, until the stop; then
/// once more (the events were disabled before the stop: that takes the last records).
/// Ends early if the writer has failed (it says why).
fn copy(
    rings: &[Ring],
    ctl: &Control,
    to_writer: Sender<Vec<u8>>,
    spares: Receiver<Vec<u8>>,
    queued: &AtomicU64,
) {
    let fds: Vec<RawFd> = rings.iter().map(Ring::fd).collect();
    let drain_all = |bounded: bool| -> std::result::Result<bool, ()> {
        for r in rings {
            if bounded && queued.load(Ordering::Acquire) >= MAX_QUEUED_BYTES {
                return Ok(false);
            }
            let mut chunk = spares.try_recv().unwrap_or_default();
            if r.drain(&mut chunk) == 0 {
                continue;
            }
            queued.fetch_add(chunk.len() as u64, Ordering::AcqRel);
            to_writer.send(chunk).map_err(|_| ())?;
        }
        Ok(true)
    };
    loop {
        let Ok(all) = drain_all(true) else {
            return;
        };
        if ctl.stopping() {
            break;
        }
        match all {
            true => ctl.wait(&fds, Duration::from_millis(200)),
            // The rings are still readable: waiting on them would not wait.
            false => ctl.wait(&[], QUEUE_FULL_WAIT),
        }
    }
    let _ = drain_all(false);
}

/// The writer: appends each chunk to `out` and gives the emptied buffer back for reuse
/// (fresh buffers of this size cost a page fault per page).
fn write(
    mut out: BufWriter<File>,
    path: &std::path::Path,
    chunks: Receiver<Vec<u8>>,
    spares: Sender<Vec<u8>>,
    queued: &AtomicU64,
) -> Result<()> {
    let io = |e| Error::io("writing", path, e);
    for mut chunk in chunks {
        out.write_all(&chunk).map_err(io)?;
        queued.fetch_sub(chunk.len() as u64, Ordering::AcqRel);
        chunk.clear();
        let _ = spares.send(chunk);
    }
    out.flush().map_err(io)
}

/// Gives the calling thread (the copier) the highest nice level, -20: a thread woken at
/// the watermark then runs before the traced threads that fill its rings, as a lock storm
/// keeps every CPU busy. With 8 KiB stack copies at every futex() call of a C program
/// hammering locks on 2 busy CPUs, the rings lost 61-73 % of the chains at nice 0 and
/// 0-10 % at -20; `SCHED_FIFO` did about as well (0-4.5 %) but would hold the CPU from
/// every other task while it copies. Best effort: a refusal leaves the thread as it is.
fn first_in_line() {
    // SAFETY: gettid and setpriority on this thread alone; no memory is passed.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -20);
    }
}
