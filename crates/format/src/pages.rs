//! Page sources: a CPU's ring-buffer pages read from a file a window at a time
//! (`PlainPages`). They know nothing of which container the pages came from.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::layout::whole_pages;
use crate::mapped::Window;

/// Pages a container stores packed its own way (trace.dat v7's compressed chunks): the
/// container's reader describes them, and opens them when a reader of the trace asks, so
/// that the trace's types name no container.
pub trait PackedPages: Send + Sync + std::fmt::Debug {
    /// The pages, read from `data` (the file holding them) and named `shown` in messages,
    /// `page_size` bytes each.
    fn open(&self, data: &Path, shown: &Path, page_size: usize) -> Result<Box<dyn PageSource>>;
    /// File offset where they start.
    fn offset(&self) -> u64;
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
    /// The current page as a share of the mapped window it lies in, where it lies in one:
    /// a reader that holds it reads the page in place, without asking the source again.
    fn shared_page(&self) -> Option<SharedPage> {
        None
    }
    /// Passes over the next `n` pages without reading them (where the source can), so
    /// that the following `advance` moves to the page after them. Returns how many there
    /// were (fewer at the end of the data).
    fn skip(&mut self, n: u64) -> Result<u64> {
        for i in 0..n {
            if !self.advance()? {
                return Ok(i);
            }
        }
        Ok(n)
    }
}

/// A page in a mapped window, shared with the source that mapped it: the window stays
/// mapped while a share is held.
#[derive(Clone)]
pub struct SharedPage {
    window: Arc<Window>,
    start: usize,
    end: usize,
}

impl SharedPage {
    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        &self.window.bytes()[self.start..self.end]
    }
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
    window: Option<Arc<Window>>,
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
        PlainPages::from_file(file, path, offset, size, page_size)
    }

    /// Like [`PlainPages::open`], for a file already open (an unnamed one: `spool`);
    /// `path` names it in messages.
    pub fn from_file(
        file: File,
        path: &Path,
        offset: u64,
        size: u64,
        page_size: usize,
    ) -> Result<PlainPages> {
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

    /// Names `path` in messages (the user's name for an unnamed copy).
    pub fn named(mut self, path: PathBuf) -> PlainPages {
        self.path = path;
        self
    }

    fn refill(&mut self) -> Result<()> {
        self.window = None;
        let left = self.end - self.next_read;
        let mut got = 0;
        let mut want = 0;
        if self.mapping_works {
            want = (left.min(whole_pages(self.page_size, MAP_WINDOW) as u64)) as usize;
            got = (self.file_len.saturating_sub(self.next_read)).min(want as u64) as usize;
            self.window = Window::map(&self.file, self.next_read, got).map(Arc::new);
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
    fn shared_page(&self) -> Option<SharedPage> {
        let window = self.window.clone()?;
        (self.cur_end > self.buf_pos).then_some(SharedPage {
            window,
            start: self.buf_pos,
            end: self.cur_end,
        })
    }
    fn page_offset(&self) -> u64 {
        self.last_offset
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn skip(&mut self, n: u64) -> Result<u64> {
        let ps = self.page_size as u64;
        let in_window = (self.buf_len - self.cur_end) as u64 / ps;
        if n <= in_window {
            self.cur_end += (n * ps) as usize;
            return Ok(n);
        }
        // Past the window: the next refill starts after the skipped pages, which are
        // neither mapped nor read.
        let beyond = ((n - in_window) * ps).min(self.end.saturating_sub(self.next_read));
        self.cur_end = self.buf_len;
        self.next_read += beyond - beyond % ps;
        Ok(in_window + beyond / ps)
    }
}
