//! Merging a CPU's pages from the side instance (completions recorded without the pid
//! filter, see `session`) into its main pages, in time order, as one page stream.
//!
//! The two instances share the trace clock and the event ids, so their records can be
//! interleaved as they are: each record is taken with its absolute time and re-encoded
//! into fresh pages ([`PageBuilder`]). Losses flagged on either side's pages are carried
//! over to the next record from that side.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use kstate_format::page::PageRecords;
use kstate_format::page_builder::PageBuilder;
use kstate_format::writer::TraceWriter;
use kstate_format::{Lost, PageLayout};

use crate::assemble::{count_page, CpuCount};
use crate::error::{Error, Result};

/// Writes CPU `cpu`'s pages: the records of `main` and `side` (scratch files of whole
/// pages) merged by time. Counts what went into the file, like `assemble::copy_cpu`.
pub fn merge_cpu(
    w: &mut TraceWriter,
    cpu: u32,
    main: &Path,
    side: &Path,
    layout: &PageLayout,
) -> Result<CpuCount> {
    let mut a = Records::open(main, layout)?;
    let mut b = Records::open(side, layout)?;
    let mut count = CpuCount {
        cpu,
        ..CpuCount::default()
    };
    let mut builder = PageBuilder::new(*layout);
    let mut done: Vec<Vec<u8>> = Vec::new();
    let mut cw = w.cpu_writer(cpu)?;
    loop {
        let (ra, rb) = (a.peek()?, b.peek()?);
        let from = match (ra, rb) {
            (None, None) => break,
            (Some(_), None) => &mut a,
            (None, Some(_)) => &mut b,
            (Some(x), Some(y)) if x <= y => &mut a,
            _ => &mut b,
        };
        let (ts, lost, payload) = from.take();
        match lost {
            Lost::None => {}
            Lost::Unknown => builder.lost_uncounted(),
            Lost::Count(n) => builder.lost(n),
        }
        if !builder.push(ts, &payload, &mut |p| done.push(p.to_vec())) {
            count.bad_pages += 1;
        }
        for p in done.drain(..) {
            if count_page(&p, layout, &mut count) {
                cw.write_page(&p)?;
            }
        }
    }
    // Losses after a side's last record (a page flagged but empty) still count.
    for l in [std::mem::take(&mut a.lost), std::mem::take(&mut b.lost)] {
        match l {
            Lost::None => {}
            Lost::Unknown => builder.lost_uncounted(),
            Lost::Count(n) => builder.lost(n),
        }
    }
    builder.finish(&mut |p| done.push(p.to_vec()));
    for p in done.drain(..) {
        if count_page(&p, layout, &mut count) {
            cw.write_page(&p)?;
        }
    }
    count.bad_pages += a.bad_pages + b.bad_pages;
    count.partial_tail = a.partial_tail + b.partial_tail;
    cw.finish()?;
    Ok(count)
}

/// Whether a scratch file of pages holds any record or loss (an unreadable file is
/// taken to: the merge then says what is wrong with it).
pub fn has_records(path: &Path, layout: &PageLayout) -> bool {
    let Ok(mut r) = Records::open(path, layout) else {
        return true;
    };
    r.peek().map_or(true, |ts| ts.is_some()) || r.lost != Lost::None || r.bad_pages > 0
}

/// The records of one scratch file of pages, read a page at a time.
struct Records {
    path: std::path::PathBuf,
    file: BufReader<File>,
    layout: PageLayout,
    page: Vec<u8>,
    /// Records of the current page not yet taken: (time, start, len).
    pending: std::collections::VecDeque<(u64, usize, usize)>,
    /// The loss flagged on the current page, for its first record.
    lost: Lost,
    bad_pages: u64,
    partial_tail: u64,
}

impl Records {
    fn open(path: &Path, layout: &PageLayout) -> Result<Records> {
        let f = File::open(path).map_err(|e| Error::io("opening", path, e))?;
        Ok(Records {
            path: path.to_path_buf(),
            file: BufReader::with_capacity(layout.page_size.max(64 << 10), f),
            layout: *layout,
            page: vec![0; layout.page_size],
            pending: Default::default(),
            lost: Lost::None,
            bad_pages: 0,
            partial_tail: 0,
        })
    }

    /// The time of the next record, reading pages until one has records.
    fn peek(&mut self) -> Result<Option<u64>> {
        while self.pending.is_empty() {
            if !self.next_page()? {
                return Ok(None);
            }
        }
        Ok(self.pending.front().map(|r| r.0))
    }

    /// The next record (after a `peek` that found one): time, loss before it, payload.
    fn take(&mut self) -> (u64, Lost, Vec<u8>) {
        let (ts, start, len) = self.pending.pop_front().expect("peeked");
        let lost = std::mem::take(&mut self.lost);
        (ts, lost, self.page[start..start + len].to_vec())
    }

    /// Reads the next page; false at the end of the file.
    fn next_page(&mut self) -> Result<bool> {
        let mut got = 0;
        while got < self.page.len() {
            match self.file.read(&mut self.page[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("reading", &self.path, e)),
            }
        }
        if got < self.page.len() {
            // Only a failed write (a full disk) leaves part of a page at the end.
            self.partial_tail += got as u64;
            return Ok(false);
        }
        let (header, records) = match PageRecords::new(&self.page, &self.layout) {
            Ok(x) => x,
            Err(_) => {
                self.bad_pages += 1;
                return Ok(true);
            }
        };
        // A loss stays noted until a record carries it.
        if header.lost != Lost::None {
            self.lost = match (self.lost, header.lost) {
                (Lost::Count(a), Lost::Count(b)) => Lost::Count(a + b),
                (_, Lost::Unknown) | (Lost::Unknown, _) => Lost::Unknown,
                (_, l) => l,
            };
        }
        let base = self.page.as_ptr() as usize;
        for r in records {
            match r {
                Ok((ts, payload)) => {
                    let start = payload.as_ptr() as usize - base;
                    self.pending.push_back((ts, start, payload.len()));
                }
                Err(_) => {
                    self.bad_pages += 1;
                    break;
                }
            }
        }
        Ok(true)
    }
}
