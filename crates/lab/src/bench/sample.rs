//! `kstate bench sample`: what CPU sampling (`kstate record --sample` at its default
//! rate) costs the workload. Two fixed-work programs — a CPU loop and a system-call loop —
//! each run untraced, under `kstate record` without sampling, and under `kstate record
//! --sample`; the table gives the work's own run time (measured inside the workload, so
//! the recorder's start and stop are not in it), the ratio to the untraced run, the
//! samples taken and the recorder's CPU time.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use super::run_cmd;
use crate::Error;
use serde_json::{json, Value};

#[derive(clap::Args)]
#[command(
    after_help = "Workloads (rows), each a fixed amount of work in a child process:\n  \
    cpu      a multiply-add loop, no system calls (N iterations)\n  \
    syscall  getppid() in a loop (N calls): every call enters the kernel\n\n\
    Configurations:\n  \
    none     no tracer\n  \
    record   kstate record (default events) -- WORKLOAD\n  \
    sample   kstate record --sample (cpu-clock at the default 999 Hz, call chains)\n\n\
    Times are the work's own wall time, median of --runs interleaved runs; ratios are to\n\
    `none`. Recorder CPU is the recorder's own CPU time while it recorded (its readers\n\
    and the sample ring's). Run as root; figures from a shared machine are noisy."
)]
pub struct Args {
    /// Scale the default amount of work (0.01 for a quick check)
    #[arg(long, default_value_t = 1.0, value_parser = kstate_args::float(0.0001..=1000.0))]
    iters: f64,
    /// Runs of each configuration, interleaved; the median is reported
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<usize>(crate::bench::RUNS))]
    runs: usize,
    /// Where recordings go while measuring (removed afterwards)
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// The workloads: name, what one operation is, default operation count.
const WORKS: &[(&str, &str, u64)] = &[
    ("cpu", "multiply-add iteration", 1_500_000_000),
    ("syscall", "getppid() call", 5_000_000),
];

const CONFIGS: &[&str] = &["none", "record", "sample"];

#[derive(clap::Args)]
pub struct PassArgs {
    /// cpu or syscall
    work: String,
    /// Operations
    n: u64,
}

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One workload run in this process: prints `{"work", "ops", "wall_s", "cpu_s"}`.
pub fn pass(a: PassArgs) -> Result<ExitCode, Error> {
    let c0 = cpu_s();
    let t = Instant::now();
    match a.work.as_str() {
        "cpu" => {
            let mut x = 1u64;
            for _ in 0..a.n {
                x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
            }
            std::hint::black_box(x);
        }
        "syscall" => {
            for _ in 0..a.n {
                // SAFETY: getppid has no preconditions.
                std::hint::black_box(unsafe { libc::getppid() });
            }
        }
        w => return Err(err(format!("no workload {w:?} (cpu, syscall)"))),
    }
    let wall = t.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({"work": a.work, "ops": a.n, "wall_s": wall, "cpu_s": cpu_s() - c0})
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Default, Clone)]
struct Cell {
    wall: Vec<f64>,
    cpu: Vec<f64>,
    samples: Vec<f64>,
    lost: u64,
    rec_cpu: Vec<f64>,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    if !(a.iters > 0.0 && a.iters.is_finite()) {
        return Err(err("--iters must be positive"));
    }
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let dir = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    let file = dir.join(format!(".kstate-bench-sample-{}.dat", std::process::id()));
    let runs = a.runs.max(1);
    let ops: Vec<u64> = WORKS
        .iter()
        .map(|w| ((w.2 as f64 * a.iters) as u64).max(1))
        .collect();
    // cells[work][config]
    let mut cells = vec![vec![Cell::default(); CONFIGS.len()]; WORKS.len()];
    for run in 0..runs {
        eprintln!("kstate bench sample: run {}/{runs}", run + 1);
        for (wi, w) in WORKS.iter().enumerate() {
            let work = [
                exe.display().to_string(),
                "bench".into(),
                "sample-pass".into(),
                w.0.into(),
                ops[wi].to_string(),
            ];
            for (ci, config) in CONFIGS.iter().enumerate() {
                let out = if *config == "none" {
                    run_cmd(Command::new(&work[0]).args(&work[1..]))?
                } else {
                    let mut c = Command::new(&exe);
                    c.args(["record", "--json", "-o"]).arg(&file);
                    if *config == "sample" {
                        c.arg("--sample");
                    }
                    let r = run_cmd(c.arg("--").args(&work));
                    let _ = std::fs::remove_file(&file);
                    r?
                };
                let cell = &mut cells[wi][ci];
                for l in out.lines().filter(|l| l.starts_with('{')) {
                    let v: Value = serde_json::from_str(l)
                        .map_err(|e| err(format!("bad output line {l}: {e}")))?;
                    if let Some(s) = v["wall_s"].as_f64() {
                        cell.wall.push(s);
                        cell.cpu.push(v["cpu_s"].as_f64().unwrap_or(0.0));
                    } else if let Some(ns) = v["recording_cpu_ns"].as_f64() {
                        cell.rec_cpu.push(ns / 1e9);
                        if let Some(n) = v["samples"]["samples"].as_f64() {
                            cell.samples.push(n);
                            cell.lost = cell.lost.max(v["samples"]["lost"].as_u64().unwrap_or(0));
                        }
                    }
                }
                if cell.wall.len() != run + 1 {
                    return Err(err(format!(
                        "{} under {config}: no timing in its output:\n{out}",
                        w.0
                    )));
                }
            }
        }
    }
    let rows: Vec<Value> = WORKS
        .iter()
        .enumerate()
        .map(|(wi, w)| {
            let base = median(&cells[wi][0].wall).unwrap_or(0.0);
            let configs: Vec<Value> = CONFIGS
                .iter()
                .enumerate()
                .map(|(ci, config)| {
                    let c = &cells[wi][ci];
                    let wall = median(&c.wall).unwrap_or(0.0);
                    json!({
                        "config": config,
                        "wall_s": wall,
                        "wall_s_runs": c.wall,
                        "cpu_s": median(&c.cpu),
                        "ratio": if base > 0.0 { wall / base } else { 0.0 },
                        "samples": median(&c.samples),
                        "lost": (*config == "sample").then_some(c.lost),
                        "recorder_cpu_s": median(&c.rec_cpu),
                    })
                })
                .collect();
            json!({"work": w.0, "op": w.1, "ops": ops[wi], "configs": configs})
        })
        .collect();
    if a.json {
        println!(
            "{}",
            json!({"runs": runs, "iters": a.iters, "sample_rate": "cpu-clock at 999 Hz (the default)", "workloads": rows})
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "# kstate bench sample: the work's wall time, median of {runs} runs; `sample` is --sample at the default rate (cpu-clock, 999 Hz)"
    );
    println!(
        "# {:<8} {:>11}  {:<7} {:>9} {:>7} {:>8} {:>5} {:>14}",
        "work", "ops", "config", "time s", "ratio", "samples", "lost", "recorder CPU s"
    );
    for r in &rows {
        for c in r["configs"].as_array().unwrap() {
            let opt = |v: &Value, prec: usize| {
                v.as_f64()
                    .map_or("-".to_string(), |x| format!("{x:.prec$}"))
            };
            println!(
                "  {:<8} {:>11}  {:<7} {:>9.3} {:>7.3} {:>8} {:>5} {:>14}",
                r["work"].as_str().unwrap_or(""),
                r["ops"].as_u64().unwrap_or(0),
                c["config"].as_str().unwrap_or(""),
                c["wall_s"].as_f64().unwrap_or(0.0),
                c["ratio"].as_f64().unwrap_or(0.0),
                opt(&c["samples"], 0),
                c["lost"].as_u64().map_or("-".into(), |n| n.to_string()),
                opt(&c["recorder_cpu_s"], 3),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
