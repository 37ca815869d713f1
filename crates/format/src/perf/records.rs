//! The records of a perf.data file, read in place through a moving window: each is its
//! 8-byte header (u32 type, u16 misc, u16 size) and a body. Two kinds are unwrapped here so
//! that no reader above sees them:
//!
//! - `PERF_RECORD_COMPRESSED` (`perf record -z`): the bodies of all of them are one zstd
//!   stream (perf flushes its compressor at each record but does not end the frame), and
//!   what it decompresses to is more records, which may straddle two compressed ones.
//! - `PERF_RECORD_HEADER_TRACING_DATA` (pipe mode): its payload follows the record,
//!   outside the size its header gives; it is stepped over.
//!
//! Memory is the window, the decompressor's window (at most what the stream's frame header
//! asks for, bounded by the decoder), and one decompressed batch.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::mapped::Window;

pub const RECORD_HEADER_TRACING_DATA: u32 = 66;
pub const RECORD_COMPRESSED: u32 = 81;

/// A record type's name as perf prints it (`perf report -D`), for messages.
pub fn record_name(kind: u32) -> String {
    const KERNEL: [&str; 22] = [
        "",
        "MMAP",
        "LOST",
        "COMM",
        "EXIT",
        "THROTTLE",
        "UNTHROTTLE",
        "FORK",
        "READ",
        "SAMPLE",
        "MMAP2",
        "AUX",
        "ITRACE_START",
        "LOST_SAMPLES",
        "SWITCH",
        "SWITCH_CPU_WIDE",
        "NAMESPACES",
        "KSYMBOL",
        "BPF_EVENT",
        "CGROUP",
        "TEXT_POKE",
        "AUX_OUTPUT_HW_ID",
    ];
    const USER: [&str; 19] = [
        "HEADER_ATTR",
        "HEADER_EVENT_TYPE",
        "HEADER_TRACING_DATA",
        "HEADER_BUILD_ID",
        "FINISHED_ROUND",
        "ID_INDEX",
        "AUXTRACE_INFO",
        "AUXTRACE",
        "AUXTRACE_ERROR",
        "THREAD_MAP",
        "CPU_MAP",
        "STAT_CONFIG",
        "STAT",
        "STAT_ROUND",
        "EVENT_UPDATE",
        "TIME_CONV",
        "HEADER_FEATURE",
        "COMPRESSED",
        "FINISHED_INIT",
    ];
    let name = match kind {
        1..=21 => Some(KERNEL[kind as usize]),
        64..=82 => Some(USER[kind as usize - 64]),
        _ => None,
    };
    match name {
        Some(n) => format!("{n} record (type {kind})"),
        None => format!("record of type {kind}"),
    }
}

/// Bytes mapped (or read) at a time: a record is at most 64 KiB, so one always fits.
const WINDOW: usize = 4 << 20;

/// Bytes decompressed at a time.
const BATCH: usize = 1 << 20;

/// One record: its file offset (for a decompressed one, the offset of the compressed
/// record it came from), type, misc bits and body after the header.
#[derive(Debug, Clone, Copy)]
pub struct Rec<'a> {
    pub at: u64,
    pub kind: u32,
    pub misc: u16,
    pub body: &'a [u8],
}

/// Walks the records of `[start, end)` of a file.
pub struct Records {
    file: File,
    pub path: PathBuf,
    pos: u64,
    pub end: u64,
    win: Option<Window>,
    buf: Vec<u8>,
    /// File offset of the window's first byte, and its length.
    win_at: u64,
    win_len: usize,
    /// Whether compressed records are opened (a reader that wants only the header
    /// records, which are never compressed, saves the work).
    decompress: bool,
    inflate: Option<Box<Inflate>>,
    /// Bytes mapped at a time ([`WINDOW`] unless a reader asks for more).
    window: usize,
}

/// The zstd stream of a file's compressed records.
struct Inflate {
    dec: ruzstd::decoding::FrameDecoder,
    /// Compressed bytes not yet taken by the decoder.
    input: Vec<u8>,
    /// Decompressed bytes; records are handed out from `pos`.
    out: Vec<u8>,
    pos: usize,
    /// Offset of the compressed record the latest input came from.
    at: u64,
    /// The frame was closed by kstate at the end of the file to release its last window.
    closed: bool,
}

/// Where the record to hand out lies.
enum Found {
    Window(u64, usize),
    Inflated(u64, usize, usize),
}

impl Records {
    pub fn open(path: &Path, start: u64, end: u64) -> Result<Records> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(Records {
            file,
            path: path.to_path_buf(),
            pos: start,
            end,
            win: None,
            buf: Vec::new(),
            win_at: start,
            win_len: 0,
            decompress: true,
            inflate: None,
            window: WINDOW,
        })
    }

    /// Maps `bytes` at a time instead of [`WINDOW`].
    pub(crate) fn window_bytes(mut self, bytes: usize) -> Records {
        self.window = bytes.max(WINDOW);
        self
    }

    /// Hands out compressed records as they are instead of what they hold.
    pub fn raw(mut self) -> Records {
        self.decompress = false;
        self
    }

    /// Whether compressed records were met: the records handed out since are not where
    /// their offset says.
    pub fn inflated(&self) -> bool {
        self.inflate.is_some()
    }

    /// The file offset of the next record in the file (not counting decompressed ones).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Goes on from `pos` (a record's start found by an earlier walk), keeping the window.
    pub(crate) fn seek(&mut self, pos: u64) {
        self.pos = pos;
    }

    /// The mapped bytes and their file offset: the record `next_in_file` returned last
    /// lies whole in them.
    pub(crate) fn window(&self) -> (&[u8], u64) {
        (self.bytes(), self.win_at)
    }

    fn bytes(&self) -> &[u8] {
        match &self.win {
            Some(w) => w.bytes(),
            None => &self.buf[..self.win_len],
        }
    }

    /// Makes `[at, at + n)` part of the window.
    #[inline]
    fn ensure(&mut self, at: u64, n: usize) -> Result<bool> {
        if at >= self.win_at && at + n as u64 <= self.win_at + self.win_len as u64 {
            return Ok(true);
        }
        self.slide(at, n)
    }

    #[cold]
    fn slide(&mut self, at: u64, n: usize) -> Result<bool> {
        let len = (self.end - at).min(self.window as u64) as usize;
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

    /// The next record in the file itself: (offset, type, misc, size).
    pub(crate) fn next_in_file(&mut self) -> Result<Option<(u64, u32, u16, usize)>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let at = self.pos;
        if !self.ensure(at, 8)? {
            return Err(Error::truncated(
                at,
                format!(
                    "perf.data: the data ends inside a record header ({} bytes left)",
                    self.end - at
                ),
            ));
        }
        let o = (at - self.win_at) as usize;
        let h = &self.bytes()[o..o + 8];
        let kind = u32::from_le_bytes(h[..4].try_into().unwrap());
        let misc = u16::from_le_bytes(h[4..6].try_into().unwrap());
        let size = u16::from_le_bytes(h[6..8].try_into().unwrap()) as usize;
        if size < 8 {
            return Err(Error::corrupt(
                at,
                format!(
                    "perf.data: {} has size {size}, less than its header",
                    record_name(kind)
                ),
            ));
        }
        if !self.ensure(at, size)? {
            return Err(Error::truncated(
                at,
                format!(
                    "perf.data: {} ({size} bytes) runs past the end of the data at {}",
                    record_name(kind),
                    self.end
                ),
            ));
        }
        let mut next = at + size as u64;
        if kind == RECORD_HEADER_TRACING_DATA && size >= 12 {
            let o = (at - self.win_at) as usize;
            let n = u32::from_le_bytes(self.bytes()[o + 8..o + 12].try_into().unwrap());
            next += n as u64;
            if next > self.end {
                return Err(Error::truncated(
                    at,
                    format!(
                        "perf.data: tracing data record ({n} bytes) runs past the end of the data at {}",
                        self.end
                    ),
                ));
            }
        }
        self.pos = next;
        Ok(Some((at, kind, misc, size)))
    }

    /// Walks the records from the next one on that start before `limit` and lie whole in
    /// the window, handing each to `take` (file offset, offset in [`Records::window`],
    /// type, body after the header) until it returns false: that record is left for the
    /// next read. Stops before a record it cannot hand out as it lies (a size less than
    /// its header, a compressed or tracing-data record, one not whole in the window),
    /// which `next_in_file` or `next` then reads, and reports if damaged. Returns whether
    /// it took any.
    ///
    /// The loop every record of a perf.data goes through, twice (the scan at open and
    /// the analysis): inlined into the caller's, with no call and no `Result` per record.
    #[inline(always)]
    pub(crate) fn walk(
        &mut self,
        limit: u64,
        mut take: impl FnMut(u64, usize, u32, &[u8]) -> bool,
    ) -> bool {
        // What was decompressed comes first; `next` hands it out.
        if self.inflate.is_some() || self.pos < self.win_at {
            return false;
        }
        let bytes = match &self.win {
            Some(w) => w.bytes(),
            None => &self.buf[..self.win_len],
        };
        let limit = limit.min(self.end);
        let mut pos = self.pos;
        while pos < limit {
            let o = (pos - self.win_at) as usize;
            let Some(h) = bytes.get(o..o + 8) else {
                break;
            };
            let kind = u32::from_le_bytes(h[..4].try_into().unwrap());
            let size = u16::from_le_bytes(h[6..8].try_into().unwrap()) as usize;
            let plain = match kind {
                RECORD_HEADER_TRACING_DATA => false,
                RECORD_COMPRESSED => !self.decompress,
                _ => true,
            };
            if size < 8 || !plain || o + size > bytes.len() {
                break;
            }
            if !take(pos, o, kind, &bytes[o + 8..o + size]) {
                break;
            }
            pos += size as u64;
        }
        let took = pos != self.pos;
        self.pos = pos;
        took
    }

    /// The next record: (file offset, type, body after the 8-byte header).
    #[inline]
    pub fn next(&mut self) -> Result<Option<(u64, u32, &[u8])>> {
        Ok(self.next_rec()?.map(|r| (r.at, r.kind, r.body)))
    }

    /// The next record, decompressed ones included.
    pub fn next_rec(&mut self) -> Result<Option<Rec<'_>>> {
        let found = loop {
            if let Some(inf) = self.inflate.as_deref_mut() {
                if let Some((start, size)) = inf.whole()? {
                    break Found::Inflated(inf.at, start, size);
                }
                if inf.step()? {
                    continue;
                }
            }
            match self.next_in_file()? {
                Some((at, RECORD_COMPRESSED, _, size)) if self.decompress => {
                    let o = (at - self.win_at) as usize;
                    let inf = self.inflate.get_or_insert_with(|| Box::new(Inflate::new()));
                    let body = match &self.win {
                        Some(w) => &w.bytes()[o + 8..o + size],
                        None => &self.buf[o + 8..o + size],
                    };
                    inf.input.extend_from_slice(body);
                    inf.at = at;
                }
                Some((at, _, _, size)) => break Found::Window(at, size),
                None => match self.inflate.as_deref_mut() {
                    // The end of the file: perf leaves its frame open, so close it to have
                    // the decompressor release the last window of records.
                    Some(inf) if !inf.closed => inf.close(),
                    Some(inf) if inf.pos < inf.out.len() => {
                        let left = inf.out.len() - inf.pos;
                        inf.pos = inf.out.len();
                        return Err(Error::truncated(
                            inf.at,
                            format!("perf.data: the compressed records end inside a record ({left} bytes left)"),
                        ));
                    }
                    _ => return Ok(None),
                },
            }
        };
        Ok(Some(match found {
            Found::Window(at, size) => {
                let o = (at - self.win_at) as usize;
                let b = &self.bytes()[o..o + size];
                Rec {
                    at,
                    kind: u32::from_le_bytes(b[..4].try_into().unwrap()),
                    misc: u16::from_le_bytes(b[4..6].try_into().unwrap()),
                    body: &b[8..],
                }
            }
            Found::Inflated(at, start, size) => {
                let inf = self.inflate.as_deref_mut().expect("inflating");
                inf.pos = start + size;
                let b = &inf.out[start..start + size];
                Rec {
                    at,
                    kind: u32::from_le_bytes(b[..4].try_into().unwrap()),
                    misc: u16::from_le_bytes(b[4..6].try_into().unwrap()),
                    body: &b[8..],
                }
            }
        }))
    }
}

impl Inflate {
    fn new() -> Inflate {
        Inflate {
            dec: ruzstd::decoding::FrameDecoder::new(),
            input: Vec::new(),
            out: Vec::new(),
            pos: 0,
            at: 0,
            closed: false,
        }
    }

    /// The next whole record in `out`: (start, size).
    fn whole(&self) -> Result<Option<(usize, usize)>> {
        let left = &self.out[self.pos..];
        if left.len() < 8 {
            return Ok(None);
        }
        let size = u16::from_le_bytes(left[6..8].try_into().unwrap()) as usize;
        if size < 8 {
            return Err(Error::corrupt(
                self.at,
                format!("perf.data: a record of size {size} in the data compressed at this offset"),
            ));
        }
        Ok((left.len() >= size).then_some((self.pos, size)))
    }

    /// Decompresses more; false where nothing more comes out of the input there is.
    fn step(&mut self) -> Result<bool> {
        if self.pos > 0 {
            self.out.drain(..self.pos);
            self.pos = 0;
        }
        let at = self.at;
        let bad = |e: String| Error::corrupt(at, format!("perf.data: compressed records: {e}"));
        // The decoder is not hardened against every malformed stream.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<bool> {
            // A new frame (the first, or one after a frame the writer ended).
            // (After kstate closed the frame, what input is left is the closing's padding.)
            if self.dec.is_finished()
                && self.dec.can_collect() == 0
                && !self.input.is_empty()
                && !self.closed
            {
                if self.input.len() < 18 {
                    // The frame header may not be all here yet.
                    return Ok(false);
                }
                let mut src = &self.input[..];
                self.dec.reset(&mut src).map_err(|e| bad(e.to_string()))?;
                let used = self.input.len() - src.len();
                self.input.drain(..used);
            }
            if self.dec.is_finished() && self.dec.can_collect() == 0 {
                return Ok(false);
            }
            let old = self.out.len();
            self.out.resize(old + BATCH, 0);
            let (read, written) = self
                .dec
                .decode_from_to(&self.input, &mut self.out[old..])
                .map_err(|e| bad(e.to_string()))?;
            self.out.truncate(old + written);
            self.input.drain(..read.min(self.input.len()));
            Ok(read > 0 || written > 0)
        }));
        match r {
            Ok(r) => r,
            Err(_) => Err(bad("the decompressor gave up".into())),
        }
    }

    /// Ends the frame perf left open: an empty last raw block (and a checksum's place).
    fn close(&mut self) {
        self.closed = true;
        if !self.dec.is_finished() {
            self.input.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0]);
        }
    }
}
