//! Two runs' paths side by side (`kstate why A B`): the time per state, per thread
//! (by command: thread ids differ between runs) and per line of the hop tree (a chain of
//! commands and a state), in A and B, and what changed most, in the impact order of
//! `kstate compare` ([`crate::compare::by_impact`]).
//!
//! Rules: with requests (`--span`) each side is the mean request (its totals over the
//! requests, divided by their number), else the whole window. A line of the tree is
//! compared when both runs have it and it holds at least `min_share` of its run's wall
//! time in one of them (what `--min-count` is to `compare`: a small stretch's ratio is
//! noise); lines of one run only are listed, not ranked. "What grew" is the ranked
//! line that added the most time: the question of two runs is where B's extra time
//! went, and a noisy stretch that tripled (a 20 ms wait for a CPU become 60 ms) explains
//! less of it than a sleep that doubled (300 ms more).

use std::collections::BTreeMap;

use super::{Node, Path, Why};
use kstate_analyze::critical::State;

/// When a line is compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Share of the wall time (0..1) a line needs in one run to be ranked.
    pub min_share: f64,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules { min_share: 0.05 }
    }
}

/// The rules as `kstate why --help` prints them.
pub const RULES: &str = "\
How two runs are compared (A is the baseline, B the new one): each run's thread is found
the same way (--comm, --pid or --tid in each file); with --span each side is its mean
request (the requests' totals divided by their number), else the whole window. Side by
side: the time per state, per thread (by command), and per line of the hop tree (a
chain of commands ending in a state). A line is ranked when both runs have it and it
holds at least --min-share of its run's wall time in one of them; \"what changed most\"
ranks those lines by the ratio B/A farthest from 1 (|log2 ratio|, as kstate compare
does), and \"what grew\" is the ranked line that added the most time (B - A). Lines
in one run only are listed, not ranked.";

/// One run's side.
#[derive(Debug, Clone)]
pub struct Side {
    pub label: String,
    pub tid: i32,
    pub comm: String,
    /// Requests averaged (0: the whole window).
    pub requests: usize,
    pub wall_ns: u64,
    states: BTreeMap<String, u64>,
    threads: BTreeMap<String, u64>,
    lines: BTreeMap<String, u64>,
}

impl Side {
    /// `why`'s whole window, or its mean request when it has requests.
    pub fn of(label: &str, why: &Why) -> Side {
        let paths: Vec<&Path> = match why.requests.is_empty() {
            true => vec![&why.path],
            false => why.requests.iter().collect(),
        };
        let mut s = Side {
            label: label.to_string(),
            tid: why.path.tid,
            comm: why.path.comm.clone(),
            requests: why.requests.len(),
            wall_ns: 0,
            states: BTreeMap::new(),
            threads: BTreeMap::new(),
            lines: BTreeMap::new(),
        };
        for p in &paths {
            s.wall_ns += p.wall_ns;
            for (st, ns) in &p.by_state {
                *s.states.entry(st.name().to_string()).or_default() += ns;
            }
            for t in &p.by_thread {
                *s.threads.entry(t.comm.clone()).or_default() += t.ns;
            }
            tree_lines(&p.tree, "", &mut s.lines);
        }
        let n = paths.len().max(1) as u64;
        s.wall_ns /= n;
        for m in [&mut s.states, &mut s.threads, &mut s.lines] {
            for v in m.values_mut() {
                *v /= n;
            }
        }
        s
    }
}

/// `a > b > c: state what` per state line; runnable lines drop their CPU (it differs
/// between runs without meaning anything).
fn tree_lines(n: &Node, prefix: &str, out: &mut BTreeMap<String, u64>) {
    let chain = match prefix {
        "" => n.comm.clone(),
        p => format!("{p} > {}", n.comm),
    };
    for s in &n.states {
        let what = match s.state {
            State::Runnable => "",
            _ => s.what.as_str(),
        };
        let key = match what {
            "" => format!("{chain}: {}", s.state.name()),
            w => format!("{chain}: {} {w}", s.state.name()),
        };
        *out.entry(key).or_default() += s.ns;
    }
    for w in &n.wakers {
        tree_lines(w, &chain, out);
    }
}

/// One key in A and B.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub key: String,
    pub a_ns: Option<u64>,
    pub b_ns: Option<u64>,
}

impl Row {
    pub fn ratio(&self) -> Option<f64> {
        match (self.a_ns, self.b_ns) {
            (Some(a), Some(b)) if a > 0 => Some(b as f64 / a as f64),
            _ => None,
        }
    }
}

/// A ranked line.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub key: String,
    pub a_ns: u64,
    pub b_ns: u64,
    pub ratio: f64,
}

#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub rules: Rules,
    pub states: Vec<Row>,
    pub threads: Vec<Row>,
    /// Lines of the hop tree, of both runs first, each by B's time (A's for A-only).
    pub lines: Vec<Row>,
    /// Lines ranked, most changed first.
    pub changes: Vec<Change>,
}

impl Comparison {
    /// The ranked line that added the most time (the first in rank of equal ones).
    pub fn grew(&self) -> Option<&Change> {
        let added = |c: &Change| c.b_ns.saturating_sub(c.a_ns);
        self.changes
            .iter()
            .filter(|c| c.b_ns > c.a_ns)
            .reduce(|best, c| if added(c) > added(best) { c } else { best })
    }
}

fn rows(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<Row> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<Row> = keys
        .into_iter()
        .map(|k| Row {
            key: k.clone(),
            a_ns: a.get(k).copied(),
            b_ns: b.get(k).copied(),
        })
        .collect();
    let side = |r: &Row| match (r.a_ns, r.b_ns) {
        (Some(_), Some(_)) => 0,
        (Some(_), None) => 1,
        _ => 2,
    };
    out.sort_by(|x, y| {
        side(x)
            .cmp(&side(y))
            .then(y.b_ns.or(y.a_ns).cmp(&x.b_ns.or(x.a_ns)))
            .then_with(|| x.key.cmp(&y.key))
    });
    out
}

/// A and B side by side.
pub fn compare(a: Side, b: Side, rules: Rules) -> Comparison {
    let states = rows(&a.states, &b.states);
    let threads = rows(&a.threads, &b.threads);
    let lines = rows(&a.lines, &b.lines);
    let share = |ns: u64, wall: u64| match wall {
        0 => 0.0,
        w => ns as f64 / w as f64,
    };
    let mut changes: Vec<Change> = lines
        .iter()
        .filter_map(|r| {
            let (x, y) = (r.a_ns?, r.b_ns?);
            let big = share(x, a.wall_ns).max(share(y, b.wall_ns)) >= rules.min_share;
            let ratio = r.ratio()?;
            (big && ratio > 0.0).then(|| Change {
                key: r.key.clone(),
                a_ns: x,
                b_ns: y,
                ratio,
            })
        })
        .collect();
    changes.sort_by(|x, y| {
        crate::compare::by_impact(x.ratio, y.ratio).then_with(|| x.key.cmp(&y.key))
    });
    Comparison {
        a,
        b,
        rules,
        states,
        threads,
        lines,
        changes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(label: &str, wall_ns: u64, lines: &[(&str, u64)]) -> Side {
        Side {
            label: label.to_string(),
            tid: 1,
            comm: "a".to_string(),
            requests: 0,
            wall_ns,
            states: BTreeMap::new(),
            threads: BTreeMap::new(),
            lines: lines.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    /// A wait that tripled ranks first in change, but the sleep that doubled added more
    /// time: that is what grew. A line below the share is not ranked; one that shrank
    /// never grew.
    #[test]
    fn what_grew_is_the_line_that_added_most_time() {
        let ms = 1_000_000;
        // Each line's ms in A and in B.
        let lines = [
            ("a: running", 100, 100),
            ("a > c: sleep timer", 300, 600),
            ("a: runnable", 30, 90),
            ("a: disk", 70, 10),
            ("a: irq", 1, 10),
        ];
        let of = |i: usize| -> Vec<(&str, u64)> {
            lines.iter().map(|l| (l.0, [l.1, l.2][i] * ms)).collect()
        };
        let (a, b) = (side("A", 500 * ms, &of(0)), side("B", 950 * ms, &of(1)));
        let c = compare(a, b, Rules::default());
        let ranked: Vec<&str> = c.changes.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            ranked,
            ["a: disk", "a: runnable", "a > c: sleep timer", "a: running"]
        );
        let grew = c.grew().unwrap();
        assert_eq!((grew.key.as_str(), grew.ratio), ("a > c: sleep timer", 2.0));
        let shrank = compare(
            side("A", 10, &[("a: x", 8)]),
            side("B", 5, &[("a: x", 4)]),
            Rules::default(),
        );
        assert!(shrank.grew().is_none());
    }
}
