//! `kstate cachesim -- CMD`: the cache-pollution comparison of `kstate profile
//! --compare-events` from a simulated cache, for machines without a PMU (VMs): CMD runs
//! under valgrind's cachegrind, and each function's share of the D1 and LL data misses is
//! put next to its share of the data references.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_cachesim::valgrind;
use kstate_lab::cachegrind::{self, Cachegrind};
use kstate_views::profile::compare;

use super::cachesim_sets;

const AFTER_HELP: &str = "\
The figures come from cachegrind's simulation of the caches (their sizes are printed in
the header), not from this machine's counters: a first-level data cache (D1) and a
last-level cache (LL) with cachegrind's replacement policy, no prefetching, and only this
program on them. Misses are read + write misses (D1mr+D1mw, DLmr+DLmw), references data
reads + writes (Dr+Dw), summed per function over the source files its code comes from.
The program runs about 50 times slower than natively.

A function is flagged (*) when its share of D1 or LL misses is at least --ratio times its
share of the references and at least --min-share %: it streams through data that does not
stay in the cache (and evicts what others reuse), the seed's cache-pollution signature.

With --sets the question is another: which data piles into few cache sets. CMD runs under
valgrind's lackey (--trace-mem, some 100 times slower than natively), every data access
is charged to the instruction that made it, and each site's distinct lines are placed in
the sets of one cache level (--level, from sysfs, or --cache). A site is flagged when its
lines overflow the sets they use (more lines than sets used x ways) while spread evenly
they would fit and use at least twice as many sets: structures laid at a large power-of-
two stride (page-aligned, like seed 001's task_structs in 8 KiB stacks) that collide by
alignment. The suggested colour count is lines / (sets used x ways), rounded up: shift
each structure by one of that many multiples of the line size.

Examples:
  kstate cachesim -- ./myprog arg
  kstate cachesim --sets -- ./myprog arg
  kstate cachesim --sets --cache 2097152,16,64 --json -- ./myprog
  kstate cachesim --ll 8388608,16,64 --keep cg.out -- ./myprog
  kstate cachesim --input cachegrind.out.1234 --json";

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Print JSON (one line, after what the command itself prints)
    #[arg(long)]
    json: bool,
    /// Only the N first functions (with --sets, sites): the flagged, then the largest (0: all)
    #[arg(long, value_name = "N", default_value_t = 30)]
    top: usize,
    /// Flag a function whose miss share is at least RATIO times its reference share
    #[arg(long, value_name = "RATIO", default_value_t = compare::Thresholds::default().ratio)]
    ratio: f64,
    /// ... and at least PCT % of the misses (fewer are noise)
    #[arg(long, value_name = "PCT", default_value_t = compare::Thresholds::default().min_share)]
    min_share: f64,
    /// The valgrind to run
    #[arg(long, value_name = "PATH", default_value = "valgrind")]
    valgrind: PathBuf,
    /// Simulated D1 cache: SIZE,ASSOC,LINE in bytes (default: this CPU's, as cachegrind
    /// reads it)
    #[arg(long, value_name = "SIZE,ASSOC,LINE")]
    d1: Option<String>,
    /// Simulated last-level cache: SIZE,ASSOC,LINE
    #[arg(long, value_name = "SIZE,ASSOC,LINE")]
    ll: Option<String>,
    /// Keep cachegrind's output file here (for cg_annotate)
    #[arg(long, value_name = "FILE")]
    keep: Option<PathBuf>,
    /// Read an existing cachegrind output file instead of running a command
    #[arg(long, value_name = "FILE", conflicts_with_all = ["command", "keep", "d1", "ll"])]
    input: Option<PathBuf>,
    /// Cache sets instead: per load/store site, the sets of one cache level its lines
    /// fall in against an even spread; flags the sites whose structures collide by
    /// alignment, with the colours that would cure it (valgrind lackey's address trace)
    #[arg(long, conflicts_with_all = ["input", "keep", "d1", "ll", "ratio", "min_share"])]
    sets: bool,
    /// With --sets: the cache level to check (from sysfs)
    #[arg(long, default_value_t = 2, value_parser = kstate_args::int::<u32>(1..=4), requires = "sets")]
    level: u32,
    /// With --sets: the cache as SIZE,ASSOC,LINE in bytes instead of this CPU's
    #[arg(long, value_name = "SIZE,ASSOC,LINE", requires = "sets")]
    cache: Option<String>,
    /// With --sets: the sysfs root the cache geometry is read from
    #[arg(long, value_name = "ROOT", default_value = "/sys", requires = "sets")]
    sysfs: PathBuf,
    /// With --sets: only sites with at least N distinct lines
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = kstate_args::int::<u64>(1..=1 << 30), requires = "sets")]
    min_lines: u64,
    /// The command to run under cachegrind
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.sets {
        return sets(&args);
    }
    let t = compare::Thresholds::checked(args.ratio, args.min_share)?;
    let (text, version, status) = match &args.input {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| Error::system(p, e))?;
            (text, None, None)
        }
        None => {
            let run = valgrind::CachegrindRun {
                valgrind: &args.valgrind,
                d1: args.d1.as_deref(),
                ll: args.ll.as_deref(),
                command: &args.command,
            };
            let sim = valgrind::cachegrind(&run, |w| {
                eprintln!("kstate cachesim: valgrind:{w}");
            })?;
            // --keep is placed the way kstate writes every output (a fresh file renamed
            // onto the name), not handed to valgrind, which would open a planted link at it.
            if let Some(k) = &args.keep {
                kstate_format::output::write(k, &sim.text).map_err(|e| Error::output(k, e))?;
            }
            (sim.text, Some(sim.version), Some(sim.status))
        }
    };
    let cg: Cachegrind = cachegrind::parse(&text)?;
    let (base, tested) = cg.data_counts()?;
    let c = compare::compare(&base, &tested, t);
    let total = |e: &str| cg.event(e).map_or(0, |i| cg.summary[i]);
    let mut header = vec![format!(
        "SIMULATED caches (valgrind cachegrind{}), not this machine's counters:",
        version
            .as_ref()
            .map(|v| format!(", {v}"))
            .unwrap_or_default()
    )];
    header.extend(cg.desc.iter().map(|d| format!("  {d}")));
    header.push(format!("command: {}", cg.cmd));
    header.push(format!(
        "data refs {} (Dr {} + Dw {}), D1 misses {} ({} + {}), LL misses {} ({} + {})",
        base.total,
        total("Dr"),
        total("Dw"),
        tested[0].total,
        total("D1mr"),
        total("D1mw"),
        tested[1].total,
        total("DLmr"),
        total("DLmw"),
    ));
    if let Some(s) = status.filter(|s| !s.success()) {
        eprintln!("kstate cachesim: the command exited with {s}");
    }
    let summary: serde_json::Map<String, serde_json::Value> = cg
        .events
        .iter()
        .zip(&cg.summary)
        .map(|(e, n)| (e.clone(), (*n).into()))
        .collect();
    let extra = serde_json::json!({
        "simulated": true,
        "simulator": "cachegrind",
        "valgrind": version,
        "caches": cg.desc,
        "command": cg.cmd,
        "input": args.input.as_ref().map(|p| p.display().to_string()),
        "exit_status": status.and_then(|s| s.code()),
        "summary": summary,
    });
    crate::print::comparison(&c, &header, "File", extra, args.json, args.top);
    Ok(ExitCode::SUCCESS)
}

/// `--sets`: the command under lackey, its sites judged against one cache level.
fn sets(args: &Args) -> Result<ExitCode, Error> {
    if args.command.is_empty() {
        return Err(valgrind::usage(
            "give the command to check after --, e.g. kstate cachesim --sets -- ./prog",
        )
        .into());
    }
    let (lvl, source) = valgrind::level(args.cache.as_deref(), args.level, &args.sysfs)?;
    let run = valgrind::lackey(&args.valgrind, &args.command, lvl)?;
    let shown = cachesim_sets::Shown {
        json: args.json,
        top: args.top,
        min_lines: args.min_lines,
    };
    cachesim_sets::print(&run, &lvl, &source, &args.command.join(" "), shown);
    Ok(ExitCode::SUCCESS)
}
