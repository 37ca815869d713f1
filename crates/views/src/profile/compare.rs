//! Each symbol's share of one count next to its share of another over the same run: the
//! cache-pollution signature of the seed (a function with 63 % of the cache misses but 7 %
//! of the accesses). The base count is what a symbol does (references, time); the tested
//! counts are what it costs (misses, faults). A symbol whose tested share is at least
//! `ratio` times its base share, and at least `min_share` %, is flagged: it causes far more
//! than its part of the cost.
//!
//! `kstate profile --compare-events` feeds it two sampled events of one recording;
//! `kstate cachesim` the data references and D1/LL misses of cachegrind's simulation.

use std::collections::HashMap;

use kstate_format::{Error, ErrorKind};

/// When a symbol is flagged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Tested share over base share.
    pub ratio: f64,
    /// Smallest tested share (percent) worth flagging: below it, a few samples make any
    /// ratio.
    pub min_share: f64,
}

impl Thresholds {
    /// `ratio` and `min_share` checked: a positive ratio, a share in 0..100 (named by the
    /// options that set them, `--ratio` and `--min-share`).
    pub fn checked(ratio: f64, min_share: f64) -> Result<Thresholds, Error> {
        let fine = ratio.is_finite() && ratio > 0.0 && (0.0..=100.0).contains(&min_share);
        if !fine {
            return Err(Error::new(
                ErrorKind::Unsupported,
                None,
                format!(
                    "--ratio {ratio} must be a positive number and --min-share {min_share} a percentage (0..100)"
                ),
            ));
        }
        Ok(Thresholds { ratio, min_share })
    }
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            ratio: 3.0,
            min_share: 5.0,
        }
    }
}

/// One count over the symbols of a run.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// What is counted, e.g. `page-faults` or `D1 misses (D1mr+D1mw)`.
    pub name: String,
    /// The whole run's count: shares are of it.
    pub total: u64,
    /// Of the counts, when not plain events (`ns` for cpu-clock's periods).
    pub unit: &'static str,
    /// (symbol, image) -> count; a key may repeat (summed).
    pub by_symbol: Vec<((String, String), u64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub symbol: String,
    pub image: String,
    pub base: u64,
    pub base_share: f64,
    /// Per tested count: the symbol's count, share and share over the base share (None
    /// when its base share is 0).
    pub tested: Vec<Tested>,
    pub flagged: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tested {
    pub count: u64,
    pub share: f64,
    pub ratio: Option<f64>,
}

/// A count's name, total and unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Total {
    pub name: String,
    pub total: u64,
    pub unit: &'static str,
}

impl Total {
    fn of(c: &Counts) -> Total {
        Total {
            name: c.name.clone(),
            total: c.total,
            unit: c.unit,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Comparison {
    /// Names and totals of the base and the tested counts.
    pub base: Total,
    pub tested: Vec<Total>,
    pub thresholds: Thresholds,
    /// Flagged rows first, then by the largest share of any count.
    pub rows: Vec<Row>,
}

fn share(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    }
}

pub fn compare(base: &Counts, tested: &[Counts], t: Thresholds) -> Comparison {
    let k = tested.len();
    // symbol -> (base count, tested counts)
    let mut m: HashMap<&(String, String), (u64, Vec<u64>)> = HashMap::new();
    for (key, n) in &base.by_symbol {
        m.entry(key).or_insert_with(|| (0, vec![0; k])).0 += n;
    }
    for (i, c) in tested.iter().enumerate() {
        for (key, n) in &c.by_symbol {
            m.entry(key).or_insert_with(|| (0, vec![0; k])).1[i] += n;
        }
    }
    let mut rows: Vec<Row> = m
        .into_iter()
        .filter(|(_, (b, ns))| *b > 0 || ns.iter().any(|&n| n > 0))
        .map(|(key, (b, ns))| {
            let base_share = share(b, base.total);
            let tested: Vec<Tested> = ns
                .iter()
                .zip(tested)
                .map(|(&n, c)| {
                    let s = share(n, c.total);
                    Tested {
                        count: n,
                        share: s,
                        ratio: (base_share > 0.0).then(|| s / base_share),
                    }
                })
                .collect();
            let flagged = tested
                .iter()
                .any(|x| x.share >= t.min_share && x.ratio.is_none_or(|r| r >= t.ratio));
            Row {
                symbol: key.0.clone(),
                image: key.1.clone(),
                base: b,
                base_share,
                tested,
                flagged,
            }
        })
        .collect();
    // The flagged first, then the largest share of any count: the heavy users show
    // next to the polluters.
    let top = |r: &Row| {
        r.tested
            .iter()
            .map(|x| x.share)
            .fold(r.base_share, f64::max)
    };
    rows.sort_by(|a, b| {
        b.flagged
            .cmp(&a.flagged)
            .then(top(b).total_cmp(&top(a)))
            .then(b.base_share.total_cmp(&a.base_share))
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.image.cmp(&b.image))
    });
    Comparison {
        base: Total::of(base),
        tested: tested.iter().map(Total::of).collect(),
        thresholds: t,
        rows,
    }
}

impl super::Profile {
    /// The profile's per-symbol periods as a count for [`compare`].
    pub fn counts(&self) -> Counts {
        Counts {
            name: self.event.clone(),
            total: self.total_period,
            // The clock events' periods are nanoseconds.
            unit: match self.event.as_str() {
                "cpu-clock" | "task-clock" => "ns",
                _ => "",
            },
            by_symbol: self
                .rows
                .iter()
                .map(|r| ((r.sym.name.clone(), r.sym.image.clone()), r.period))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(name: &str, rows: &[(&str, u64)]) -> Counts {
        Counts {
            name: name.into(),
            total: rows.iter().map(|r| r.1).sum(),
            unit: "",
            by_symbol: rows
                .iter()
                .map(|(s, n)| ((s.to_string(), "img".to_string()), *n))
                .collect(),
        }
    }

    #[test]
    fn the_seed_signature_is_flagged() {
        // 7 % of the references, 63 % of the misses.
        let refs = counts("refs", &[("stream", 7), ("hot", 90), ("rare", 3)]);
        let miss = counts(
            "miss",
            &[("stream", 63), ("hot", 33), ("rare", 4), ("nothing", 0)],
        );
        let c = compare(&refs, &[miss], Thresholds::default());
        assert_eq!(c.rows[0].symbol, "stream");
        assert_eq!(c.rows[1].symbol, "hot");
        assert!(c.rows[0].flagged);
        assert!((c.rows[0].tested[0].ratio.unwrap() - 9.0).abs() < 1e-9);
        let hot = c.rows.iter().find(|r| r.symbol == "hot").unwrap();
        assert!(!hot.flagged);
        // 4 % of the misses in 3 % of the references: neither ratio nor share enough.
        assert!(!c.rows.iter().find(|r| r.symbol == "rare").unwrap().flagged);
        assert_eq!((c.base.name.as_str(), c.base.total), ("refs", 100));
        // Symbols with nothing counted are no rows.
        assert_eq!(c.rows.len(), 3);
    }

    #[test]
    fn thresholds_and_missing_base() {
        let refs = counts("refs", &[("a", 99), ("b", 1)]);
        let miss = counts("miss", &[("a", 94), ("b", 4), ("c", 2)]);
        // b: 4 % of misses in 1 % of references.
        let t = Thresholds {
            ratio: 3.0,
            min_share: 3.0,
        };
        let c = compare(&refs, std::slice::from_ref(&miss), t);
        let row = |c: &Comparison, s: &str| c.rows.iter().find(|r| r.symbol == s).cloned();
        assert!(row(&c, "b").unwrap().flagged);
        // c has no references at all: a share with no base is flagged when large enough.
        assert_eq!(row(&c, "c").unwrap().tested[0].ratio, None);
        assert!(!row(&c, "c").unwrap().flagged);
        let t = Thresholds {
            ratio: 3.0,
            min_share: 2.0,
        };
        assert!(row(&compare(&refs, &[miss], t), "c").unwrap().flagged);
        // Either of two tested counts flags.
        let m1 = counts("m1", &[("a", 100)]);
        let m2 = counts("m2", &[("a", 50), ("b", 50)]);
        let c = compare(&refs, &[m1, m2], Thresholds::default());
        assert!(row(&c, "b").unwrap().flagged && !row(&c, "a").unwrap().flagged);
    }
}
