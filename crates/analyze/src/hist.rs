//! Bounded-memory distributions of durations (or any u64 values).
//!
//! [`LogHist`] is a log-linear histogram in the style of HdrHistogram: values below 256 are
//! counted exactly; above, every power-of-two octave is split into 128 equal buckets, so a
//! bucket's width is at most 1/128 of its lower bound. A percentile is reported as the
//! midpoint of the bucket holding the rank (clamped to the exact min and max), hence its
//! relative error is at most 1/256 (0.4 %), and it is exact below 256 ns. Memory is one
//! counter per bucket between the smallest and largest value seen (at most 7,424 buckets
//! for the whole u64 range; about 1,700 for 100 ns..100 ms), whatever the number of values.
//!
//! Each bucket also keeps the sum of its values, so that a bucket carries (index, count,
//! sum): what kstate's fleet summaries store, and what [`LogHist::merge`] adds exactly.
//! The scheme is documented for other engines in docs/bucket-scheme.md; its name is
//! [`SCHEME`].
//!
//! Octaves are whole runs of buckets, so power-of-two buckets (`--buckets log2`) are
//! exact sums of buckets. Decimal decades (`--buckets log10`) do not line up with the
//! buckets and are counted separately by [`Decades`].

/// Index of the bucket holding u64::MAX.
pub const LAST_BUCKET: u32 = 7423;

/// Values below this are counted one bucket per value.
const EXACT: u64 = 256;
/// log2 of the buckets per octave above `EXACT`.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

/// The name of this bucket scheme, stored with every summary so that a reader refuses
/// buckets of another one (docs/bucket-scheme.md).
pub const SCHEME: &str = "kstate-loglinear-256-128";

/// Relative error bound of [`LogHist::percentile`], as documented in `--help`.
pub const PERCENTILE_REL_ERROR: f64 = 1.0 / 256.0;

#[derive(Debug, Clone, Default)]
pub struct LogHist {
    /// Index of `counts[0]`.
    base: u32,
    counts: Vec<u64>,
    /// Sum of the values in each bucket (saturating), parallel to `counts`.
    sums: Vec<u64>,
    total: u64,
}

/// Bucket index of a value.
#[inline]
pub fn bucket_of(v: u64) -> u32 {
    if v < EXACT {
        return v as u32;
    }
    let e = 63 - v.leading_zeros(); // >= 8
    let shift = e - SUB_BITS;
    let mant = (v >> shift) - SUB; // 0..SUB
    (EXACT as u32) + (e - 8) * SUB as u32 + mant as u32
}

/// The smallest and largest value of bucket `i` (inclusive).
pub fn bucket_range(i: u32) -> (u64, u64) {
    if (i as u64) < EXACT {
        return (i as u64, i as u64);
    }
    let j = i - EXACT as u32;
    let e = 8 + j / SUB as u32;
    let mant = SUB + (j % SUB as u32) as u64;
    let shift = e - SUB_BITS;
    let lo = mant << shift;
    let hi = lo + ((1u64 << shift) - 1);
    (lo, hi)
}

impl LogHist {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let at = self.slot(bucket_of(v));
        self.counts[at] += 1;
        self.sums[at] = self.sums[at].saturating_add(v);
        self.total += 1;
    }

    /// Position of bucket `b` in `counts`, growing the range to hold it.
    #[inline(always)]
    fn slot(&mut self, b: u32) -> usize {
        // Once per sample: a bucket in the range so far is the common case, and the rest
        // (the first sample, a range to grow) is out of line.
        match b.checked_sub(self.base) {
            Some(at) if (at as usize) < self.counts.len() => at as usize,
            _ => self.grow_to(b),
        }
    }

    /// Grows the range of buckets to hold `b`; its position in `counts`.
    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, b: u32) -> usize {
        if self.counts.is_empty() {
            self.base = b;
        }
        if b < self.base {
            let grow = (self.base - b) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.sums.splice(0..0, std::iter::repeat_n(0, grow));
            self.base = b;
        }
        let at = (b - self.base) as usize;
        if at >= self.counts.len() {
            self.counts.resize(at + 1, 0);
            self.sums.resize(at + 1, 0);
        }
        at
    }

    /// Adds `count` values summing to `sum` to bucket `index` (a bucket read back from a
    /// summary). Indexes past the scheme's last bucket are refused.
    pub fn add_bucket(&mut self, index: u32, count: u64, sum: u64) -> Result<(), String> {
        if index > LAST_BUCKET {
            return Err(format!(
                "bucket {index} is past the scheme's last ({LAST_BUCKET})"
            ));
        }
        if count == 0 {
            return Ok(());
        }
        let at = self.slot(index);
        self.counts[at] += count;
        self.sums[at] = self.sums[at].saturating_add(sum);
        self.total += count;
        Ok(())
    }

    /// Adds every value of `other`: the merged histogram is the one of all values at once.
    pub fn merge(&mut self, other: &LogHist) {
        for (i, c, s) in other.indexed() {
            let at = self.slot(i);
            self.counts[at] += c;
            self.sums[at] = self.sums[at].saturating_add(s);
        }
        self.total += other.total;
    }

    /// Non-empty buckets as (index, count, sum of values), in increasing order.
    pub fn indexed(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.counts
            .iter()
            .zip(&self.sums)
            .enumerate()
            .filter(|(_, (&c, _))| c > 0)
            .map(|(i, (&c, &s))| (self.base + i as u32, c, s))
    }

    /// The bucket holding the nearest-rank quantile `permille`/1000 (500: median, 990:
    /// p99, 999: p99.9): the first bucket whose running count c satisfies
    /// c * 1000 >= permille * n, in integers, so that SQL over summed buckets finds the
    /// same one (sql/fleet_quantiles.sql).
    pub fn quantile_bucket(&self, permille: u64) -> Option<u32> {
        let need = permille as u128 * self.total as u128;
        let mut seen = 0u128;
        for (i, c, _) in self.indexed() {
            seen += c as u128;
            if seen * 1000 >= need {
                return Some(i);
            }
        }
        None
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// Non-empty buckets as (lo, hi, count), in increasing order.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| {
                let (lo, hi) = bucket_range(self.base + i as u32);
                (lo, hi, c)
            })
    }

    /// The nearest-rank percentile `p` (0 < p <= 100): the value with rank
    /// ceil(p/100 * n), as the midpoint of its bucket clamped to [min, max].
    pub fn percentile(&self, p: f64, min: u64, max: u64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(self.base + i as u32);
                return (lo + (hi - lo) / 2).clamp(min, max);
            }
        }
        max
    }

    /// Counts per power-of-two bucket: (k, count) where the bucket is [2^k, 2^(k+1)), and
    /// k = -1 stands for the value 0.
    pub fn log2(&self) -> Vec<(i32, u64)> {
        let mut out: Vec<(i32, u64)> = Vec::new();
        for (lo, _, c) in self.buckets() {
            let k = if lo == 0 {
                -1
            } else {
                63 - lo.leading_zeros() as i32
            };
            match out.last_mut() {
                Some((lk, n)) if *lk == k => *n += c,
                _ => out.push((k, c)),
            }
        }
        out
    }
}

/// LKST's decimal buckets: (0, 100 ns], (100 ns, 1 us], (1 us, 10 us], ..., (1 s, 10 s],
/// (10 s, inf).
#[derive(Debug, Clone, Default)]
pub struct Decades {
    pub counts: [u64; DECADES],
}

pub const DECADES: usize = 10;

/// Upper bounds (inclusive) of the decades; the last decade has none.
pub const DECADE_UPPER_NS: [u64; DECADES - 1] = [
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

impl Decades {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = DECADE_UPPER_NS
            .iter()
            .position(|&u| v <= u)
            .unwrap_or(DECADES - 1);
        self.counts[i] += 1;
    }
    /// (lo_exclusive, hi_inclusive) of decade `i`; `None` for no bound.
    pub fn range(i: usize) -> (Option<u64>, Option<u64>) {
        let lo = if i == 0 {
            None
        } else {
            Some(DECADE_UPPER_NS[i - 1])
        };
        (lo, DECADE_UPPER_NS.get(i).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_equal_one_of_all_values() {
        let (mut a, mut b, mut all) = (LogHist::default(), LogHist::default(), LogHist::default());
        for v in (0..5000u64).map(|i| i * i % 100_003) {
            let h = if v % 3 == 0 { &mut a } else { &mut b };
            h.record(v);
            all.record(v);
        }
        let mut m = LogHist::default();
        m.merge(&b);
        m.merge(&a);
        assert_eq!(m.base, all.base);
        assert_eq!(m.counts, all.counts);
        assert_eq!(m.total, all.total);
    }

    #[test]
    fn buckets_tile_the_range() {
        let mut prev_hi = None;
        for i in 0..7424u32 {
            let (lo, hi) = bucket_range(i);
            assert!(lo <= hi);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {i}");
            }
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            if lo >= EXACT {
                assert!((hi - lo + 1) * SUB <= lo, "bucket {i} too wide");
            }
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    /// Percentiles against the exact nearest-rank values of sorted data.
    #[test]
    fn percentiles_within_bound() {
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut vals = Vec::new();
        let mut h = LogHist::default();
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // log-uniform over 1 ns .. 10 s
            let v = (10f64.powf((x % 1_000_000) as f64 / 1_000_000.0 * 10.0)) as u64;
            vals.push(v);
            h.record(v);
        }
        vals.sort_unstable();
        let (min, max) = (vals[0], *vals.last().unwrap());
        for p in [1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            let rank = ((p / 100.0 * vals.len() as f64).ceil() as usize).max(1);
            let exact = vals[rank - 1];
            let got = h.percentile(p, min, max);
            let err = (got as f64 - exact as f64).abs() / exact.max(1) as f64;
            assert!(
                err <= PERCENTILE_REL_ERROR || (exact < EXACT && got == exact),
                "p{p}: {got} vs {exact}"
            );
        }
        let log2_total: u64 = h.log2().iter().map(|x| x.1).sum();
        assert_eq!(log2_total, 100_000);
    }

    #[test]
    fn merge_is_the_histogram_of_all_values() {
        let (mut a, mut b, mut all) = (LogHist::default(), LogHist::default(), LogHist::default());
        for v in [5u64, 300, 70_000, 1 << 33] {
            a.record(v);
            all.record(v);
        }
        for v in [2u64, 301, 1 << 40, 70_001] {
            b.record(v);
            all.record(v);
        }
        a.merge(&b);
        let got: Vec<_> = a.indexed().collect();
        assert_eq!(got, all.indexed().collect::<Vec<_>>());
        assert_eq!(a.count(), 8);
        let s: u64 = got.iter().map(|x| x.2).sum();
        assert_eq!(
            s,
            5 + 300 + 70_000 + (1 << 33) + 2 + 301 + (1 << 40) + 70_001
        );
        // 8 values: the median is the 4th (300 and 301 share bucket 300's), p99 the 8th.
        assert_eq!(a.quantile_bucket(500), Some(bucket_of(300)));
        assert_eq!(a.quantile_bucket(990), Some(bucket_of(1 << 40)));
        assert_eq!(bucket_of(u64::MAX), LAST_BUCKET);
        assert!(a.add_bucket(LAST_BUCKET + 1, 1, 1).is_err());
    }

    #[test]
    fn log2_buckets_are_exact() {
        let mut h = LogHist::default();
        for v in [0, 1, 2, 3, 255, 256, 511, 512, 1 << 40] {
            h.record(v);
        }
        assert_eq!(
            h.log2(),
            vec![(-1, 1), (0, 1), (1, 2), (7, 1), (8, 2), (9, 1), (40, 1)]
        );
    }

    #[test]
    fn decades() {
        let mut d = Decades::default();
        for v in [0, 100, 101, 1000, 1001, 10_000_000_001, u64::MAX] {
            d.record(v);
        }
        assert_eq!(d.counts, [2, 2, 1, 0, 0, 0, 0, 0, 0, 2]);
    }
}
