//! `kstate compare A B`: two recordings side by side, per analyzer and key, with what
//! changed most; `--threshold` makes it a regression gate for scripts and CI.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::filter::{parse_window, Filters, WindowSpec};
use kstate_render::Format;
use kstate_views::compare::{compare_sources, Metric, Rules, RULES};

/// Exit status when a key regressed beyond --threshold.
pub const EXIT_REGRESSED: u8 = 3;

const AFTER_HELP: &str =
    "Exit status: 0 when compared (and, with --threshold, nothing regressed); 3 when \
--threshold is given and a key regressed beyond it; 2 for bad input (a file that does not \
parse, no analyzer both recordings support, bad arguments).\n\n";

#[derive(clap::Args)]
#[command(after_help = format!("{AFTER_HELP}{RULES}"))]
pub struct Args {
    /// The baseline recording (trace.dat, perf.data, raw capture or Parquet directory)
    a: PathBuf,
    /// The recording compared with it
    b: PathBuf,
    /// Output: text (for people), csv or json (complete, integer values)
    #[arg(long, default_value = "text", value_parser = ["text", "csv", "json"])]
    format: String,
    /// The metric regressions are judged by: count, total, avg or p99
    #[arg(long, default_value = "p99", value_parser = Metric::parse)]
    metric: Metric,
    /// Exit with status 3 when a key's --metric in B is at least RATIO times A's (without
    /// it, keys are still flagged at 1.5 but the exit status stays 0)
    #[arg(long, value_name = "RATIO")]
    threshold: Option<f64>,
    /// Samples a key needs in each recording to be compared
    #[arg(long, default_value_t = 5, value_name = "N")]
    min_count: u64,
    /// Only these analyzers (comma-separated; default: every one both support)
    #[arg(long, value_delimiter = ',')]
    analyzer: Vec<String>,
    /// Only these keys, as printed (comma-separated)
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// Only tasks with this comm (comma-separated)
    #[arg(long, value_delimiter = ',')]
    comm: Vec<String>,
    /// Only pairs starting in FROM:TO of each recording (relative to its own start)
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    window: Option<WindowSpec>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let bad = |m: String| Error::Usage(m);
    let mut rules = Rules {
        metric: args.metric,
        min_count: args.min_count,
        ..Rules::default()
    };
    if let Some(t) = args.threshold {
        if !(t.is_finite() && t > 0.0) {
            return Err(bad(format!(
                "--threshold {t}: expected a ratio above 0, e.g. 1.5"
            )));
        }
        rules.threshold = t;
    }
    let filters = Filters {
        window: args.window,
        keys: args.key.clone(),
        comms: args.comm.clone(),
        ..Filters::default()
    };
    let a = super::source(&args.a)?;
    let b = super::source(&args.b)?;
    let c = compare_sources(&a, &b, &args.analyzer, &filters, rules).map_err(Error::from)?;
    let format = match args.format.as_str() {
        "csv" => Format::Csv,
        "json" => Format::Json,
        _ => Format::Text,
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let r = kstate_render::compare::comparison(&c, format, &mut out).and_then(|_| out.flush());
    if let Err(e) = r {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(Error::Stdout(e));
        }
    }
    if !c.damage.is_empty() {
        return Ok(super::damage::finish(&c.damage));
    }
    if args.threshold.is_some() && c.regressed() {
        return Ok(ExitCode::from(EXIT_REGRESSED));
    }
    Ok(ExitCode::SUCCESS)
}
