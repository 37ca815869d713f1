//! A read-only window of a file, mapped into memory.
//!
//! Reading uncompressed trace data through `pread` spends a fifth of a whole-trace pass
//! copying pages out of the page cache. Mapping the file removes that copy; mapping it a
//! window at a time (and unmapping each window before the next) keeps the resident pages
//! — which count against the reader's memory — bounded by the window, not the file.
//!
//! A file truncated by someone else while a window of it is mapped makes the process
//! fault (SIGBUS) when it touches the lost part; trace files being read are not being
//! rewritten, and the window never reaches past the file's size at mapping time.

use std::fs::File;
use std::os::fd::AsRawFd;

pub struct Window {
    base: *mut libc::c_void,
    map_len: usize,
    /// From `base` to the first byte asked for (mappings start on a system page).
    skip: usize,
    len: usize,
}

// SAFETY: the mapping is private to this value and only read.
unsafe impl Send for Window {}
// SAFETY: shared references only read the mapping (`bytes`), which nothing writes.
unsafe impl Sync for Window {}

impl Window {
    /// Maps `len` bytes of `file` from `offset`; None where the file cannot be mapped.
    pub fn map(file: &File, offset: u64, len: usize) -> Option<Window> {
        if len == 0 {
            return None;
        }
        // SAFETY: sysconf has no preconditions.
        let sys_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        let start = offset - offset % sys_page;
        let skip = (offset - start) as usize;
        let map_len = skip + len;
        // SAFETY: a fresh read-only shared mapping of our open file; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                start as libc::off_t,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        Some(Window {
            base,
            map_len,
            skip,
            len,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: base..base+map_len is mapped readable for our lifetime, and skip + len
        // == map_len.
        unsafe { std::slice::from_raw_parts((self.base as *const u8).add(self.skip), self.len) }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`.
        unsafe { libc::munmap(self.base, self.map_len) };
    }
}
