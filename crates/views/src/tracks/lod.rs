//! Level of detail: a row's summary (its long slices one by one, its short ones summed per
//! bucket) and the rasterizer that turns slices and buckets into at most one drawable per
//! pixel column.

use super::{Kind, Slice};

/// Most columns a view may ask for.
pub const MAX_COLS: usize = 8192;

/// The short slices of one row within one bucket (Δ wide).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// The bucket's start over Δ.
    idx: u64,
    /// Time the slices cover in it, and how many start in it.
    cover: u32,
    count: u32,
    /// The longest of them (its part in this bucket).
    top: Top,
}

#[derive(Debug, Clone, Copy)]
struct Top {
    ns: u32,
    kind: Kind,
    label: u32,
    arg: i32,
}

/// One row's summary: what a view of columns at least Δ wide needs.
#[derive(Debug, Default)]
pub struct RowSum {
    /// Slices at least Δ long, by start once sealed.
    long: Vec<Slice>,
    /// The longest of them: a search for those covering a time starts that much before.
    max_long: u64,
    buckets: Vec<Bucket>,
    pub slices: u64,
    pub covered: u64,
    pub first: u64,
    pub last: u64,
}

impl RowSum {
    pub fn add(&mut self, s: Slice, q: u64) {
        if self.slices == 0 {
            self.first = s.start;
        }
        self.slices += 1;
        self.covered += s.dur();
        self.first = self.first.min(s.start);
        self.last = self.last.max(s.end);
        if s.dur() >= q {
            self.max_long = self.max_long.max(s.dur());
            self.long.push(s);
            return;
        }
        let (i0, i1) = (s.start / q, s.end / q);
        for i in i0..=i1 {
            let lo = s.start.max(i * q);
            let hi = s.end.min((i + 1) * q);
            // A zero-length slice (two events at one time) still shows.
            let ns = hi.saturating_sub(lo).max((s.start == s.end) as u64) as u32;
            let b = self.bucket(i);
            b.cover = b.cover.saturating_add(ns);
            b.count += (i == i0) as u32;
            if ns > b.top.ns {
                b.top = Top {
                    ns,
                    kind: s.kind,
                    label: s.label,
                    arg: s.arg,
                };
            }
        }
    }

    /// Bucket `idx`: slices end in about the order they start, so it is nearly always the
    /// last one or a new one.
    fn bucket(&mut self, idx: u64) -> &mut Bucket {
        let at = match self.buckets.last() {
            Some(b) if b.idx == idx => self.buckets.len() - 1,
            Some(b) if b.idx > idx => match self.buckets.binary_search_by_key(&idx, |b| b.idx) {
                Ok(i) => i,
                Err(i) => {
                    self.buckets.insert(i, Bucket::empty(idx));
                    i
                }
            },
            _ => {
                self.buckets.push(Bucket::empty(idx));
                self.buckets.len() - 1
            }
        };
        &mut self.buckets[at]
    }

    /// Orders the long slices by start (they were added as they ended).
    pub fn seal(&mut self) {
        self.long.sort_by_key(|s| (s.start, s.end));
        self.long.shrink_to_fit();
        self.buckets.shrink_to_fit();
    }

    /// The long slices that cover any of [from, to].
    pub fn long_in(&self, from: u64, to: u64) -> impl Iterator<Item = &Slice> {
        let lo = self
            .long
            .partition_point(|s| s.start < from.saturating_sub(self.max_long));
        self.long[lo..]
            .iter()
            .take_while(move |s| s.start <= to)
            .filter(move |s| s.end >= from)
    }

    /// The buckets over the raster's span, drawn into it (its columns at least Δ wide).
    pub fn add_buckets(&self, r: &mut Raster, q: u64) {
        let lo = self.buckets.partition_point(|b| (b.idx + 1) * q <= r.from);
        let to = r.to;
        for b in self.buckets[lo..].iter().take_while(|b| b.idx * q <= to) {
            let (start, end) = (b.idx * q, (b.idx + 1) * q);
            r.spread(start, end, b.cover as f64, b.top);
        }
    }
}

impl Bucket {
    fn empty(idx: u64) -> Bucket {
        Bucket {
            idx,
            cover: 0,
            count: 0,
            top: Top {
                ns: 0,
                kind: Kind::Running,
                label: 0,
                arg: 0,
            },
        }
    }
}

/// One drawable: columns [c0, c1) hold `kind`/`label`/`arg`, covering `fill`/255 of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Draw {
    pub c0: u32,
    pub c1: u32,
    pub kind: Kind,
    pub label: u32,
    pub arg: i32,
    pub fill: u8,
}

/// Per column, the time covered and the largest single contribution.
pub struct Raster {
    pub from: u64,
    pub to: u64,
    col_ns: f64,
    cover: Vec<f64>,
    best: Vec<Option<(f64, Kind, u32, i32)>>,
}

impl Raster {
    pub fn new(from: u64, to: u64, cols: usize) -> Raster {
        Raster {
            from,
            to,
            col_ns: (to - from) as f64 / cols as f64,
            cover: vec![0.0; cols],
            best: vec![None; cols],
        }
    }

    fn col(&self, t: u64) -> usize {
        let c = (t.saturating_sub(self.from) as f64 / self.col_ns) as usize;
        c.min(self.cover.len() - 1)
    }

    /// Draws one slice.
    pub fn add(&mut self, s: &Slice) {
        let (a, b) = (s.start.max(self.from), s.end.min(self.to));
        if b < a || s.end < self.from || s.start > self.to {
            return;
        }
        let (c0, c1) = (self.col(a), self.col(b));
        for c in c0..=c1 {
            let lo = (self.from as f64 + c as f64 * self.col_ns).max(a as f64);
            let hi = (self.from as f64 + (c + 1) as f64 * self.col_ns).min(b as f64);
            let ns = (hi - lo).max(if a == b { 1.0 } else { 0.0 });
            if ns <= 0.0 {
                continue;
            }
            self.put(c, ns, s.kind, s.label, s.arg);
        }
    }

    /// Spreads a bucket's `cover` over the columns [start, end) overlaps, in proportion.
    fn spread(&mut self, start: u64, end: u64, cover: f64, top: Top) {
        let (a, b) = (start.max(self.from), end.min(self.to));
        if b <= a {
            return;
        }
        let len = (end - start) as f64;
        let (c0, c1) = (self.col(a), self.col(b.saturating_sub(1).max(a)));
        for c in c0..=c1 {
            let lo = (self.from as f64 + c as f64 * self.col_ns).max(a as f64);
            let hi = (self.from as f64 + (c + 1) as f64 * self.col_ns).min(b as f64);
            if hi <= lo {
                continue;
            }
            let part = (hi - lo) / len;
            self.cover[c] += cover * part;
            let ns = top.ns as f64 * part;
            if self.best[c].is_none_or(|x| ns > x.0) {
                self.best[c] = Some((ns, top.kind, top.label, top.arg));
            }
        }
    }

    fn put(&mut self, c: usize, ns: f64, kind: Kind, label: u32, arg: i32) {
        self.cover[c] += ns;
        if self.best[c].is_none_or(|x| ns > x.0) {
            self.best[c] = Some((ns, kind, label, arg));
        }
    }

    /// The drawables: per column the largest contribution, coalesced with the columns
    /// after it that show the same thing as fully.
    pub fn finish(self) -> Vec<Draw> {
        let mut out: Vec<Draw> = Vec::new();
        for (c, (cover, best)) in self.cover.iter().zip(&self.best).enumerate() {
            let Some((_, kind, label, arg)) = *best else {
                continue;
            };
            let fill = ((cover / self.col_ns).min(1.0) * 255.0).round().max(1.0) as u8;
            let c = c as u32;
            if let Some(d) = out.last_mut() {
                if d.c1 == c
                    && d.kind == kind
                    && d.label == label
                    && d.arg == arg
                    && d.fill / 32 == fill / 32
                {
                    d.c1 = c + 1;
                    d.fill = d.fill.max(fill);
                    continue;
                }
            }
            out.push(Draw {
                c0: c,
                c1: c + 1,
                kind,
                label,
                arg,
                fill,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sl(start: u64, end: u64, label: u32) -> Slice {
        Slice {
            start,
            end,
            kind: Kind::Syscall,
            label,
            arg: 0,
        }
    }

    #[test]
    fn buckets_and_long_slices_draw_what_the_slices_draw() {
        let q = 100;
        let mut sum = RowSum::default();
        let slices = [
            sl(0, 10, 1),
            sl(20, 30, 1),
            sl(95, 105, 2),
            sl(300, 800, 3),
            sl(850, 860, 4),
        ];
        for s in slices {
            sum.add(s, q);
        }
        sum.seal();
        assert_eq!(sum.long.len(), 1);
        assert_eq!(sum.long_in(0, 299).count(), 0);
        assert_eq!(sum.long_in(799, 900).count(), 1);
        // Columns of 200 ns: drawn from the summary and from the slices, the same.
        let mut a = Raster::new(0, 1000, 5);
        for s in sum.long_in(0, 1000) {
            a.add(s);
        }
        sum.add_buckets(&mut a, q);
        let mut b = Raster::new(0, 1000, 5);
        for s in &slices {
            b.add(s);
        }
        let (da, db) = (a.finish(), b.finish());
        assert_eq!(da, db);
        // Column 0 holds 30 ns of 200 (label 1 the largest part), 1 half the long slice,
        // 2..=3 the rest of it, 4 the short slice of label 4.
        assert_eq!(
            da.iter().map(|d| (d.c0, d.c1, d.label)).collect::<Vec<_>>(),
            [(0, 1, 1), (1, 2, 3), (2, 4, 3), (4, 5, 4)]
        );
        assert_eq!(da[0].fill, (30.0f64 / 200.0 * 255.0).round() as u8);
        assert_eq!(da[2].fill, 255);
    }
}
