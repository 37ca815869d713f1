//! `kstate plot`: LKST's four chart kinds as SVG or PNG (by the output's extension).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::analyzers;
use kstate_render::charts;
use kstate_render::rundir::write_chart;
use kstate_render::svg::{self, Size};
use kstate_views::survey;
use kstate_views::timeline::TimeAxis;

const AFTER_HELP: &str = "\
Charts (LKST's lkst_plot_log, _stat, _dist, _sysinfo):
  --log   the analyzer's samples over time: per time bin (1/1000 of the recording) the
          longest and shortest sample of each of the --top keys (largest total first);
          levels (run-queue length, requests in flight) as steps. --with ANALYZER2 draws
          a second analyzer on a right-hand axis over the same time (twin axes).
  --stat  per key: bars = count (left axis), lines = avg / max / min (right axis).
  --dist  histogram of values in LKST's decimal buckets (<=0.1us, 0.1us-1us, ...), one bar
          per key for the --top keys.
  kstate plot sysinfo FILE -o mem.svg: memory use over time from the /proc/meminfo
          snapshots kstate record stores (used, free, page cache, anonymous, dirty).

Time runs from the start of the recording to its stop (seconds), the same axis for every
chart of one file. Value axes are logarithmic when values span 100x or more.
The output is SVG or PNG by its extension; PNGs are drawn from the same SVG with a font
compiled into kstate (DejaVu Sans), so they look the same everywhere.

Examples:
  kstate plot syscall --log kstate.dat -o syscall.svg
  kstate plot syscall --log --with runq kstate.dat -o both.png --size 1280x720
  kstate plot runq --stat --top 8 kstate.dat -o runq-stat.svg
  kstate plot sysinfo kstate.dat -o memory.png";

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Analyzer (see kstate analyze --list), or `sysinfo` for the memory series
    analyzer: String,
    /// trace.dat (v6/v7) file or raw tracefs capture directory
    file: PathBuf,
    /// Samples over time (the default)
    #[arg(long, group = "mode")]
    log: bool,
    /// Count bars and avg/max/min lines per key
    #[arg(long, group = "mode")]
    stat: bool,
    /// Histogram of values per key
    #[arg(long, group = "mode")]
    dist: bool,
    /// Output file: .svg or .png
    #[arg(short, long)]
    output: PathBuf,
    /// --log: a second analyzer on the right-hand axis
    #[arg(long, value_name = "ANALYZER2")]
    with: Option<String>,
    /// Key the results by (analyzer-specific, see kstate analyze --list)
    #[arg(long)]
    by: Option<String>,
    /// Only these keys, as printed (comma-separated; --log and --stat)
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// Keys drawn (largest total first)
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
    /// Image size in pixels
    #[arg(long, value_name = "WxH", default_value = "960x540", value_parser = Size::parse)]
    size: Size,
}

fn bad(msg: String) -> Error {
    Error::Usage(msg)
}

fn find(name: &str) -> Result<&'static kstate_analyze::Info, Error> {
    analyzers::find(name).ok_or_else(|| {
        let names: Vec<&str> = analyzers::ALL.iter().map(|a| a.name).collect();
        bad(format!(
            "no analyzer {name:?}; there are: {}, and sysinfo (memory)",
            names.join(", ")
        ))
    })
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let source = super::source(&args.file)?;
    let trace = source.trace();
    let rec = survey::recording(trace);
    let info = find(&args.analyzer)?;
    if info.traits.snapshots {
        let snaps = survey::snapshots(trace);
        if snaps.is_empty() {
            return Err(bad(format!(
                "{}: no memory snapshots in this file (kstate record stores them every --sysinfo-interval ms)",
                args.file.display()
            )));
        }
        let stats: Vec<_> = analyzers::ALL
            .iter()
            .filter_map(|i| survey::stat_pass(&source, i, None).ok())
            .take(1)
            .collect();
        let mut axis = survey::axis_of(rec.as_ref(), &stats.iter().collect::<Vec<_>>(), None);
        if rec.is_none() && stats.is_empty() {
            axis = TimeAxis {
                t0: snaps[0].ts,
                t1: snaps[snaps.len() - 1].ts.max(snaps[0].ts + 1),
            };
        }
        let chart = charts::memory_chart(&snaps, &axis, Vec::new());
        let damage = damage_of(trace, stats.iter());
        let svg = marked(svg::time_chart(&chart, args.size), &damage, args.size);
        write_chart(&svg, &args.output)?;
        return Ok(super::damage::finish(&damage));
    }
    let with = args.with.as_deref().map(find).transpose()?;
    if with.is_some() && (args.stat || args.dist) {
        return Err(bad(
            "--with draws twin axes over time: use it with --log".into()
        ));
    }
    let stat = survey::stat_pass(&source, info, args.by.as_deref())?;
    let stat2 = match with {
        Some(w) => Some(survey::stat_pass(&source, w, None)?),
        None => None,
    };
    let mut outs = vec![&stat];
    outs.extend(stat2.as_ref());
    let axis = survey::axis_of(rec.as_ref(), &outs, None);
    let wl = survey::workload_of(trace, rec.as_ref());
    let a = survey::complete(&source, info, stat, axis, wl.clone());
    // What the passes skipped as damaged, said after the chart of the rest.
    let damage = damage_of(trace, [&a.stat, &a.dist].into_iter().chain(stat2.as_ref()));
    let svg = if args.stat {
        let mut a = a;
        if !args.key.is_empty() {
            a.stat.rows.retain(|r| args.key.contains(&r.key));
        }
        svg::stat_chart(&charts::stat_chart(&a, args.top), args.size)
    } else if args.dist {
        let mut a = a;
        if !args.key.is_empty() {
            a.dist.rows.retain(|r| args.key.contains(&r.key));
        }
        svg::dist_chart(&charts::dist_chart(&a, args.top), args.size)
    } else {
        let b = match (with, stat2) {
            (Some(w), Some(s)) => Some(survey::complete(&source, w, s, axis, wl)),
            _ => None,
        };
        let chart = charts::log_chart(&a, b.as_ref(), &axis, &args.key, args.top, Vec::new());
        svg::time_chart(&chart, args.size)
    };
    write_chart(&marked(svg, &damage, args.size), &args.output)?;
    Ok(super::damage::finish(&damage))
}

/// What the file and the passes skipped as damaged, each problem once.
fn damage_of<'a>(
    trace: &'a kstate_format::Trace,
    passes: impl Iterator<Item = &'a kstate_analyze::Outcome>,
) -> Vec<kstate_format::Error> {
    let mut damage = Vec::new();
    for e in trace.damage().chain(passes.flat_map(|o| &o.errors)) {
        kstate_format::damage::note(&mut damage, e);
    }
    damage
}

/// The chart, marked as drawn from a damaged file when the reader skipped something.
fn marked(chart: String, damage: &[kstate_format::Error], size: Size) -> String {
    match damage.len() {
        0 => chart,
        n => svg::mark_damaged(&chart, n, size),
    }
}
