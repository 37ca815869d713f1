//! What users select: time windows, durations, tasks, CPUs, keys.
//!
//! Times and durations are parsed as decimal text, never through a float, so they are
//! exact to the nanosecond.

use std::fmt;

/// A point in time as typed: seconds after the first event of the trace (`1.5`, `250ms`)
/// or an absolute trace-clock time as `kstate dump` prints it (`@259445.106948920`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSpec {
    Rel(u64),
    Abs(u64),
}

impl TimeSpec {
    pub fn resolve(self, trace_start: u64) -> u64 {
        match self {
            TimeSpec::Rel(ns) => trace_start.saturating_add(ns),
            TimeSpec::Abs(ns) => ns,
        }
    }
}

impl fmt::Display for TimeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeSpec::Rel(ns) => write!(f, "{}", fmt_secs(*ns)),
            TimeSpec::Abs(ns) => write!(f, "@{}", fmt_secs(*ns)),
        }
    }
}

/// `A:B`, either side optional; see [`TimeSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    pub from: Option<TimeSpec>,
    pub to: Option<TimeSpec>,
}

impl WindowSpec {
    /// Inclusive absolute bounds.
    pub fn resolve(&self, trace_start: u64) -> (u64, u64) {
        (
            self.from.map_or(0, |t| t.resolve(trace_start)),
            self.to.map_or(u64::MAX, |t| t.resolve(trace_start)),
        )
    }
}

impl fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(a) = self.from {
            write!(f, "{a}")?;
        }
        f.write_str(":")?;
        if let Some(b) = self.to {
            write!(f, "{b}")?;
        }
        Ok(())
    }
}

pub fn parse_window(s: &str) -> Result<WindowSpec, String> {
    let (a, b) = s.split_once(':').ok_or_else(|| {
        format!("invalid window {s:?}: expected FROM:TO, e.g. 1.5:2 or @259445.1:")
    })?;
    let side = |t: &str| -> Result<Option<TimeSpec>, String> {
        let t = t.trim();
        if t.is_empty() {
            Ok(None)
        } else if let Some(abs) = t.strip_prefix('@') {
            Ok(Some(TimeSpec::Abs(parse_secs(abs)?)))
        } else {
            Ok(Some(TimeSpec::Rel(parse_dur_or_secs(t)?)))
        }
    };
    let w = WindowSpec {
        from: side(a)?,
        to: side(b)?,
    };
    if let (Some(TimeSpec::Rel(x)), Some(TimeSpec::Rel(y)))
    | (Some(TimeSpec::Abs(x)), Some(TimeSpec::Abs(y))) = (w.from, w.to)
    {
        if y < x {
            return Err(format!("invalid window {s:?}: ends before it starts"));
        }
    }
    Ok(w)
}

/// `259445.106948920` -> 259445106948920.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1_000_000_000)
        .ok_or_else(|| format!("invalid time {s:?}: expected seconds like 259445.106948920"))
}

/// Decimal `s` times `unit` ns, exactly (at most nine decimals).
fn parse_scaled(s: &str, unit: u64) -> Option<u64> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut v = whole.checked_mul(unit)?;
    let mut scale = unit;
    for d in frac.bytes() {
        if !scale.is_multiple_of(10) {
            // A fraction finer than a nanosecond.
            if d != b'0' {
                return None;
            }
            continue;
        }
        scale /= 10;
        v = v.checked_add((d - b'0') as u64 * scale)?;
    }
    Some(v)
}

/// A duration: a decimal number with a unit `ns`, `us`, `ms` or `s` (`10us`, `1.5ms`,
/// `2s`); a bare number is nanoseconds.
pub fn parse_dur(s: &str) -> Result<u64, String> {
    parse_with_unit(s, 1).ok_or_else(|| {
        format!("invalid duration {s:?}: expected a number and a unit, e.g. 10us, 1.5ms, 2s")
    })
}

/// Like [`parse_dur`] but a bare number is seconds (window bounds).
pub fn parse_dur_or_secs(s: &str) -> Result<u64, String> {
    parse_with_unit(s, 1_000_000_000)
        .ok_or_else(|| format!("invalid time {s:?}: expected seconds (1.5) or a duration (250ms)"))
}

fn parse_with_unit(s: &str, bare: u64) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "" => bare,
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    parse_scaled(num, scale)
}

/// 259445106948920 -> `259445.106948920`.
pub fn fmt_secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// A duration for people: `812ns`, `12.345us`, `1.500ms`, `2.000000s`.
pub fn fmt_dur(ns: u64) -> String {
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{}.{:03}us", ns / 1_000, ns % 1_000)
    } else if ns < 1_000_000_000 {
        format!("{}.{:03}ms", ns / 1_000_000, ns % 1_000_000 / 1_000)
    } else {
        format!("{}.{:06}s", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
    }
}

/// Everything a sample must satisfy to be counted. Empty lists select everything.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub window: Option<WindowSpec>,
    pub not_window: Option<WindowSpec>,
    /// Process ids (thread-group ids where the trace tells them, else thread ids).
    pub pids: Vec<i32>,
    pub tids: Vec<i32>,
    pub comms: Vec<String>,
    pub cpus: Vec<u32>,
    pub keys: Vec<String>,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

impl Filters {
    /// One line per active filter, as typed, for report headers.
    pub fn describe(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        let list = |xs: &[String]| xs.join(",");
        if let Some(w) = &self.window {
            v.push(("window".into(), w.to_string()));
        }
        if let Some(w) = &self.not_window {
            v.push(("not-window".into(), w.to_string()));
        }
        let ints = |xs: &[i32]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        if !self.pids.is_empty() {
            v.push(("pid".into(), list(&ints(&self.pids))));
        }
        if !self.tids.is_empty() {
            v.push(("tid".into(), list(&ints(&self.tids))));
        }
        if !self.comms.is_empty() {
            v.push(("comm".into(), list(&self.comms)));
        }
        if !self.cpus.is_empty() {
            let c: Vec<String> = self.cpus.iter().map(|x| x.to_string()).collect();
            v.push(("cpu".into(), list(&c)));
        }
        if !self.keys.is_empty() {
            v.push(("key".into(), list(&self.keys)));
        }
        if let Some(m) = self.min {
            v.push(("min".into(), fmt_dur(m)));
        }
        if let Some(m) = self.max {
            v.push(("max".into(), fmt_dur(m)));
        }
        v
    }
}

/// The selected time: inside `include` (inclusive) and outside `exclude`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeSel {
    pub include: (u64, u64),
    pub exclude: Option<(u64, u64)>,
}

impl TimeSel {
    pub const ALL: TimeSel = TimeSel {
        include: (0, u64::MAX),
        exclude: None,
    };
    #[inline]
    pub fn contains(&self, t: u64) -> bool {
        t >= self.include.0
            && t <= self.include.1
            && !self.exclude.is_some_and(|(a, b)| t >= a && t <= b)
    }
    /// Whether any instant of (a, b] is selected.
    pub fn overlaps(&self, a: u64, b: u64) -> bool {
        self.overlap_ns(a, b) > 0 || self.contains(b)
    }
    /// Nanoseconds of [a, b) that are selected.
    pub fn overlap_ns(&self, a: u64, b: u64) -> u64 {
        let inter = |(x, y): (u64, u64), (p, q): (u64, u64)| -> u64 {
            let lo = x.max(p);
            let hi = y.min(q);
            hi.saturating_sub(lo)
        };
        let inc = (self.include.0, self.include.1.saturating_add(1));
        let total = inter((a, b), inc);
        match self.exclude {
            None => total,
            Some((p, q)) => {
                let ex = (p, q.saturating_add(1));
                let lo = a.max(inc.0);
                let hi = b.min(inc.1);
                if hi <= lo {
                    0
                } else {
                    total - inter((lo, hi), ex)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_dur("10us"), Ok(10_000));
        assert_eq!(parse_dur("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_dur("2s"), Ok(2_000_000_000));
        assert_eq!(parse_dur("750"), Ok(750));
        assert_eq!(parse_dur("0.000000001s"), Ok(1));
        assert!(parse_dur("1.5ns").is_err());
        assert!(parse_dur("10 parsecs").is_err());
        assert!(parse_dur("-1us").is_err());
        assert!(parse_dur("").is_err());
    }

    #[test]
    fn windows() {
        let w = parse_window("1.5:2").unwrap();
        assert_eq!(w.resolve(100), (1_500_000_100, 2_000_000_100));
        let w = parse_window("@259445.1:").unwrap();
        assert_eq!(w.resolve(7), (259_445_100_000_000, u64::MAX));
        let w = parse_window(":250ms").unwrap();
        assert_eq!(w.resolve(0), (0, 250_000_000));
        assert_eq!(w.to_string(), ":0.250000000");
        assert!(parse_window("2:1").is_err());
        assert!(parse_window("1").is_err());
    }

    #[test]
    fn time_selection() {
        let s = TimeSel {
            include: (10, 100),
            exclude: Some((20, 29)),
        };
        assert!(s.contains(10) && s.contains(100) && !s.contains(25) && !s.contains(101));
        assert_eq!(s.overlap_ns(0, 200), 91 - 10);
        assert_eq!(s.overlap_ns(20, 30), 0);
        assert!(!s.overlaps(20, 29));
        assert!(s.overlaps(20, 30));
        assert_eq!(TimeSel::ALL.overlap_ns(5, 9), 4);
    }

    #[test]
    fn human_durations() {
        assert_eq!(fmt_dur(812), "812ns");
        assert_eq!(fmt_dur(12_345), "12.345us");
        assert_eq!(fmt_dur(1_500_000), "1.500ms");
        assert_eq!(fmt_dur(2_000_000_000), "2.000000s");
    }
}
