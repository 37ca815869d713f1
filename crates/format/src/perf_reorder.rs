//! One CPU's records put back in time order where perf wrote a few of them out of it.
//!
//! perf drains each CPU's ring buffer in order, but real files still break that order a
//! little: perf 6.x writes some records twice, the copy after later records (70 of 4 M
//! records in a `dd bs=1` recording, the furthest 52 records late). Sorting the whole file
//! for that (the crate's sorting reader and spooled pages) costs twice the direct read, and
//! holding every record in a heap for the sake of those few costs a third more. So the scan
//! finds the stretches of the file where a CPU's records are out of order ([`Disorder`]),
//! and a reader copies and sorts only those ([`Stretch`]).
//!
//! Every pair of records in the wrong order lies inside one stretch: a record that belongs
//! earlier opens a stretch at the first record later than it, and stretches that overlap
//! are joined. So sorting each stretch on its own puts the whole CPU in order.

/// How many records back the scan looks for a record's place, and the most a stretch may
/// hold; a file that needs more goes to the sorting reader.
const LOOK_BACK: usize = 1 << 14;

/// Stretches per CPU past which the file is read by the sorting reader instead (a file out
/// of order throughout, as written from per-thread buffers).
const MAX_STRETCHES: usize = 1 << 16;

/// A stretch of the file, [start, end) in offsets, whose records of one CPU must be sorted.
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
    /// The record at `at`..`end` in the file, at time `ts`.
    #[inline]
    pub fn see(&mut self, ts: u64, at: u64, end: u64) {
        if ts < self.max {
            self.out_of_order(ts, end);
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
    fn out_of_order(&mut self, ts: u64, end: u64) {
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
        while let Some(&(s, e, f)) = self.stretches.last() {
            if e <= start {
                break;
            }
            (start, first) = (start.min(s), first.min(f));
            self.stretches.pop();
        }
        self.stretches.push((start, end, first));
        if self.seen + 1 - first > LOOK_BACK || self.stretches.len() > MAX_STRETCHES {
            self.unbounded = true;
        }
    }

    /// The stretches to sort, None if the records are too far out of order for them.
    pub fn stretches(&self) -> Option<Vec<(u64, u64)>> {
        (!self.unbounded).then(|| self.stretches.iter().map(|&(s, e, _)| (s, e)).collect())
    }
}

/// The records of one stretch, copied as they are read and handed out sorted by time
/// (records of equal time in file order).
#[derive(Default)]
pub(crate) struct Stretch {
    bytes: Vec<u8>,
    /// Time, start and length in `bytes` and file offset of each record, sorted once the
    /// stretch is read.
    records: Vec<(u64, usize, usize, u64)>,
    next: usize,
}

impl Stretch {
    pub fn push(&mut self, ts: u64, record: &[u8], at: u64) {
        if self.next > 0 && self.is_empty() {
            // The last stretch is all handed out: start afresh.
            self.records.clear();
            self.bytes.clear();
            self.next = 0;
        }
        self.records.push((ts, self.bytes.len(), record.len(), at));
        self.bytes.extend_from_slice(record);
    }

    /// Every record is in: sort them.
    pub fn sort(&mut self) {
        // Stable: records of equal time keep their order in the file.
        self.records.sort_by_key(|r| r.0);
        self.next = 0;
    }

    /// The next record in time order: its time, its place in [`Stretch::bytes`] (which
    /// holds it until the next `push`), and its file offset.
    pub fn pop(&mut self) -> Option<(u64, usize, usize, u64)> {
        let r = self.records.get(self.next).copied()?;
        self.next += 1;
        Some(r)
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Nothing left to hand out (nothing pushed, or all popped).
    pub fn is_empty(&self) -> bool {
        self.next >= self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of 10 bytes each at these times: the stretches, as record numbers.
    fn stretches(times: &[u64]) -> Option<Vec<(u64, u64)>> {
        let mut d = Disorder::default();
        for (i, &t) in times.iter().enumerate() {
            let at = 10 * i as u64;
            d.see(t, at, at + 10);
        }
        d.stretches()
            .map(|v| v.into_iter().map(|(s, e)| (s / 10, e / 10)).collect())
    }

    /// Sorts each stretch of `times` alone, as a reader does.
    fn read(times: &[u64], st: &[(u64, u64)]) -> Vec<u64> {
        let mut out = Vec::new();
        let mut s = Stretch::default();
        for (i, &t) in times.iter().enumerate() {
            let i = i as u64;
            match st.iter().find(|&&(a, b)| a <= i && i < b) {
                Some(&(_, end)) => {
                    s.push(t, &[0], 0);
                    if i + 1 == end {
                        s.sort();
                        while let Some((t, _, _, _)) = s.pop() {
                            out.push(t);
                        }
                    }
                }
                None => out.push(t),
            }
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
        assert_eq!(stretches(&[4, 5, 6, 5, 6, 7]), Some(vec![(2, 4)]));
        assert_eq!(stretches(&[10, 11, 12, 13, 9]), Some(vec![(0, 5)]));
        // Two apart, and two that overlap joined.
        assert_eq!(
            stretches(&[1, 3, 2, 4, 5, 6, 8, 7, 9]),
            Some(vec![(1, 3), (6, 8)])
        );
        assert_eq!(stretches(&[1, 5, 6, 7, 2, 8, 3]), Some(vec![(1, 7)]));
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
            assert_eq!(read(&times, &st), want, "{times:?} in {st:?}");
        }
    }

    #[test]
    fn equal_times_keep_file_order() {
        let mut s = Stretch::default();
        for (t, b) in [(5, 1u8), (5, 2), (4, 3), (5, 4)] {
            s.push(t, &[b], 0);
        }
        s.sort();
        let mut out = Vec::new();
        while let Some((_, at, _, _)) = s.pop() {
            out.push(s.bytes()[at]);
        }
        assert_eq!(out, [3, 1, 2, 4]);
        assert!(s.is_empty());
        s.push(1, &[9], 0);
        assert_eq!(s.bytes(), [9]);
    }
}
