//! `kstate fleet`'s report of merged summaries: text tables, CSV and JSON.

use std::io::Write;

use kstate_views::fleet::{Duplicate, Failure, Figures, Fleet, Outlier};

use crate::csv_field;

/// One printed row: a group's (or the whole fleet's) merged statistics.
struct Line<'a> {
    analyzer: &'a str,
    key: &'a str,
    unit: &'a str,
    group: Option<&'a str>,
    m: &'a Figures,
}

fn lines(f: &Fleet) -> Vec<Line<'_>> {
    let mut v = Vec::new();
    for ((a, k), e) in &f.entries {
        v.push(Line {
            analyzer: a,
            key: k,
            unit: &e.unit,
            group: None,
            m: &e.fleet,
        });
        for (g, m) in &e.groups {
            v.push(Line {
                analyzer: a,
                key: k,
                unit: &e.unit,
                group: Some(g),
                m,
            });
        }
    }
    v
}

/// The names of kstate_views::fleet::QUANTILES.
const QUANTILES: [&str; 3] = ["p50", "p99", "p999"];

/// recordings, count, total, avg, min, max, flagged, then the quantiles' values and
/// buckets.
fn numbers(m: &Figures) -> [u64; 13] {
    let q = m.quantiles;
    [
        m.recordings,
        m.count,
        m.total,
        m.avg(),
        m.min,
        m.max,
        m.flagged,
        q[0].value,
        q[1].value,
        q[2].value,
        q[0].bucket as u64,
        q[1].bucket as u64,
        q[2].bucket as u64,
    ]
}

/// One row per group and the fleet, every figure as an integer.
pub fn csv(f: &Fleet, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "analyzer,key,unit,group,recordings,count,total,avg,min,max,flagged,\
         p50,p99,p999,p50_bucket,p99_bucket,p999_bucket"
    )?;
    // Analyzer, key and group names come from the recordings: escaped as formulas too.
    let q = csv_field;
    for l in lines(f) {
        let n: Vec<String> = numbers(l.m).iter().map(u64::to_string).collect();
        writeln!(
            out,
            "{},{},{},{},{}",
            q(l.analyzer),
            q(l.key),
            l.unit,
            q(l.group.unwrap_or("(fleet)")),
            n.join(",")
        )?;
    }
    Ok(())
}

/// A text table row: the group, then recordings, count, total, avg, min, max, p50, p99,
/// p99.9.
fn text_row(out: &mut dyn Write, c: [&dyn std::fmt::Display; 10]) -> std::io::Result<()> {
    writeln!(
        out,
        "  {:<24} {:>5} {:>10} {:>14} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]
    )
}

/// The tables per analyzer and key, then the outliers; `by` and `k` as the user gave them.
pub fn text(
    f: &Fleet,
    outliers: &[Outlier],
    by: &str,
    k: f64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let n: u64 = f.recordings.values().sum();
    writeln!(
        out,
        "{} recordings in {} groups by {}",
        n,
        f.recordings.len(),
        by
    )?;
    let mut last = None;
    for l in lines(f) {
        if last != Some((l.analyzer, l.key)) {
            writeln!(out, "\n{} {} ({})", l.analyzer, l.key, l.unit)?;
            text_row(
                out,
                [
                    &"group", &"recs", &"count", &"total", &"avg", &"min", &"max", &"p50", &"p99",
                    &"p99.9",
                ],
            )?;
            last = Some((l.analyzer, l.key));
        }
        let n = numbers(l.m);
        let g = l.group.unwrap_or("(fleet)");
        text_row(
            out,
            [
                &g, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5], &n[7], &n[8], &n[9],
            ],
        )?;
    }
    writeln!(
        out,
        "\noutliers (p99 > {} x the median of the groups' p99s):{}",
        k,
        if outliers.is_empty() { " none" } else { "" }
    )?;
    for o in outliers {
        writeln!(
            out,
            "  {} {} {}: p99 {} vs median {}",
            o.analyzer, o.key, o.group, o.p99, o.median_p99
        )?;
    }
    Ok(())
}

/// One JSON document: every row with its quantiles' buckets, the outliers, the failures
/// and the summaries left out as copies of a recording merged from another file.
pub fn json(
    f: &Fleet,
    outliers: &[Outlier],
    failed: &[Failure],
    duplicates: &[Duplicate],
    by: &str,
    k: f64,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    use serde_json::json;
    // Written a row at a time: the document of every key by host of 1,000 summaries held
    // as one serde_json value took 5 GB (ten times the figures it was made from).
    let put = |out: &mut dyn Write, v: &serde_json::Value| {
        serde_json::to_writer(&mut *out, v).map_err(std::io::Error::other)
    };
    write!(out, "{{\n\"by\": ")?;
    put(out, &json!(by))?;
    write!(out, ",\n\"k\": ")?;
    put(out, &json!(k))?;
    write!(out, ",\n\"groups\": ")?;
    put(out, &json!(f.recordings))?;
    write!(out, ",\n\"rows\": [")?;
    for (i, l) in lines(f).iter().enumerate() {
        let a = l.m;
        let mut v = json!({
            "analyzer": l.analyzer, "key": l.key, "unit": l.unit, "group": l.group,
            "recordings": a.recordings, "count": a.count, "total": a.total,
            "avg": a.avg(), "min": a.min, "max": a.max, "flagged": a.flagged,
        });
        for (name, q) in QUANTILES.iter().zip(a.quantiles) {
            v[name] = json!(q.value);
            v[format!("{name}_bucket")] = json!({"index": q.bucket, "lo": q.lo, "hi": q.hi});
        }
        write!(out, "{}\n  ", if i == 0 { "" } else { "," })?;
        put(out, &v)?;
    }
    write!(out, "],\n\"outliers\": ")?;
    let outliers: Vec<_> = outliers
        .iter()
        .map(|o| {
            json!({
                "analyzer": o.analyzer, "key": o.key, "group": o.group,
                "p99": o.p99, "median_p99": o.median_p99,
            })
        })
        .collect();
    put(out, &json!(outliers))?;
    write!(out, ",\n\"failed\": ")?;
    let failed: Vec<_> = failed
        .iter()
        .map(|(p, e)| json!({"file": p.display().to_string(), "error": e}))
        .collect();
    put(out, &json!(failed))?;
    write!(out, ",\n\"duplicates\": ")?;
    let duplicates: Vec<_> = duplicates
        .iter()
        .map(|d| {
            json!({
                "file": d.path.display().to_string(), "recording": d.recording,
                "merged": d.merged.display().to_string(),
            })
        })
        .collect();
    put(out, &json!(duplicates))?;
    writeln!(out, "\n}}")
}

#[cfg(test)]
mod tests {
    use kstate_analyze::Source;
    use kstate_views::fleet::{summarize, Fleet, GroupBy};

    /// Group names come from the recordings (host names, command lines): a CSV cell that
    /// starts like a formula is written as text, and the fleet row carries the same figures
    /// as the one group it holds.
    #[test]
    fn csv_cells_that_look_like_formulas_are_text() {
        let path = kstate_testdata::path("lisa-sched_load/trace.dat");
        let mut s = summarize(&Source::open(&path).unwrap(), &[], false).unwrap();
        s.meta.host = "=HYPERLINK(\"x\")".into();
        let f = Fleet::new(GroupBy::Host, None, None).of(&[s]);
        let mut out = Vec::new();
        super::csv(&f, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows.len() > 2, "{text}");
        let cell = ",\"'=HYPERLINK(\"\"x\"\")\",";
        let at = rows
            .iter()
            .position(|l| l.contains(cell))
            .expect("the group's row");
        // One recording: the fleet row just above it has the same figures.
        let (_, group) = rows[at].split_once(cell).unwrap();
        let (_, fleet) = rows[at - 1].split_once(",(fleet),").unwrap();
        assert_eq!(fleet, group);
        assert!(group.starts_with("1,"), "{group}");
    }
}
