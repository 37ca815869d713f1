//! Alarm rules on live statistics ([`kstate_analyze::live`]): a condition on one analyzer's
//! statistic (or the events lost), over a sliding window of intervals, e.g.
//! `syscall.p99{name=write} > 100ms over 3s`.
//!
//! ```text
//! RULE    = SUBJECT OP VALUE [ "over" DURATION | "for" DURATION ]
//! SUBJECT = ANALYZER "." STAT [ "{" FILTER "=" KEY "}" ]  |  "lost"
//! STAT    = count | total | avg | min | max | p50 | p90 | p99 | p999 | rate | level
//! OP      = ">" | ">=" | "<" | "<=" | "=="
//! ```
//!
//! - The statistic is taken over the samples that completed in the window, of every key,
//!   or of the keys FILTER=KEY selects. FILTER is one of the analyzer's `--by` keyings
//!   (the statistic then comes from that keying) or `key` (its default keying); `dev` and
//!   `comm` name the device or task part of the default key. KEY matches a key exactly
//!   or one of its parts: the name or the id of `comm-tid`, the device in `…(vda)`.
//! - `rate` is samples per second; `level` is the highest value seen (for a length such
//!   as `blkqueue`'s requests in flight); `lost` is the events the kernel dropped.
//! - VALUE takes a time unit (ns, us, ms, s) for time statistics, a plain number
//!   otherwise.
//! - `over D`: the statistic over the last D (whole intervals, at least one); `for D`:
//!   the condition held in every interval of the last D; neither: the last interval.

use std::collections::VecDeque;

use kstate_analyze::analyzer::{Info, Unit};
use kstate_analyze::analyzers;
use kstate_analyze::live::Interval;
use kstate_analyze::stats::Agg;

/// A statistic of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Count,
    Total,
    Avg,
    Min,
    Max,
    Percentile(f64),
    /// Samples per second.
    Rate,
    /// The highest value seen.
    Level,
}

const STATS: &str = "count, total, avg, min, max, p50, p90, p99, p999, rate, level";

impl Stat {
    fn parse(s: &str) -> Option<Stat> {
        Some(match s {
            "count" => Stat::Count,
            "total" => Stat::Total,
            "avg" => Stat::Avg,
            "min" => Stat::Min,
            "max" => Stat::Max,
            "p50" => Stat::Percentile(50.0),
            "p90" => Stat::Percentile(90.0),
            "p99" => Stat::Percentile(99.0),
            "p999" => Stat::Percentile(99.9),
            "rate" => Stat::Rate,
            "level" => Stat::Level,
            _ => return None,
        })
    }

    /// Whether its values are in the analyzer's unit (else a count or a rate).
    fn in_unit(self) -> bool {
        !matches!(self, Stat::Count | Stat::Rate)
    }

    fn of(self, agg: &Agg, window_ns: u64) -> f64 {
        match self {
            Stat::Count => agg.count as f64,
            Stat::Total => agg.total as f64,
            Stat::Avg => agg.avg() as f64,
            Stat::Min => agg.min() as f64,
            Stat::Max | Stat::Level => agg.max as f64,
            Stat::Percentile(p) => match agg.count {
                0 => 0.0,
                _ => agg.percentile(p) as f64,
            },
            Stat::Rate => agg.count as f64 * 1e9 / window_ns.max(1) as f64,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => a == b,
        }
    }
}

/// What a rule watches.
#[derive(Debug, Clone)]
pub enum Subject {
    /// A statistic of one analyzer's samples, keyed `by`, of the keys `key` selects.
    Analyzer {
        info: &'static Info,
        by: &'static str,
        stat: Stat,
        key: Option<(String, String)>,
    },
    /// Events the kernel dropped, on every CPU.
    Lost,
}

/// How much time a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last interval.
    Last,
    /// The statistic over the last N ns.
    Over(u64),
    /// The condition in every interval of the last N ns.
    For(u64),
}

/// One parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// As the user wrote it.
    pub text: String,
    pub subject: Subject,
    pub op: Op,
    pub threshold: f64,
    pub window: Window,
}

impl Rule {
    /// Parses a rule, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let t = text.trim();
        let bad = |why: String| format!("alarm rule {t:?}: {why}");
        if t.contains('{') && !t.contains('}') {
            return Err(bad("the key filter must end with '}'".into()));
        }
        // Past the key filter, whose '=' is not a comparison.
        let from = t.find('}').map_or(0, |i| i + 1);
        let op_at = t[from..]
            .find(['>', '<', '='])
            .map(|i| i + from)
            .ok_or_else(|| bad("no comparison (>, >=, <, <=, ==)".into()))?;
        let (lhs, rest) = t.split_at(op_at);
        let (op, rest) = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .iter()
        .find_map(|(s, op)| rest.strip_prefix(s).map(|r| (*op, r)))
        .ok_or_else(|| {
            bad(format!(
                "{:?} is not a comparison (>, >=, <, <=, ==)",
                &rest[..1]
            ))
        })?;
        let subject = parse_subject(lhs.trim()).map_err(bad)?;
        let mut words = rest.split_whitespace();
        let value = words
            .next()
            .ok_or_else(|| bad("no value after the comparison".into()))?;
        let time = match &subject {
            Subject::Analyzer { info, stat, .. } => stat.in_unit() && info.unit == Unit::Ns,
            Subject::Lost => false,
        };
        let threshold = match time {
            true => parse_duration(value).map(|ns| ns as f64),
            false => value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{value:?} is not a number")),
        }
        .map_err(bad)?;
        let window = match (words.next(), words.next()) {
            (None, _) => Window::Last,
            (Some(w @ ("over" | "for")), Some(d)) => {
                let ns = parse_duration(d).map_err(bad)?;
                if ns == 0 {
                    return Err(bad(format!("'{w} {d}': the time must be positive")));
                }
                match w {
                    "over" => Window::Over(ns),
                    _ => Window::For(ns),
                }
            }
            (Some(w @ ("over" | "for")), None) => {
                return Err(bad(format!("'{w}' needs a time, e.g. '{w} 3s'")))
            }
            (Some(w), _) => {
                return Err(bad(format!(
                    "expected 'over TIME' or 'for TIME' after the value, not {w:?}"
                )))
            }
        };
        if let Some(w) = words.next() {
            return Err(bad(format!("unexpected {w:?} at the end")));
        }
        Ok(Rule {
            text: t.to_string(),
            subject,
            op,
            threshold,
            window,
        })
    }

    /// The analyzer and keying the rule needs run live, if any.
    pub fn query(&self) -> Option<(&'static Info, &'static str)> {
        match &self.subject {
            Subject::Analyzer { info, by, .. } => Some((info, by)),
            Subject::Lost => None,
        }
    }

    /// A value of the rule's statistic for people: `312.5ms`, `17`.
    pub fn fmt_value(&self, v: f64) -> String {
        match &self.subject {
            Subject::Analyzer { info, stat, .. } if stat.in_unit() => {
                info.unit.fmt(v.round() as u64)
            }
            _ if v.fract() == 0.0 => format!("{v}"),
            _ => format!("{v:.1}"),
        }
    }
}

fn parse_subject(s: &str) -> Result<Subject, String> {
    if s == "lost" {
        return Ok(Subject::Lost);
    }
    let (head, filter) = match s.split_once('{') {
        Some((h, f)) => {
            let f = f
                .strip_suffix('}')
                .ok_or_else(|| format!("{s:?}: the key filter must end with '}}'"))?;
            (h.trim(), Some(f))
        }
        None => (s, None),
    };
    let (name, stat) = head.split_once('.').ok_or_else(|| {
        format!("{head:?}: expected ANALYZER.STATISTIC (e.g. syscall.p99) or lost")
    })?;
    let info = analyzers::find(name).ok_or_else(|| {
        let names: Vec<&str> = analyzers::ALL
            .iter()
            .filter(|i| i.live.is_some())
            .map(|i| i.name)
            .collect();
        format!("no analyzer {name:?}; there are: {}", names.join(", "))
    })?;
    if info.live.is_none() {
        return Err(format!(
            "analyzer {name} reads no events and cannot be watched"
        ));
    }
    let stat =
        Stat::parse(stat).ok_or_else(|| format!("no statistic {stat:?}; there are: {STATS}"))?;
    let mut by = info.by[0].0;
    let key = match filter {
        None => None,
        Some(f) => {
            let (k, v) = f
                .split_once('=')
                .ok_or_else(|| format!("key filter {{{f}}}: expected {{NAME=KEY}}"))?;
            let (k, v) = (k.trim(), v.trim());
            if v.is_empty() {
                return Err(format!("key filter {{{f}}}: no key after '='"));
            }
            let describes = |what: &str| info.by[0].1.contains(what);
            match info.by.iter().find(|(n, _)| *n == k) {
                Some((n, _)) => by = n,
                None if k == "key" => {}
                None if k == "dev" && describes("device") => {}
                None if k == "comm" && describes("comm") => {}
                None => {
                    let mut names: Vec<&str> = info.by.iter().map(|b| b.0).collect();
                    names.push("key");
                    if describes("device") {
                        names.push("dev");
                    }
                    if describes("comm") {
                        names.push("comm");
                    }
                    return Err(format!(
                        "{name} has no key {k:?}; it offers: {}",
                        names.join(", ")
                    ));
                }
            }
            Some((k.to_string(), v.to_string()))
        }
    };
    Ok(Subject::Analyzer {
        info,
        by,
        stat,
        key,
    })
}

/// `100ms`, `1.5s`, `250us`, `40ns`: nanoseconds; the unit is required.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    if !s.contains(|c: char| c.is_alphabetic()) {
        return Err(format!("{s:?} needs a time unit (ns, us, ms, s)"));
    }
    kstate_analyze::filter::parse_dur(s)
        .map_err(|_| format!("{s:?}: not a time with a known unit (ns, us, ms, s)"))
}

/// Whether `key` is the one `want` names: the whole key, or one of its parts.
fn key_matches(key: &str, want: &str) -> bool {
    if key == want {
        return true;
    }
    // comm-tid: the comm or the id.
    if let Some((comm, id)) = key.rsplit_once('-') {
        if comm == want || id == want {
            return true;
        }
    }
    // 0000fe00-W(vda): the device.
    key.split_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .is_some_and(|d| d == want)
}

/// A rule that fired.
#[derive(Debug, Clone)]
pub struct Firing {
    pub rule: String,
    /// The value the statistic had, and the threshold, in the rule's units (ns for times).
    pub value: f64,
    pub threshold: f64,
    /// Both for people.
    pub value_text: String,
    pub threshold_text: String,
    /// The window the statistic covers: [start, end) in ns on the trace clock.
    pub start: u64,
    pub end: u64,
    /// The key with the largest value where the rule looks at several.
    pub key: Option<String>,
    /// Times the rule became true again since its previous firing, held back because
    /// that firing was less than the quiet time (--alarm-every) ago.
    pub suppressed: u64,
}

/// Rules checked every interval, each firing at most once per `quiet` ns: when its
/// condition becomes true and again while it stays true. A condition that flips false
/// and true again sooner is not fired but counted, and the next firing says how often.
pub struct Alarms {
    rules: Vec<RuleState>,
    quiet: u64,
}

struct RuleState {
    rule: Rule,
    /// Per interval: start, end, the samples selected (or the events lost).
    history: VecDeque<(u64, u64, Agg, Option<String>)>,
    last_fired: Option<u64>,
    was_true: bool,
    /// Becoming true again within the quiet time, since the last firing.
    suppressed: u64,
}

impl Alarms {
    pub fn new(rules: Vec<Rule>, quiet_ns: u64) -> Alarms {
        Alarms {
            rules: rules
                .into_iter()
                .map(|rule| RuleState {
                    rule,
                    history: VecDeque::new(),
                    last_fired: None,
                    was_true: false,
                    suppressed: 0,
                })
                .collect(),
            quiet: quiet_ns,
        }
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|r| &r.rule)
    }

    /// Takes one interval's results; returns the rules that fire.
    pub fn check(&mut self, iv: &Interval) -> Vec<Firing> {
        let mut fired = Vec::new();
        for r in &mut self.rules {
            let (agg, top) = select(&r.rule.subject, iv);
            r.history.push_back((iv.start, iv.end, agg, top));
            let span = match r.rule.window {
                Window::Last => 0,
                Window::Over(ns) | Window::For(ns) => ns,
            };
            // Whole intervals covering the span, at least one.
            while r.history.len() > 1 {
                let first_end = r.history[1].0;
                if iv.end - first_end >= span {
                    r.history.pop_front();
                } else {
                    break;
                }
            }
            let covered = iv.end - r.history[0].0 >= span;
            let stat = match &r.rule.subject {
                Subject::Analyzer { stat, .. } => *stat,
                Subject::Lost => Stat::Total,
            };
            let (value, holds) = match r.rule.window {
                Window::For(_) => {
                    let values: Vec<f64> = r
                        .history
                        .iter()
                        .map(|(s, e, a, _)| stat.of(a, e - s))
                        .collect();
                    let holds =
                        covered && values.iter().all(|v| r.rule.op.holds(*v, r.rule.threshold));
                    (values.last().copied().unwrap_or(0.0), holds)
                }
                _ => {
                    let mut all = Agg::default();
                    for (_, _, a, _) in &r.history {
                        all.merge(a);
                    }
                    let v = stat.of(&all, iv.end - r.history[0].0);
                    (v, r.rule.op.holds(v, r.rule.threshold))
                }
            };
            let due = r
                .last_fired
                .is_none_or(|t| iv.end.saturating_sub(t) >= self.quiet);
            // Becoming true again does not bypass the quiet time: a condition that flips
            // every interval would fire every interval.
            if holds && !due && !r.was_true {
                r.suppressed += 1;
            }
            if holds && due {
                r.last_fired = Some(iv.end);
                let key = r.history.iter().rev().find_map(|(_, _, _, k)| k.clone());
                fired.push(Firing {
                    rule: r.rule.text.clone(),
                    value,
                    threshold: r.rule.threshold,
                    value_text: r.rule.fmt_value(value),
                    threshold_text: r.rule.fmt_value(r.rule.threshold),
                    start: r.history[0].0,
                    end: iv.end,
                    key,
                    suppressed: std::mem::take(&mut r.suppressed),
                });
            }
            r.was_true = holds;
        }
        fired
    }
}

/// The samples `subject` looks at in one interval, merged over the selected keys, and
/// the key with the largest value among them.
fn select(subject: &Subject, iv: &Interval) -> (Agg, Option<String>) {
    let mut agg = Agg::default();
    match subject {
        Subject::Lost => {
            for c in &iv.cpus {
                // A loss the kernel did not count is at least one event.
                let n = c.lost.unwrap_or(1);
                if n > 0 {
                    agg.count += 1;
                    agg.total += n;
                    agg.max = agg.max.max(n);
                }
            }
            (agg, None)
        }
        Subject::Analyzer { info, by, key, .. } => {
            let mut top: Option<(u64, &str)> = None;
            let o = iv
                .outcomes
                .iter()
                .find(|o| o.info.name == info.name && o.by == *by);
            for row in o.iter().flat_map(|o| &o.rows) {
                if key.as_ref().is_some_and(|(_, k)| !key_matches(&row.key, k)) {
                    continue;
                }
                agg.merge(&row.agg);
                if top.is_none_or(|(m, _)| row.agg.max > m) {
                    top = Some((row.agg.max, &row.key));
                }
            }
            (agg, top.map(|(_, k)| k.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse() {
        let r = Rule::parse("syscall.p99{name=write} > 100ms over 3s").unwrap();
        assert_eq!(r.op, Op::Gt);
        assert_eq!(r.threshold, 100e6);
        assert_eq!(r.window, Window::Over(3_000_000_000));
        match &r.subject {
            Subject::Analyzer {
                info,
                by,
                stat,
                key,
            } => {
                assert_eq!(info.name, "syscall");
                assert_eq!(*by, "name");
                assert_eq!(*stat, Stat::Percentile(99.0));
                assert_eq!(key.as_ref().unwrap().1, "write");
            }
            s => panic!("{s:?}"),
        }
        let r = Rule::parse("blkqueue.level >= 32 for 2s").unwrap();
        assert_eq!((r.op, r.threshold), (Op::Ge, 32.0));
        assert_eq!(r.window, Window::For(2_000_000_000));
        assert!(matches!(
            Rule::parse("lost > 0").unwrap().subject,
            Subject::Lost
        ));
        assert!(Rule::parse("biotime.max{dev=vda} > 1s").is_ok());
        assert_eq!(Rule::parse("runq.p99 > 5ms").unwrap().threshold, 5e6);
        // Keyed by tid: the statistic comes from that keying.
        let r = Rule::parse("syscall.max{tid=42} > 1ms").unwrap();
        assert_eq!(r.query().unwrap().1, "tid");
    }

    #[test]
    fn bad_rules_say_why() {
        for (rule, why) in [
            ("sycall.p99 > 1ms", "no analyzer \"sycall\""),
            ("syscall.p98 > 1ms", "no statistic \"p98\""),
            ("syscall.p99{nme=write} > 1ms", "syscall has no key \"nme\""),
            ("syscall.p99 > 100", "needs a time unit"),
            ("syscall.p99 > 100xs", "not a time with a known unit"),
            ("syscall.p99 100ms", "no comparison"),
            ("syscall.p99 > 1ms over", "'over' needs a time"),
            (
                "syscall.p99 > 1ms within 3s",
                "expected 'over TIME' or 'for TIME'",
            ),
            ("syscall.count > many", "is not a number"),
            ("sysinfo.max > 1", "cannot be watched"),
            ("syscall > 1ms", "expected ANALYZER.STATISTIC"),
            ("syscall.max{name=write > 1ms", "must end with '}'"),
        ] {
            let e = Rule::parse(rule).unwrap_err();
            assert!(e.contains(why), "{rule}: {e}");
            assert!(e.contains(rule.trim()), "{rule}: {e}");
        }
    }

    /// A 300 ms interval ending at `end_ms` with `lost` events lost on one CPU.
    fn losing(end_ms: u64, lost: u64) -> Interval {
        Interval {
            start: (end_ms - 300) * 1_000_000,
            end: end_ms * 1_000_000,
            outcomes: Vec::new(),
            cpus: vec![kstate_analyze::live::CpuActivity {
                cpu: 0,
                events: 10,
                bytes: 100,
                lost: Some(lost),
            }],
        }
    }

    #[test]
    fn a_flipping_condition_fires_no_more_often_than_the_quiet_time() {
        // The auditor's case: true, false, true ... every 300 ms over 3 s, quiet 10 s.
        let mut alarms = Alarms::new(vec![Rule::parse("lost > 0").unwrap()], 10_000_000_000);
        let mut fired = Vec::new();
        for i in 1..=10u64 {
            let lost = if i % 2 == 1 { 5 } else { 0 };
            fired.extend(alarms.check(&losing(i * 300, lost)));
        }
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!((fired[0].end, fired[0].suppressed), (300_000_000, 0));
        // 10.5 s on, more than the quiet time after the first: it fires, and says that
        // the four onsets in between (at 0.9, 1.5, 2.1, 2.7 s) were held back.
        let f = alarms.check(&losing(10_500, 5));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].suppressed, 4);
        // Staying true does not count as becoming true again.
        assert!(alarms.check(&losing(10_800, 5)).is_empty());
        let f = alarms.check(&losing(20_800, 5));
        assert_eq!((f.len(), f[0].suppressed), (1, 0));
    }

    #[test]
    fn keys_match_by_part() {
        assert!(key_matches("write", "write"));
        assert!(key_matches("bash-42", "42"));
        assert!(key_matches("bash-42", "bash"));
        assert!(key_matches("0000fe00-W(vda)", "vda"));
        assert!(!key_matches("writev", "write"));
        assert!(!key_matches("bash-421", "42"));
    }
}
