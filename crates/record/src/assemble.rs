//! Moving each CPU's scratch file into the trace.dat, counting events and losses on the
//! way (the only time the recorder looks inside pages: after tracing has stopped).
//!
//! Space: each batch of pages is punched out of its scratch file once it is in the
//! output, so assembling needs about one batch of free space beyond what the scratch
//! files already hold — which is what lets a recording stopped by a full disk still be
//! written out.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;

use kstate_format::layout::whole_pages;
use kstate_format::page::PageRecords;
use kstate_format::writer::TraceWriter;
use kstate_format::{Lost, PageLayout};

use crate::error::{Error, Result};

/// What one CPU's data held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuCount {
    pub cpu: u32,
    pub pages: u64,
    pub events: u64,
    /// Events the kernel counted as lost before pages of this CPU.
    pub lost: u64,
    /// Pages flagged as following a loss whose size the kernel did not store.
    pub lost_unknown: u64,
    /// Bytes of event records (page headers and unused page tails excluded).
    pub data_bytes: u64,
    /// Bytes dropped from the end of the scratch file because they were not a whole page
    /// (only after a failed write, e.g. a full disk).
    pub partial_tail: u64,
    /// Pages whose records could not be walked (counted as far as they went).
    pub bad_pages: u64,
}

/// Bytes copied per batch (rounded to whole pages).
const BATCH_BYTES: usize = 4 << 20;

pub fn copy_cpu(
    w: &mut TraceWriter,
    cpu: u32,
    scratch: &Path,
    layout: &PageLayout,
) -> Result<CpuCount> {
    let page_size = layout.page_size;
    let mut f: File = OpenOptions::new()
        .read(true)
        .write(true)
        .open(scratch)
        .map_err(|e| Error::io("opening", scratch, e))?;
    let len = f
        .metadata()
        .map_err(|e| Error::io("reading the size of", scratch, e))?
        .len();
    let mut count = CpuCount {
        cpu,
        partial_tail: len % page_size as u64,
        ..CpuCount::default()
    };
    let whole = len - count.partial_tail;
    let mut cw = w.cpu_writer(cpu)?;
    let mut buf = vec![0u8; whole_pages(page_size, BATCH_BYTES)];
    let mut at = 0u64;
    while at < whole {
        let n = ((whole - at) as usize).min(buf.len());
        f.read_exact(&mut buf[..n])
            .map_err(|e| Error::io("reading", scratch, e))?;
        for page in buf[..n].chunks_exact(page_size) {
            if count_page(page, layout, &mut count) {
                cw.write_page(page)?;
            }
        }
        punch(&f, at, n as u64);
        at += n as u64;
    }
    cw.finish()?;
    Ok(count)
}

/// Counts one page; false for an empty page that is not worth keeping.
pub(crate) fn count_page(page: &[u8], layout: &PageLayout, c: &mut CpuCount) -> bool {
    let (header, records) = match PageRecords::new(page, layout) {
        Ok(x) => x,
        Err(_) => {
            c.bad_pages += 1;
            c.pages += 1;
            return true;
        }
    };
    if header.data_len == 0 && header.lost == Lost::None {
        return false;
    }
    c.pages += 1;
    c.data_bytes += header.data_len as u64;
    match header.lost {
        Lost::None => {}
        Lost::Unknown => c.lost_unknown += 1,
        Lost::Count(n) => c.lost += n,
    }
    for r in records {
        match r {
            Ok(_) => c.events += 1,
            Err(_) => {
                c.bad_pages += 1;
                break;
            }
        }
    }
    true
}

/// Frees the space of pages already copied (best effort: filesystems without hole
/// punching keep it until the scratch file is removed).
fn punch(f: &File, offset: u64, len: u64) {
    // SAFETY: fallocate on our own open file; failure is harmless.
    unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        );
    }
}

/// Sets aside `bytes` of disk in `path`, so that a recording that fills the disk can
/// still write the file's metadata once this is deleted. Best effort.
pub fn reserve(path: &Path, bytes: u64) -> Option<File> {
    let f = kstate_format::output::create_new(path).ok()?;
    // SAFETY: fallocate on our own open file.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, bytes as libc::off_t) };
    (r == 0).then_some(f)
}

/// Gives back the space a reader preallocated past the end of its scratch file
/// (truncating to the current size frees blocks beyond it on ext4 and XFS).
pub fn release_preallocation(scratch: &Path) {
    if let Ok(f) = OpenOptions::new().write(true).open(scratch) {
        if let Ok(m) = f.metadata() {
            let _ = f.set_len(m.len());
        }
    }
}
