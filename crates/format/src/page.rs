//! Ring-buffer pages (sub-buffers) as the kernel writes them to `trace_pipe_raw`: a header
//! (u64 timestamp, `local_t` commit with loss flags) then 4-byte-aligned records, each a
//! 32-bit header of 5 bits type_len and 27 bits time delta.
//!
//! The cursor holds only integers so that a stream can own its page buffer and the cursor
//! side by side without self-referential borrows; it never allocates.

use crate::bytes::Endian;
use crate::error::{Error, Result};
use crate::layout::PageLayout;

/// Bits of the commit field (kernel `RB_MISSED_*`); the length is the low 27 bits.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 27) - 1;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Absolute time stamps carry 59 bits; the top 5 come from the running clock.
const TS_MSB: u64 = 0xf8 << 56;

/// Events the kernel dropped before this page because the buffer was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lost {
    #[default]
    None,
    /// The kernel flagged a loss but did not store how many.
    Unknown,
    Count(u64),
}

impl Lost {
    pub fn is_some(self) -> bool {
        self != Lost::None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub timestamp: u64,
    /// Bytes of record data after the header.
    pub data_len: usize,
    pub lost: Lost,
}

/// Reads a page header and checks the commit length against the page.
pub fn read_header(page: &[u8], layout: &PageLayout) -> Result<PageHeader> {
    if page.len() < layout.data_offset {
        return Err(Error::truncated(
            0,
            format!("page of {} bytes is shorter than its header", page.len()),
        ));
    }
    let e = layout.endian;
    let timestamp = e.uint(page, layout.ts_offset, 8).unwrap_or(0);
    let commit = e
        .uint(page, layout.commit_offset, layout.commit_size)
        .unwrap_or(0);
    let data_len = (commit & COMMIT_MASK) as usize;
    let room = page.len() - layout.data_offset;
    if data_len > room {
        return Err(Error::corrupt(
            layout.commit_offset as u64,
            format!("page commit length {data_len} overruns the page ({room} bytes of data room)"),
        ));
    }
    let lost = if commit & MISSED_EVENTS == 0 {
        Lost::None
    } else if commit & MISSED_STORED != 0 {
        // The count sits right after the data when there was room for it.
        match e.uint(page, layout.data_offset + data_len, layout.commit_size) {
            Some(n) => Lost::Count(n),
            None => Lost::Unknown,
        }
    } else {
        Lost::Unknown
    };
    Ok(PageHeader {
        timestamp,
        data_len,
        lost,
    })
}

/// The time of a page's first record, read from the page's first bytes (`prefix` may
/// end before the page does): for cutting a file in time without reading whole pages.
/// Where no whole record starts in `prefix` (or the page is damaged), the header's time,
/// which is never later than the first record's.
pub fn first_time(prefix: &[u8], layout: &PageLayout) -> Option<u64> {
    if prefix.len() < layout.data_offset {
        return None;
    }
    let e = layout.endian;
    let timestamp = e.uint(prefix, layout.ts_offset, 8)?;
    let commit = e.uint(prefix, layout.commit_offset, layout.commit_size)?;
    let end = (layout.data_offset + (commit & COMMIT_MASK) as usize).min(prefix.len());
    let mut cursor = PageCursor {
        pos: layout.data_offset,
        end,
        ts: timestamp,
    };
    Some(match cursor.next(prefix, e) {
        Ok(Some(r)) => r.ts,
        _ => timestamp,
    })
}

/// A position inside one page.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageCursor {
    pos: usize,
    end: usize,
    ts: u64,
}

/// One record: its absolute timestamp (in trace clock units) and where its payload lies
/// in the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub ts: u64,
    pub start: usize,
    pub len: usize,
}

impl PageCursor {
    pub fn new(header: &PageHeader, layout: &PageLayout) -> PageCursor {
        PageCursor {
            pos: layout.data_offset,
            end: layout.data_offset + header.data_len,
            ts: header.timestamp,
        }
    }

    /// The next data record, skipping time extends and padding; `None` at the end of the page.
    /// Errors carry offsets relative to the page start.
    // Once per record: inlined into the merge's walk through a page.
    #[inline(always)]
    pub fn next(&mut self, page: &[u8], endian: Endian) -> Result<Option<Record>> {
        loop {
            let at = self.pos;
            if at + 4 > self.end {
                return Ok(None);
            }
            let word = endian.u32(page[at..at + 4].try_into().expect("4 bytes"));
            let (type_len, delta) = match endian {
                Endian::Little => (word & 0x1f, (word >> 5) as u64),
                Endian::Big => (word >> 27, (word & 0x07ff_ffff) as u64),
            };
            match type_len {
                1..=28 => {
                    let len = type_len as usize * 4;
                    let start = at + 4;
                    if start + len > self.end {
                        return Err(overrun(at, len, self.end));
                    }
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = start + len;
                    return Ok(Some(Record {
                        ts: self.ts,
                        start,
                        len,
                    }));
                }
                0 => {
                    let n = self.array0(page, at, endian)?;
                    // array[0] counts itself; payloads are padded to 4 bytes.
                    let len = (n.saturating_sub(4) as usize + 3) & !3;
                    let start = at + 8;
                    if n < 4 || start + len > self.end {
                        return Err(overrun(at, len, self.end));
                    }
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = start + len;
                    return Ok(Some(Record {
                        ts: self.ts,
                        start,
                        len,
                    }));
                }
                TYPE_PADDING => {
                    if delta == 0 {
                        // A null event: the rest of the page is unused.
                        self.pos = self.end;
                        return Ok(None);
                    }
                    // A discarded event keeps its time delta (like kbuffer, we apply it).
                    let n = self.array0(page, at, endian)? as usize;
                    let next = at + 4 + n;
                    if n < 4 || next > self.end {
                        return Err(overrun(at, n, self.end));
                    }
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = next;
                }
                TYPE_TIME_EXTEND => {
                    let hi = self.array0(page, at, endian)? as u64;
                    self.ts = self.ts.wrapping_add((hi << 27) | delta);
                    self.pos = at + 8;
                }
                _ => {
                    // TYPE_TIME_STAMP: absolute time, missing the top bits.
                    debug_assert_eq!(type_len, TYPE_TIME_STAMP);
                    let hi = self.array0(page, at, endian)? as u64;
                    let mut abs = (hi << 27) | delta;
                    if self.ts & TS_MSB != 0 {
                        abs |= self.ts & TS_MSB;
                        if abs < self.ts {
                            abs = abs.wrapping_add(1 << 59);
                        }
                    }
                    self.ts = abs;
                    self.pos = at + 8;
                }
            }
        }
    }

    #[inline]
    fn array0(&self, page: &[u8], at: usize, endian: Endian) -> Result<u32> {
        if at + 8 > self.end {
            return Err(Error::corrupt(
                at as u64,
                "record header at the end of the page has no length word",
            ));
        }
        Ok(endian.u32(page[at + 4..at + 8].try_into().expect("4 bytes")))
    }
}

fn overrun(at: usize, len: usize, end: usize) -> Error {
    Error::corrupt(
        at as u64,
        format!("record of {len} bytes overruns the page's committed data (ends at {end})"),
    )
}

/// Convenience iterator over one page's records, for tests and tools that hold a whole page.
pub struct PageRecords<'a> {
    page: &'a [u8],
    endian: Endian,
    cursor: PageCursor,
    failed: bool,
}

impl<'a> PageRecords<'a> {
    pub fn new(page: &'a [u8], layout: &PageLayout) -> Result<(PageHeader, PageRecords<'a>)> {
        let header = read_header(page, layout)?;
        let cursor = PageCursor::new(&header, layout);
        Ok((
            header,
            PageRecords {
                page,
                endian: layout.endian,
                cursor,
                failed: false,
            },
        ))
    }
}

impl<'a> Iterator for PageRecords<'a> {
    type Item = Result<(u64, &'a [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.cursor.next(self.page, self.endian) {
            Ok(Some(r)) => Some(Ok((r.ts, &self.page[r.start..r.start + r.len]))),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> PageLayout {
        PageLayout::default_for(Endian::Little, 8, 4096)
    }

    /// Builds a page from (type_len, delta, extra words) records.
    fn page(ts: u64, commit_flags: u64, words: &[u32], trailer: Option<u64>) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&ts.to_le_bytes());
        let len = words.len() as u64 * 4;
        p[8..16].copy_from_slice(&(len | commit_flags).to_le_bytes());
        for (i, w) in words.iter().enumerate() {
            p[16 + i * 4..20 + i * 4].copy_from_slice(&w.to_le_bytes());
        }
        if let Some(n) = trailer {
            let at = 16 + len as usize;
            p[at..at + 8].copy_from_slice(&n.to_le_bytes());
        }
        p
    }

    fn hdr(type_len: u32, delta: u32) -> u32 {
        type_len | (delta << 5)
    }

    #[test]
    fn walks_data_extend_padding_and_absolute() {
        let words = [
            hdr(1, 10),
            0xaaaa, // 4-byte payload at ts 110
            hdr(TYPE_TIME_EXTEND, 5),
            1, // +5 + (1<<27)
            hdr(0, 3),
            12,
            0xbbbb,
            0xcccc, // long form: array[0]=12 -> 8-byte payload
            hdr(TYPE_PADDING, 7),
            8,
            0xdead, // discarded event: array[0] counts the 8 bytes after the header
            hdr(TYPE_TIME_STAMP, 42),
            0, // absolute ts 42
            hdr(2, 1),
            1,
            2,
        ];
        let p = page(100, 0, &words, None);
        let (h, recs) = PageRecords::new(&p, &layout()).unwrap();
        assert_eq!(h.lost, Lost::None);
        let got: Vec<(u64, usize)> = recs
            .map(|r| r.map(|(ts, d)| (ts, d.len())))
            .collect::<Result<_>>()
            .unwrap();
        let t1 = 110;
        let t2 = t1 + 5 + (1 << 27) + 3;
        assert_eq!(got, vec![(t1, 4), (t2, 8), (43, 8)]);
    }

    #[test]
    fn reads_loss_flags() {
        let p = page(1, MISSED_EVENTS | MISSED_STORED, &[hdr(1, 0), 0], Some(17));
        assert_eq!(read_header(&p, &layout()).unwrap().lost, Lost::Count(17));
        let p = page(1, MISSED_EVENTS, &[hdr(1, 0), 0], None);
        assert_eq!(read_header(&p, &layout()).unwrap().lost, Lost::Unknown);
    }

    #[test]
    fn rejects_overrunning_commit_and_records() {
        let mut p = page(1, 0, &[], None);
        p[8..16].copy_from_slice(&5000u64.to_le_bytes());
        let e = read_header(&p, &layout()).unwrap_err();
        assert!(e.msg.contains("overruns"), "{e}");
        // A record claiming 28 words in an 8-byte commit.
        let p = page(1, 0, &[hdr(28, 0), 0], None);
        let (_, mut recs) = PageRecords::new(&p, &layout()).unwrap();
        assert!(recs.next().unwrap().is_err());
        assert!(recs.next().is_none());
    }

    #[test]
    fn big_endian_headers() {
        let l = PageLayout::default_for(Endian::Big, 4, 4096);
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&1000u64.to_be_bytes());
        p[8..12].copy_from_slice(&8u32.to_be_bytes());
        p[12..16].copy_from_slice(&((1u32 << 27) | 9).to_be_bytes());
        let (_, recs) = PageRecords::new(&p, &l).unwrap();
        let got: Vec<_> = recs.map(|r| r.unwrap().0).collect();
        assert_eq!(got, vec![1009]);
    }
}
