//! `kstate scale`: one command at each CPU count (pinned to CPUs 0..N-1 with
//! sched_setaffinity: no reboots, no cpusets), recorded and classified: wall time and
//! speed-up, the /proc/stat split of the CPUs used, and the verdict with its evidence;
//! with `-o DIR`, an HTML report (table, scalability plot, one section per run).

pub mod report;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::Error;
use kstate_format::output;
use kstate_render::html::CpuSplit;
use kstate_render::scale::{ScaleReport, ScaleRun};
use serde_json::{json, Value};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  kstate scale --cpus 1,2 -- kstate workload mmap 4 20000\n  \
    kstate scale --cpus 1,2 --sample -o scale-out -- kstate workload chat\n\n\
    Each run: kstate record -e perf,syscall,futex -a [--sample] -- CMD, with CMD pinned to\n\
    CPUs 0..N-1 (its threads and children inherit the mask), then kstate classify on the\n\
    recording (rules: kstate classify --help). Seconds are the recording's span. CPU\n\
    columns are /proc/stat of the CPUs the command was pinned to.\n\n\
    -o DIR writes DIR/report.html (self-contained: the table, the scalability plot of\n\
    speed-up and throughput = 1/seconds against CPUs, and per run its CPU accounting,\n\
    verdict and evidence, top profile symbols with --sample, kernel and user-space locks\n\
    waited on, and block requests), DIR/scalability.svg and .png, and keeps the\n\
    recordings there as cpuN.dat (unless --keep names another directory). Run as root."
)]
pub struct Args {
    /// CPU counts (comma-separated)
    #[arg(long, value_delimiter = ',', required = true, value_parser = kstate_args::int::<usize>(1..=1024))]
    cpus: Vec<usize>,
    /// Keep the recordings in DIR as cpuN.dat
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Where recordings go while measuring (without --keep; removed afterwards)
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
    /// Also sample the CPUs (kstate record --sample: cpu-clock at 999 Hz, call chains);
    /// the report shows each run's top symbols
    #[arg(long)]
    sample: bool,
    /// Write the HTML report and plot into DIR (created), recordings kept there too
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// The command to run at each CPU count
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// What each run records: the classifier's events, and futex waits for the report's
/// user-space locks.
const EVENTS: &str = "perf,syscall,futex";

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(c) = a.cpus.iter().find(|c| **c == 0 || **c > online) {
        return Err(err(format!("--cpus {c}: this machine has {online} CPUs")));
    }
    let dir = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    if let Some(o) = &a.output {
        std::fs::create_dir_all(o).map_err(|e| Error::io(o, e))?;
    }
    let keep = a.keep.clone().or_else(|| a.output.clone());
    if let Some(k) = &keep {
        std::fs::create_dir_all(k).map_err(|e| Error::io(k, e))?;
    }
    let mut record = vec!["record", "--json", "-e", EVENTS, "-a"];
    if a.sample {
        record.push("--sample");
    }
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    for &n in &a.cpus {
        eprintln!("kstate scale: {n} CPU(s)");
        let file = match &keep {
            Some(k) => k.join(format!("cpu{n}.dat")),
            None => dir.join(format!(".kstate-scale-{}.dat", std::process::id())),
        };
        let before = crate::bench::io::cpu_times(n);
        let t = Instant::now();
        let out = Command::new(&exe)
            .args(&record)
            .arg("-o")
            .arg(&file)
            .args([
                "--",
                &exe.display().to_string(),
                "workload",
                "pin",
                "--cpus",
            ])
            .arg(n.to_string())
            .arg("--")
            .args(&a.command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| err(format!("cannot run kstate record: {e}")))?;
        let wall = t.elapsed().as_secs_f64();
        let after = crate::bench::io::cpu_times(n);
        if !out.status.success() {
            let _ = std::fs::remove_file(&file);
            return Err(err(format!(
                "{n} CPU(s): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let source = kstate_analyze::Source::open(&file)?;
        let scope = kstate_views::workload::workload_scope(source.trace());
        let fig = kstate_views::classify::figures(source.trace(), scope.as_ref())?;
        let (kind, evidence) = kstate_views::classify::verdict(&fig);
        let tables = match a.output {
            Some(_) => report::tables(&source, scope.as_ref(), a.sample),
            None => Vec::new(),
        };
        drop(source);
        if keep.is_none() {
            let _ = std::fs::remove_file(&file);
        }
        let d: Vec<f64> = (0..4)
            .map(|i| after[i].saturating_sub(before[i]) as f64)
            .collect();
        let sum = d.iter().sum::<f64>().max(1.0);
        runs.push(ScaleRun {
            cpus: n,
            seconds: fig.span_ns as f64 / 1e9,
            cpu: CpuSplit {
                user: d[0] / sum,
                system: d[1] / sum,
                idle: d[2] / sum,
                iowait: d[3] / sum,
                other: 0.0,
            },
            verdict: kind.to_string(),
            evidence: evidence.clone(),
            figures: report::figures(&fig),
            tables,
            file: keep.as_ref().map(|_| file.display().to_string()),
            ..ScaleRun::default()
        });
        rows.push(json!({
            "cpus": n,
            "seconds": fig.span_ns as f64 / 1e9,
            "wall_with_recorder": wall,
            "cpu_pct": {"user": d[0] / sum * 100.0, "system": d[1] / sum * 100.0,
                        "idle": d[2] / sum * 100.0, "iowait": d[3] / sum * 100.0},
            "verdict": kind,
            "evidence": evidence,
            "cpu_demand": fig.demand(),
            "lock_wait": fig.lock(),
            "io_wait": fig.io(),
            "disk_busy": fig.disk(),
        }));
    }
    let base = rows[0]["seconds"].as_f64().unwrap_or(0.0);
    for (r, run) in rows.iter_mut().zip(&mut runs) {
        let s = r["seconds"].as_f64().unwrap_or(0.0);
        run.speedup = if s > 0.0 { base / s } else { 0.0 };
        r["speedup"] = json!(run.speedup);
    }
    if let Some(o) = &a.output {
        let report = ScaleReport {
            command: a.command.clone(),
            how: format!(
                "kstate {} -- CMD",
                record
                    .iter()
                    .filter(|x| **x != "--json")
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            runs,
        };
        let html = o.join("report.html");
        output::write(&html, kstate_render::scale::render(&report))
            .map_err(|e| Error::io(&html, e))?;
        let svg = o.join("scalability.svg");
        let plot = kstate_render::scale::plot(&report);
        output::write(&svg, &plot).map_err(|e| Error::io(&svg, e))?;
        // Without the png feature the SVG is enough.
        if let Ok(bytes) = kstate_render::rundir::png(&plot) {
            let png = o.join("scalability.png");
            output::write(&png, bytes).map_err(|e| Error::io(&png, e))?;
        }
        eprintln!("kstate scale: report in {}", html.display());
    }
    if a.json {
        println!(
            "{}",
            json!({"command": a.command, "runs": Value::Array(rows),
                "report": a.output.as_ref().map(|o| o.join("report.html").display().to_string())})
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("command: {}", a.command.join(" "));
    println!(
        "{:>4} {:>8} {:>8} {:>5} {:>5} {:>5} {:>6}  verdict",
        "cpus", "seconds", "speedup", "usr%", "sys%", "idle%", "iowt%"
    );
    for r in &rows {
        let p = |k: &str| r["cpu_pct"][k].as_f64().unwrap_or(0.0);
        println!(
            "{:>4} {:>8.3} {:>7.2}x {:>5.1} {:>5.1} {:>5.1} {:>6.1}  {}",
            r["cpus"].as_u64().unwrap_or(0),
            r["seconds"].as_f64().unwrap_or(0.0),
            r["speedup"].as_f64().unwrap_or(0.0),
            p("user"),
            p("system"),
            p("idle"),
            p("iowait"),
            r["verdict"].as_str().unwrap_or("")
        );
        println!("      {}", r["evidence"].as_str().unwrap_or(""));
    }
    Ok(ExitCode::SUCCESS)
}

/// `kstate workload pin --cpus N -- CMD`: pins itself to CPUs 0..N-1 and becomes CMD.
pub fn pin_exec(cpus: usize, command: &[String]) -> Result<(), Error> {
    use std::os::unix::process::CommandExt;
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let Some(prog) = command.first() else {
        return Err(err("workload pin: no command"));
    };
    let e = Command::new(prog).args(&command[1..]).exec();
    Err(err(format!("cannot run {prog}: {e}")))
}
