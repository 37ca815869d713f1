//! One CPU's records put back in time order where perf wrote a few of them out of it.
//!
//! perf drains each CPU's ring buffer in order, but real files still break that order a
//! little: perf 6.x writes some records twice, the copy after later records (70 of 4 M
//! records in a `dd bs=1` recording, the furthest 52 records late). Sorting the whole file
//! for that (the crate's sorting reader and spooled pages) costs twice the direct read, and
//! holding every record in a heap for the sake of those few costs a third more. So the scan
//! finds the stretches of the file where a CPU's records are out of order ([`Disorder`]),
//! and a reader copies and sorts only those ([`Sorter`]).
//!
//! Every pair of records in the wrong order lies inside one stretch: a record that belongs
//! earlier opens a stretch at the first record later than it, and stretches that overlap
//! are joined. So sorting each stretch on its own puts the whole CPU in order.

/// How many records back the scan looks for a record's place, and the most a stretch may
/// hold; a file that needs more goes to the sorting reader.
pub(crate) const LOOK_BACK: usize = 1 << 14;

/// Stretches per CPU past which the file is read by the sorting reader instead (a file out
/// of order throughout, as written from per-thread buffers).
const MAX_STRETCHES: usize = 1 << 16;

/// Stretches of the file whose records of one CPU must be sorted: the offsets of each one's
/// first and last record.
pub(crate) type Stretches = std::sync::Arc<[(u64, u64)]>;

/// What the scan learns of one CPU's order, record by record in file order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Disorder {
    /// For each of the last `LOOK_BACK` records, a ring by record number: the latest time
    /// up to it (non-decreasing, so the first later time is found by bisection) and its
    /// offset.
    latest: Vec<(u64, u64)>,
    seen: usize,
    max: u64,
    /// The stretches found so far, and the record number each starts at.
    stretches: Vec<(u64, u64, usize)>,
    /// Set when a record belongs further back than the look-back, or there are too many
    /// stretches to keep.
    unbounded: bool,
}

impl Disorder {
    /// The record at offset `at` in the file, at time `ts`.
    #[inline]
    pub fn see(&mut self, ts: u64, at: u64) {
        if ts < self.max {
            self.out_of_order(ts, at);
        }
        self.max = self.max.max(ts);
        if self.latest.len() < LOOK_BACK {
            self.latest.push((self.max, at));
        } else {
            self.latest[self.seen % LOOK_BACK] = (self.max, at);
        }
        self.seen += 1;
    }

    #[cold]
    fn out_of_order(&mut self, ts: u64, last: u64) {
        if self.unbounded {
            return;
        }
        let held = self.latest.len();
        let oldest = self.seen - held;
        let at = |i: usize| self.latest[(oldest + i) % LOOK_BACK];
        // The stretch starts at the first record later than `ts`.
        let (mut lo, mut hi) = (0, held);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if at(mid).0 > ts {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == 0 && oldest > 0 {
            // A later record may lie before the ring: too far back to tell.
            self.unbounded = true;
            return;
        }
        let (mut start, mut first) = (at(lo).1, oldest + lo);
        while let Some(&(s, l, f)) = self.stretches.last() {
            if l < start {
                break;
            }
            (start, first) = (start.min(s), first.min(f));
            self.stretches.pop();
        }
        self.stretches.push((start, last, first));
        if self.seen + 1 - first > LOOK_BACK || self.stretches.len() > MAX_STRETCHES {
            self.unbounded = true;
        }
    }

    /// The latest time seen.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Takes over what `next` saw of the records after this one's, where none of them is
    /// earlier than [`Disorder::max`] (so no pair out of order spans the two): their
    /// stretches are this one's too. Nothing is seen after.
    pub fn append(&mut self, next: Disorder) {
        let seen = self.seen;
        let moved = next.stretches.into_iter().map(|(s, l, f)| (s, l, f + seen));
        self.stretches.extend(moved);
        self.unbounded |= next.unbounded || self.stretches.len() > MAX_STRETCHES;
        self.max = self.max.max(next.max);
        self.seen += next.seen;
        self.latest = Vec::new();
    }

    /// The stretches to sort, None if the records are too far out of order for them.
    pub fn stretches(&self) -> Option<Vec<(u64, u64)>> {
        (!self.unbounded).then(|| self.stretches.iter().map(|&(s, e, _)| (s, e)).collect())
    }
}

/// Where one reader stands in a CPU's stretches: it offers each of the CPU's records it
/// wants, in file order, and hands on those it is told to pass, or the sorted records of a
/// stretch once that is whole. Both readers of perf.data use it (`direct` straight,
/// `stream` into pages), so they give one order.
pub(crate) struct Sorter {
    stretches: Stretches,
    next: usize,
    /// The offset the batch being gathered runs to (the last record of its stretches).
    last: Option<u64>,
    batch: Batch,
}

/// What became of an offered record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// In no stretch: hand it on now.
    Pass,
    /// Copied into the stretch being gathered.
    Held,
    /// It completed the stretch: [`Sorter::pop`] hands out its records in time order.
    Ready,
}

impl Sorter {
    pub fn new(stretches: Stretches) -> Sorter {
        Sorter {
            stretches,
            next: 0,
            last: None,
            batch: Batch::default(),
        }
    }

    /// The record at offset `at`, at time `ts`.
    #[inline]
    pub fn offer(&mut self, ts: u64, record: &[u8], at: u64) -> Offer {
        if self.last.is_none() {
            // Stretches whose records were all left out lie behind.
            while self.stretches.get(self.next).is_some_and(|s| s.1 < at) {
                self.next += 1;
            }
            match self.stretches.get(self.next) {
                Some(&(first, _)) if first <= at => {}
                _ => return Offer::Pass,
            }
        }
        self.gather(ts, record, at)
    }

    /// Where records start to need [`Sorter::offer`], for a reader at offset `at`: the
    /// first record of the next stretch (`u64::MAX` if none is left); every record
    /// before it would pass. None while a stretch is gathered or handed out.
    #[inline]
    pub fn clear_from(&mut self, at: u64) -> Option<u64> {
        if self.last.is_some() || self.batch.next < self.batch.records.len() {
            return None;
        }
        while self.stretches.get(self.next).is_some_and(|s| s.1 < at) {
            self.next += 1;
        }
        Some(self.stretches.get(self.next).map_or(u64::MAX, |s| s.0))
    }

    #[cold]
    fn gather(&mut self, ts: u64, record: &[u8], at: u64) -> Offer {
        self.batch.push(ts, record, at);
        // Where a stretch's last records were left out, the record after it joins it, and
        // the stretches it lies in too: sorting them together orders them as well.
        let mut last = self.last.unwrap_or(0);
        while let Some(&(first, l)) = self.stretches.get(self.next) {
            if first > at {
                break;
            }
            last = last.max(l);
            self.next += 1;
        }
        if at >= last {
            self.last = None;
            self.batch.sort();
            Offer::Ready
        } else {
            self.last = Some(last);
            Offer::Held
        }
    }

    /// No record is left to offer: the stretch gathered so far is sorted for `pop`.
    pub fn finish(&mut self) {
        if self.last.take().is_some() {
            self.batch.sort();
        }
    }

    /// The next record of a whole stretch in time order: its time, its place in
    /// [`Sorter::bytes`] (which holds it until the next `offer`), and its file offset.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, usize, usize, u64)> {
        if self.last.is_some() {
            return None;
        }
        self.batch.pop()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.batch.bytes
    }
}

/// The records of one stretch, copied as they are read and handed out sorted by time
/// (records of equal time in file order).
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Time, start and length in `bytes` and file offset of each record, sorted once the
    /// stretch is read.
    records: Vec<(u64, usize, usize, u64)>,
    next: usize,
}

impl Batch {
    fn push(&mut self, ts: u64, record: &[u8], at: u64) {
        if self.next > 0 && self.next >= self.records.len() {
            // The last stretch is all handed out: start afresh.
            self.records.clear();
            self.bytes.clear();
            self.next = 0;
        }
        self.records.push((ts, self.bytes.len(), record.len(), at));
        self.bytes.extend_from_slice(record);
    }

    fn sort(&mut self) {
        // Stable: records of equal time keep their order in the file.
        self.records.sort_by_key(|r| r.0);
        self.next = 0;
    }

    fn pop(&mut self) -> Option<(u64, usize, usize, u64)> {
        let r = self.records.get(self.next).copied()?;
        self.next += 1;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records 10 bytes apart at these times: the stretches, as record numbers.
    fn stretches(times: &[u64]) -> Option<Vec<(u64, u64)>> {
        let mut d = Disorder::default();
        for (i, &t) in times.iter().enumerate() {
            d.see(t, 10 * i as u64);
        }
        d.stretches()
            .map(|v| v.into_iter().map(|(s, l)| (s / 10, l / 10)).collect())
    }

    /// What a reader hands on: every record offered to a [`Sorter`] over `st`, except
    /// those in `left_out`.
    fn read(times: &[u64], st: &[(u64, u64)], left_out: &[usize]) -> Vec<u64> {
        let mut out = Vec::new();
        let mut s = Sorter::new(st.iter().map(|&(a, b)| (10 * a, 10 * b)).collect());
        for (i, &t) in times.iter().enumerate() {
            if left_out.contains(&i) {
                continue;
            }
            match s.offer(t, &[i as u8], 10 * i as u64) {
                Offer::Pass => out.push(t),
                Offer::Held => {}
                Offer::Ready => {
                    while let Some((t, _, _, _)) = s.pop() {
                        out.push(t);
                    }
                }
            }
        }
        s.finish();
        while let Some((t, _, _, _)) = s.pop() {
            out.push(t);
        }
        out
    }

    #[test]
    fn in_order_has_no_stretch() {
        assert_eq!(stretches(&[1, 2, 2, 3]), Some(vec![]));
    }

    #[test]
    fn a_stretch_runs_from_the_first_later_record_to_the_early_one() {
        // perf's duplicates: 5 6 5 6 (the copy of 5 goes back past one 6).
        assert_eq!(stretches(&[4, 5, 6, 5, 6, 7]), Some(vec![(2, 3)]));
        assert_eq!(stretches(&[10, 11, 12, 13, 9]), Some(vec![(0, 4)]));
        // Two apart, and two that overlap joined.
        assert_eq!(
            stretches(&[1, 3, 2, 4, 5, 6, 8, 7, 9]),
            Some(vec![(1, 2), (6, 7)])
        );
        assert_eq!(stretches(&[1, 5, 6, 7, 2, 8, 3]), Some(vec![(1, 6)]));
    }

    #[test]
    fn too_far_back_or_too_long_is_unbounded() {
        let mut t: Vec<u64> = (10..10 + LOOK_BACK as u64 + 5).collect();
        assert_eq!(stretches(&t).map(|s| s.len()), Some(0));
        t.push(5);
        assert_eq!(stretches(&t), None);
        // Within the look-back it is a stretch.
        let mut t: Vec<u64> = (10..10 + LOOK_BACK as u64 + 5).collect();
        t.push(20);
        assert_eq!(stretches(&t).map(|s| s.len()), Some(1));
        // Many short stretches are kept; stretches that join into one too long are not.
        let t: Vec<u64> = (0..2 * LOOK_BACK as u64).map(|i| i ^ 1).collect();
        assert_eq!(stretches(&t).map(|s| s.len()), Some(LOOK_BACK));
        let t: Vec<u64> = (0..LOOK_BACK as u64)
            .flat_map(|k| [2 * k + 3, k + 1])
            .collect();
        assert_eq!(stretches(&t[..200]).map(|s| s.len()), Some(1));
        assert_eq!(stretches(&t), None);
    }

    #[test]
    fn sorting_each_stretch_puts_every_record_in_place() {
        for times in [
            vec![4, 5, 6, 5, 6, 7],
            vec![10, 11, 12, 13, 9, 14],
            vec![1, 5, 6, 7, 2, 8, 3, 9, 9, 4, 10],
            vec![1, 3, 2, 4, 5, 6, 8, 7, 9],
            vec![3, 2, 1],
        ] {
            let st = stretches(&times).unwrap();
            let mut want = times.clone();
            want.sort();
            assert_eq!(read(&times, &st, &[]), want, "{times:?} in {st:?}");
        }
    }

    /// A reader that leaves out a stretch's last record, or all of a stretch's records,
    /// still hands on every other record, in order.
    #[test]
    fn records_left_out_of_a_stretch() {
        let times = [1, 3, 2, 4, 5, 6, 8, 7, 9];
        let st = stretches(&times).unwrap();
        assert_eq!(read(&times, &st, &[2]), [1, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(read(&times, &st, &[1, 2]), [1, 4, 5, 6, 7, 8, 9]);
        assert_eq!(read(&times, &st, &[7]), [1, 2, 3, 4, 5, 6, 8, 9]);
        assert_eq!(read(&times, &st, &[7, 8]), [1, 2, 3, 4, 5, 6, 8]);
    }

    #[test]
    fn equal_times_keep_file_order() {
        let mut s = Sorter::new(Stretches::from([(0, 30)]));
        let mut offers = Vec::new();
        for (i, (t, b)) in [(5, 1u8), (5, 2), (4, 3), (5, 4)].into_iter().enumerate() {
            offers.push(s.offer(t, &[b], 10 * i as u64));
        }
        assert_eq!(
            offers,
            [Offer::Held, Offer::Held, Offer::Held, Offer::Ready]
        );
        let mut out = Vec::new();
        while let Some((_, at, _, _)) = s.pop() {
            out.push(s.bytes()[at]);
        }
        assert_eq!(out, [3, 1, 2, 4]);
        // Past the stretch, records pass.
        assert_eq!(s.offer(6, &[5], 40), Offer::Pass);
    }
}
