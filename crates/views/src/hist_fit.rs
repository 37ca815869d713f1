//! Bars that fit a distribution, for charts: the decimal decades of `--dist --buckets
//! log10` put queue lengths of 1 to 64 in one `<=100` bar and a memory level that moves
//! by a few per cent in one bar too. From a key's histogram ([`LogHist`], exact below 256
//! and within 1/128 above), bars are chosen by the values' spread: one per value for a
//! few small integers, equal widths of 1, 2 or 5 times a power of ten when the largest
//! value is at most twenty times the smallest, else 1-2-5 steps per decade.

use kstate_analyze::hist::{bucket_range, LogHist};
use kstate_analyze::stats::Agg;

/// One bar: values from `lo` to `hi` (inclusive), how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    pub lo: u64,
    pub hi: u64,
    pub count: u64,
}

/// How the bars were cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// One bar per value.
    Values,
    /// Equal widths.
    Linear,
    /// 1-2-5 steps per decade.
    Log,
}

/// The bars of `agg`'s values (at most about `max_bars`), and whether every count is exact
/// (each histogram bucket fell in one bar; else a bucket went to the bar holding its
/// values' mean, off by at most its width, 1/128 of its values).
pub fn fit(agg: &Agg, max_bars: usize) -> (Scale, Vec<Bar>, bool) {
    let max_bars = max_bars.max(2) as u64;
    if agg.count == 0 {
        return (Scale::Values, Vec::new(), true);
    }
    let (lo, hi) = (agg.min(), agg.max);
    let (scale, edges) = if hi - lo < max_bars && hi < 256 {
        (Scale::Values, (lo..=hi + 1).collect::<Vec<u64>>())
    } else if hi <= lo.saturating_mul(20) || hi < 256 {
        let width = nice((hi - lo) / max_bars + 1);
        let start = lo / width * width;
        let mut e = vec![start];
        while *e.last().expect("not empty") <= hi {
            let next = e.last().expect("not empty").saturating_add(width);
            if next == *e.last().expect("not empty") {
                break;
            }
            e.push(next);
        }
        (Scale::Linear, e)
    } else {
        (Scale::Log, log_edges(lo, hi, max_bars))
    };
    let mut bars: Vec<Bar> = edges
        .windows(2)
        .map(|w| Bar {
            lo: w[0],
            hi: w[1] - 1,
            count: 0,
        })
        .collect();
    let exact = assign(&agg.hist, &mut bars);
    (scale, bars, exact)
}

/// 1, 2 or 5 times a power of ten, at least `x`.
fn nice(x: u64) -> u64 {
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if let Some(v) = p.checked_mul(m) {
                if v >= x {
                    return v;
                }
            }
        }
        match p.checked_mul(10) {
            Some(n) => p = n,
            None => return u64::MAX,
        }
    }
}

/// Edges 1, 2, 5, 10, 20, ... from the last at or below `lo` to the first past `hi`;
/// decades only where 1-2-5 would give more than `max_bars` bars.
fn log_edges(lo: u64, hi: u64, max_bars: u64) -> Vec<u64> {
    let mut decade = 1u64;
    while decade.saturating_mul(10) <= lo.max(1) {
        decade *= 10;
    }
    let decades = (hi.max(1) as f64 / decade as f64).log10().ceil().max(1.0) as u64;
    let steps: &[u64] = if decades * 3 <= max_bars {
        &[1, 2, 5]
    } else {
        &[1]
    };
    let mut e: Vec<u64> = Vec::new();
    let mut d = decade;
    loop {
        for m in steps {
            let v = d.saturating_mul(*m);
            if e.last() != Some(&v) {
                e.push(v);
            }
            if v > hi || v == u64::MAX {
                let first = e.iter().rposition(|&x| x <= lo).unwrap_or(0);
                let mut e = e.split_off(first);
                if e[0] > lo {
                    e.insert(0, 0);
                }
                return e;
            }
        }
        d = d.saturating_mul(10);
    }
}

/// `agg`'s values counted in `bars` (cut for another side, say), and whether exactly.
pub fn recount(agg: &Agg, bars: &[Bar]) -> (Vec<u64>, bool) {
    let mut b: Vec<Bar> = bars.iter().map(|b| Bar { count: 0, ..*b }).collect();
    if b.is_empty() {
        return (Vec::new(), agg.count == 0);
    }
    let exact = assign(&agg.hist, &mut b);
    (b.iter().map(|x| x.count).collect(), exact)
}

/// Adds each histogram bucket to the bar that holds it (or its mean); whether all were
/// held whole.
fn assign(h: &LogHist, bars: &mut [Bar]) -> bool {
    let mut exact = true;
    for (i, count, sum) in h.indexed() {
        let (blo, bhi) = bucket_range(i);
        let mean = sum / count.max(1);
        let at = bars.partition_point(|b| b.hi < mean).min(bars.len() - 1);
        let b = &mut bars[at];
        b.count += count;
        if blo < b.lo || bhi > b.hi {
            exact = false;
        }
    }
    exact
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(vals: impl IntoIterator<Item = u64>) -> Agg {
        let mut a = Agg::default();
        for v in vals {
            a.add(v, false, false);
        }
        a
    }

    #[test]
    fn bars_fit_the_values() {
        // Queue lengths 1..=64: equal widths of 5, not one `<=100` bar.
        let a = agg((1..=64).chain(1..=8));
        let (scale, bars, exact) = fit(&a, 20);
        assert_eq!(scale, Scale::Linear);
        assert_eq!((bars[0].lo, bars[0].hi, bars[0].count), (0, 4, 4 + 4));
        assert_eq!(bars.last().unwrap().hi, 64);
        assert_eq!(bars.iter().map(|b| b.count).sum::<u64>(), 72);
        assert!(exact);
        // A few values: one bar each.
        let (scale, bars, _) = fit(&agg([3, 3, 4, 7]), 20);
        assert_eq!(scale, Scale::Values);
        assert_eq!(bars.len(), 5);
        assert_eq!(
            bars.iter().map(|b| b.count).collect::<Vec<_>>(),
            [2, 1, 0, 0, 1]
        );
        // A memory level moving by a few per cent: linear, many bars.
        let (scale, bars, _) = fit(&agg([1_000_000_000, 1_010_000_000, 1_030_000_000]), 20);
        assert_eq!(scale, Scale::Linear);
        assert!(bars.len() >= 10, "{bars:?}");
        // Durations over decades: 1-2-5 steps.
        let (scale, bars, _) = fit(&agg([150, 3_000, 70_000, 2_000_000]), 40);
        assert_eq!(scale, Scale::Log);
        assert_eq!(bars[0].lo, 100);
        assert_eq!(bars.iter().map(|b| b.count).sum::<u64>(), 4);
        assert!(bars.windows(2).all(|w| w[0].hi + 1 == w[1].lo));
        assert!(bars.last().unwrap().hi >= 2_000_000);
    }
}
