//! `kstate dump`: every event in global time order, as `trace-cmd report` prints it, as raw
//! fields (`--raw`), or as NDJSON. The lines are kstate-views' `dump`; this writes them
//! to standard output and says what they leave out.

use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_views::dump::{self, Request, Style, SLICE_BYTES};

use crate::timefmt::parse_secs;

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat (v6/v7) files or raw tracefs capture directories; several (a host and
    /// its guests) print on one timeline, each line prefixed with its file's name, as
    /// `trace-cmd report -i host.dat -i guest.dat`
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// NDJSON: one {"ts","cpu","pid","event","fields","text"} object per line (and
    /// "file" when several files are given)
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    /// Each event's raw fields (name=value, as `trace-cmd report -R`) instead of its message
    #[arg(long)]
    raw: bool,
    /// Timestamps in nanoseconds (as `trace-cmd report -t`) instead of microseconds
    #[arg(long)]
    ns: bool,
    /// Only these events (names or SYSTEM:NAME), comma-separated
    #[arg(long, value_delimiter = ',')]
    events: Vec<String>,
    /// Only these CPUs, comma-separated
    #[arg(long, value_delimiter = ',')]
    cpu: Vec<u32>,
    /// Only events recorded in this process (common_pid)
    #[arg(long)]
    pid: Option<i32>,
    /// Start time in seconds, as printed (inclusive)
    #[arg(long, value_parser = parse_secs, value_name = "SECS")]
    from: Option<u64>,
    /// End time in seconds, as printed (inclusive)
    #[arg(long, value_parser = parse_secs, value_name = "SECS")]
    to: Option<u64>,
    /// Threads to format with (default: the cores no other task is running on as the
    /// command starts), a perf.data's scan at open included; the output is the same byte
    /// for byte. Several files, --cpu, lost events and function-tracer events use one
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// How a perf.data's samples are read (hidden: tests and `bench analyze` compare
    /// the older ways with the direct one)
    #[arg(long, hide = true, value_parser = ["direct", "pages", "sorted"])]
    perf_read: Option<String>,
    /// Bytes of pages per slice when formatting on several threads (tests cut small
    /// traces)
    #[arg(long, hide = true, default_value_t = SLICE_BYTES)]
    slice_bytes: usize,
    /// Say on standard error how the threads' part went: slices, and slices printed again
    #[arg(long, hide = true)]
    slice_stats: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let threads = super::threads(args.threads)?;
    let opts = super::open_options(Some(threads), args.perf_read.as_deref());
    let traces = args
        .files
        .iter()
        .map(|f| super::open_with(f, &opts))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = args
        .files
        .iter()
        .map(|f| {
            f.file_name()
                .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into())
        })
        .collect();
    let req = Request {
        style: if args.json {
            Style::Json
        } else if args.raw {
            Style::Raw
        } else {
            Style::Text
        },
        ns: args.ns,
        events: args.events,
        cpus: args.cpu,
        pid: args.pid,
        from: args.from,
        to: args.to,
        threads,
        slice_bytes: args.slice_bytes,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let dumped = match dump::write(&traces, &names, &req, &mut out) {
        Ok(d) => d,
        Err(dump::Error::Write(e)) => return stdout_closed(e),
        Err(dump::Error::Trace(e)) => return Err(e.into()),
    };
    if let Some(s) = dumped.slices.filter(|_| args.slice_stats) {
        eprintln!(
            "kstate dump: {} slices, {} printed again",
            s.slices, s.again
        );
    }
    if !dumped.raw_fields.is_empty() {
        let raw: Vec<String> = dumped
            .raw_fields
            .iter()
            .map(|(name, n, why)| format!("{name} {n} ({why})"))
            .collect();
        eprintln!(
            "kstate dump: printed as raw fields (print format not evaluated): {}",
            raw.join(", ")
        );
    }
    // A format refused as damaged is bad input: said after the output, which printed its
    // events as raw fields.
    for e in &dumped.format_errors {
        eprintln!("kstate: {e}");
    }
    match dumped.failure {
        None if !dumped.format_errors.is_empty() => Ok(ExitCode::from(2)),
        None => Ok(ExitCode::SUCCESS),
        Some(e) => Err(e.into()),
    }
}

/// Reading into `head` or a closed pager is not an error.
fn stdout_closed(e: std::io::Error) -> Result<ExitCode, Error> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::Stdout(e))
    }
}
