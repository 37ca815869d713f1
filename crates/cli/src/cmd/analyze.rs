//! `kstate analyze` (alias `la`): run one analyzer over a trace, as per-key statistics,
//! distributions or a log of pairs.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::analyzer::{Buckets, Mode};
use kstate_analyze::analyzers;
use kstate_analyze::filter::{parse_dur, parse_dur_or_secs, Filters};
use kstate_analyze::Query;
use kstate_render::sorted::{LogOrder, SortedLog};
use kstate_render::{Format, LogWriter, Meta};

const AFTER_HELP: &str = "\
Times: --window/--not-window take FROM:TO, either side optional. A plain number is seconds
after the first event of the trace (1.5:2, or with a unit: 250ms:1s); a leading @ makes it
an absolute trace-clock time as `kstate dump` prints it (@259445.106948920:@259445.2). A
pair is selected when its start lies in the window (bounds inclusive).

Durations (--min/--max): a number and a unit: 500ns, 10us, 1.5ms, 2s (bare numbers: ns).
For analyzers whose values are not times (bytes, pages, queue lengths), give bare numbers.

Percentiles (p50, p99) are nearest-rank values from a per-key log-linear histogram: exact
below 256 ns, otherwise within 0.4 % (1/256) of the true value. count, total, avg (rounded
down to the ns), min and max are exact. Memory grows with the number of keys and of open
pairs, not with the trace.

Losses: the header lists events lost per CPU within the selected time. A pair whose start
and end straddle a loss on any CPU is dropped and counted, never guessed.

--pid matches thread-group ids where the trace records them (raw captures with
saved_tgids; kstate recordings' process table, and threads started while recording where
task:task_newtask was recorded), else thread ids; --tid always matches thread ids.

--log rows come in completion order (each row shows its start time). `--log --sort value
--top N` prints only the N largest values, largest first (`--sort start`: the N earliest);
sorting holds rows back until the end, so it needs --top: memory stays bounded by N.";

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
#[command(mut_arg("window", |a| a.help("Only pairs starting in FROM:TO")))]
#[command(mut_arg("not_window", |a| a.help("Only pairs starting outside FROM:TO")))]
#[command(mut_arg("cpu", |a| a.help(
    "Only pairs that started on these CPUs (syscall) / ended on them (runq, offcpu)"
)))]
pub struct Args {
    /// Analyzer to run (see --list)
    analyzer: Option<String>,
    /// trace.dat (v6/v7) file or raw tracefs capture directory
    file: Option<PathBuf>,
    /// List the analyzers, the events each needs and how to record them
    #[arg(long)]
    list: bool,
    /// Per key: count, total, avg, min, max, p50, p99 (the default)
    #[arg(long, group = "mode")]
    stat: bool,
    /// Per key: a histogram of values
    #[arg(long, group = "mode")]
    dist: bool,
    /// One row per pair: start, key, value, tid, pid, comm, CPU
    #[arg(long, group = "mode")]
    log: bool,
    /// Histogram buckets for --dist: log2 (powers of two) or log10 (<=0.1us, 0.1-1us, ...)
    #[arg(long, default_value = "log2", value_parser = ["log2", "log10"])]
    buckets: String,
    /// Output: text (aligned, for people), csv or json (complete, integer ns)
    #[arg(long, default_value = "text", value_parser = ["text", "csv", "json"])]
    format: String,
    /// Key the results by (analyzer-specific, see --list)
    #[arg(long)]
    by: Option<String>,
    /// --stat/--dist: sort by key, count, total (default), avg, min, max, p50, p99 (or
    /// the flag column); --log: by value (largest first) or start (earliest first), with
    /// --top N
    #[arg(long)]
    sort: Option<String>,
    /// --stat/--dist: only the first N keys; --log --sort: only the first N rows
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    #[command(flatten)]
    filter: kstate_args::FilterArgs,
    /// Only these keys, as printed (comma-separated)
    #[arg(long, value_delimiter = ',')]
    key: Vec<String>,
    /// Only values >= DUR
    #[arg(long, value_parser = parse_dur, value_name = "DUR")]
    min: Option<u64>,
    /// Only values <= DUR
    #[arg(long, value_parser = parse_dur, value_name = "DUR")]
    max: Option<u64>,
    /// microstate: values per interval of S seconds (or a duration: 100ms), a time series
    #[arg(long, value_parser = parse_dur_or_secs, value_name = "S")]
    interval: Option<u64>,
    /// Threads to analyse with (default: the cores no other task is running on as the
    /// command starts), a perf.data's scan at open included; the results are those of
    /// one thread. Where the analysis cannot be cut into time slices exactly (most
    /// analyzers, --interval, --comm) the threads decode for one pass; --log and traces
    /// with lost events or damage use one thread
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// How a perf.data's samples are read (hidden: tests and `bench analyze` compare
    /// the older ways with the direct one)
    #[arg(long, hide = true, value_parser = ["direct", "pages", "sorted"])]
    perf_read: Option<String>,
}

fn bad_args(msg: String) -> Error {
    Error::Usage(msg)
}

fn list() {
    println!(
        "{:<10} {:<10} {:<8} what / events needed",
        "ANALYZER", "PRESET", "--by"
    );
    for a in analyzers::ALL {
        let by: Vec<&str> = a.by.iter().map(|b| b.0).collect();
        println!("{:<10} {:<10} {:<8} {}", a.name, a.preset, by[0], a.about);
        println!("{:<30} needs: {}", "", a.needs);
        println!("{:<30} --by: {}", "", by.join(", "));
    }
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.list {
        list();
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = args.analyzer.as_deref() else {
        return Err(bad_args(
            "name an analyzer (kstate analyze --list shows them) and a trace file".into(),
        ));
    };
    let mut query = Query::new(name).map_err(Error::from)?;
    let info = query.analyzer;
    let Some(file) = args.file.as_deref() else {
        return Err(bad_args("name the trace file to analyze".into()));
    };
    query.mode = if args.dist {
        Mode::Dist(if args.buckets == "log10" {
            Buckets::Log10
        } else {
            Buckets::Log2
        })
    } else if args.log {
        Mode::Log
    } else {
        Mode::Stat
    };
    let mode = query.mode;
    let format = match args.format.as_str() {
        "csv" => Format::Csv,
        "json" => Format::Json,
        _ => Format::Text,
    };
    query.by = args.by.clone();
    query.interval = args.interval;
    query.threads = super::threads(args.threads)?;
    let opts = super::open_options(Some(query.threads), args.perf_read.as_deref());
    query.filters = Filters {
        keys: args.key.clone(),
        min: args.min,
        max: args.max,
        ..args.filter.filters()
    };
    query.check().map_err(Error::from)?;
    let source = super::source_with(file, &opts)?;
    let meta = Meta {
        file: file.display().to_string(),
        filters: query.filters.describe(),
    };
    let stdout = std::io::stdout();
    let out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let done = |r: std::io::Result<()>| -> Result<(), Error> {
        match r {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Stdout(e)),
            _ => Ok(()),
        }
    };
    let log_order = match (mode, &args.sort) {
        (Mode::Log, Some(col)) => {
            let order = LogOrder::parse(col).map_err(bad_args)?;
            let Some(top) = args.top else {
                return Err(bad_args(
                    "--log --sort holds rows back until the end of the trace: give --top N \
                     to bound them"
                        .into(),
                ));
            };
            Some((order, top))
        }
        _ => None,
    };
    let outcome = if let Some((order, top)) = log_order {
        let by = query.by().to_string();
        let mut sorted = SortedLog::new(order, top);
        let o = source.run(&query, &mut sorted).map_err(Error::from)?;
        let mut w = LogWriter::start_ordered(out, format, info, &by, &meta, &order.describe(top))
            .map_err(Error::Stdout)?;
        if let Err(e) = sorted.drain_into(&mut w) {
            if w.broken_pipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(Error::Stdout(e));
        }
        done(w.finish(&o, &meta))?;
        o
    } else if mode == Mode::Log {
        let by = query.by().to_string();
        let mut w = LogWriter::start(out, format, info, &by, &meta).map_err(Error::Stdout)?;
        let o = match source.run(&query, &mut w) {
            Ok(o) => o,
            Err(_) if w.broken_pipe => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(e.into()),
        };
        done(w.finish(&o, &meta))?;
        o
    } else {
        query.sort = args.sort.clone();
        query.top = args.top;
        let o = source.aggregate(&query).map_err(Error::from)?;
        let mut out = out;
        let r = match mode {
            Mode::Dist(b) => kstate_render::dist(&o, &meta, b, format, &mut out),
            _ => kstate_render::stat(&o, &meta, format, &mut out),
        };
        done(r.and_then(|_| out.flush()))?;
        o
    };
    if format == Format::Csv && outcome.any_loss() {
        let (n, unknown) = outcome.lost_total();
        eprintln!(
            "kstate: WARNING: {n}{} events lost in the selected time; {} pairs spanning a loss were dropped",
            if unknown { "+ (some uncounted)" } else { "" },
            outcome.counts.broken_by_loss
        );
    }
    Ok(super::damage::finish(&outcome.errors))
}
