//! A comparison of two recordings ([`kstate_views::compare::Comparison`]) as text, CSV or
//! JSON: what `kstate compare` prints and the browser UI reads.
//!
//! JSON: `{"a", "b", "metric", "threshold", "min_count", "regressed": bool,
//! "changes": [{"analyzer", "key", "metric", "unit", "a", "b", "ratio", "regressed"}],
//! "analyzers": [{"analyzer", "by", "unit", "rows": [{"key", "a": NUMS | null,
//! "b": NUMS | null, "ratio": {METRIC: x | null}, "diff": {METRIC: n | null}, "compared",
//! "regressed"}]}], "unmatched": [{"analyzer", "why"}], "damage": [...]}` with NUMS `{"count", "total",
//! "avg", "p99"}` in the analyzer's `unit` (`ns`, `bytes`, ...; counts are plain), and
//! "damage" what was skipped in A or B ([`crate::damage::json`]).

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

fn json(c: &Comparison, w: &mut dyn Write) -> io::Result<()> {
    write!(
        w,
        "{{\"a\":{},\"b\":{},\"metric\":{},\"threshold\":{},\"min_count\":{},\"regressed\":{},\"changes\":[",
        json_str(&c.a),
        json_str(&c.b),
        json_str(c.rules.metric.name()),
        c.rules.threshold,
        c.rules.min_count,
        c.regressed()
    )?;
    for (i, ch) in c.changes.iter().enumerate() {
        if i > 0 {
            write!(w, ",")?;
        }
        write!(
            w,
            "{{\"analyzer\":{},\"key\":{},\"metric\":{},\"unit\":{},\"a\":{},\"b\":{},\"ratio\":{},\"regressed\":{}}}",
            json_str(ch.analyzer),
            json_str(&ch.key),
            json_str(ch.metric.name()),
            json_str(if ch.metric.has_unit() { ch.unit.suffix() } else { "" }),
            ch.a,
            ch.b,
            ratio_json(Some(ch.ratio)),
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
            write!(
                w,
                "{{\"key\":{},\"a\":{},\"b\":{},\"ratio\":{{{}}},\"diff\":{{{}}},\"compared\":{},\"regressed\":{}}}",
                json_str(&k.key),
                nums(k.a),
                nums(k.b),
                per(&|m| ratio_json(k.ratio(m))),
                per(&|m| opt(k.diff(m))),
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

/// `x3.02` / `x0.50` / `-`.
fn times(r: Option<f64>) -> String {
    match r {
        Some(x) if x.is_finite() => format!("x{x:.2}"),
        _ => "-".into(),
    }
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
    writeln!(w, "What changed most (B against A):")?;
    if c.changes.is_empty() {
        writeln!(w, "  (no key with enough samples in both)")?;
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
        writeln!(
            w,
            "  {:<kw$}  {:<5} {:>12} -> {:<12} {:>9}{}",
            name,
            ch.metric.name(),
            human(info, ch.metric, ch.a),
            human(info, ch.metric, ch.b),
            times(Some(ch.ratio)),
            if ch.regressed { "  REGRESSED" } else { "" }
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
