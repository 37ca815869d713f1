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
    let mut count = CpuCount {
        cpu,
        ..CpuCount::default()
    };
    let mut cw = w.cpu_writer(cpu)?;
    merge_pages(main, side, layout, &mut count, &mut |p| {
        Ok(cw.write_page(p)?)
    })?;
    cw.finish()?;
    Ok(count)
}

/// The merge itself: hands each finished page that holds something to `write`.
fn merge_pages(
    main: &Path,
    side: &Path,
    layout: &PageLayout,
    count: &mut CpuCount,
    write: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut a = Records::open(main, layout)?;
    let mut b = Records::open(side, layout)?;
    let mut builder = PageBuilder::new(*layout);
    let mut done: Vec<Vec<u8>> = Vec::new();
    let mut flush = |done: &mut Vec<Vec<u8>>, count: &mut CpuCount| -> Result<()> {
        for p in done.drain(..) {
            if count_page(&p, layout, count) {
                write(&p)?;
            }
        }
        Ok(())
    };
    loop {
        let from = match (a.peek()?, b.peek()?) {
            (None, None) => break,
            (Some(_), None) => &mut a,
            (None, Some(_)) => &mut b,
            (Some(x), Some(y)) if x <= y => &mut a,
            _ => &mut b,
        };
        let (ts, lost, payload) = from.take();
        note_loss(&mut builder, lost);
        if !builder.push(ts, &payload, &mut |p| done.push(p.to_vec())) {
            count.bad_pages += 1;
        }
        flush(&mut done, count)?;
    }
    // Losses after a side's last record (a page flagged but empty) still count.
    note_loss(&mut builder, std::mem::take(&mut a.lost));
    note_loss(&mut builder, std::mem::take(&mut b.lost));
    builder.finish(&mut |p| done.push(p.to_vec()));
    flush(&mut done, count)?;
    count.bad_pages += a.bad_pages + b.bad_pages;
    count.partial_tail = a.partial_tail + b.partial_tail;
    Ok(())
}

fn note_loss(builder: &mut PageBuilder, lost: Lost) {
    match lost {
        Lost::None => {}
        Lost::Unknown => builder.lost_uncounted(),
        Lost::Count(n) => builder.lost(n),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use kstate_format::Endian;

    /// A scratch file of the pages `PageBuilder` makes of `events` (time, payload byte),
    /// with `lost` events noted before the event at index `lost_at`.
    fn pages(
        dir: &Path,
        name: &str,
        layout: &PageLayout,
        events: &[(u64, u8)],
        lost_at: Option<(usize, u64)>,
    ) -> std::path::PathBuf {
        let mut b = PageBuilder::new(*layout);
        let mut out = Vec::new();
        for (i, &(ts, byte)) in events.iter().enumerate() {
            if let Some((_, n)) = lost_at.filter(|l| l.0 == i) {
                b.lost(n);
            }
            assert!(b.push(ts, &[byte; 12], &mut |p| out.extend_from_slice(p)));
        }
        b.finish(&mut |p| out.extend_from_slice(p));
        let path = dir.join(name);
        std::fs::write(&path, out).unwrap();
        path
    }

    #[test]
    fn records_interleave_by_time_and_losses_carry_over() {
        let dir = tempfile::tempdir().unwrap();
        // Small pages, so that both inputs and the output span several.
        let layout = PageLayout::default_for(Endian::Little, 8, 128);
        let main: Vec<(u64, u8)> = (0..20).map(|i| (100 + i * 10, 1)).collect();
        let side: Vec<(u64, u8)> = [95, 130, 155, 190, 215, 250, 275]
            .iter()
            .map(|&t| (t, 2))
            .collect();
        let a = pages(dir.path(), "main", &layout, &main, Some((12, 5)));
        let b = pages(dir.path(), "side", &layout, &side, None);
        let mut count = CpuCount::default();
        let mut got = Vec::new();
        merge_pages(&a, &b, &layout, &mut count, &mut |p| {
            let (_, records) = PageRecords::new(p, &layout)?;
            for r in records {
                let (ts, payload) = r?;
                got.push((ts, payload[0]));
            }
            Ok(())
        })
        .unwrap();
        let mut want: Vec<(u64, u8)> = main.iter().chain(&side).copied().collect();
        want.sort();
        // Equal times: the main record first.
        assert_eq!(got, want);
        assert_eq!(count.events, 27);
        assert_eq!(count.lost, 5, "the main side's loss is kept");
        assert!(count.pages > 2, "{} pages", count.pages);
        assert_eq!(count.bad_pages, 0);
    }
}
