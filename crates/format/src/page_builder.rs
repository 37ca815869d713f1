//! Building ring-buffer pages from events, the inverse of `page`: used to give events that
//! arrive outside ring-buffer pages (perf.data samples) the same per-CPU page streams every
//! other container has, so the rest of kstate reads them unchanged.

use crate::bytes::Endian;
use crate::layout::PageLayout;

const TYPE_TIME_EXTEND: u32 = 30;
/// Payloads up to this many bytes fit a 4-byte record header (type_len 1..=28).
const MAX_SMALL: usize = 28 * 4;
const MAX_DELTA: u64 = (1 << 27) - 1;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

fn record_size(padded: usize, empty: bool) -> usize {
    if padded <= MAX_SMALL && !empty {
        4 + padded
    } else {
        8 + padded
    }
}

/// Whether a payload of `len` bytes can be stored in a page of `layout` (readers that take
/// events without pages drop the same ones the pages would).
pub fn fits(layout: &PageLayout, len: usize) -> bool {
    let padded = (len + 3) & !3;
    // A time extend may be needed on top; room for the stored loss count after data.
    let room = layout.page_size - layout.data_offset - layout.commit_size;
    record_size(padded, len == 0) + 8 <= room
}

/// One page being filled; [`PageBuilder::push`] hands back finished pages.
pub struct PageBuilder {
    layout: PageLayout,
    page: Vec<u8>,
    /// Write position in `page`.
    pos: usize,
    /// Timestamp of the last record (or of the page, before the first).
    last_ts: u64,
    /// Events lost before the next record, to be flagged on its page.
    lost: u64,
    page_lost: u64,
    /// A loss without a count before the next record, and on the current page.
    lost_uncounted: bool,
    page_uncounted: bool,
}

impl PageBuilder {
    pub fn new(layout: PageLayout) -> PageBuilder {
        let page = vec![0; layout.page_size];
        PageBuilder {
            pos: layout.data_offset,
            layout,
            page,
            last_ts: 0,
            lost: 0,
            page_lost: 0,
            lost_uncounted: false,
            page_uncounted: false,
        }
    }

    fn endian(&self) -> Endian {
        self.layout.endian
    }

    fn empty(&self) -> bool {
        self.pos == self.layout.data_offset
    }

    /// Notes `n` events lost before the next one pushed (flagged on that page, with the
    /// count stored like the kernel does).
    pub fn lost(&mut self, n: u64) {
        self.lost = self.lost.saturating_add(n);
    }

    /// Notes events lost before the next one pushed, in a number nobody knows (the page
    /// is flagged without a count, as the kernel does when the count has no room).
    pub fn lost_uncounted(&mut self) {
        self.lost_uncounted = true;
    }

    fn loss_pending(&self) -> bool {
        self.lost > 0 || self.lost_uncounted
    }

    /// Adds one event with absolute timestamp `ts` (not earlier than the previous one);
    /// returns a finished page when this event did not fit on the current one. Payloads
    /// larger than a page cannot be stored and return false.
    pub fn push(&mut self, ts: u64, payload: &[u8], done: &mut dyn FnMut(&[u8])) -> bool {
        if !fits(&self.layout, payload.len()) {
            return false;
        }
        let padded = (payload.len() + 3) & !3;
        let rec = record_size(padded, payload.is_empty());
        let room = self.layout.page_size - self.layout.data_offset - self.layout.commit_size;
        let ts = ts.max(self.last_ts);
        let need = rec + if self.empty() { 0 } else { 8 };
        // A gap longer than a time extend holds (59 bits) starts a page, whose header
        // holds the time whole.
        let far = ts - self.last_ts > MAX_DELTA | (u32::MAX as u64) << 27;
        if !self.empty() && (self.loss_pending() || far)
            || self.pos + need > self.layout.data_offset + room
        {
            self.finish_page(done);
        }
        if self.empty() {
            self.start_page(ts);
        }
        let delta = ts - self.last_ts;
        let delta = if delta > MAX_DELTA {
            self.word(TYPE_TIME_EXTEND | ((delta & MAX_DELTA) << 5) as u32);
            self.word((delta >> 27) as u32);
            0
        } else {
            delta
        };
        if rec == 4 + padded {
            self.word((padded / 4) as u32 | (delta << 5) as u32);
        } else {
            self.word((delta << 5) as u32);
            // array[0] counts itself.
            self.word((padded + 4) as u32);
        }
        self.page[self.pos..self.pos + payload.len()].copy_from_slice(payload);
        self.page[self.pos + payload.len()..self.pos + padded].fill(0);
        self.pos += padded;
        self.last_ts = ts;
        true
    }

    fn start_page(&mut self, ts: u64) {
        let e = self.endian();
        self.page.fill(0);
        let ts_at = self.layout.ts_offset;
        e.put_uint(&mut self.page[ts_at..ts_at + 8], ts);
        self.last_ts = ts;
        self.page_lost = std::mem::take(&mut self.lost);
        self.page_uncounted = std::mem::take(&mut self.lost_uncounted);
    }

    fn word(&mut self, w: u32) {
        let e = self.endian();
        e.put_uint(&mut self.page[self.pos..self.pos + 4], w as u64);
        self.pos += 4;
    }

    /// Completes the current page (if it holds anything) and hands it to `done`. Losses
    /// noted after the last event go on a page of their own with no records.
    pub fn finish(&mut self, done: &mut dyn FnMut(&[u8])) {
        self.finish_page(done);
        if self.loss_pending() {
            let ts = self.last_ts;
            self.start_page(ts);
            self.finish_lost_only(done);
        }
    }

    fn finish_lost_only(&mut self, done: &mut dyn FnMut(&[u8])) {
        let e = self.endian();
        let commit = if self.page_uncounted {
            MISSED_EVENTS
        } else {
            let (at, n) = (self.layout.data_offset, self.layout.commit_size);
            e.put_uint(&mut self.page[at..at + n], self.page_lost);
            MISSED_EVENTS | MISSED_STORED
        };
        let (at, n) = (self.layout.commit_offset, self.layout.commit_size);
        e.put_uint(&mut self.page[at..at + n], commit);
        done(&self.page);
        self.page_lost = 0;
        self.page_uncounted = false;
    }

    fn finish_page(&mut self, done: &mut dyn FnMut(&[u8])) {
        if self.empty() {
            return;
        }
        let e = self.endian();
        let data_len = (self.pos - self.layout.data_offset) as u64;
        let mut commit = data_len;
        if self.page_uncounted {
            commit |= MISSED_EVENTS;
        } else if self.page_lost > 0 {
            commit |= MISSED_EVENTS | MISSED_STORED;
            let (at, n) = (self.pos, self.layout.commit_size);
            e.put_uint(&mut self.page[at..at + n], self.page_lost);
        }
        let (at, n) = (self.layout.commit_offset, self.layout.commit_size);
        e.put_uint(&mut self.page[at..at + n], commit);
        done(&self.page);
        self.pos = self.layout.data_offset;
        self.page_lost = 0;
        self.page_uncounted = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{Lost, PageRecords};

    fn layout() -> PageLayout {
        PageLayout::default_for(Endian::Little, 8, 4096)
    }

    #[test]
    fn round_trips_through_the_page_reader() {
        let mut b = PageBuilder::new(layout());
        let mut pages = Vec::new();
        let mut events = Vec::new();
        let mut ts = 1_000u64;
        for i in 0..3000u64 {
            // Small, large and odd-sized payloads; some gaps need a time extend.
            let len = [8usize, 20, 112, 113, 300, 5][i as usize % 6];
            let payload: Vec<u8> = (0..len).map(|k| (i as usize * 7 + k) as u8).collect();
            ts += if i % 97 == 0 { 1 << 30 } else { i % 50 };
            if i == 1500 {
                b.lost(42);
            }
            assert!(b.push(ts, &payload, &mut |p| pages.push(p.to_vec())));
            events.push((ts, payload));
        }
        b.finish(&mut |p| pages.push(p.to_vec()));
        assert!(pages.len() > 10);
        let mut got = Vec::new();
        let mut lost = Vec::new();
        for p in &pages {
            let (h, recs) = PageRecords::new(p, &layout()).unwrap();
            if h.lost != Lost::None {
                lost.push((got.len(), h.lost));
            }
            for r in recs {
                let (ts, data) = r.unwrap();
                got.push((ts, data.to_vec()));
            }
        }
        assert_eq!(got.len(), events.len());
        for ((gts, gdata), (ets, edata)) in got.iter().zip(&events) {
            assert_eq!(gts, ets);
            // Payloads come back padded to 4 bytes.
            assert_eq!(&gdata[..edata.len()], &edata[..]);
            assert!(gdata[edata.len()..].iter().all(|&b| b == 0));
        }
        assert_eq!(lost, vec![(1500, Lost::Count(42))]);
    }

    /// A gap longer than a time extend's 59 bits (a damaged perf.data's times) starts a
    /// page: every time read back is the one pushed (the fuzzer's perfdirect target found
    /// the times after such a gap off by the bits the extend dropped).
    #[test]
    fn gaps_past_a_time_extend_start_a_page() {
        let mut b = PageBuilder::new(layout());
        let mut pages = Vec::new();
        let times = [
            10,
            20,
            20 + (1 << 59),
            21 + (1 << 59),
            u64::MAX - 5,
            u64::MAX,
        ];
        for &ts in &times {
            assert!(b.push(ts, &[1, 2, 3, 4], &mut |p| pages.push(p.to_vec())));
        }
        b.finish(&mut |p| pages.push(p.to_vec()));
        let mut got = Vec::new();
        for p in &pages {
            got.extend(
                PageRecords::new(p, &layout())
                    .unwrap()
                    .1
                    .map(|r| r.unwrap().0),
            );
        }
        assert_eq!(got, times);
        // 2^59 - 1 still fits in the extend: one page for both events.
        let (mut b, mut pages) = (PageBuilder::new(layout()), Vec::new());
        let times = [1, 1 + (1 << 59) - 1];
        for &ts in &times {
            b.push(ts, &[1], &mut |p| pages.push(p.to_vec()));
        }
        b.finish(&mut |p| pages.push(p.to_vec()));
        assert_eq!(pages.len(), 1);
        let (_, recs) = PageRecords::new(&pages[0], &layout()).unwrap();
        assert_eq!(recs.map(|r| r.unwrap().0).collect::<Vec<_>>(), times);
    }

    #[test]
    fn losses_after_the_last_event_get_a_page() {
        let mut b = PageBuilder::new(layout());
        let mut pages = Vec::new();
        b.push(10, &[1, 2, 3, 4], &mut |p| pages.push(p.to_vec()));
        b.lost(7);
        b.finish(&mut |p| pages.push(p.to_vec()));
        assert_eq!(pages.len(), 2);
        let (h, recs) = PageRecords::new(&pages[1], &layout()).unwrap();
        assert_eq!(h.lost, Lost::Count(7));
        assert_eq!(recs.count(), 0);
    }

    #[test]
    fn uncounted_losses_flag_the_page_without_a_count() {
        let mut b = PageBuilder::new(layout());
        let mut pages = Vec::new();
        b.push(10, &[1, 2, 3, 4], &mut |p| pages.push(p.to_vec()));
        b.lost_uncounted();
        b.push(20, &[5, 6, 7, 8], &mut |p| pages.push(p.to_vec()));
        b.lost_uncounted();
        b.finish(&mut |p| pages.push(p.to_vec()));
        let lost: Vec<Lost> = pages
            .iter()
            .map(|p| PageRecords::new(p, &layout()).unwrap().0.lost)
            .collect();
        assert_eq!(lost, vec![Lost::None, Lost::Unknown, Lost::Unknown]);
    }

    #[test]
    fn oversized_payloads_are_refused() {
        let mut b = PageBuilder::new(layout());
        assert!(!b.push(1, &[0u8; 5000], &mut |_| {}));
    }
}
