//! One CPU's events read straight from a perf.data's data section: the scan at open
//! (`perf_stream::scan`) found where the CPU's records lie; this walks those stretches
//! through a mapped window and hands out each tracepoint sample's raw record in place, so
//! an analysis reads perf.data at the speed it reads trace.dat (no page is built, nothing
//! is copied). Memory is one window per CPU.
//!
//! What it hands out is what the pages `perf_stream` builds would hold: the same samples
//! (those too large for a page are dropped by both), and perf's lost-event records as
//! losses before the CPU's next event.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::events::{CpuEvents, Item};
use crate::layout::PageLayout;
use crate::mapped::Window;
use crate::page_builder::fits;
use crate::perf_records::{record_name, RECORD_HEADER_TRACING_DATA};
use crate::perf_stream::{Layouts, PerfPages, RECORD_LOST, RECORD_SAMPLE};

/// Bytes mapped at a time: a record is at most 64 KiB, so one always fits.
const WINDOW: usize = 4 << 20;

pub(crate) struct PerfEvents {
    file: File,
    path: PathBuf,
    /// End of the data section: windows never reach past it.
    data_end: u64,
    runs: Arc<[(u64, u64)]>,
    next_run: usize,
    /// The next record, and the end of the stretch it is in.
    pos: u64,
    end: u64,
    win: Option<Window>,
    /// The window's bytes where the file could not be mapped.
    buf: Vec<u8>,
    win_at: u64,
    win_len: usize,
    layouts: Layouts,
    cpu: u32,
    wanted: Option<Vec<bool>>,
    endian: Endian,
    layout: PageLayout,
}

impl PerfEvents {
    pub(crate) fn open(
        src: &PerfPages,
        cpu: u32,
        runs: Arc<[(u64, u64)]>,
        wanted: Option<&[bool]>,
    ) -> Result<PerfEvents> {
        let file = File::open(&src.path).map_err(|e| Error::io(&src.path, e))?;
        Ok(PerfEvents {
            file,
            path: src.path.clone(),
            data_end: src.data.1,
            runs,
            next_run: 0,
            pos: 0,
            end: 0,
            win: None,
            buf: Vec::new(),
            win_at: 0,
            win_len: 0,
            layouts: src.layouts.clone(),
            cpu,
            wanted: wanted.map(<[bool]>::to_vec),
            endian: src.layout.endian,
            layout: src.layout,
        })
    }

    /// Makes `[at, at + n)` part of the window; false where the data ends first.
    #[inline]
    fn ensure(&mut self, at: u64, n: usize) -> Result<bool> {
        if at >= self.win_at && at + n as u64 <= self.win_at + self.win_len as u64 {
            return Ok(true);
        }
        self.slide(at, n)
    }

    #[cold]
    fn slide(&mut self, at: u64, n: usize) -> Result<bool> {
        let len = (self.data_end.saturating_sub(at)).min(WINDOW as u64) as usize;
        if len < n {
            return Ok(false);
        }
        self.win = None;
        self.win = Window::map(&self.file, at, len);
        if self.win.is_none() {
            self.buf.resize(len, 0);
            self.file
                .read_exact_at(&mut self.buf[..len], at)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        self.win_at = at;
        self.win_len = len;
        Ok(true)
    }

    fn damaged(&self, at: u64, msg: String) -> Error {
        Error::corrupt(at, msg).in_file(&self.path)
    }
}

impl CpuEvents for PerfEvents {
    fn next(&mut self) -> Result<Option<Item>> {
        loop {
            if self.pos >= self.end {
                let Some(&(start, end)) = self.runs.get(self.next_run) else {
                    return Ok(None);
                };
                self.next_run += 1;
                self.pos = start;
                self.end = end.min(self.data_end);
                continue;
            }
            let at = self.pos;
            // The scan at open walked these records; a file changed since reads as damage.
            if !self.ensure(at, 8)? {
                return Err(
                    self.damaged(at, "perf.data: the data ends inside a record header".into())
                );
            }
            let o = (at - self.win_at) as usize;
            let h = &self.bytes()[o..o + 8];
            let kind = u32::from_le_bytes(h[..4].try_into().unwrap());
            let size = u16::from_le_bytes(h[6..8].try_into().unwrap()) as usize;
            if size < 8 {
                return Err(self.damaged(
                    at,
                    format!(
                        "perf.data: {} has size {size}, less than its header",
                        record_name(kind)
                    ),
                ));
            }
            if !self.ensure(at, size)? {
                return Err(self.damaged(
                    at,
                    format!(
                        "perf.data: {} ({size} bytes) runs past the end of the data",
                        record_name(kind)
                    ),
                ));
            }
            let o = (at - self.win_at) as usize;
            self.pos = at + size as u64;
            let bytes = match &self.win {
                Some(w) => w.bytes(),
                None => &self.buf[..self.win_len],
            };
            let body = &bytes[o + 8..o + size];
            match kind {
                RECORD_SAMPLE => {
                    let Some(l) = self.layouts.for_sample(body) else {
                        continue;
                    };
                    // Inside a stretch, other CPUs' records may lie between this one's.
                    if l.cpu(body) != Some(self.cpu) {
                        continue;
                    }
                    let Some(raw) = l.sample(body).and_then(|s| Some((s.ts, s.raw?))) else {
                        continue;
                    };
                    let (ts, raw) = raw;
                    if let Some(w) = &self.wanted {
                        let id = self.endian.uint(raw, 0, 2).unwrap_or(u64::MAX) as usize;
                        if !w.get(id).copied().unwrap_or(false) {
                            continue;
                        }
                    }
                    if !fits(&self.layout, raw.len()) {
                        continue;
                    }
                    let start = o + 8 + (raw.as_ptr() as usize - body.as_ptr() as usize);
                    return Ok(Some(Item::Event {
                        ts,
                        start,
                        len: raw.len(),
                    }));
                }
                RECORD_LOST => {
                    let Some(l) = self.layouts.for_other(body) else {
                        continue;
                    };
                    if l.trailer_cpu(body) == Some(self.cpu) && body.len() >= 16 {
                        let n = u64::from_le_bytes(body[8..16].try_into().unwrap());
                        if n > 0 {
                            return Ok(Some(Item::Lost(n)));
                        }
                    }
                }
                RECORD_HEADER_TRACING_DATA if size >= 12 => {
                    // Pipe mode: its payload follows the record, outside its size.
                    let n = u32::from_le_bytes(body[..4].try_into().unwrap());
                    self.pos += n as u64;
                }
                _ => {}
            }
        }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        match &self.win {
            Some(w) => w.bytes(),
            None => &self.buf[..self.win_len],
        }
    }

    fn offset(&self) -> u64 {
        self.win_at
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
