//! `kstate bench analyze` on a perf.data: `kstate analyze syscall --stat` read straight
//! from the file on every core and on one thread, and through the pages the older path
//! built (`KSTATE_PERF_PAGES`), next to
//! the peers a perf user has on the same file: `perf trace -s` (the same per-call summary)
//! and `perf script` (decoding every event to text), in the same run, as ratios.

use std::path::Path;
use std::process::{Command, ExitCode};

use crate::Error;

use super::{measure, Measured};

/// Whether `file` is a perf.data written to a file (its magic).
pub fn is_perf_data(file: &Path) -> bool {
    use std::io::Read;
    let mut m = [0u8; 8];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut m))
        .is_ok()
        && &m == kstate_format::perf::MAGIC
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// The fastest of `runs` runs of `cmd()`.
fn fastest(runs: u32, keep: bool, cmd: &mut dyn FnMut() -> Command) -> Result<Measured, Error> {
    let mut best: Option<Measured> = None;
    for _ in 0..runs {
        let m = measure(&mut cmd(), keep)?;
        if best.as_ref().is_none_or(|b| m.secs < b.secs) {
            best = Some(m);
        }
    }
    Ok(best.expect("runs >= 1"))
}

/// Refuses a file that is not a perf.data, by name.
pub(super) fn check_perf_data(file: &Path) -> Result<(), Error> {
    match is_perf_data(file) {
        true => Ok(()),
        false => Err(Error::failed(format!(
            "{}: not a perf.data file (no PERFILE2 magic)",
            file.display()
        ))),
    }
}

/// `perf script` on `file` (once: it is slow), and the samples it holds, as `perf report
/// --stats` counts them: the peer `bench analyze --perf-script` compares rates with.
pub(super) fn script_rate(file: &Path) -> Result<(u64, Measured), Error> {
    check_perf_data(file)?;
    let stats = super::run_cmd(
        Command::new("perf")
            .args(["report", "--stats", "-i"])
            .arg(file),
    )?;
    // The first SAMPLE line is the file's total ("Aggregated stats"), before any per-event
    // breakdown.
    let events = stats
        .lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("SAMPLE events:")?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .ok_or_else(|| {
            Error::failed(format!(
                "perf report --stats -i {} counted no SAMPLE events",
                file.display()
            ))
        })?;
    let m = measure(
        Command::new("sh")
            .arg("-c")
            .arg(format!("perf script -i {} >/dev/null 2>&1", quoted(file))),
        false,
    )?;
    Ok((events, m))
}

pub fn analyze(file: &Path, runs: u32, no_peer: bool, json: bool) -> Result<ExitCode, Error> {
    if !no_peer {
        super::require("perf", "linux-perf")?;
    }
    let exe = std::env::current_exe().map_err(|e| Error::failed(e.to_string()))?;
    // Every core (each CPU decoded on its own thread) unless `one`.
    let kstate = |paged: bool, one: bool| {
        let exe = exe.clone();
        move || {
            let mut c = Command::new(&exe);
            c.args(["analyze", "syscall", "--stat", "--format", "json"])
                .arg(file)
                .env_remove(kstate_format::perf::PAGES_ENV);
            if one {
                c.args(["--threads", "1"]);
            }
            if paged {
                c.env(kstate_format::perf::PAGES_ENV, "1");
            }
            c
        }
    };
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_before = load();
    let direct = fastest(runs, true, &mut kstate(false, false))?;
    let one = fastest(runs, false, &mut kstate(false, true))?;
    let paged = fastest(runs, false, &mut kstate(true, true))?;
    let v: serde_json::Value = serde_json::from_str(&direct.stdout)
        .map_err(|e| Error::failed(format!("kstate analyze printed invalid JSON: {e}")))?;
    let events = v["events_read"].as_u64().unwrap_or(0);
    // perf prints its summary on stderr and its events on stdout: both are discarded.
    let sh = |script: String| {
        move || {
            let mut c = Command::new("sh");
            c.arg("-c").arg(&script);
            c
        }
    };
    let peers = if no_peer {
        Vec::new()
    } else {
        let f = quoted(file);
        vec![
            (
                "perf trace -s",
                fastest(
                    runs,
                    false,
                    &mut sh(format!("perf trace -i {f} -s >/dev/null 2>&1")),
                )?,
            ),
            (
                "perf script",
                fastest(
                    runs,
                    false,
                    &mut sh(format!("perf script -i {f} >/dev/null 2>&1")),
                )?,
            ),
        ]
    };
    let load_after = load();
    let rate = |m: &Measured| events as f64 / m.secs;
    if json {
        let row = |m: &Measured| {
            serde_json::json!({"seconds": m.secs, "cpu_seconds": m.cpu_secs,
                "events_per_sec": rate(m), "max_rss_kib": m.max_rss_kib,
                "kstate_speedup": m.secs / direct.secs})
        };
        let mut out = serde_json::json!({
            "file": file.display().to_string(), "events": events, "runs": runs,
            "loadavg_before": load_before.trim(), "loadavg_after": load_after.trim(),
            "kstate": row(&direct), "kstate_one_thread": row(&one), "kstate_pages": row(&paged),
        });
        for (name, m) in &peers {
            out[name.replace([' ', '-'], "_").replace("__", "_")] = row(m);
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("plain values")
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("file:    {}  ({events} events, perf.data)", file.display());
    println!("task:    system-call time per call (analyze syscall --stat; perf trace -s)");
    println!(
        "machine: load average {} before, {} after; best of {runs} runs each\n",
        load_before
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        load_after
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:<34} {:>9} {:>9} {:>14} {:>10} {:>12}",
        "reader", "seconds", "CPU s", "events/s", "peak RSS", "kstate is"
    );
    let line = |name: &str, m: &Measured| {
        println!(
            "{:<34} {:>9.3} {:>9.3} {:>14.0} {:>6} MiB {:>11.1}x",
            name,
            m.secs,
            m.cpu_secs,
            rate(m),
            m.max_rss_kib / 1024,
            m.secs / direct.secs
        );
    };
    line("kstate analyze syscall --stat", &direct);
    line("  the same on one thread", &one);
    line("  one thread, through built pages", &paged);
    for (name, m) in &peers {
        line(name, m);
    }
    Ok(ExitCode::SUCCESS)
}
