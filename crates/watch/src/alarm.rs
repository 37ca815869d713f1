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
    /// Parses a rule, or says what is wrong with it, pointing at the character.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let t = text.trim();
        let bad = |at: usize, why: String| point(t, at, &why);
        // Past the key filter, whose '=' is not a comparison.
        let from = match (t.find('{'), t.find('}')) {
            (Some(open), None) => {
                return Err(bad(open, "the key filter must end with '}'".into()));
            }
            (_, Some(close)) => close + 1,
            (None, None) => 0,
        };
        let op_at = t[from..]
            .find(['>', '<', '='])
            .map(|i| i + from)
            .ok_or_else(|| bad(t.len(), "no comparison (>, >=, <, <=, ==)".into()))?;
        let (lhs, rest) = t.split_at(op_at);
        let (op, len) = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .iter()
        .find_map(|(s, op)| rest.starts_with(s).then_some((*op, s.len())))
        .ok_or_else(|| {
            bad(
                op_at,
                format!("{:?} is not a comparison (>, >=, <, <=, ==)", &rest[..1]),
            )
        })?;
        let subject = parse_subject(lhs.trim_end(), t)?;
        let after_op = op_at + len;
        let rest = &t[after_op..];
        let value_at = after_op + (rest.len() - rest.trim_start().len());
        let mut words = rest.split_whitespace();
        let value = words
            .next()
            .ok_or_else(|| bad(t.len(), "no value after the comparison".into()))?;
        if value.starts_with(['>', '<', '=', '!']) {
            return Err(bad(
                value_at,
                format!(
                    "{:?} after the comparison: expected a value (the comparisons are >, >=, \
                     <, <=, ==)",
                    &value[..1]
                ),
            ));
        }
        let threshold = match subject.takes_time() {
            true => parse_duration(value).map(|ns| ns as f64),
            false => value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("{value:?} is not a number")),
        }
        .map_err(|why| bad(value_at, why))?;
        let word_at = |w: &str| t.rfind(w).unwrap_or(t.len());
        let window = match (words.next(), words.next()) {
            (None, _) => Window::Last,
            (Some(w @ ("over" | "for")), Some(d)) => {
                let ns = parse_duration(d).map_err(|why| bad(word_at(d), why))?;
                if ns == 0 {
                    return Err(bad(
                        word_at(d),
                        format!("'{w} {d}': the time must be positive"),
                    ));
                }
                match w {
                    "over" => Window::Over(ns),
                    _ => Window::For(ns),
                }
            }
            (Some(w @ ("over" | "for")), None) => {
                return Err(bad(t.len(), format!("'{w}' needs a time, e.g. '{w} 3s'")))
            }
            (Some(w), _) => {
                return Err(bad(
                    word_at(w),
                    format!("expected 'over TIME' or 'for TIME' after the value, not {w:?}"),
                ))
            }
        };
        if let Some(w) = words.next() {
            return Err(bad(word_at(w), format!("unexpected {w:?} at the end")));
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

    /// The key the rule selects (`{NAME=KEY}`), if any.
    pub fn key(&self) -> Option<&(String, String)> {
        match &self.subject {
            Subject::Analyzer { key, .. } => key.as_ref(),
            Subject::Lost => None,
        }
    }

    /// Whether the rule looks at a rate (samples per second).
    pub fn is_rate(&self) -> bool {
        matches!(
            self.subject,
            Subject::Analyzer {
                stat: Stat::Rate,
                ..
            }
        )
    }

    /// A value of the rule's statistic for people: `312.5ms`, `17`.
    pub fn fmt_value(&self, v: f64) -> String {
        match &self.subject {
            Subject::Analyzer { info, .. } if self.subject.takes_time() => {
                info.unit.fmt(v.round() as u64)
            }
            _ if v.fract() == 0.0 => format!("{v}"),
            _ => format!("{v:.1}"),
        }
    }
}

impl Subject {
    /// Whether its values are times (the threshold then needs a unit).
    fn takes_time(&self) -> bool {
        match self {
            Subject::Analyzer { info, stat, .. } => {
                stat.in_unit()
                    && info.unit == Unit::Ns
                    && !(*stat == Stat::Level && has_level(info))
            }
            Subject::Lost => false,
        }
    }
}

/// Whether the analyzer reports a level of its own (runq: the run-queue length per CPU,
/// in its table), which `level` then means instead of the highest value.
fn has_level(info: &Info) -> bool {
    info.traits.level != kstate_analyze::analyzer::Traits::DEFAULT.level
}

/// `why`, with the rule and a caret under its character `at` (a byte offset).
fn point(rule: &str, at: usize, why: &str) -> String {
    let col = rule
        .get(..at.min(rule.len()))
        .map_or(0, |s| s.chars().count());
    format!(
        "alarm rule {rule:?}: {why} (at character {})\n    {rule}\n    {}^",
        col + 1,
        " ".repeat(col)
    )
}

/// ANALYZER.STAT[{NAME=KEY}] or `lost`, which starts `rule` (for the messages).
fn parse_subject(s: &str, rule: &str) -> Result<Subject, String> {
    let bad = |at: usize, why: String| point(rule, at, &why);
    if s == "lost" {
        return Ok(Subject::Lost);
    }
    let (head, filter) = match s.split_once('{') {
        Some((h, f)) => {
            let f = f
                .strip_suffix('}')
                .ok_or_else(|| bad(s.len(), format!("{s:?}: the key filter must end with '}}'")))?;
            (h.trim(), Some(f))
        }
        None => (s, None),
    };
    let (name, stat_name) = head.split_once('.').ok_or_else(|| {
        bad(
            0,
            format!("{head:?}: expected ANALYZER.STATISTIC (e.g. syscall.p99) or lost"),
        )
    })?;
    let info = analyzers::find(name).ok_or_else(|| {
        let names: Vec<&str> = analyzers::ALL
            .iter()
            .filter(|i| i.is_live())
            .map(|i| i.name)
            .collect();
        bad(
            0,
            format!("no analyzer {name:?}; there are: {}", names.join(", ")),
        )
    })?;
    if !info.is_live() {
        return Err(bad(
            0,
            format!("analyzer {name} reads no events and cannot be watched"),
        ));
    }
    let stat_at = name.len() + 1;
    let stat = Stat::parse(stat_name).ok_or_else(|| {
        bad(
            stat_at,
            format!("no statistic {stat_name:?}; there are: {STATS}"),
        )
    })?;
    if stat == Stat::Level && info.unit == Unit::Ns && !has_level(info) {
        return Err(bad(
            stat_at,
            format!(
                "{name} has no level: its values are times ({}); use max for the longest",
                info.value
            ),
        ));
    }
    let mut by = info.by[0].0;
    let key = match filter {
        None => None,
        Some(f) => {
            let open = s.find('{').unwrap_or(0) + 1;
            if let Some(comma) = f.find(',') {
                return Err(bad(
                    open + comma,
                    format!(
                        "one key filter per rule: {{{f}}} has more than one (write a rule \
                         for each)"
                    ),
                ));
            }
            let (k, v) = f
                .split_once('=')
                .ok_or_else(|| bad(open, format!("key filter {{{f}}}: expected {{NAME=KEY}}")))?;
            let (k, v) = (k.trim(), v.trim());
            if v.is_empty() {
                return Err(bad(
                    open + f.len(),
                    format!("key filter {{{f}}}: no key after '='"),
                ));
            }
            let describes = |what: &str| info.by[0].1.contains(what);
            // The keying whose keys are tasks (`comm-tid`), for {comm=...}.
            let tasks = info.by.iter().find(|(_, d)| d.contains("(comm-"));
            match info.by.iter().find(|(n, _)| *n == k) {
                Some((n, _)) => by = n,
                None if k == "key" => {}
                None if k == "dev" && describes("device") => {}
                None if k == "comm" && describes("comm") => {}
                None if k == "comm" && tasks.is_some() => by = tasks.map_or(by, |t| t.0),
                None => {
                    let mut names: Vec<&str> = info.by.iter().map(|b| b.0).collect();
                    names.push("key");
                    if describes("device") {
                        names.push("dev");
                    }
                    if describes("comm") || tasks.is_some() {
                        names.push("comm");
                    }
                    return Err(bad(
                        open,
                        format!("{name} has no key {k:?}; it offers: {}", names.join(", ")),
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

/// Whether `key` is the one filter `name`=`want` selects: for `comm` the task's name part
/// (of `comm-tid`), for `dev` the device part (`…(vda)`), otherwise the whole key or one
/// of those parts or the id.
fn key_matches(key: &str, name: &str, want: &str) -> bool {
    let task = key.rsplit_once('-');
    let comm = task.is_some_and(|(c, _)| c == want);
    let dev = key
        .split_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .is_some_and(|d| d == want);
    match name {
        "comm" => key == want || comm,
        "dev" => dev,
        _ => key == want || comm || dev || task.is_some_and(|(_, id)| id == want),
    }
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
    /// Rates are not judged on intervals shorter than this (the last, cut short by the
    /// end of the recording: a handful of samples over a few microseconds is no rate).
    min_rate_span: u64,
    /// Warnings for people, not yet taken ([`Alarms::take_warnings`]).
    warnings: Vec<String>,
}

struct RuleState {
    rule: Rule,
    /// Per interval: start, end, the samples selected (or the events lost).
    history: VecDeque<(u64, u64, Agg, Option<String>)>,
    last_fired: Option<u64>,
    was_true: bool,
    /// Becoming true again within the quiet time, since the last firing.
    suppressed: u64,
    /// Intervals seen, and whether its key filter ever selected a key.
    intervals: u64,
    matched: bool,
}

impl Alarms {
    /// `interval_ns`: the watch's interval (rates ignore intervals under a tenth of it).
    pub fn new(rules: Vec<Rule>, quiet_ns: u64, interval_ns: u64) -> Alarms {
        Alarms {
            rules: rules
                .into_iter()
                .map(|rule| RuleState {
                    rule,
                    history: VecDeque::new(),
                    last_fired: None,
                    was_true: false,
                    suppressed: 0,
                    intervals: 0,
                    matched: false,
                })
                .collect(),
            quiet: quiet_ns,
            min_rate_span: interval_ns / 10,
            warnings: Vec::new(),
        }
    }

    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|r| &r.rule)
    }

    /// Warnings since the last call: a key filter that selected nothing in the first
    /// interval (said once per rule: a typo such as `{name=reed}` never fires).
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Per rule, the onsets held back by the quiet time since its last firing and not
    /// reported by a later one (for the summary at the end): rule, count, last firing.
    pub fn held_back(&self) -> Vec<(&str, u64, Option<u64>)> {
        self.rules
            .iter()
            .filter(|r| r.suppressed > 0)
            .map(|r| (r.rule.text.as_str(), r.suppressed, r.last_fired))
            .collect()
    }

    /// Takes one interval's results; returns the rules that fire.
    pub fn check(&mut self, iv: &Interval) -> Vec<Firing> {
        let mut fired = Vec::new();
        for r in &mut self.rules {
            let (agg, top, seen) = select(&r.rule.subject, iv);
            r.intervals += 1;
            // A system call this machine has is no typo: it may just not be made yet.
            r.matched |= top.is_some() || known_call(&r.rule);
            if r.intervals == 1 && !r.matched {
                if let Some((k, v)) = r.rule.key() {
                    self.warnings.push(format!(
                        "alarm rule {:?}: no key matches {k}={v} in the first interval \
                         ({}); it fires only if one appears",
                        r.rule.text,
                        match seen.is_empty() {
                            true => "no keys at all yet".to_string(),
                            false => format!("keys seen: {}", seen.join(", ")),
                        }
                    ));
                }
            }
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
            // A rate over a sliver of time is no rate: such an interval's samples count
            // in a window over it, but it decides nothing on its own.
            let sliver = |(s, e): (u64, u64)| e - s < self.min_rate_span;
            let over = matches!(r.rule.window, Window::Over(_));
            if r.rule.is_rate() && sliver((iv.start, iv.end)) && !over {
                continue;
            }
            let covered = iv.end - r.history[0].0 >= span;
            let stat = match &r.rule.subject {
                Subject::Analyzer { stat, .. } => *stat,
                Subject::Lost => Stat::Total,
            };
            // A level nothing measured (no run queue seen yet) is no level of 0: `runq.level
            // >= 0` fired at the start, before the analysis had seen a switch.
            let measured = |a: &Agg| stat != Stat::Level || a.count > 0;
            let (value, holds) = match r.rule.window {
                Window::For(_) => {
                    let values: Vec<f64> = r
                        .history
                        .iter()
                        .filter(|(s, e, _, _)| !(r.rule.is_rate() && sliver((*s, *e))))
                        .map(|(s, e, a, _)| stat.of(a, e - s))
                        .collect();
                    let holds = covered
                        && r.history.iter().all(|(_, _, a, _)| measured(a))
                        && values.iter().all(|v| r.rule.op.holds(*v, r.rule.threshold));
                    (values.last().copied().unwrap_or(0.0), holds)
                }
                _ => {
                    let window = iv.end - r.history[0].0;
                    if r.rule.is_rate() && window < self.min_rate_span {
                        continue;
                    }
                    let mut all = Agg::default();
                    for (_, _, a, _) in &r.history {
                        all.merge(a);
                    }
                    let v = stat.of(&all, window);
                    (v, measured(&all) && r.rule.op.holds(v, r.rule.threshold))
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

/// Where this machine's system-call table is known: the names a `syscall` rule's
/// `{name=...}` can match.
fn calls() -> &'static [&'static str] {
    match cfg!(target_arch = "x86_64") {
        true => kstate_analyze::analyzers::syscall_x86_64::X86_64,
        false => &[],
    }
}

/// Whether `rule` selects a system call by a name this machine has.
fn known_call(rule: &Rule) -> bool {
    match &rule.subject {
        Subject::Analyzer { info, by, key, .. } if info.name == "syscall" && *by == "name" => key
            .as_ref()
            .is_some_and(|(_, v)| calls().contains(&v.as_str())),
        _ => false,
    }
}

impl Rule {
    /// The system call a `syscall` rule's `{name=...}` names when this machine (whose
    /// table is known) has none by that name: a typo such as `{name=reed}` never fires.
    /// With the machine's names, for suggestions.
    pub fn unknown_call(&self) -> Option<(&str, &'static [&'static str])> {
        let Subject::Analyzer { info, by, key, .. } = &self.subject else {
            return None;
        };
        let (_, v) = key.as_ref()?;
        let unknown = info.name == "syscall" && *by == "name" && !calls().is_empty();
        (unknown && !known_call(self)).then_some((v.as_str(), calls()))
    }
}

/// Keys named in a warning at most.
const SEEN_SHOWN: usize = 8;

/// The samples `subject` looks at in one interval, merged over the selected keys, the
/// key with the largest value among them, and (when a key filter selected nothing) a
/// few of the keys there were.
fn select(subject: &Subject, iv: &Interval) -> (Agg, Option<String>, Vec<String>) {
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
            (agg, None, Vec::new())
        }
        Subject::Analyzer {
            info,
            by,
            key,
            stat,
        } => {
            let o = iv
                .outcomes
                .iter()
                .find(|o| o.info.name == info.name && o.by == *by);
            if *stat == Stat::Level && has_level(info) {
                return level(o, key.as_ref(), agg);
            }
            let mut top: Option<(u64, &str)> = None;
            for row in o.iter().flat_map(|o| &o.rows) {
                if key
                    .as_ref()
                    .is_some_and(|(n, k)| !key_matches(&row.key, n, k))
                {
                    continue;
                }
                agg.merge(&row.agg);
                if top.is_none_or(|(m, _)| row.agg.max > m) {
                    top = Some((row.agg.max, &row.key));
                }
            }
            let seen = match (key, top) {
                (Some(_), None) => o
                    .iter()
                    .flat_map(|o| &o.rows)
                    .take(SEEN_SHOWN)
                    .map(|r| r.key.clone())
                    .collect(),
                _ => Vec::new(),
            };
            (agg, top.map(|(_, k)| k.to_string()), seen)
        }
    }
}

/// An analyzer's own level (runq: the longest run queue of any CPU, or of the CPU
/// `{cpu=N}` names), from its table's `max_` column, as one sample.
fn level(
    o: Option<&kstate_analyze::analyzer::Outcome>,
    key: Option<&(String, String)>,
    mut agg: Agg,
) -> (Agg, Option<String>, Vec<String>) {
    let mut top: Option<(u64, String)> = None;
    for t in o.iter().flat_map(|o| &o.tables) {
        let Some(col) = t.columns.iter().position(|c| c.starts_with("max_")) else {
            continue;
        };
        for row in &t.rows {
            let name = match row.first() {
                Some(kstate_analyze::analyzer::Cell::Int(i)) => i.to_string(),
                Some(kstate_analyze::analyzer::Cell::Text(s)) => s.clone(),
                _ => continue,
            };
            if key.is_some_and(|(_, k)| *k != name) {
                continue;
            }
            let v = match row.get(col) {
                Some(kstate_analyze::analyzer::Cell::Int(i)) => *i,
                Some(kstate_analyze::analyzer::Cell::Float(f)) => *f as u64,
                _ => continue,
            };
            if top.as_ref().is_none_or(|(m, _)| v > *m) {
                top = Some((v, format!("{} {name}", t.columns[0])));
            }
        }
    }
    if let Some((v, _)) = &top {
        agg.add(*v, false, false);
    }
    (agg, top.map(|(_, k)| k), Vec::new())
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

    #[test]
    fn errors_point_at_the_character_and_filters_take_comm_and_levels() {
        let e = Rule::parse("syscall.max >> 1ms").unwrap_err();
        assert!(e.contains("\">\" after the comparison"), "{e}");
        assert!(
            e.ends_with("(at character 14)\n    syscall.max >> 1ms\n                 ^"),
            "{e}"
        );
        let e = Rule::parse("syscall.max{name=read,tid=1} > 1ms").unwrap_err();
        assert!(e.contains("one key filter per rule"), "{e}");
        assert!(e.contains("(at character 22)"), "{e}");
        let e = Rule::parse("syscall.p98 > 1ms").unwrap_err();
        assert!(e.contains("(at character 9)"), "{e}");
        // comm selects the task keying where the default keying has none.
        let r = Rule::parse("syscall.max{comm=bash} > 1ms").unwrap();
        assert_eq!(r.query().unwrap().1, "tid");
        let r = Rule::parse("offcpu.max{comm=bash} > 1ms").unwrap();
        assert_eq!(r.query().unwrap().1, "pid");
        // runq.level is a queue length (no time unit); syscall has no level.
        let r = Rule::parse("runq.level >= 4").unwrap();
        assert_eq!(r.threshold, 4.0);
        assert_eq!(r.fmt_value(5.0), "5");
        let e = Rule::parse("syscall.level > 3").unwrap_err();
        assert!(e.contains("syscall has no level"), "{e}");
        assert!(Rule::parse("blkqueue.level >= 32").is_ok());
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
            partial: false,
        }
    }

    #[test]
    fn a_flipping_condition_fires_no_more_often_than_the_quiet_time() {
        // The auditor's case: true, false, true ... every 300 ms over 3 s, quiet 10 s.
        let mut alarms = Alarms::new(
            vec![Rule::parse("lost > 0").unwrap()],
            10_000_000_000,
            300_000_000,
        );
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
    fn a_level_nothing_measured_does_not_hold() {
        // No run queue seen (the intervals before the first switch): no level, not 0.
        for rule in ["runq.level >= 0", "runq.level >= 0 for 600ms"] {
            let mut alarms = Alarms::new(vec![Rule::parse(rule).unwrap()], 1, 300_000_000);
            for i in 1..=3u64 {
                let f = alarms.check(&losing(i * 300, 0));
                assert!(f.is_empty(), "{rule}: {f:?}");
            }
        }
    }

    #[test]
    fn keys_match_by_part() {
        assert!(key_matches("write", "name", "write"));
        assert!(key_matches("bash-42", "tid", "42"));
        assert!(key_matches("bash-42", "key", "bash"));
        assert!(key_matches("bash-42", "comm", "bash"));
        assert!(!key_matches("bash-42", "comm", "42"));
        assert!(key_matches("0000fe00-W(vda)", "dev", "vda"));
        assert!(!key_matches("writev", "name", "write"));
        assert!(!key_matches("bash-421", "tid", "42"));
    }
}
