//! Two recordings side by side (A, the baseline, and B): per analyzer and key the count,
//! total, average and p99 of each, B's ratio to A and the difference, which keys
//! regressed, and a ranked list of what changed most. `kstate compare` prints it and the
//! browser UI shows it; both ask [`compare_sources`] (or [`compare_outcomes`] for results
//! already at hand), so they agree.
//!
//! (`profile::compare` is another question: one run's per-symbol shares of two counts.)
//!
//! Rules, the same everywhere (`kstate compare --help` prints [`RULES`]):
//! - a key is compared when both recordings have it; keys seen in one only are listed as
//!   such, with no ratio;
//! - ratios and regressions need at least `min_count` samples on each side (a p99 of
//!   three samples is their maximum);
//! - a key regressed when the chosen metric of B is at least `threshold` times A's, for
//!   analyzers whose values are durations (more time is worse; for sizes and levels more
//!   is not obviously worse, so they are compared but never flagged);
//! - "what changed most" ranks keys by impact: the wall time a key added per second of
//!   recording (its total per second of B minus its total per second of A, for durations
//!   that are time spent), then its p99 growth weighted by how often it happens (p99 B
//!   minus p99 A, times B's count per second); a key of one recording only is ranked
//!   against zero on the other side. Each entry also names the metric whose ratio is
//!   farthest from 1. (A ranking by ratios alone put a sleep's p99 regression 101st of
//!   131 behind rare calls that went from 3 to 9.)
//! - two stretches of different lengths (inside a window against outside it) compare
//!   counts and totals per second of each.

use kstate_analyze::analyzer::{Outcome, Row, Unit};
use kstate_analyze::filter::Filters;
use kstate_analyze::{analyzers, Error, Info, Query, Source};

/// The rules as `kstate compare --help` prints them.
pub const RULES: &str = "\
How recordings are compared (A is the baseline, B the new one):
  Every analyzer that applies to both runs over each with the same filters. Per analyzer
  and key: count, total, avg and p99 of A and B, the ratio B/A and the difference B-A.
  A key is compared when both recordings have it, with at least --min-count samples on
  each side (a p99 of three samples is their maximum); a key seen in one recording only
  has no ratio. A key has regressed when its --metric in B is at least
  --threshold times A's (default 1.5), for analyzers whose values are durations (more
  time is worse; sizes and queue lengths are compared but never flagged). \"What changed
  most\" ranks keys by impact: first the wall time each added per second of recording
  (its total in B per second of B minus its total in A per second of A, for durations
  that are time spent), then its p99 growth weighted by its count (p99 B - p99 A, times
  its count in B per second); keys of one recording only are ranked against zero, but
  not keys that name a thread or a process (they name another one in the other
  recording). Each
  entry names the metric whose ratio B/A is farthest from 1 (x2.50: B is 2.5 times A;
  /4.00: a quarter of it). Inside a window against outside it, counts and totals are
  compared per second of each.";

/// A compared quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Count,
    Total,
    Avg,
    P99,
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::Count, Metric::Total, Metric::Avg, Metric::P99];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Count => "count",
            Metric::Total => "total",
            Metric::Avg => "avg",
            Metric::P99 => "p99",
        }
    }

    pub fn parse(s: &str) -> Result<Metric, String> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("invalid metric {s:?}: expected count, total, avg or p99"))
    }

    /// Whether the value carries the analyzer's unit (a count does not).
    pub fn has_unit(self) -> bool {
        self != Metric::Count
    }
}

/// One key's numbers in one recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nums {
    pub count: u64,
    pub total: u64,
    pub avg: u64,
    pub p99: u64,
}

impl Nums {
    pub fn of(r: &Row) -> Nums {
        Nums {
            count: r.agg.count,
            total: r.agg.total,
            avg: r.agg.avg(),
            p99: r.agg.percentile(99.0),
        }
    }

    pub fn get(&self, m: Metric) -> u64 {
        match m {
            Metric::Count => self.count,
            Metric::Total => self.total,
            Metric::Avg => self.avg,
            Metric::P99 => self.p99,
        }
    }
}

/// When a key counts as compared, and when as regressed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    pub metric: Metric,
    /// B/A of `metric` at or above which a key regressed.
    pub threshold: f64,
    /// Samples needed on each side.
    pub min_count: u64,
    /// The metrics "what changed most" names a key's change by (the one whose ratio is
    /// farthest from 1): all four for two recordings; only avg and p99 when one side is a
    /// shorter stretch of time than the other (inside a window against outside it).
    pub rank_by: &'static [Metric],
    /// Counts and totals compared per second of each side (their lengths differ by more
    /// than the workload: inside a window against outside it).
    pub per_second: bool,
    /// Both sides come from one recording (inside a window against outside it): keys that
    /// name a thread or a process name the same one on both sides, and are ranked.
    pub same_recording: bool,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            metric: Metric::P99,
            threshold: 1.5,
            min_count: 5,
            rank_by: &Metric::ALL,
            per_second: false,
            same_recording: false,
        }
    }
}

/// One key in A and B.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyDiff {
    pub key: String,
    pub a: Option<Nums>,
    pub b: Option<Nums>,
    /// Both sides have enough samples for ratios to mean something.
    pub compared: bool,
    pub regressed: bool,
    /// Seconds per ns of each side (1e9 / its length), where the lengths are known.
    pub per_s: Option<(f64, f64)>,
    /// Counts and totals compare per second ([`Rules::per_second`]).
    pub per_second: bool,
    /// Its values are time spent: a total is wall time.
    pub time_spent: bool,
}

impl KeyDiff {
    /// B/A, where both have the key and A's value is not 0; counts and totals per second
    /// of each side with [`Rules::per_second`].
    pub fn ratio(&self, m: Metric) -> Option<f64> {
        let (a, b) = (self.a?.get(m), self.b?.get(m));
        if a == 0 {
            return None;
        }
        let r = b as f64 / a as f64;
        match (self.per_second, self.per_s, m) {
            (true, Some((sa, sb)), Metric::Count | Metric::Total) => Some(r * sb / sa),
            _ => Some(r),
        }
    }

    /// `m` of a side (0: A, 1: B) per second of its length: counts and totals only.
    pub fn rate(&self, m: Metric, side: usize) -> Option<f64> {
        let (sa, sb) = self.per_s?;
        let (n, s) = match side {
            0 => (self.a?, sa),
            _ => (self.b?, sb),
        };
        matches!(m, Metric::Count | Metric::Total).then(|| n.get(m) as f64 * s)
    }

    /// Wall time added per second of recording (ns/s): B's total per second of B minus
    /// A's per second of A (a side without the key counts 0). None where the values are
    /// not time spent or the lengths are not known.
    pub fn added(&self) -> Option<f64> {
        let (sa, sb) = self.per_s?;
        if !self.time_spent {
            return None;
        }
        let t = |n: Option<Nums>, s: f64| n.map_or(0.0, |n| n.total as f64 * s);
        Some(t(self.b, sb) - t(self.a, sa))
    }

    /// p99 growth weighted by count (ns/s): (p99 B - p99 A) times B's count per second (A's
    /// when B lacks the key); a side without the key has a p99 of 0.
    pub fn tail_growth(&self) -> Option<f64> {
        let (sa, sb) = self.per_s.unwrap_or((1.0, 1.0));
        let p = |n: Option<Nums>| n.map_or(0.0, |n| n.p99 as f64);
        let per_s = match (self.b, self.a) {
            (Some(b), _) => b.count as f64 * sb,
            (None, Some(a)) => a.count as f64 * sa,
            (None, None) => return None,
        };
        Some((p(self.b) - p(self.a)) * per_s)
    }

    /// B - A, where both have the key.
    pub fn diff(&self, m: Metric) -> Option<i128> {
        Some(self.b?.get(m) as i128 - self.a?.get(m) as i128)
    }
}

/// One analyzer's keys in A and B: the keys of both, then those of A only, then of B only,
/// each by B's total (A's for A-only keys), largest first.
#[derive(Debug, Clone)]
pub struct AnalyzerDiff {
    pub info: &'static Info,
    pub by: &'static str,
    pub keys: Vec<KeyDiff>,
}

/// A ranked entry of "what changed most".
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub analyzer: &'static str,
    pub unit: Unit,
    pub key: String,
    /// The metric whose ratio is farthest from 1 (total for a key of one side only).
    pub metric: Metric,
    /// Its value in A and B (None: the side lacks the key).
    pub a: Option<u64>,
    pub b: Option<u64>,
    pub ratio: Option<f64>,
    /// Wall time added per second of recording, ns/s ([`KeyDiff::added`]).
    pub added: Option<f64>,
    /// p99 growth weighted by count, ns/s ([`KeyDiff::tail_growth`]).
    pub tail: Option<f64>,
    pub regressed: bool,
}

/// An analyzer that ran on one side only (or neither), and why.
#[derive(Debug, Clone)]
pub struct Unmatched {
    pub analyzer: &'static str,
    pub why: String,
}

/// A and B compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub rules: Rules,
    pub analyzers: Vec<AnalyzerDiff>,
    pub unmatched: Vec<Unmatched>,
    /// What changed most, largest first.
    pub changes: Vec<Change>,
    /// What was skipped as damaged in A or B, each once: the figures cover the rest.
    pub damage: Vec<kstate_format::Error>,
}

impl Comparison {
    /// Whether any key regressed (the CLI's --threshold exit status).
    pub fn regressed(&self) -> bool {
        self.analyzers
            .iter()
            .any(|a| a.keys.iter().any(|k| k.regressed))
    }
}

/// One analyzer's two outcomes, keyed alike, compared; `lengths`: how long each side's
/// stretch of time is (ns), for rates and the wall time added per second.
pub fn compare_outcomes(
    a: &Outcome,
    b: &Outcome,
    rules: &Rules,
    lengths: Option<(u64, u64)>,
) -> AnalyzerDiff {
    let info = analyzers::find(a.info.name).unwrap_or_else(|| {
        // Outcomes always come from an analyzer of ALL.
        unreachable!("analyzer {} not in ALL", a.info.name)
    });
    let flaggable = info.unit == Unit::Ns && info.traits.time_spent;
    let per_s = lengths.map(|(x, y)| (1e9 / x.max(1) as f64, 1e9 / y.max(1) as f64));
    let mut keys: Vec<KeyDiff> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for r in &a.rows {
        index.insert(r.key.as_str(), keys.len());
        keys.push(KeyDiff {
            key: r.key.clone(),
            a: Some(Nums::of(r)),
            b: None,
            compared: false,
            regressed: false,
            per_s,
            per_second: rules.per_second,
            time_spent: flaggable,
        });
    }
    for r in &b.rows {
        match index.get(r.key.as_str()) {
            Some(&i) => keys[i].b = Some(Nums::of(r)),
            None => keys.push(KeyDiff {
                key: r.key.clone(),
                a: None,
                b: Some(Nums::of(r)),
                compared: false,
                regressed: false,
                per_s,
                per_second: rules.per_second,
                time_spent: flaggable,
            }),
        }
    }
    for k in &mut keys {
        k.compared = matches!((k.a, k.b), (Some(x), Some(y))
            if x.count >= rules.min_count && y.count >= rules.min_count);
        k.regressed =
            flaggable && k.compared && k.ratio(rules.metric).is_some_and(|r| r >= rules.threshold);
    }
    let side = |k: &KeyDiff| match (k.a, k.b) {
        (Some(_), Some(_)) => 0,
        (Some(_), None) => 1,
        _ => 2,
    };
    let total = |k: &KeyDiff| k.b.or(k.a).map_or(0, |n| n.total);
    keys.sort_by(|x, y| {
        side(x)
            .cmp(&side(y))
            .then(total(y).cmp(&total(x)))
            .then_with(|| x.key.cmp(&y.key))
    });
    AnalyzerDiff {
        info,
        by: a.by,
        keys,
    }
}

/// The metrics independent of how long each side lasted.
pub const RATES: [Metric; 2] = [Metric::Avg, Metric::P99];

/// Keyings whose keys name a thread, a process or an address in one (`comm-tid`,
/// `futex 0x...@pid`): in two recordings the same key names different things.
const PER_TASK: [&str; 6] = ["pid", "tid", "thread", "task", "lock", "caller"];

/// The ranked changes of the analyzers (see the module documentation): keys compared,
/// and keys of one side with at least `rules.min_count` samples there; each named by its
/// metric of `rules.rank_by` farthest from 1. Between two recordings, analyzers keyed by
/// task are left out.
pub fn rank(analyzers: &[AnalyzerDiff], rules: &Rules) -> Vec<Change> {
    let (by, min_count) = (rules.rank_by, rules.min_count);
    let mut out = Vec::new();
    for a in analyzers {
        if !rules.same_recording && PER_TASK.contains(&a.by) {
            continue;
        }
        for k in &a.keys {
            let one_side = match (k.a, k.b) {
                (Some(_), Some(_)) => false,
                (Some(n), None) | (None, Some(n)) => n.count >= min_count,
                (None, None) => false,
            };
            if !k.compared && !one_side {
                continue;
            }
            let best = by
                .iter()
                .copied()
                .filter_map(|m| Some((m, k.ratio(m)?)))
                .filter(|(_, r)| *r > 0.0)
                .max_by(|x, y| x.1.log2().abs().total_cmp(&y.1.log2().abs()));
            let (metric, ratio) = match best {
                Some((m, r)) if !one_side => (m, Some(r)),
                _ => (Metric::Total, None),
            };
            out.push(Change {
                analyzer: a.info.name,
                unit: a.info.unit,
                key: k.key.clone(),
                metric,
                a: k.a.map(|n| n.get(metric)),
                b: k.b.map(|n| n.get(metric)),
                ratio,
                added: k.added(),
                tail: k.tail_growth(),
                regressed: k.regressed,
            });
        }
    }
    out.sort_by(|x, y| {
        let added = |c: &Change| c.added.unwrap_or(0.0);
        let tail = |c: &Change| c.tail.unwrap_or(0.0);
        added(y)
            .total_cmp(&added(x))
            .then_with(|| tail(y).total_cmp(&tail(x)))
            .then_with(|| x.analyzer.cmp(y.analyzer))
            .then_with(|| x.key.cmp(&y.key))
    });
    out
}

/// The impact order of "what changed most": the ratio farthest from 1 (|log2 ratio|)
/// first. Shared with `kstate why A B` ([`crate::why::compare`]).
pub fn by_impact(x: f64, y: f64) -> std::cmp::Ordering {
    y.log2().abs().total_cmp(&x.log2().abs())
}

/// Runs every analyzer of `names` (all of them when empty) over A and B with the same
/// filters and compares those that apply to both. Errors only when no analyzer applies
/// to both (or one of `names` does not exist).
pub fn compare_sources(
    a: &Source,
    b: &Source,
    names: &[String],
    filters: &Filters,
    rules: Rules,
) -> Result<Comparison, Error> {
    let mut list: Vec<&'static Info> = Vec::new();
    for n in names {
        list.push(Query::new(n)?.analyzer);
    }
    if list.is_empty() {
        list = analyzers::ALL.iter().collect();
    }
    let mut diffs = Vec::new();
    let mut unmatched = Vec::new();
    let mut has: [Vec<&str>; 2] = Default::default();
    let lengths = length(a, filters.window).zip(length(b, filters.window));
    let mut damage = Vec::new();
    for info in list {
        let mut q = Query::new(info.name)?;
        q.filters = filters.clone();
        let (ra, rb) = (a.aggregate(&q), b.aggregate(&q));
        for (side, r) in [ra.is_ok(), rb.is_ok()].into_iter().enumerate() {
            if r {
                has[side].push(info.name);
            }
        }
        for r in [&ra, &rb] {
            note_damage(&mut damage, r);
        }
        match (ra, rb) {
            (Ok(oa), Ok(ob)) => diffs.push(compare_outcomes(&oa, &ob, &rules, lengths)),
            (ra, rb) => {
                let why = match (ra.err(), rb.err()) {
                    (Some(ea), Some(_)) => format!("neither recording: {}", first_line(&ea)),
                    (Some(ea), None) => format!("only in B; A: {}", first_line(&ea)),
                    (None, Some(eb)) => format!("only in A; B: {}", first_line(&eb)),
                    (None, None) => unreachable!("both succeeded"),
                };
                unmatched.push(Unmatched {
                    analyzer: info.name,
                    why,
                });
            }
        }
    }
    if diffs.is_empty() {
        let mut why = nothing_in_common([a.label(), b.label()], &has);
        // Damage may be what hides the events: said with its place.
        for (side, s) in ["A", "B"].into_iter().zip([a, b]) {
            if let Some(e) = s.trace().damage().next() {
                why.push_str(&format!(
                    "\n{side} is damaged, which may hide its events: {e}"
                ));
            }
        }
        return Err(Error::Query(why));
    }
    let mut c = Comparison::new(a.label(), b.label(), rules, diffs, unmatched);
    c.damage = damage;
    Ok(c)
}

/// Notes in `damage` what one side's run `r` skipped as damaged, or the damage that
/// stopped it (not an analyzer that does not apply).
fn note_damage(damage: &mut Vec<kstate_format::Error>, r: &Result<Outcome, Error>) {
    match r {
        Ok(o) => o
            .errors
            .iter()
            .for_each(|e| kstate_format::damage::note(damage, e)),
        Err(Error::Trace(e)) if !e.kind.is_not_applicable() => {
            kstate_format::damage::note(damage, e)
        }
        Err(_) => {}
    }
}

/// How long a recording lasted (ns): its first to its last event (from its page index,
/// made here if the source has none), or the part of `window` within them; None for a
/// recording whose pages cannot be indexed (a perf.data) or that has no event. Rates per
/// second and the wall time added per second are over it.
pub fn length(source: &Source, window: Option<kstate_analyze::filter::WindowSpec>) -> Option<u64> {
    let built;
    let index = match source.pages() {
        Some(p) => p,
        None => {
            built =
                std::sync::Arc::new(kstate_format::stream::PageIndex::build(source.trace()).ok()?);
            &built
        }
    };
    let (first, last) = index.event_span()?;
    let (a, b) = window.map_or((first, last), |w| w.resolve(first));
    let (a, b) = (a.max(first), b.min(last));
    (b > a).then(|| b - a)
}

/// Why two recordings cannot be compared: which analyzers apply to each (`has`), a line
/// a side, rather than every analyzer's reason on one line.
pub fn nothing_in_common(labels: [&str; 2], has: &[Vec<&str>; 2]) -> String {
    let mut s = String::from(
        "A and B have no analyzer in common (each analyzer needs events both recordings have):",
    );
    for (side, (label, names)) in ["A", "B"].iter().zip(labels.iter().zip(has)) {
        let list = match names.is_empty() {
            true => "no analyzer applies".to_string(),
            false => names.join(", "),
        };
        s.push_str(&format!("\n  {side} {label}: {list}"));
    }
    s.push_str("\nRecord both with the same events (kstate record -e PRESET) to compare them.");
    s
}

impl Comparison {
    /// A comparison of analyzers already compared (each by [`compare_outcomes`]).
    pub fn new(
        a: &str,
        b: &str,
        rules: Rules,
        analyzers: Vec<AnalyzerDiff>,
        unmatched: Vec<Unmatched>,
    ) -> Comparison {
        let changes = rank(&analyzers, &rules);
        Comparison {
            a: a.to_string(),
            b: b.to_string(),
            rules,
            analyzers,
            unmatched,
            changes,
            damage: Vec::new(),
        }
    }
}

fn first_line(e: &Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstate_analyze::analyzer::Outcome;
    use kstate_analyze::stats::Agg;

    fn outcome(rows: &[(&str, &[u64])]) -> Outcome {
        let mut o = Outcome {
            info: kstate_analyze::analyzers::ALL[0],
            by: "name",
            rows: Vec::new(),
            trace_start: None,
            span: None,
            lost: Default::default(),
            counts: Default::default(),
            tables: Vec::new(),
            notes: Vec::new(),
            errors: Vec::new(),
        };
        for (key, vals) in rows {
            let mut agg = Agg::default();
            for v in *vals {
                agg.add(*v, false, false);
            }
            o.rows.push(Row {
                key: key.to_string(),
                agg,
            });
        }
        o
    }

    #[test]
    fn ratios_regressions_and_ranking() {
        let slow = [100u64, 100, 100, 100, 100, 100];
        let a = outcome(&[
            ("write", &slow),
            ("read", &[10, 10, 10, 10, 10]),
            ("gone", &[5; 9]),
            ("rare", &[1, 1]),
        ]);
        let b = outcome(&[
            ("write", &[300, 300, 300, 300, 300, 300]),
            ("read", &[11, 11, 11, 11, 11, 11, 11, 11, 11, 11]),
            ("new", &[7; 6]),
            ("rare", &[100, 100]),
        ]);
        let d = compare_outcomes(&a, &b, &Rules::default(), None);
        let key = |k: &str| d.keys.iter().find(|x| x.key == k).unwrap();
        let w = key("write");
        assert_eq!(w.ratio(Metric::P99), Some(3.0));
        assert_eq!(w.diff(Metric::Total), Some(1200));
        assert!(w.compared && w.regressed);
        // read: twice the calls, each 10 % slower: not a p99 regression.
        assert!(key("read").compared && !key("read").regressed);
        assert_eq!(key("read").ratio(Metric::Count), Some(2.0));
        // Too few samples to compare, however large the change.
        assert!(!key("rare").compared && !key("rare").regressed);
        assert_eq!((key("gone").b, key("new").a), (None, None));
        // Keys of both first (by B's total), then A's only, then B's only.
        let order: Vec<&str> = d.keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(order, ["write", "rare", "read", "gone", "new"]);
        // Without lengths, no wall time added: by p99 growth times count. write: +200 ns
        // on 6 calls; new (B only): +7 on 6; read: +1 on 10; gone (A only): -5 on 9.
        let ch = rank(std::slice::from_ref(&d), &Rules::default());
        let order: Vec<&str> = ch.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(order, ["write", "new", "read", "gone"]);
        // write's total, avg and p99 tripled (|log2 3| = 1.58; the last of equals, p99,
        // names it); read's total went 2.2x.
        assert_eq!((ch[0].metric, ch[0].ratio), (Metric::P99, Some(3.0)));
        assert!(ch[0].regressed);
        assert_eq!((ch[1].a, ch[1].b, ch[1].ratio), (None, Some(42), None));
        assert!((ch[2].ratio.unwrap() - 2.2).abs() < 1e-9);
        assert_eq!(ch[0].tail, Some(1200.0));
    }

    #[test]
    fn impact_is_wall_time_added_per_second() {
        // A lasted 2 s, B 1 s. write: 600 ns in A (300 ns/s), 1800 ns in B (1800 ns/s):
        // +1500 ns/s. read: a hundred times the calls of B, but each 10 ns: +990 ns/s.
        // sleep: p99 x4 on 5 calls in each, 4000 ns more per second.
        let a = outcome(&[
            ("write", &[100; 6]),
            ("read", &[10; 5]),
            ("sleep", &[1000; 5]),
        ]);
        let b = outcome(&[
            ("write", &[300; 6]),
            ("read", &[10; 100]),
            ("sleep", &[4000; 5]),
        ]);
        let rules = Rules {
            per_second: true,
            ..Rules::default()
        };
        let d = compare_outcomes(&a, &b, &rules, Some((2_000_000_000, 1_000_000_000)));
        let k = |n: &str| d.keys.iter().find(|x| x.key == n).unwrap().clone();
        assert_eq!(k("write").added(), Some(1800.0 - 300.0));
        assert_eq!(k("read").added(), Some(1000.0 - 25.0));
        assert_eq!(k("sleep").added(), Some(20000.0 - 2500.0));
        // Per second: read's count went from 2.5/s to 100/s.
        assert_eq!(k("read").ratio(Metric::Count), Some(40.0));
        assert_eq!(k("read").rate(Metric::Count, 1), Some(100.0));
        let ch = rank(std::slice::from_ref(&d), &rules);
        let order: Vec<&str> = ch.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(order, ["sleep", "write", "read"]);
        // Keyed by thread, between two recordings: not ranked (tids name other threads).
        let mut by_tid = d.clone();
        by_tid.by = "tid";
        assert!(rank(std::slice::from_ref(&by_tid), &rules).is_empty());
        let one = Rules {
            same_recording: true,
            ..rules
        };
        assert_eq!(rank(&[by_tid], &one).len(), 3);
    }
}
