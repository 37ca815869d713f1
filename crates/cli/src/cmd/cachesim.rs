//! `kstate cachesim -- CMD`: the cache-pollution comparison of `kstate profile
//! --compare-events` from a simulated cache, for machines without a PMU (VMs): CMD runs
//! under valgrind's cachegrind, and each function's share of the D1 and LL data misses is
//! put next to its share of the data references.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use kstate_analyze::cachegrind::{self, Cachegrind};
use kstate_analyze::profile::compare;
use kstate_format::{Error, ErrorKind};

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
    pub(super) json: bool,
    /// Only the N first functions (with --sets, sites): the flagged, then the largest (0: all)
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub(super) top: usize,
    /// Flag a function whose miss share is at least RATIO times its reference share
    #[arg(long, value_name = "RATIO", default_value_t = compare::Thresholds::default().ratio)]
    ratio: f64,
    /// ... and at least PCT % of the misses (fewer are noise)
    #[arg(long, value_name = "PCT", default_value_t = compare::Thresholds::default().min_share)]
    min_share: f64,
    /// The valgrind to run
    #[arg(long, value_name = "PATH", default_value = "valgrind")]
    pub(super) valgrind: PathBuf,
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
    pub(super) sets: bool,
    /// With --sets: the cache level to check (from sysfs)
    #[arg(long, default_value_t = 2, value_parser = kstate_args::int::<u32>(1..=4), requires = "sets")]
    pub(super) level: u32,
    /// With --sets: the cache as SIZE,ASSOC,LINE in bytes instead of this CPU's
    #[arg(long, value_name = "SIZE,ASSOC,LINE", requires = "sets")]
    pub(super) cache: Option<String>,
    /// With --sets: the sysfs root the cache geometry is read from
    #[arg(long, value_name = "ROOT", default_value = "/sys", requires = "sets")]
    pub(super) sysfs: PathBuf,
    /// With --sets: only sites with at least N distinct lines
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = kstate_args::int::<u64>(1..=1 << 30), requires = "sets")]
    pub(super) min_lines: u64,
    /// The command to run under cachegrind
    #[arg(last = true, value_name = "CMD")]
    pub(super) command: Vec<String>,
}

pub(super) fn usage(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, None, msg.into())
}

/// `SIZE,ASSOC,LINE`, checked here so that a typo is not a valgrind usage message.
pub(super) fn cache_spec(opt: &str, v: &str) -> Result<String, Error> {
    let n: Vec<Option<u64>> = v.split(',').map(|x| x.trim().parse().ok()).collect();
    match n.as_slice() {
        [Some(s), Some(a), Some(l)] if *s > 0 && *a > 0 && *l > 0 => Ok(format!("{s},{a},{l}")),
        _ => Err(usage(format!(
            "--{opt} {v:?}: expected SIZE,ASSOC,LINE in bytes, e.g. 32768,8,64"
        ))),
    }
}

/// valgrind's version line, which also proves it is valgrind.
pub(super) fn valgrind_version(valgrind: &Path) -> Result<String, Error> {
    let out = Command::new(valgrind)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => usage(format!(
                "{} not found: kstate cachesim runs the command under valgrind's cachegrind; install valgrind (Debian/Ubuntu: apt-get install valgrind) or give --valgrind PATH",
                valgrind.display()
            )),
            _ => usage(format!("running {} --version: {e}", valgrind.display())),
        })?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !v.starts_with("valgrind-") {
        return Err(usage(format!(
            "{} does not look like valgrind (`--version` printed {:?}, {})",
            valgrind.display(),
            v.lines().next().unwrap_or(""),
            out.status
        )));
    }
    Ok(v)
}

/// valgrind's scratch files live in a fresh directory of kstate's own (0700), removed on
/// every way out: valgrind opens `--log-file` and `--cachegrind-out-file` with O_TRUNC,
/// so a fixed name in a shared $TMPDIR would be written through a link another user
/// planted there, as root (issue 24).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the command under cachegrind; returns its output file's text, valgrind's version
/// and the command's exit status.
fn simulate(args: &Args) -> Result<(String, String, std::process::ExitStatus), Error> {
    if args.command.is_empty() {
        return Err(usage(
            "give the command to simulate after --, e.g. kstate cachesim -- ./prog (or --input FILE)",
        ));
    }
    let version = valgrind_version(&args.valgrind)?;
    let tmp = std::env::temp_dir();
    let scratch = Scratch(
        kstate_format::output::private_dir(&tmp, "kstate-cachesim-", "")
            .map_err(|e| Error::io(&tmp, e))?,
    );
    let log = scratch.0.join("valgrind.log");
    let out = scratch.0.join("cachegrind.out");
    let mut cmd = Command::new(&args.valgrind);
    cmd.arg("--tool=cachegrind")
        .arg("--cache-sim=yes")
        .arg(format!("--cachegrind-out-file={}", out.display()))
        .arg(format!("--log-file={}", log.display()));
    if let Some(d1) = &args.d1 {
        cmd.arg(format!("--D1={}", cache_spec("d1", d1)?));
    }
    if let Some(ll) = &args.ll {
        cmd.arg(format!("--LL={}", cache_spec("ll", ll)?));
    }
    cmd.arg("--").args(&args.command);
    let status = cmd
        .status()
        .map_err(|e| usage(format!("running {}: {e}", args.valgrind.display())))?;
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    // What valgrind warns about the simulation (e.g. the LL cache it had to adjust).
    for l in log_text.lines().filter(|l| l.contains("warning:")) {
        let l = l.trim_start_matches(|c: char| c == '-' || c == '=' || c.is_ascii_digit());
        eprintln!("kstate cachesim: valgrind:{l}");
    }
    let text = std::fs::read_to_string(&out).map_err(|e| {
        let tail: Vec<&str> = log_text.lines().rev().take(8).collect();
        usage(format!(
            "cachegrind wrote no output ({}: {e}); valgrind exited with {status}{}",
            out.display(),
            if tail.is_empty() {
                String::new()
            } else {
                format!(
                    ", saying:\n  {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
                )
            }
        ))
    })?;
    // --keep is placed the way kstate writes every output (a fresh file renamed onto the
    // name), not handed to valgrind, which would open a planted link at it.
    if let Some(k) = &args.keep {
        kstate_format::output::write(k, &text).map_err(|e| Error::io(k, e))?;
    }
    Ok((text, version, status))
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.sets {
        return super::cachesim_sets::run(&args);
    }
    let t = compare::Thresholds::checked(args.ratio, args.min_share)?;
    let (text, version, status) = match &args.input {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
            (text, None, None)
        }
        None => {
            let (text, v, s) = simulate(&args)?;
            (text, Some(v), Some(s))
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
