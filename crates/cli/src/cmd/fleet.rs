//! `kstate fleet DIR`: the summaries under DIR (`kstate summarize`) merged on all cores
//! (kstate_analyze::fleet): per analyzer, key and group the merged count, total, avg,
//! min, max and nearest-rank p50/p99/p99.9 to the bucket, and the outlier groups.

#[cfg(feature = "parquet")]
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use kstate_format::{Error, ErrorKind};

const AFTER_HELP: &str = "\
Quantiles are nearest-rank over the merged log-linear histograms: the bucket holding the
value of rank ceil(q * count) (docs/bucket-scheme.md), reported as its midpoint within
[min, max], exact below 256 and within 1/256 above. An outlier is a group whose p99 is more
than K times the median of the groups' p99s (the lower middle one for an even number).
sql/fleet_quantiles.sql computes the same buckets in DuckDB, Spark SQL or Trino.";

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Directory of summaries (every *.summary.parquet under it)
    dir: PathBuf,
    /// Group recordings by: host, kernel, command or recording
    #[arg(long, default_value = "host")]
    by: String,
    /// Only this analyzer
    #[arg(long)]
    analyzer: Option<String>,
    /// Only this key (e.g. a system call's name)
    #[arg(long)]
    key: Option<String>,
    /// Outlier threshold: group p99 > K x the median of the groups' p99s
    #[arg(long, default_value_t = 3.0)]
    k: f64,
    /// text, csv or json
    #[arg(long, default_value = "text")]
    format: String,
}

fn bad(msg: String) -> Error {
    Error::new(ErrorKind::Unsupported, None, msg)
}

#[cfg(not(feature = "parquet"))]
pub fn run(_: Args) -> Result<ExitCode, Error> {
    Err(bad(
        "this kstate was built without Parquet support: build it with \
         `cargo build --release --features parquet`"
            .into(),
    ))
}

#[cfg(feature = "parquet")]
pub fn run(args: Args) -> Result<ExitCode, Error> {
    use kstate_analyze::fleet::{self, Fleet, GroupBy};
    let by = GroupBy::parse(&args.by).ok_or_else(|| {
        bad(format!(
            "--by {:?}: one of {}",
            args.by,
            GroupBy::NAMES.join(", ")
        ))
    })?;
    if !(args.k.is_finite() && args.k > 0.0 && args.k <= 1e6) {
        return Err(bad(format!("--k {}: a number in (0, 1e6]", args.k)));
    }
    if !["text", "csv", "json"].contains(&args.format.as_str()) {
        return Err(bad(format!(
            "--format {:?}: text, csv or json",
            args.format
        )));
    }
    if let Some(a) = &args.analyzer {
        kstate_analyze::Query::new(a).map_err(super::engine_err)?;
    }
    let files = kstate_export::parquet::summary_files(&args.dir)?;
    if files.is_empty() {
        return Err(bad(format!(
            "{}: no *{} files",
            args.dir.display(),
            kstate_export::parquet::SUMMARY_SUFFIX
        )));
    }
    let template = Fleet::new(by, args.analyzer.clone(), args.key.clone());
    let (merged, failed) = fleet::reduce(
        &files,
        |p| kstate_export::parquet::read_summary(p).map_err(|e| super::with_path(p, &e)),
        &template,
    );
    let outliers = merged.outliers(args.k);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let r = match args.format.as_str() {
        "json" => json(&merged, &outliers, &failed, &args, &mut out),
        "csv" => csv(&merged, &mut out),
        _ => text(&merged, &outliers, &args, &mut out),
    }
    .and_then(|_| out.flush());
    if let Err(e) = r {
        return Err(Error::new(
            ErrorKind::Io,
            None,
            format!("writing output: {e}"),
        ));
    }
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "kstate: {} of {} summaries not read (the figures leave them out):",
        failed.len(),
        files.len()
    );
    for (_, e) in &failed {
        eprintln!("  {e}");
    }
    Ok(ExitCode::from(crate::EXIT_BAD_INPUT))
}

/// One printed row: a group's (or the whole fleet's) merged statistics.
#[cfg(feature = "parquet")]
struct Line<'a> {
    analyzer: &'a str,
    key: &'a str,
    unit: &'a str,
    group: Option<&'a str>,
    m: &'a kstate_analyze::fleet::Merged,
}

#[cfg(feature = "parquet")]
fn lines(f: &kstate_analyze::fleet::Fleet) -> Vec<Line<'_>> {
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

#[cfg(feature = "parquet")]
const QUANTILES: [(&str, u64); 3] = [("p50", 500), ("p99", 990), ("p999", 999)];

/// recordings, count, total, avg, min, max, flagged, then the quantiles' values and
/// buckets.
#[cfg(feature = "parquet")]
fn numbers(m: &kstate_analyze::fleet::Merged) -> [u64; 13] {
    let a = &m.agg;
    let q = QUANTILES.map(|(_, p)| m.quantile(p));
    [
        m.recordings,
        a.count,
        a.total,
        a.avg(),
        a.min(),
        a.max,
        a.flagged,
        q[0].value,
        q[1].value,
        q[2].value,
        q[0].bucket as u64,
        q[1].bucket as u64,
        q[2].bucket as u64,
    ]
}

#[cfg(feature = "parquet")]
fn csv(f: &kstate_analyze::fleet::Fleet, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "analyzer,key,unit,group,recordings,count,total,avg,min,max,flagged,\
         p50,p99,p999,p50_bucket,p99_bucket,p999_bucket"
    )?;
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
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
#[cfg(feature = "parquet")]
fn text_row(out: &mut dyn Write, c: [&dyn std::fmt::Display; 10]) -> std::io::Result<()> {
    writeln!(
        out,
        "  {:<24} {:>5} {:>10} {:>14} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]
    )
}

#[cfg(feature = "parquet")]
fn text(
    f: &kstate_analyze::fleet::Fleet,
    outliers: &[kstate_analyze::fleet::Outlier],
    args: &Args,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let n: u64 = f.recordings.values().sum();
    writeln!(
        out,
        "{} recordings in {} groups by {}",
        n,
        f.recordings.len(),
        args.by
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
        "\noutliers (p99 > {} x the median of the groups' p99s): {}",
        args.k,
        if outliers.is_empty() { "none" } else { "" }
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

#[cfg(feature = "parquet")]
fn json(
    f: &kstate_analyze::fleet::Fleet,
    outliers: &[kstate_analyze::fleet::Outlier],
    failed: &[kstate_analyze::fleet::Failure],
    args: &Args,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    use serde_json::json;
    let rows: Vec<_> = lines(f)
        .iter()
        .map(|l| {
            let a = &l.m.agg;
            let mut v = json!({
                "analyzer": l.analyzer, "key": l.key, "unit": l.unit, "group": l.group,
                "recordings": l.m.recordings, "count": a.count, "total": a.total,
                "avg": a.avg(), "min": a.min(), "max": a.max, "flagged": a.flagged,
            });
            for (name, p) in QUANTILES {
                let q = l.m.quantile(p);
                v[name] = json!(q.value);
                v[format!("{name}_bucket")] = json!({"index": q.bucket, "lo": q.lo, "hi": q.hi});
            }
            v
        })
        .collect();
    let doc = json!({
        "by": args.by, "k": args.k,
        "groups": f.recordings,
        "rows": rows,
        "outliers": outliers.iter().map(|o| json!({
            "analyzer": o.analyzer, "key": o.key, "group": o.group,
            "p99": o.p99, "median_p99": o.median_p99,
        })).collect::<Vec<_>>(),
        "failed": failed.iter().map(|(p, e)| json!({"file": p.display().to_string(), "error": e}))
            .collect::<Vec<_>>(),
    });
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::other)?;
    writeln!(out)
}
