//! `kstate fleet DIR`: the summaries under DIR (`kstate summarize`) merged on all cores
//! (kstate_views::fleet): per analyzer, key and group the merged count, total, avg,
//! min, max and nearest-rank p50/p99/p99.9 to the bucket, and the outlier groups.

#[cfg(feature = "parquet")]
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;

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
    Error::Usage(msg)
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
    use kstate_render::fleet as render;
    use kstate_views::fleet::{self, Fleet, GroupBy};
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
        kstate_analyze::Query::new(a).map_err(Error::from)?;
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
    let fleet::Reduced {
        fleet: merged,
        failed,
        duplicates,
    } = fleet::reduce(
        &files,
        |p| kstate_export::parquet::read_summary_meta(p).map_err(|e| super::with_path(p, &e)),
        |p| {
            kstate_export::parquet::read_summary_of(
                p,
                args.analyzer.as_deref(),
                args.key.as_deref(),
            )
            .map_err(|e| super::with_path(p, &e))
        },
        &template,
    );
    let outliers = merged.outliers(args.k);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let r = match args.format.as_str() {
        "json" => render::json(
            &merged,
            &outliers,
            &failed,
            &duplicates,
            &args.by,
            args.k,
            &mut out,
        ),
        "csv" => render::csv(&merged, &mut out),
        _ => render::text(&merged, &outliers, &args.by, args.k, &mut out),
    }
    .and_then(|_| out.flush());
    if let Err(e) = r {
        return Err(Error::Stdout(e));
    }
    // A second summary of a recording is not an error (a dataset appended to twice, a
    // copy): the figures hold the recording once and nothing is missing from them.
    for d in &duplicates {
        eprintln!("kstate: warning: {d}");
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
