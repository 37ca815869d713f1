//! `kstate bench record`: what recording costs the traced program. A null-system-call
//! loop (getppid, pinned to one CPU) runs four ways in the same run — untraced, with the
//! events enabled but nothing reading them (the kernel's own cost of the tracepoints),
//! under `kstate record`, under `kstate watch` (the same recording, analysed live every
//! second), and under `perf record` — and the table compares them.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use super::run_cmd;
use crate::Error;
use kstate_record::instance::Instance;
use kstate_record::tracefs::Tracefs;
use serde_json::{json, Value};

#[derive(clap::Args)]
pub struct Args {
    /// getppid calls per run (at most what `kstate workload` takes, which makes them)
    #[arg(long, default_value_t = 2_000_000, value_parser = kstate_args::int::<u64>(1..=*crate::workload::COUNT.end()))]
    calls: u64,
    /// Runs of each row; the median is reported
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<usize>(crate::bench::RUNS))]
    runs: usize,
    /// CPU the workload is pinned to
    #[arg(long, default_value_t = 0, value_parser = kstate_args::int::<usize>(crate::bench::CPU))]
    cpu: usize,
    /// Skip the perf row
    #[arg(long)]
    no_peer: bool,
    /// Where recordings go while measuring (removed afterwards)
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

/// One run of a row.
#[derive(Debug, Clone, Default)]
struct Sample {
    ns_per_call: f64,
    workload_cpu_ns: u64,
    events: Option<u64>,
    lost: Option<u64>,
    /// The recorder's CPU while tracing (kstate reports it; for perf: all its CPU time
    /// minus the workload's, build-id processing turned off).
    recorder_cpu_ns: Option<u64>,
    /// kstate only: CPU including writing the file after the workload ended.
    recorder_total_cpu_ns: Option<u64>,
}

/// CPU time of all waited-for children so far.
fn children_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data that getrusage fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid and writable.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn workload_cmd(exe: &Path, a: &Args) -> Vec<String> {
    vec![
        exe.display().to_string(),
        "workload".into(),
        "getppid".into(),
        a.calls.to_string(),
        "--cpu".into(),
        a.cpu.to_string(),
        "--json".into(),
    ]
}

fn parse_workload(v: &Value) -> Result<(f64, u64), Error> {
    match (v["ns_per_call"].as_f64(), v["cpu_ns"].as_u64()) {
        (Some(ns), Some(cpu)) => Ok((ns, cpu)),
        _ => Err(err(format!("unexpected workload output: {v}"))),
    }
}

fn untraced(exe: &Path, a: &Args) -> Result<Sample, Error> {
    let w = workload_cmd(exe, a);
    let out = run_cmd(Command::new(&w[0]).args(&w[1..]))?;
    let v = json_lines(&out);
    let (ns, cpu) = parse_workload(v.first().ok_or_else(|| err("no workload output"))?)?;
    Ok(Sample {
        ns_per_call: ns,
        workload_cpu_ns: cpu,
        ..Sample::default()
    })
}

/// The events on in a private instance, with the clock and buffer kstate records with,
/// and nobody reading: what the tracepoints alone cost. With `pid_filter`, events are
/// also filtered to the workload as `kstate record -- CMD` filters them (set_event_pid
/// with event-fork): the kernel then checks every event's pid, a cost of the
/// configuration rather than of reading, so kstate's reading cost is measured against
/// this row.
fn enabled_unread(exe: &Path, a: &Args, pid_filter: bool) -> Result<Sample, Error> {
    let tfs = Tracefs::open().map_err(|e| err(e.to_string()))?;
    let mut inst = Instance::create(&tfs).map_err(|e| err(e.to_string()))?;
    let setup = || -> kstate_record::Result<()> {
        inst.write(
            "buffer_size_kb",
            &kstate_record::DEFAULT_BUFFER_KIB.to_string(),
        )?;
        inst.write("trace_clock", "mono")?;
        let _ = inst.write(
            "buffer_subbuf_size_kb",
            &kstate_record::default_subbuf_kib(kstate_record::DEFAULT_BUFFER_KIB).to_string(),
        );
        if pid_filter {
            // The workload is our child: event-fork lets it inherit our place in the list.
            inst.write("options/event-fork", "1")?;
            inst.write("set_event_pid", &std::process::id().to_string())?;
        }
        inst.write("events/raw_syscalls/enable", "1")?;
        inst.write("tracing_on", "1")
    };
    setup().map_err(|e| err(e.to_string()))?;
    let r = untraced(exe, a);
    inst.remove().map_err(|e| err(e.to_string()))?;
    r
}

fn kstate_row(exe: &Path, a: &Args, out: &Path) -> Result<Sample, Error> {
    let mut cmd = Command::new(exe);
    cmd.args(["record", "--json", "-e", "syscall", "-o"])
        .arg(out)
        .arg("--")
        .args(workload_cmd(exe, a));
    let stdout = run_cmd(&mut cmd)?;
    let _ = std::fs::remove_file(out);
    let v = json_lines(&stdout);
    let [w, s] = &v[..] else {
        return Err(err(format!("unexpected kstate record output: {stdout}")));
    };
    let (ns, cpu) = parse_workload(w)?;
    Ok(Sample {
        ns_per_call: ns,
        workload_cpu_ns: cpu,
        events: s["events"].as_u64(),
        lost: s["lost"].as_u64(),
        recorder_cpu_ns: s["recording_cpu_ns"].as_u64(),
        recorder_total_cpu_ns: s["recorder_cpu_ns"].as_u64(),
    })
}

/// `kstate watch --json`: the workload's line and one line per interval (their CPU
/// activity: events and losses) share its standard output. Its CPU is all of it, the
/// file written at the end included, as for `perf` (compare with kstate record's total).
fn watch_row(exe: &Path, a: &Args) -> Result<Sample, Error> {
    let before = children_cpu_ns();
    let mut cmd = Command::new(exe);
    cmd.args(["watch", "--json", "-e", "syscall", "--"])
        .args(workload_cmd(exe, a));
    let stdout = run_cmd(&mut cmd)?;
    let total = children_cpu_ns() - before;
    let v = json_lines(&stdout);
    let w = v
        .iter()
        .find(|l| l.get("ns_per_call").is_some())
        .ok_or_else(|| err(format!("no workload output under kstate watch: {stdout}")))?;
    let (ns, cpu) = parse_workload(w)?;
    let cpus = v
        .iter()
        .flat_map(|l| l["cpus"].as_array().into_iter().flatten());
    let (mut events, mut lost) = (0, Some(0u64));
    for c in cpus {
        events += c["events"].as_u64().unwrap_or(0);
        lost = lost.zip(c["lost"].as_u64()).map(|(a, b)| a + b);
    }
    Ok(Sample {
        ns_per_call: ns,
        workload_cpu_ns: cpu,
        events: Some(events),
        lost,
        recorder_cpu_ns: None,
        recorder_total_cpu_ns: Some(total.saturating_sub(cpu)),
    })
}

fn perf_row(exe: &Path, a: &Args, out: &Path) -> Result<Sample, Error> {
    let before = children_cpu_ns();
    let mut cmd = Command::new("perf");
    // No build-id collection at the end: perf's cost is then its recording alone.
    cmd.args([
        "record",
        "-q",
        "--no-buildid",
        "--no-buildid-cache",
        "-e",
        "raw_syscalls:*",
        "-o",
    ])
    .arg(out)
    .arg("--")
    .args(workload_cmd(exe, a));
    let stdout = run_cmd(&mut cmd)?;
    let total = children_cpu_ns() - before;
    let v = json_lines(&stdout);
    let (ns, cpu) = parse_workload(
        v.first()
            .ok_or_else(|| err("no workload output under perf"))?,
    )?;
    let (events, lost) = perf_stats(out)?;
    let _ = std::fs::remove_file(out);
    Ok(Sample {
        ns_per_call: ns,
        workload_cpu_ns: cpu,
        events: Some(events),
        lost: Some(lost),
        recorder_cpu_ns: Some(total.saturating_sub(cpu)),
        recorder_total_cpu_ns: None,
    })
}

/// Samples and lost-event records from `perf report --stats`.
fn perf_stats(file: &Path) -> Result<(u64, u64), Error> {
    let out = Command::new("perf")
        .args(["report", "--stats", "-i"])
        .arg(file)
        .output()
        .map_err(|e| err(format!("perf report: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let count = |label: &str| -> u64 {
        // The aggregated block comes first; per-event blocks repeat SAMPLE.
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Ok((count("SAMPLE events"), count("LOST events")))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Row {
    name: &'static str,
    samples: Vec<Sample>,
}

impl Row {
    fn ns(&self) -> f64 {
        median(self.samples.iter().map(|s| s.ns_per_call).collect())
    }
    fn opt(&self, f: impl Fn(&Sample) -> Option<u64>) -> Option<f64> {
        let v: Vec<f64> = self
            .samples
            .iter()
            .filter_map(|s| f(s).map(|x| x as f64))
            .collect();
        (!v.is_empty()).then(|| median(v))
    }
    fn max(&self, f: impl Fn(&Sample) -> Option<u64>) -> Option<u64> {
        self.samples.iter().filter_map(f).max()
    }
    fn workload_cpu(&self) -> f64 {
        median(
            self.samples
                .iter()
                .map(|s| s.workload_cpu_ns as f64)
                .collect(),
        )
    }
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let dir = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    let kout = dir.join(format!(".kstate-bench-{}.dat", std::process::id()));
    let pout = dir.join(format!(".kstate-bench-{}.perf.data", std::process::id()));
    let names: &[&'static str] = &[
        "no tracer",
        "events enabled, nothing read",
        "same + pid filter, nothing read",
        "kstate record -e syscall",
        "kstate watch -e syscall",
        "perf record -e raw_syscalls:*",
    ];
    let names = if a.no_peer { &names[..5] } else { names };
    let mut rows: Vec<Row> = names
        .iter()
        .map(|n| Row {
            name: n,
            samples: Vec::new(),
        })
        .collect();
    // Rows interleaved run by run, so a slow spell of the machine hits all of them.
    for run in 0..a.runs.max(1) {
        eprintln!("kstate bench record: run {}/{}", run + 1, a.runs.max(1));
        for (i, row) in rows.iter_mut().enumerate() {
            let s = match i {
                0 => untraced(&exe, &a)?,
                1 => enabled_unread(&exe, &a, false)?,
                2 => enabled_unread(&exe, &a, true)?,
                3 => kstate_row(&exe, &a, &kout)?,
                4 => watch_row(&exe, &a)?,
                _ => perf_row(&exe, &a, &pout)?,
            };
            row.samples.push(s);
        }
    }
    let base = rows[0].ns();
    let kernel = rows[1].ns();
    let kernel_filtered = rows[2].ns();
    let k = &rows[3];
    let over_kernel = (k.ns() - kernel) / kernel * 100.0;
    let over_filtered = (k.ns() - kernel_filtered) / kernel_filtered * 100.0;
    let k_cpu_share = k.opt(|s| s.recorder_cpu_ns).unwrap_or(0.0) / k.workload_cpu() * 100.0;
    // Watch against record, both measured in this run: per call, and the recorder CPU
    // (all of it, the file included, for both) per event.
    let w = &rows[4];
    let watch_over_record = (w.ns() - k.ns()) / k.ns() * 100.0;
    let per_event = |r: &Row| {
        r.opt(|s| s.recorder_total_cpu_ns).unwrap_or(0.0)
            / r.opt(|s| s.events).unwrap_or(1.0).max(1.0)
    };
    let live_ns_per_event = per_event(w) - per_event(k);

    if a.json {
        let rows_json: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "row": r.name,
                    "ns_per_call": r.ns(),
                    "slowdown": r.ns() / base,
                    "events": r.opt(|s| s.events),
                    "lost_max": r.max(|s| s.lost),
                    "recorder_cpu_ns": r.opt(|s| s.recorder_cpu_ns),
                    "recorder_total_cpu_ns": r.opt(|s| s.recorder_total_cpu_ns),
                    "workload_cpu_ns": r.workload_cpu(),
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "calls": a.calls, "runs": a.runs, "cpu": a.cpu,
                "rows": rows_json,
                "kstate_over_enabled_pct": over_kernel,
                "kstate_over_enabled_pid_filter_pct": over_filtered,
                "kstate_recorder_cpu_pct_of_workload": k_cpu_share,
                "watch_over_record_pct": watch_over_record,
                "watch_live_analysis_cpu_ns_per_event": live_ns_per_event,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "workload: {} getppid calls pinned to CPU {}; median of {} runs per row; buffer {} KiB per CPU",
        a.calls,
        a.cpu,
        a.runs.max(1),
        kstate_record::DEFAULT_BUFFER_KIB
    );
    println!();
    println!(
        "{:<32} {:>9} {:>9} {:>10} {:>8} {:>22}",
        "row", "ns/call", "slowdown", "events", "lost", "recorder CPU (% wkld)"
    );
    for r in &rows {
        let cpu = match r.opt(|s| s.recorder_cpu_ns) {
            Some(c) => format!("{:.3} s ({:.1}%)", c / 1e9, c / r.workload_cpu() * 100.0),
            None => "-".into(),
        };
        println!(
            "{:<32} {:>9.1} {:>8.2}x {:>10} {:>8} {:>22}",
            r.name,
            r.ns(),
            r.ns() / base,
            r.opt(|s| s.events)
                .map_or("-".into(), |e| format!("{e:.0}")),
            r.max(|s| s.lost).map_or("-".into(), |l| l.to_string()),
            cpu
        );
    }
    println!();
    println!(
        "kstate: {:+.1}% per call over the tracepoints' own cost with the same pid filter \
         (target <= 10%; {:+.1}% over the unfiltered events); \
         recorder CPU while recording {:.1}% of the workload's (target < 5%); \
         {:.3} s in all with writing the file",
        over_filtered,
        over_kernel,
        k_cpu_share,
        k.opt(|s| s.recorder_total_cpu_ns).unwrap_or(0.0) / 1e9
    );
    println!(
        "kstate watch: {:+.1}% per call over kstate record (target within 10%); live analysis \
         {:.0} ns of recorder CPU per event over record's ({:.0} vs {:.0} ns, each with writing \
         the file); {} events lost",
        watch_over_record,
        live_ns_per_event,
        per_event(w),
        per_event(k),
        w.max(|s| s.lost)
            .map_or("uncounted".into(), |l| l.to_string())
    );
    if rows.len() > 5 {
        println!(
            "perf: {:.2}x kstate record's time per call, {:.2}x kstate watch's; lost-event \
             records: {} (perf's \"lost\" column counts PERF_RECORD_LOST records, each dropping many events)",
            rows[5].ns() / k.ns(),
            rows[5].ns() / w.ns(),
            rows[5].max(|s| s.lost).unwrap_or(0)
        );
    }
    Ok(ExitCode::SUCCESS)
}
