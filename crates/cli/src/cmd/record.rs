//! `kstate record`: kernel events into a trace.dat while a command runs (or until Ctrl-C
//! or --duration), then a summary with the buffer consumption rate per CPU.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::error::Error;
use kstate_format::writer::Compression;
use kstate_record::events::PRESETS;
use kstate_record::{Options, DEFAULT_BUFFER_KIB};

use super::exit_status;
use kstate_args as numbers;

#[derive(clap::Args)]
#[command(after_help = concat!("Examples:\n  \
    kstate record -e syscall -- dd if=/dev/zero of=/dev/null count=100000\n  \
    kstate record -e sched,proc -a --duration 5\n  \
    kstate record -e bio --filter 'block:block_rq_issue:bytes > 4096' -- ./writer\n\n\
    Run as root. Events go into a private tracefs instance that is removed on exit\n\
    (also after Ctrl-C or SIGTERM). A recorder killed with SIGKILL stops tracing as it dies\n\
    and leaves what it had recorded beside the output: `kstate recover OUTPUT` makes a\n\
    trace.dat of it. The output is a trace-cmd trace.dat (v7).\n\n",
    super::exit_status::exit_status_help!()))]
pub struct Args {
    /// Output file
    #[arg(short, long, default_value = "kstate.dat")]
    output: PathBuf,
    /// Events: a preset (see --list-presets), SYSTEM, SYSTEM:EVENT or SYSTEM:*; repeat or
    /// separate with commas [default: perf]
    #[arg(short, long = "event", value_name = "SPEC")]
    events: Vec<String>,
    /// Record only these processes (all their threads, and children they start); the
    /// recording ends within a second of the last one's exit
    #[arg(short, long = "pid", value_name = "PID", value_parser = numbers::int::<i32>(1..=numbers::PID_MAX))]
    pids: Vec<i32>,
    /// With a command: record the whole system, not only the command and its children
    #[arg(short, long)]
    all: bool,
    /// Stop after this long: seconds (1.5) or a duration with a unit (250ms, 2s); at most
    /// a year
    #[arg(short, long, value_name = "SECONDS", value_parser = numbers::duration)]
    duration: Option<Duration>,
    /// Ring-buffer size per CPU, in KiB
    #[arg(short = 'b', long = "buffer", value_name = "KIB", default_value_t = DEFAULT_BUFFER_KIB,
          value_parser = numbers::int::<u64>(numbers::BUFFER_KIB))]
    buffer_kib: u64,
    /// Ring-buffer sub-buffer size in KiB, a power of two up to 512 (Linux 6.8+; larger
    /// pages cost less per byte to move) [default: the largest that leaves 16 per buffer,
    /// at most 512, where the kernel allows it]
    #[arg(long = "subbuf", value_name = "KIB",
          value_parser = numbers::int::<u64>(1..=kstate_record::check::MAX_SUBBUF_KIB))]
    subbuf_kib: Option<u64>,
    /// Trace clock [default: mono, which lines up with CLOCK_MONOTONIC and maps to wall time]
    #[arg(long)]
    clock: Option<String>,
    /// Kernel-side event filter, EVENT:EXPR with EVENT a system:event, an event or a system
    /// (e.g. 'sched:sched_switch:prev_pid != 0'); repeatable
    #[arg(long = "filter", value_name = "EVENT:EXPR")]
    filters: Vec<String>,
    /// Snapshot /proc/meminfo and /proc/vmstat every MS milliseconds into the file (0: off)
    #[arg(long = "sysinfo-interval", value_name = "MS", default_value_t = 1000,
          value_parser = numbers::int::<u64>(numbers::SYSINFO_MS))]
    sysinfo_interval: u64,
    /// Compress the file (trace-cmd reads it)
    #[arg(long, value_name = "ALGO", value_parser = ["zstd", "none"])]
    compress: Option<String>,
    /// List the event presets and exit
    #[arg(long)]
    list_presets: bool,
    /// Also sample the CPUs through perf_event_open, with kernel and user call chains, on
    /// the trace clock: HZ (cpu-clock at HZ), EVENT (at 999 Hz) or EVENT:PERIOD (one sample
    /// every PERIOD events); EVENT is cpu-clock, task-clock, page-faults, cycles,
    /// instructions, cache-misses, cache-references, branches, branch-misses, LLC-loads,
    /// LLC-misses [default: cpu-clock at 999 Hz]. Repeat it (or give a comma list) to
    /// sample several events, e.g. for `kstate profile --compare-events`. `kstate profile
    /// FILE` reads them
    #[arg(long, value_name = "HZ|EVENT[:PERIOD]", num_args = 0..=1, default_missing_value = "",
          value_delimiter = ',', value_parser = kstate_record::sampler::parse_spec)]
    sample: Vec<kstate_record::sampler::SampleSpec>,
    /// With --sample of a hardware event this machine lacks: sample cpu-clock instead of
    /// failing
    #[arg(long, requires = "sample")]
    sample_fallback: bool,
    /// Also take the user call chain at every futex() call (a perf event on
    /// syscalls:sys_enter_futex), so `kstate analyze futex --by caller` and `kstate
    /// top-locks` name the function that waited on each lock, and the processes' mappings
    /// that name the lock itself. Use with `-e futex`
    #[arg(long)]
    stacks: bool,
    /// User stack bytes copied with each --sample sample and --stacks chain, with the
    /// user registers: chains are then unwound through the mapped files' DWARF CFI
    /// (.eh_frame), so code without frame pointers (glibc) keeps its callers. 0: none (the
    /// kernel's frame-pointer walk alone; smaller files) [default: 8192 for samples, 1024
    /// for --stacks chains, which need only the frames up to the lock's caller and come in
    /// bursts of many thousand a second]
    #[arg(long, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(0..=kstate_record::sampler::MAX_STACK_BYTES as i64))]
    stack_bytes: Option<u32>,
    /// Also measure how long user locks are held: uprobes on the C library's
    /// pthread_mutex_lock (entry and return) and pthread_mutex_unlock, in kstate's own
    /// tracefs instance, removed on every exit; `kstate analyze lockhold` reads them
    #[arg(long)]
    holds: bool,
    /// Print the summary as JSON on standard output
    #[arg(long)]
    json: bool,
    /// The command to run while recording
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.list_presets {
        list_presets();
        return Ok(ExitCode::SUCCESS);
    }
    let mut opts = Options::new(args.output.clone());
    if !args.events.is_empty() {
        opts.events = args.events;
    }
    opts.pids = args.pids;
    opts.all = args.all;
    opts.command = args.command;
    opts.duration = args.duration;
    opts.buffer_kib = args.buffer_kib;
    opts.subbuf_kib = args.subbuf_kib;
    opts.clock = args.clock;
    opts.filters = args.filters;
    opts.sysinfo_interval_ms = args.sysinfo_interval;
    opts.compression = match args.compress.as_deref() {
        Some("zstd") => Compression::Zstd,
        _ => Compression::None,
    };
    opts.argv = std::env::args().collect();
    opts.sample = args.sample;
    opts.sample_fallback = args.sample_fallback;
    opts.stacks = args.stacks;
    opts.stack_bytes = args.stack_bytes;
    opts.holds = args.holds;
    // Mistakes in the arguments are found before anything is recorded (exit status 2).
    kstate_record::check::arguments(&opts).map_err(|e| Error::Usage(e.to_string()))?;
    let mut notify = |m: &str| eprintln!("kstate: {m}");
    match kstate_record::record(&opts, &mut notify) {
        Ok(s) => {
            if args.json {
                let exit = s.workload_status.map(exit_status::shell_status);
                println!("{}", kstate_render::record::json(&s, exit));
            } else {
                eprint!("{}", kstate_render::record::text(&s));
            }
            if let Some(why) = &s.disk_full {
                eprintln!(
                    "kstate: recording cut short: {why}; {} holds what was recorded until then",
                    s.output.display()
                );
                return Ok(ExitCode::FAILURE);
            }
            Ok(exit_status::failed(s.workload_status).unwrap_or(ExitCode::SUCCESS))
        }
        Err(e) => {
            eprintln!("kstate record: {e}");
            Ok(ExitCode::from(Error::from(e).exit_code()))
        }
    }
}

fn list_presets() {
    for p in PRESETS {
        println!("{:<8} {}", p.name, p.about);
        let events = kstate_record::events::preset_events(p.name).unwrap_or_default();
        if p.name == "all" {
            println!("         ({} events)", events.len());
            continue;
        }
        for e in events {
            println!("         {e}");
        }
    }
}
