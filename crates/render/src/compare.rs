//! A comparison of two recordings ([`kstate_views::compare::Comparison`]) as text, CSV or
//! JSON: what `kstate compare` prints and the browser UI reads.
//!
//! JSON: `{"a", "b", "metric", "threshold", "min_count", "per_second", "regressed": bool,
//! "changes": [{"analyzer", "key", "metric", "unit", "a", "b", "ratio", "added_ns_per_s",
//! "tail_ns_per_s", "regressed"}], "analyzers": [{"analyzer", "by", "unit", "rows":
//! [{"key", "a": NUMS | null, "b": NUMS | null, "per_s": {"a": RATES | null, "b": RATES
//! | null} | null, "ratio": {METRIC: x | null}, "diff": {METRIC: n | null},
//! "added_ns_per_s", "compared", "regressed"}]}], "unmatched": [{"analyzer", "why"}],
//! "damage": [...]}` with NUMS `{"count", "total", "avg", "p99"}` in the analyzer's `unit`
//! (`ns`, `bytes`, ...; counts are plain), RATES `{"count", "total"}` per second of each
//! side, and "damage" what was skipped in A or B ([`crate::damage::json`]).
//! `changes` is in the order of impact (see `kstate compare --help`); a change's `a` or
//! `b` (and its ratio) is null for a key of one side only.

use std::io::{self, Write};

use kstate_analyze::Info;
use kstate_views::compare::{Comparison, KeyDiff, Metric};

use crate::{csv_field, json_str, Format};

/// Writes `c` in `fmt`.
pub fn comparison(c: &Comparison, fmt: Format, w: &mut dyn Write) -> io::Result<()> {
    match fmt {
        Format::Json => json(c, w),
        Format::Csv => csv(c, w),
        Format::Text => text(c, w),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("null".into(), |x| x.to_string())
}

fn ratio_json(r: Option<f64>) -> String {
    match r {
        Some(x) if x.is_finite() => format!("{x:.6}"),
        _ => "null".into(),
    }
}

/// A rate (per second) in JSON: three decimals.
fn rate_json(r: Option<f64>) -> String {
    match r {
        Some(x) if x.is_finite() => format!("{x:.3}"),
        _ => "null".into(),
    }
}

fn json(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    write!(
        w,
        "{{\"a\":{},\"b\":{},\"metric\":{},\"threshold\":{},\"min_count\":{},\"per_second\":{},\"regressed\":{},\"changes\":[",
        json_str(&c.a),
        json_str(&c.b),
        json_str(c.rules.metric.name()),
        c.rules.threshold,
        c.rules.min_count,
        c.rules.per_second,
        c.regressed()
    )?;
    for (i, ch) in c.changes.iter().enumerate() {
        if i > 0 {
            write!(w, ",")?;
        }
        write!(
            w,
            "{{\"analyzer\":{},\"key\":{},\"metric\":{},\"unit\":{},\"a\":{},\"b\":{},\"ratio\":{},\"added_ns_per_s\":{},\"tail_ns_per_s\":{},\"regressed\":{}}}",
            json_str(ch.analyzer),
            json_str(&ch.key),
            json_str(ch.metric.name()),
            json_str(if ch.metric.has_unit() { ch.unit.suffix() } else { "" }),
            opt(ch.a),
            opt(ch.b),
            ratio_json(ch.ratio),
            rate_json(ch.added),
            rate_json(ch.tail),
            ch.regressed
        )?;
    }
    write!(w, "],\"analyzers\":[")?;
    for (i, a) in c.analyzers.iter().enumerate() {
        if i > 0 {
            write!(w, ",")?;
        }
        write!(
            w,
            "{{\"analyzer\":{},\"by\":{},\"unit\":{},\"rows\":[",
            json_str(a.info.name),
            json_str(a.by),
            json_str(a.info.unit.suffix())
        )?;
        for (j, k) in a.keys.iter().enumerate() {
            if j > 0 {
                write!(w, ",")?;
            }
            let nums = |n: Option<kstate_views::compare::Nums>| {
                n.map_or("null".into(), |n| {
                    format!(
                        "{{\"count\":{},\"total\":{},\"avg\":{},\"p99\":{}}}",
                        n.count, n.total, n.avg, n.p99
                    )
                })
            };
            let per = |f: &dyn Fn(Metric) -> String| {
                Metric::ALL
                    .iter()
                    .map(|m| format!("\"{}\":{}", m.name(), f(*m)))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let rates = |side: usize| match (side, k.a, k.b) {
                (0, None, _) | (1, _, None) => "null".to_string(),
                _ => format!(
                    "{{\"count\":{},\"total\":{}}}",
                    rate_json(k.rate(Metric::Count, side)),
                    rate_json(k.rate(Metric::Total, side))
                ),
            };
            let per_s = match k.per_s {
                None => "null".to_string(),
                Some(_) => format!("{{\"a\":{},\"b\":{}}}", rates(0), rates(1)),
            };
            write!(
                w,
                "{{\"key\":{},\"a\":{},\"b\":{},\"per_s\":{},\"ratio\":{{{}}},\"diff\":{{{}}},\"added_ns_per_s\":{},\"compared\":{},\"regressed\":{}}}",
                json_str(&k.key),
                nums(k.a),
                nums(k.b),
                per_s,
                per(&|m| ratio_json(k.ratio(m))),
                per(&|m| opt(k.diff(m))),
                rate_json(k.added()),
                k.compared,
                k.regressed
            )?;
        }
        write!(w, "]}}")?;
    }
    write!(w, "],\"unmatched\":[")?;
    for (i, u) in c.unmatched.iter().enumerate() {
        if i > 0 {
            write!(w, ",")?;
        }
        write!(
            w,
            "{{\"analyzer\":{},\"why\":{}}}",
            json_str(u.analyzer),
            json_str(&u.why)
        )?;
    }
    writeln!(w, "],\"damage\":{}}}", crate::damage::json(&c.damage))
}

fn csv(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    write!(w, "analyzer,by,unit,key")?;
    for m in Metric::ALL {
        let n = m.name();
        write!(w, ",{n}_a,{n}_b,{n}_ratio,{n}_diff")?;
    }
    writeln!(w, ",compared,regressed")?;
    for a in &c.analyzers {
        for k in &a.keys {
            write!(
                w,
                "{},{},{},{}",
                a.info.name,
                a.by,
                a.info.unit.suffix(),
                csv_field(&k.key)
            )?;
            for m in Metric::ALL {
                let cell = |v: Option<String>| v.unwrap_or_default();
                write!(
                    w,
                    ",{},{},{},{}",
                    cell(k.a.map(|n| n.get(m).to_string())),
                    cell(k.b.map(|n| n.get(m).to_string())),
                    cell(k.ratio(m).map(|r| format!("{r:.6}"))),
                    cell(k.diff(m).map(|d| d.to_string()))
                )?;
            }
            writeln!(w, ",{},{}", k.compared, k.regressed)?;
        }
    }
    Ok(())
}

/// A value of `m` for people.
fn human(info: &Info, m: Metric, v: u64) -> String {
    if m.has_unit() {
        info.unit.fmt(v)
    } else {
        v.to_string()
    }
}

/// A ratio people read: `x3.02` (B is 3.02 times A), `/277` (B is A's 277th), `-`.
pub fn times(r: Option<f64>) -> String {
    let f = |x: f64| match x {
        x if x >= 100.0 => format!("{x:.0}"),
        x if x >= 10.0 => format!("{x:.1}"),
        x => format!("{x:.2}"),
    };
    match r {
        Some(x) if x.is_finite() && x >= 1.0 => format!("x{}", f(x)),
        Some(x) if x.is_finite() && x > 0.0 => format!("/{}", f(1.0 / x)),
        Some(0.0) => "/inf".into(),
        _ => "-".into(),
    }
}

/// Wall time added per second, signed: `+212.4ms/s`.
fn per_second(ns: f64) -> String {
    let sign = if ns < 0.0 { "-" } else { "+" };
    let a = ns.abs();
    let s = match a {
        a if a >= 1e9 => format!("{:.3}s", a / 1e9),
        a if a >= 1e6 => format!("{:.1}ms", a / 1e6),
        a if a >= 1e3 => format!("{:.1}us", a / 1e3),
        a => format!("{a:.0}ns"),
    };
    format!("{sign}{s}/s")
}

fn text(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "A: {}", c.a)?;
    writeln!(w, "B: {}", c.b)?;
    let r = &c.rules;
    writeln!(
        w,
        "regressed: {} of B >= {} x A's, keys with >= {} samples in both (durations only)",
        r.metric.name(),
        r.threshold,
        r.min_count
    )?;
    writeln!(w)?;
    writeln!(
        w,
        "What changed most (B against A), by wall time added per second of recording, then p99 growth times calls per second:"
    )?;
    if c.changes.is_empty() {
        writeln!(w, "  (no key with enough samples)")?;
    }
    let infos: Vec<&Info> = c.analyzers.iter().map(|a| a.info).collect();
    let info_of = |name: &str| infos.iter().find(|i| i.name == name).copied();
    let kw = c
        .changes
        .iter()
        .take(20)
        .map(|ch| ch.analyzer.len() + 1 + ch.key.chars().count())
        .max()
        .unwrap_or(3);
    for ch in c.changes.iter().take(20) {
        let Some(info) = info_of(ch.analyzer) else {
            continue;
        };
        let name = format!("{} {}", ch.analyzer, ch.key);
        let side = |v: Option<u64>| v.map_or("-".into(), |v| human(info, ch.metric, v));
        let note = match (ch.a, ch.b) {
            (None, _) => "  only in B",
            (_, None) => "  only in A",
            _ if ch.regressed => "  REGRESSED",
            _ => "",
        };
        writeln!(
            w,
            "  {:<kw$}  {:>13}  {:<5} {:>12} -> {:<12} {:>9}{note}",
            name,
            ch.added.map_or("-".into(), per_second),
            ch.metric.name(),
            side(ch.a),
            side(ch.b),
            times(ch.ratio),
        )?;
    }
    for a in &c.analyzers {
        writeln!(w)?;
        writeln!(
            w,
            "{} (key: {}; value: {})",
            a.info.name, a.by, a.info.value
        )?;
        let kw = a
            .keys
            .iter()
            .map(|k| k.key.chars().count())
            .max()
            .unwrap_or(3)
            .max(3);
        write!(w, "{:<kw$}", "KEY")?;
        for m in Metric::ALL {
            let n = m.name().to_uppercase();
            write!(
                w,
                " {:>10} {:>10} {:>7}",
                format!("{n} A"),
                format!("{n} B"),
                "B/A"
            )?;
        }
        writeln!(w)?;
        for k in &a.keys {
            row(a.info, k, kw, w)?;
        }
        if a.keys.is_empty() {
            writeln!(w, "(no pairs)")?;
        }
    }
    if !c.unmatched.is_empty() {
        writeln!(w)?;
        writeln!(w, "Not compared:")?;
        for u in &c.unmatched {
            writeln!(w, "  {}: {}", u.analyzer, u.why)?;
        }
    }
    Ok(())
}

fn row(info: &Info, k: &KeyDiff, kw: usize, w: &mut dyn Write) -> io::Result<()> {
    write!(w, "{:<kw$}", k.key)?;
    for m in Metric::ALL {
        let side = |n: Option<kstate_views::compare::Nums>| {
            n.map_or("-".into(), |n| human(info, m, n.get(m)))
        };
        write!(
            w,
            " {:>10} {:>10} {:>7}",
            side(k.a),
            side(k.b),
            times(k.ratio(m))
        )?;
    }
    let note = match (k.a, k.b) {
        (Some(_), None) => "  only in A",
        (None, Some(_)) => "  only in B",
        _ if k.regressed => "  REGRESSED",
        _ if !k.compared => "  (few samples)",
        _ => "",
    };
    writeln!(w, "{note}")
}
