//! A reader's scratch file, written with `O_DIRECT` so pages go from the kernel's ring
//! buffer to the disk without passing through the page cache.
//!
//! Pages reach the recorder in a pipe (spliced from `trace_pipe_raw`, not copied). Moving
//! them on into a buffered file copies every byte into the page cache, and ext4 adds its
//! delayed-allocation and buffer-head work per 4 KiB block — together more than half of
//! the recorder's CPU in a system-call storm — for data nobody reads before the
//! recording ends. Spliced into an `O_DIRECT` file instead, the pipe's pages are handed
//! to the block layer as they are: one write per pipe-full (1 MiB), no copy.
//!
//! The cost is that the disk must keep up as the data comes (the ring buffer absorbs the
//! bursts, not the page cache). Filesystems that refuse `O_DIRECT`, or its alignment, get
//! buffered writes.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// O_DIRECT needs buffers, offsets and lengths aligned to the device's logical block;
/// the page size (4096 or more) covers every common device.
const ALIGN: usize = 4096;
/// Disk space is reserved ahead of the writes in steps this large (see `preallocate`).
const PREALLOCATE_STEP: u64 = 64 << 20;

pub struct ScratchFile {
    fd: OwnedFd,
    path: PathBuf,
    /// One page, aligned for O_DIRECT, for pages that are read rather than spliced.
    page: PageBuf,
    /// Bytes on disk so far (whole pages, unless a write failed midway).
    written: u64,
    direct: bool,
    allocated: u64,
}

impl ScratchFile {
    pub fn create(path: &Path, page_size: usize) -> Result<ScratchFile> {
        // Created exclusively: the scratch directory is new and private, so a name that
        // exists there was planted.
        let open = |flags| kstate_format::output::exclusive(flags).open(path);
        let (fd, direct) = match open(libc::O_DIRECT) {
            Ok(f) => (f, true),
            Err(_) => (open(0).map_err(|e| Error::io("creating", path, e))?, false),
        };
        Ok(ScratchFile {
            fd: OwnedFd::from(fd),
            path: path.to_path_buf(),
            page: PageBuf::new(page_size)?,
            written: 0,
            direct,
            allocated: 0,
        })
    }

    /// A scratch "file" in memory (`memfd_create`), for a recording whose pages are read
    /// as they come and given back (`kstate watch` without `-o`): nothing goes to the
    /// disk, the memory is the kernel's page cache of the file (shared memory, not the
    /// process's heap), punched holes free it, and it vanishes with the process however
    /// it dies. Its path, `/proc/self/fd/N`, opens it again within this process.
    pub fn in_memory(name: &str, page_size: usize) -> Result<ScratchFile> {
        let cname = std::ffi::CString::new(format!("kstate-{name}"))
            .map_err(|_| Error::new(format!("a memory file name with a NUL byte: {name:?}")))?;
        // SAFETY: a valid NUL-terminated name; the descriptor is checked below.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::os(
                format!("creating the memory file for {name}"),
                std::io::Error::last_os_error(),
            ));
        }
        // SAFETY: a fresh descriptor owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        Ok(ScratchFile {
            fd,
            path,
            page: PageBuf::new(page_size)?,
            written: 0,
            direct: false,
            // Memory is not reserved ahead: it is taken as pages arrive.
            allocated: u64::MAX,
        })
    }

    /// Where the file can be opened again (a memory file's `/proc/self/fd/N`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives back the space of everything written so far (the file keeps its length,
    /// the bytes read back as zeros): for pages nobody will read.
    pub fn discard_written(&mut self) {
        if self.written == 0 {
            return;
        }
        // SAFETY: fallocate on our own descriptor with a valid range.
        unsafe {
            libc::fallocate(
                self.fd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                0,
                self.written as libc::off_t,
            )
        };
    }

    /// Bytes written to the file so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Moves exactly `n` bytes (whole pages) out of the pipe `from` into the file.
    pub fn splice_from(&mut self, from: RawFd, n: usize) -> Result<()> {
        self.append(n, |fd, at, _, left| {
            let mut at = at as libc::loff_t;
            // SAFETY: valid descriptors; `at` is a valid loff_t the kernel may advance.
            unsafe {
                libc::splice(
                    from,
                    std::ptr::null_mut(),
                    fd,
                    &mut at,
                    left,
                    libc::SPLICE_F_MOVE,
                )
            }
        })
    }

    /// The page-sized buffer `write_page` writes; fill it first.
    pub fn page_buf(&mut self) -> &mut [u8] {
        self.page.as_mut()
    }

    /// Appends the page held in `page_buf`.
    pub fn write_page(&mut self) -> Result<()> {
        let page = self.page.ptr;
        self.append(self.page.len, |fd, at, done, left| {
            // SAFETY: page[done..done + left] is initialised memory inside our page buffer.
            unsafe { libc::pwrite(fd, page.add(done).cast(), left, at as libc::off_t) }
        })
    }

    /// Appends `len` bytes, one `write(fd, file offset, bytes done, bytes left)` system
    /// call at a time: retries interruptions and short writes, and drops O_DIRECT where
    /// the filesystem refuses it or a short write left the end unaligned.
    fn append(
        &mut self,
        len: usize,
        write: impl Fn(RawFd, u64, usize, usize) -> isize,
    ) -> Result<()> {
        self.preallocate(len as u64);
        let mut done = 0;
        while done < len {
            let n = write(self.fd.as_raw_fd(), self.written, done, len - done);
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EINVAL) if self.direct => {
                        self.set_buffered();
                        continue;
                    }
                    _ => return Err(Error::io("writing pages to", &self.path, e)),
                }
            }
            if n == 0 {
                return Err(self.no_progress());
            }
            done += n as usize;
            self.written += n as u64;
            if self.direct && !self.written.is_multiple_of(ALIGN as u64) {
                self.set_buffered();
            }
        }
        Ok(())
    }

    fn no_progress(&self) -> Error {
        Error::new(format!(
            "writing pages to {}: no progress",
            self.path.display()
        ))
    }

    /// Drops O_DIRECT for the rest of the recording.
    fn set_buffered(&mut self) {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl on our own descriptor.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_DIRECT);
        }
        self.direct = false;
    }

    /// Reserves disk space ahead of the writes in large steps: fewer, larger extents, and
    /// room the metadata reserve does not compete for. Best effort: a refusal (no
    /// support, or the disk is nearly full) leaves allocation to the writes.
    fn preallocate(&mut self, incoming: u64) {
        if self.written + incoming <= self.allocated {
            return;
        }

        // SAFETY: fallocate on our own open file; KEEP_SIZE leaves the file size alone.
        let r = unsafe {
            libc::fallocate(
                self.fd.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                self.allocated as libc::off_t,
                PREALLOCATE_STEP as libc::off_t,
            )
        };
        self.allocated = if r == 0 {
            self.allocated + PREALLOCATE_STEP
        } else {
            u64::MAX // do not try again
        };
    }
}

/// A page of memory aligned for O_DIRECT.
struct PageBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is owned memory, used by one thread at a time.
unsafe impl Send for PageBuf {}

impl PageBuf {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN).expect("page-sized layout")
    }

    fn new(len: usize) -> Result<PageBuf> {
        // SAFETY: the layout has a non-zero size (page sizes are at least 4 KiB).
        let ptr = unsafe { alloc_zeroed(Self::layout(len.max(1))) };
        if ptr.is_null() {
            return Err(Error::new("out of memory for a page buffer"));
        }
        Ok(PageBuf { ptr, len })
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: len bytes, allocated and zeroed in `new`, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { dealloc(self.ptr, Self::layout(self.len.max(1))) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: fds is a valid array of two ints.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors are fresh and owned here.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn page(n: u8, size: usize) -> Vec<u8> {
        (0..size).map(|i| n.wrapping_add(i as u8)).collect()
    }

    /// Spliced and read pages land in order, whole, whichever way the file is opened
    /// (the scratch directory may be on a filesystem without O_DIRECT).
    #[test]
    fn spliced_and_written_pages_land_in_order() {
        const PAGE: usize = 4096;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cpu0");
        let mut f = ScratchFile::create(&path, PAGE).unwrap();
        let (r, w) = pipe();
        let mut expected = Vec::new();
        for n in 0..3u8 {
            let p = page(n, PAGE);
            // SAFETY: writes PAGE bytes from a valid buffer into our pipe.
            let put = unsafe { libc::write(w.as_raw_fd(), p.as_ptr().cast(), PAGE) };
            assert_eq!(put, PAGE as isize);
            expected.extend_from_slice(&p);
        }
        f.splice_from(r.as_raw_fd(), 3 * PAGE).unwrap();
        let last = page(9, PAGE);
        f.page_buf().copy_from_slice(&last);
        f.write_page().unwrap();
        expected.extend_from_slice(&last);
        assert_eq!(f.written(), 4 * PAGE as u64);
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }
}
