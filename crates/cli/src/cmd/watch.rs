//! `kstate watch`: the live front end (crate kstate-watch); this parses its arguments
//! and hands them over.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::error::Error;
use kstate_record::DEFAULT_BUFFER_KIB;

use kstate_args as numbers;

#[derive(clap::Args)]
#[command(after_help = concat!("Alarm rules (--alarm, --alarm-file: one rule a line, # comments):\n  \
    RULE    = SUBJECT OP VALUE [over TIME | for TIME]\n  \
    SUBJECT = ANALYZER.STAT[{NAME=KEY}]  or  lost\n  \
    STAT    = count total avg min max p50 p90 p99 p999 rate level\n  \
    OP      = > >= < <= ==\n\
  The statistic covers the samples that completed in the window (every key, or the keys\n\
  NAME=KEY selects: NAME is one of the analyzer's --by keyings, or key, dev, comm; KEY\n\
  matches a key or the comm, id or device part of it). VALUE has a time unit (ns, us, ms,\n\
  s) for time statistics. 'over 3s': the statistic over the last 3 s; 'for 2s': the\n\
  condition held in every interval of the last 2 s; neither: the last interval. 'rate' is\n\
  per second, 'level' the highest value (e.g. blkqueue's requests in flight), 'lost' the\n\
  events the kernel dropped. A rule fires when it becomes true, and again every\n\
  --alarm-every while it stays true; it never fires more often than --alarm-every: when it\n\
  becomes true again sooner, that is counted, and its next firing's line (and the JSON\n\
  'suppressed') says how many were held back.\n\n\
Examples:\n  \
    kstate watch -a --json --duration 10\n  \
    kstate watch -e syscall --alarm 'syscall.max{name=clock_nanosleep} > 200ms' -- ./server\n  \
    kstate watch -e sched,bio -a --alarm 'runq.p99 > 5ms over 3s' --alarm 'blkqueue.level >= 32 for 2s'\n  \
    kstate watch -e syscall -a --escalate 'syscall.p99 > 50ms over 3s -> bio,lock for 20s' --shed bio\n\n\
Escalation (--escalate 'RULE -> EVENTS [for TIME]'): when the alarm RULE fires, EVENTS\n\
  (as -e takes them) are turned on for TIME (default 10 s; firing again extends it), then\n\
  off. Overload: every 100 ms, when a CPU's ring buffer is half unread or lost events, the\n\
  --shed events and any escalated ones are turned off (before the buffer is full) until\n\
  every CPU has been calm for five intervals. Alarms, escalations, shedding and losses are printed, and written into the\n\
  recording (-o) and the flight recorder's files: `kstate info` lists them.\n\n\
Disk: without -o the pages are read from memory as they come and given back once\n\
  analysed: a few pages per CPU of memory, no disk (a private directory in $TMPDIR holds\n\
  the event formats, about the size of /proc/kallsyms; a watch killed with SIGKILL leaves\n\
  it, and the next watch removes it). With -o every page goes to disk: the whole\n\
  recording. With --keep the window is kept in memory (a size must fit in half the memory\n\
  available; a time window is capped there) and only saves are written: at most\n\
  --max-saves files of about the window each; --keep-on-disk keeps the window on disk\n\
  instead. An analysis that cannot keep up skips pages past 128 MiB per CPU (logged).\n\n\
Flight recorder saves: DIR/kstate-alarm-RULE-2026-11-28T14:03:07Z.dat (UTC; -2, -3 ... when\n\
  the name is taken: nothing is overwritten), with the wall-clock offset, the process\n\
  table and the watch log. SIGUSR1 or the dashboard's w key saves the window now\n\
  (kstate-save-manual-TIME.dat).\n\n\
Metrics (--metrics 127.0.0.1:9464): OpenMetrics (or the classic text format) at /metrics,\n\
  counted from the start: per analyzer and key a histogram of its values, per CPU events,\n\
  losses and buffer fill, alarms fired per rule.\n\n\
    Run as root. Like kstate record, events go into a private tracefs instance that is\n\
    removed on exit (Ctrl-C, SIGTERM too). With -o the recording is kept as a trace.dat.\n\n",
    super::exit_status::exit_status_help!()))]
pub struct Args {
    /// Events: a preset, SYSTEM, SYSTEM:EVENT; repeat or separate with commas
    /// [default: perf,syscall]
    #[arg(short, long = "event", value_name = "SPEC")]
    events: Vec<String>,
    /// Watch only these processes (all their threads, and children they start)
    #[arg(short, long = "pid", value_name = "PID", value_parser = numbers::int::<i32>(1..=numbers::PID_MAX))]
    pids: Vec<i32>,
    /// With a command: watch the whole system, not only the command and its children
    #[arg(short, long)]
    all: bool,
    /// Report every TIME: seconds (0.5) or a duration (250ms), from 10ms to an hour
    #[arg(short, long, value_name = "TIME", default_value = "1", value_parser = interval)]
    interval: Duration,
    /// Stop after this long
    #[arg(short, long, value_name = "SECONDS", value_parser = numbers::duration)]
    duration: Option<Duration>,
    /// Keep the recording as this trace.dat
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Ring-buffer size per CPU, in KiB
    #[arg(short = 'b', long = "buffer", value_name = "KIB", default_value_t = DEFAULT_BUFFER_KIB,
          value_parser = numbers::int::<u64>(numbers::BUFFER_KIB))]
    buffer_kib: u64,
    /// One JSON object per interval on standard output (the default when it is not a
    /// terminal)
    #[arg(long)]
    json: bool,
    /// Rows per analyzer in each interval's report
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = numbers::int::<usize>(1..=10_000))]
    top: usize,
    /// An alarm rule (see below); repeatable
    #[arg(long = "alarm", value_name = "RULE")]
    alarms: Vec<String>,
    /// Alarm rules, one a line
    #[arg(long, value_name = "FILE")]
    alarm_file: Option<PathBuf>,
    /// Also append each firing as a JSON line to FILE
    #[arg(long, value_name = "FILE")]
    alarm_log: Option<PathBuf>,
    /// Run this shell command when an alarm fires, with KSTATE_ALARM_RULE, _VALUE,
    /// _THRESHOLD, _KEY, _START, _END (ns on the trace clock) in its environment; a
    /// failure is logged
    #[arg(long, value_name = "CMD")]
    on_alarm: Option<String>,
    /// An --on-alarm command still running after this long is killed (with its process
    /// group) and logged [default: 10s]
    #[arg(long, value_name = "TIME", value_parser = numbers::duration)]
    on_alarm_timeout: Option<Duration>,
    /// A rule fires at most this often (held-back firings are counted in the next, and
    /// summed at the end) [default: 10s]
    #[arg(long, value_name = "TIME", value_parser = numbers::duration)]
    alarm_every: Option<Duration>,
    /// Flight recorder: keep only the last TIME of the recording, in memory (or the
    /// newest SIZE of pages, every CPU's together: 50M, 1G, from 1M to 1024G), and when
    /// an alarm fires write a trace.dat from TIME before it (or as far back as the pages
    /// kept reach) to --after after it, named after the alarm and the time, into
    /// --save-dir. Older pages are given back as it goes, checked every interval
    #[arg(long, value_name = "TIME|SIZE", value_parser = keep)]
    keep: Option<kstate_watch::Keep>,
    /// With --keep: keep the window on disk (in $TMPDIR), for windows larger than
    /// memory; the disk then holds at most twice TIME and --after, however far the live
    /// analysis falls behind
    #[arg(long)]
    keep_on_disk: bool,
    /// With --keep: how long after the alarm the saved recording goes on [default: 2s]
    #[arg(long, value_name = "TIME", value_parser = numbers::duration)]
    after: Option<Duration>,
    /// With --keep: where the saved recordings go; checked before recording [default: .]
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,
    /// With --keep: at most N saves in this run (later alarms are logged, not saved)
    /// [default: 100]
    #[arg(long, value_name = "N", value_parser = numbers::int::<usize>(1..=1_000_000))]
    max_saves: Option<usize>,
    /// With --keep: no save sooner than TIME after the last (manual saves excepted)
    /// [default: 0s]
    #[arg(long, value_name = "TIME", value_parser = numbers::duration)]
    save_gap: Option<Duration>,
    /// When an alarm fires, turn more events on for a while: 'RULE -> EVENTS [for TIME]'
    /// (see below); repeatable
    #[arg(long = "escalate", value_name = "RULE")]
    escalations: Vec<String>,
    /// Events that may be turned off when the readers fall behind the kernel (escalated
    /// events always may); as -e takes them
    #[arg(long = "shed", value_name = "SPEC")]
    shed: Vec<String>,
    /// Serve the figures for Prometheus at http://ADDR/metrics (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// The command to run while watching
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// The shortest --interval: each interval keeps its own results until it is reported,
/// so nanosecond intervals made millions of them a second and grew without bound.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest: an interval is a dashboard refresh.
const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// `--interval`: a duration from 10 ms to an hour.
fn interval(s: &str) -> Result<Duration, String> {
    let range = "from 10ms to 3600s (an hour)";
    match numbers::duration(s) {
        Ok(d) if (MIN_INTERVAL..=MAX_INTERVAL).contains(&d) => Ok(d),
        Ok(_) => Err(format!("out of range: expected {range}")),
        Err(_) => Err(format!(
            "expected seconds (0.5) or a duration (250ms), {range}"
        )),
    }
}

/// The sizes `--keep` takes: a few pages per CPU at least, and no more than a disk.
const KEEP_BYTES: std::ops::RangeInclusive<u64> = 1 << 20..=1 << 40;

/// `--keep`: a duration (30s, 1.5) or a size with its unit (K, M, G; KiB and MiB too).
fn keep(s: &str) -> Result<kstate_watch::Keep, String> {
    let t = s.trim();
    let units = [("K", 10), ("M", 20), ("G", 30), ("T", 40)];
    let sized = units.iter().find_map(|(u, shift)| {
        [format!("{u}iB"), format!("{u}B"), u.to_string()]
            .iter()
            .find_map(|suffix| t.strip_suffix(suffix.as_str()))
            .map(|n| (n.trim(), *shift))
    });
    let range = "a duration (30s, 1.5) or a size from 1M to 1024G (50M, 1G)";
    let Some((n, shift)) = sized else {
        return numbers::duration(t)
            .map(kstate_watch::Keep::Time)
            .map_err(|e| format!("{e}; or a size from 1M to 1024G (50M, 1G)"));
    };
    let n: u64 = n
        .parse()
        .map_err(|_| format!("expected {range}: {n:?} is not a whole number"))?;
    match n.checked_mul(1 << shift) {
        Some(b) if KEEP_BYTES.contains(&b) => Ok(kstate_watch::Keep::Bytes(b)),
        _ => Err(format!("out of range: expected {range}")),
    }
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let opts = kstate_watch::Options {
        events: args.events,
        pids: args.pids,
        all: args.all,
        interval: args.interval,
        duration: args.duration,
        output: args.output,
        buffer_kib: args.buffer_kib,
        json: args.json,
        top: args.top,
        alarms: args.alarms,
        alarm_file: args.alarm_file,
        alarm_log: args.alarm_log,
        on_alarm: args.on_alarm,
        on_alarm_timeout: args.on_alarm_timeout,
        alarm_every: args.alarm_every,
        keep: args.keep,
        after: args.after,
        save_dir: args.save_dir,
        max_saves: args.max_saves,
        save_gap: args.save_gap,
        keep_on_disk: args.keep_on_disk,
        metrics: args.metrics,
        escalations: args.escalations,
        shed: args.shed,
        command: args.command,
    };
    let ended = match kstate_watch::run(opts) {
        // As a shell does: 127 for a command not found, 126 for one not executable.
        Err(kstate_watch::Error::CommandNotRun { status, message }) => {
            eprintln!("kstate: {message}");
            return Ok(ExitCode::from(status));
        }
        r => r?,
    };
    Ok(match ended {
        // The command's own status when it failed, as `kstate record` exits.
        kstate_watch::Ended::Complete(status) => {
            super::exit_status::failed(status).unwrap_or(ExitCode::SUCCESS)
        }
        kstate_watch::Ended::CutShort => ExitCode::FAILURE,
    })
}
