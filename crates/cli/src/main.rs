//! `kstate`: Linux kernel performance tracer and analyzer.

mod cmd;
mod error;
mod print;
mod timefmt;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "kstate", version, about = "Linux kernel performance tracer and analyzer", long_about = None, after_help = EXIT_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a trace: kind, kernel facts, clock, CPUs, time range, events and losses per CPU
    Info(cmd::info::Args),
    /// Print every event in time order (trace-cmd-like text, or NDJSON with --json)
    Dump(cmd::dump::Args),
    /// Record kernel events into a trace.dat while a command runs (or until Ctrl-C)
    Record(cmd::record::Args),
    /// Record like `record` and analyze as the pages arrive: a report every interval (JSON
    /// lines, or a dashboard on a terminal), alarms on live statistics
    Watch(Box<cmd::watch::Args>),
    /// Make a trace.dat of what a killed recorder (SIGKILL, OOM) left beside its output
    Recover(cmd::recover::Args),
    /// Analyze a trace: per-key statistics, distributions or a log of paired events
    /// (system-call time, wake-up latency, off-CPU time, ...)
    #[command(visible_alias = "la")]
    Analyze(Box<cmd::analyze::Args>),
    /// Compare two recordings: per analyzer and key, count, total, avg and p99 of each, ratio
    /// and difference, what changed most; --threshold fails on a regression (exit 3)
    Compare(cmd::compare::Args),
    /// CPU profile of a recording made with --sample: per-symbol shares, callers, callees
    Profile(cmd::profile::Args),
    /// Compare two profiles (recordings made with --sample): per-symbol change in share
    Diff(cmd::profile::DiffArgs),
    /// One line per user-space lock: "threads spent N % of their time waiting on <lock>"
    TopLocks(cmd::top_locks::Args),
    /// Split a trace into one trace.dat per CPU (timestamps kept)
    Split(cmd::split::Args),
    /// Record a command (or the built-in demo), analyze it with every analyzer that
    /// applies, and write a directory with the analyses, plots and report.html
    Run(Box<cmd::run::Args>),
    /// Draw an analysis as an SVG or PNG chart (time series, stat, distribution, memory)
    Plot(Box<cmd::plot::Args>),
    /// Write the self-contained HTML report of a recording
    Report(cmd::report::Args),
    /// Convert a trace: a raw tracefs capture to trace.dat v7, or any trace to Chrome JSON,
    /// Perfetto or Parquet (--to)
    Convert(cmd::convert::Args),
    /// Summarize recordings for a fleet: per analyzer and key the statistics and the
    /// mergeable histogram, one small Parquet file per recording (the parquet feature, on by default)
    Summarize(cmd::summarize::Args),
    /// Merge a fleet's summaries: per group (host, kernel, command) merged count, total and
    /// p50/p99/p99.9 to the bucket, and the outlier groups
    Fleet(cmd::fleet::Args),
    /// Sort a recording into CPU-busy, I/O-bound, lock-contention or other, with the
    /// figures that decided it (the rules: kstate classify --help)
    Classify(cmd::classify::Args),
    /// Run a command at each CPU count (pinned), record and classify each run: seconds,
    /// speed-up, CPU split and verdict per CPU count
    Scale(kstate_lab::scale::Args),
    /// Explore recordings in the browser: an overview on one time axis, a panel per
    /// analyzer, selections as filters, inside vs outside a window, A/B comparison
    Ui(cmd::ui::Args),
    /// Small programs with known behaviour, for tests, benchmarks and demos
    #[command(subcommand, hide = true)]
    Workload(kstate_lab::workload::Workload),
    /// Measure kstate against its peers on this machine
    #[command(subcommand)]
    Bench(kstate_lab::bench::Bench),
    /// Run a command under valgrind's cachegrind: each function's share of the simulated
    /// cache misses next to its share of the data references (profile --compare-events
    /// where there is no PMU)
    Cachesim(cmd::cachesim::Args),
}

/// Exit status for bad input (unreadable, truncated or corrupt trace, bad arguments).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status for a failure of the system or of the command (writing output, recording).
pub const EXIT_FAILED: u8 = 1;

/// The exit statuses, as `kstate --help` states them.
const EXIT_HELP: &str = "\
Exit status:
  0    done
  1    the system or the command failed (writing output, recording, a command kstate ran)
  2    bad input or arguments (a missing, unreadable, truncated or corrupt trace; bad options)
  N    record/run -- CMD: CMD's own status when it fails (128+S when signal S killed it)";

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `println!` panics when stdout fails (a full disk, a closed pipe), and the commands
    // print through it: such a panic is not a bug to report but a failed output. It
    // unwinds as any error returns (output files and the tracefs instance are cleaned up
    // on the way), and is then reported as the other failed outputs are.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if stdout_failure(info.payload()).is_none() {
            default_hook(info);
        }
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli.command)));
    let result = match result {
        Ok(r) => r,
        Err(panic) => match stdout_failure(&*panic) {
            // The reader had enough: not a failure (as `analyze` and `dump` treat it).
            Some(why) if why.contains("Broken pipe") => return ExitCode::SUCCESS,
            Some(why) => Err(error::Error::Failed(format!("writing output: {why}"))),
            None => std::panic::resume_unwind(panic),
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kstate: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The OS error of a panic raised by a failed `print!` to stdout, if it is one.
fn stdout_failure(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    let msg = payload.downcast_ref::<String>()?;
    msg.strip_prefix("failed printing to stdout: ")
}

fn run(command: Command) -> Result<ExitCode, error::Error> {
    match command {
        Command::Info(a) => cmd::info::run(a),
        Command::Dump(a) => cmd::dump::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Watch(a) => cmd::watch::run(*a),
        Command::Recover(a) => cmd::recover::run(a),
        Command::Analyze(a) => cmd::analyze::run(*a),
        Command::Run(a) => cmd::run::run(*a),
        Command::Plot(a) => cmd::plot::run(*a),
        Command::Report(a) => cmd::report::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Split(a) => cmd::split::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Profile(a) => cmd::profile::run(a),
        Command::Diff(a) => cmd::profile::diff(a),
        Command::TopLocks(a) => cmd::top_locks::run(a),
        Command::Bench(b) => kstate_lab::bench::run(b).map_err(Into::into),
        Command::Classify(a) => cmd::classify::run(a),
        Command::Summarize(a) => cmd::summarize::run(a),
        Command::Fleet(a) => cmd::fleet::run(a),
        Command::Scale(a) => kstate_lab::scale::run(a).map_err(Into::into),
        Command::Ui(a) => cmd::ui::run(a),
        Command::Workload(w) => kstate_lab::workload::run(w).map_err(Into::into),
        Command::Cachesim(a) => cmd::cachesim::run(a),
    }
}
