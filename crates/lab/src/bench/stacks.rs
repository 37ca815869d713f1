//! `kstate bench stacks`: what callers and hold times cost (issue 16's benchmark row).
//!
//! 1. Unwinding: `kstate workload spin` recorded with `--sample`, with stack copies
//!    (`--stack-bytes` default: each sample carries the user registers and the top of the
//!    user stack, unwound through the mapped files' CFI) and without (`--stack-bytes 0`:
//!    the kernel's frame-pointer chain alone), each for SPIN ms and 3 x SPIN ms; then
//!    `kstate profile --json` of each file is timed. Samples per second decoded is of the
//!    long file; the time per sample is the slope between the short and the long file, so
//!    that the fixed costs (opening, loading symbols and CFI once per file) are not in it.
//!    The difference of the slopes is the cost of copying and unwinding a stack.
//! 2. Hold probes: a mutex-heavy program (THREADS threads taking one pthread mutex PAIRS
//!    times each, nothing inside) run bare, under `record -e futex --stacks` and under
//!    `record -e futex --stacks --holds`. Its own wall time (measured inside, so the
//!    recorder's start and stop are not in it) gives the slowdown: every lock and unlock
//!    hits a uprobe (three per pair), a trap into the kernel each.
//!
//! Runs are interleaved and the median taken; the child programs are this executable
//! (`kstate workload spin --ms`, and `bench stacks --mutex-pass` for the mutex program).

use std::cell::UnsafeCell;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use super::run_cmd;
use crate::Error;
use serde_json::{json, Value};

#[derive(clap::Args)]
pub struct Args {
    /// CPU time the sampled program burns, in ms
    #[arg(long, default_value_t = 2000, value_parser = kstate_args::int::<u64>(10..=600_000))]
    spin_ms: u64,
    /// Threads of the mutex program
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<u64>(1..=256))]
    threads: u64,
    /// Lock/unlock pairs per thread of the mutex program
    #[arg(long, default_value_t = 20_000, value_parser = kstate_args::int::<u64>(1..=100_000_000))]
    pairs: u64,
    /// Runs of each configuration, interleaved; the median is reported
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<usize>(crate::bench::RUNS))]
    runs: usize,
    /// Where recordings go while measuring (removed afterwards)
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
    /// Run the mutex program in this process (THREADS PAIRS) and print its timing
    #[arg(long, hide = true, num_args = 2, value_names = ["THREADS", "PAIRS"])]
    mutex_pass: Option<Vec<u64>>,
}

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// One pthread mutex shared by the threads (std's Mutex is not a pthread mutex, and the
/// hold probes are on pthread_mutex_lock/unlock).
struct PMutex(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be used from several threads at once.
unsafe impl Sync for PMutex {}

static MUTEX: PMutex = PMutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));

/// The mutex program: prints `{"wall_s": ...}`, the time from the threads' start to the
/// last one's end.
fn mutex_pass(threads: u64, pairs: u64) -> Result<ExitCode, Error> {
    let t = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..pairs {
                    // SAFETY: MUTEX is a valid, initialised mutex, locked and unlocked
                    // by the same thread.
                    unsafe {
                        libc::pthread_mutex_lock(MUTEX.0.get());
                        libc::pthread_mutex_unlock(MUTEX.0.get());
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| err("a mutex thread panicked"))?;
    }
    println!("{}", json!({"wall_s": t.elapsed().as_secs_f64()}));
    Ok(ExitCode::SUCCESS)
}

/// The `{"wall_s"}` line a child printed.
fn wall_of(out: &str, what: &str) -> Result<f64, Error> {
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["wall_s"].as_f64())
        .ok_or_else(|| err(format!("{what}: no timing in its output:\n{out}")))
}

/// The sampling configurations: name and extra `record` arguments.
const SAMPLED: [(&str, &[&str]); 2] = [
    ("stack copies", &[]),
    ("frame pointers only", &["--stack-bytes", "0"]),
];

/// The mutex program's configurations: name and `record` arguments (None: bare).
const MUTEX_CONFIGS: [(&str, Option<&[&str]>); 3] = [
    ("bare", None),
    ("--stacks", Some(&["-e", "futex", "--stacks"])),
    (
        "--stacks --holds",
        Some(&["-e", "futex", "--stacks", "--holds"]),
    ),
];

/// One recording of the spin program and its timed decodes.
#[derive(Default, Clone)]
struct Decode {
    samples: u64,
    file_bytes: u64,
    secs: Vec<f64>,
}

/// Spin lengths recorded per configuration, as multiples of --spin-ms.
const LENGTHS: [u64; 2] = [1, 3];

/// Records the spin program with `extra` into `file`: (samples, file bytes).
fn record_spin(exe: &Path, file: &Path, extra: &[&str], spin_ms: u64) -> Result<Decode, Error> {
    let out = run_cmd(
        Command::new(exe)
            .args(["record", "--json", "--sample"])
            .args(extra)
            .arg("-o")
            .arg(file)
            .arg("--")
            .arg(exe)
            .args(["workload", "spin", "--ms"])
            .arg(spin_ms.to_string()),
    )?;
    let v = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("samples").is_some())
        .ok_or_else(|| err(format!("kstate record printed no summary:\n{out}")))?;
    let samples = v["samples"]["samples"].as_u64().unwrap_or(0);
    if samples == 0 {
        return Err(err(format!("the spin program was not sampled:\n{out}")));
    }
    let file_bytes = std::fs::metadata(file)
        .map_err(|e| Error::io(file, e))?
        .len();
    Ok(Decode {
        samples,
        file_bytes,
        secs: Vec::new(),
    })
}

/// Removes the recordings on every way out.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    if let Some(v) = &a.mutex_pass {
        return mutex_pass(v[0], v[1]);
    }
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let dir = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    let pid = std::process::id();
    // files[config * LENGTHS.len() + length]
    let files: Vec<PathBuf> = (0..SAMPLED.len() * LENGTHS.len())
        .map(|i| dir.join(format!(".kstate-bench-stacks-{pid}-{i}.dat")))
        .collect();
    let hold_file = dir.join(format!(".kstate-bench-stacks-{pid}-m.dat"));
    let mut scratch = files.clone();
    scratch.push(hold_file.clone());
    let _scratch = Scratch(scratch);
    let runs = a.runs.max(1);

    // 1. Decoding with and without stack copies: one recording each, timed decodes.
    let mut decode = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let (extra, k) = (SAMPLED[i / LENGTHS.len()].1, LENGTHS[i % LENGTHS.len()]);
        decode.push(record_spin(&exe, f, extra, a.spin_ms * k)?);
    }
    // 2. The mutex program bare and recorded.
    let work: Vec<String> = vec![
        exe.display().to_string(),
        "bench".into(),
        "stacks".into(),
        "--mutex-pass".into(),
        a.threads.to_string(),
        a.pairs.to_string(),
    ];
    let mut walls = vec![Vec::new(); MUTEX_CONFIGS.len()];
    for run in 0..runs {
        eprintln!("kstate bench stacks: run {}/{runs}", run + 1);
        for (d, f) in decode.iter_mut().zip(&files) {
            let t = Instant::now();
            run_cmd(Command::new(&exe).args(["profile", "--json"]).arg(f))?;
            d.secs.push(t.elapsed().as_secs_f64());
        }
        for ((name, rec), w) in MUTEX_CONFIGS.iter().zip(&mut walls) {
            let out = match rec {
                None => run_cmd(Command::new(&work[0]).args(&work[1..]))?,
                Some(r) => {
                    let o = run_cmd(
                        Command::new(&exe)
                            .arg("record")
                            .args(*r)
                            .arg("-o")
                            .arg(&hold_file)
                            .arg("--")
                            .args(&work),
                    );
                    let _ = std::fs::remove_file(&hold_file);
                    o?
                }
            };
            w.push(wall_of(&out, name)?);
        }
    }

    let decode_rows: Vec<Value> = SAMPLED
        .iter()
        .zip(decode.chunks(LENGTHS.len()))
        .map(|((name, _), d)| {
            let (short, long) = (&d[0], &d[LENGTHS.len() - 1]);
            let (ts, tl) = (median(&short.secs), median(&long.secs));
            let dn = long.samples.saturating_sub(short.samples).max(1) as f64;
            json!({
                "config": name,
                "samples": [short.samples, long.samples],
                "file_bytes": [short.file_bytes, long.file_bytes],
                "profile_s": [ts, tl],
                "profile_s_runs": [&short.secs, &long.secs],
                "samples_per_s": long.samples as f64 / tl.max(1e-9),
                "us_per_sample": (tl - ts) * 1e6 / dn,
            })
        })
        .collect();
    let per = |i: usize| decode_rows[i]["us_per_sample"].as_f64().unwrap_or(0.0);
    let unwind_us = per(0) - per(1);
    let base = median(&walls[0]);
    let mutex_rows: Vec<Value> = MUTEX_CONFIGS
        .iter()
        .zip(&walls)
        .map(|((name, _), w)| {
            let m = median(w);
            json!({
                "config": name, "wall_s": m, "wall_s_runs": w,
                "ratio": if base > 0.0 { m / base } else { 0.0 },
                "ns_per_pair": m * 1e9 / (a.threads * a.pairs) as f64,
            })
        })
        .collect();
    if a.json {
        println!(
            "{}",
            json!({
                "runs": runs, "spin_ms": a.spin_ms, "threads": a.threads, "pairs": a.pairs,
                "decode": decode_rows, "unwind_us_per_sample": unwind_us,
                "mutex": mutex_rows,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "# kstate bench stacks: medians of {runs} runs; decode = `kstate profile --json` of `kstate workload spin --ms {}` and `--ms {}` recorded with --sample; us/sample = the slope between them",
        a.spin_ms * LENGTHS[0],
        a.spin_ms * LENGTHS[LENGTHS.len() - 1],
    );
    println!(
        "  {:<20} {:>13} {:>15} {:>13} {:>11} {:>10}",
        "decode", "samples", "file KiB", "profile s", "samples/s", "us/sample"
    );
    let pair = |v: &Value, f: &dyn Fn(&Value) -> String| {
        let a = v.as_array().map(|a| a.iter().map(f).collect::<Vec<_>>());
        a.map_or("-".to_string(), |a| a.join("/"))
    };
    for r in &decode_rows {
        println!(
            "  {:<20} {:>13} {:>15} {:>13} {:>11.0} {:>10.1}",
            r["config"].as_str().unwrap_or(""),
            pair(&r["samples"], &|x| x.as_u64().unwrap_or(0).to_string()),
            pair(&r["file_bytes"], &|x| (x.as_u64().unwrap_or(0) / 1024)
                .to_string()),
            pair(&r["profile_s"], &|x| format!(
                "{:.3}",
                x.as_f64().unwrap_or(0.0)
            )),
            r["samples_per_s"].as_f64().unwrap_or(0.0),
            r["us_per_sample"].as_f64().unwrap_or(0.0),
        );
    }
    println!("  stack copy + unwinding: {unwind_us:.1} us per sample");
    println!(
        "\n  {:<20} {:>10} {:>7} {:>12}   ({} threads x {} pthread mutex lock/unlock pairs)",
        "mutex program", "time s", "ratio", "ns/pair", a.threads, a.pairs
    );
    for r in &mutex_rows {
        println!(
            "  {:<20} {:>10.3} {:>7.2} {:>12.0}",
            r["config"].as_str().unwrap_or(""),
            r["wall_s"].as_f64().unwrap_or(0.0),
            r["ratio"].as_f64().unwrap_or(0.0),
            r["ns_per_pair"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(ExitCode::SUCCESS)
}
