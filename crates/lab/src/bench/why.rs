//! `kstate bench why FILE`: the critical-path walk's speed and memory next to `kstate
//! analyze offcpu --stat` (the scheduler analyzer it stands beside) on the same file, in
//! the same run: wall time, CPU time, the file's events per second and peak RSS. The
//! thread is `--tid`, else the one switched most (`kstate why` then names it).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use super::{measure, Measured};
use crate::Error;

#[derive(clap::Args)]
pub struct Args {
    /// A recording with scheduler events (kstate record -e why), large: 10 M events or more
    file: PathBuf,
    /// The thread whose path is walked (default: the one switched most)
    #[arg(long)]
    tid: Option<i32>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// The thread switched most in `file`.
fn busiest(file: &Path) -> Result<i32, Error> {
    let trace = kstate_format::Trace::open(file)?;
    let found =
        kstate_analyze::critical::select::candidates(&trace, &Default::default(), None, None, None)
            .map_err(|e| Error::failed(e.to_string()))?;
    found
        .first()
        .map(|c| c.tid)
        .ok_or_else(|| Error::failed(format!("{}: no thread switched", file.display())))
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| Error::failed(e.to_string()))?;
    let info = super::run_cmd(Command::new(&exe).args(["info", "--json"]).arg(&a.file))?;
    let info: serde_json::Value = serde_json::from_str(&info)
        .map_err(|e| Error::failed(format!("kstate info printed invalid JSON: {e}")))?;
    let events = info["events"].as_u64().unwrap_or(0);
    let tid = match a.tid {
        Some(t) => t,
        None => busiest(&a.file)?,
    };
    // Each measured once, cold first: the order is the table's.
    let offcpu = measure(
        Command::new(&exe)
            .args([
                "analyze",
                "offcpu",
                "--stat",
                "--format",
                "json",
                "--threads",
                "1",
            ])
            .arg(&a.file),
        false,
    )?;
    let why = measure(
        Command::new(&exe)
            .args(["why", "--format", "json", "--tid", &tid.to_string()])
            .arg(&a.file),
        true,
    )?;
    let v: serde_json::Value = serde_json::from_str(&why.stdout)
        .map_err(|e| Error::failed(format!("kstate why printed invalid JSON: {e}")))?;
    // The path's segments as the walk found them (the JSON lists at most --max-segments).
    let segments = v["segments_total"].as_u64().unwrap_or(0);
    let rate = |m: &Measured| events as f64 / m.secs;
    if a.json {
        let row = |m: &Measured| {
            serde_json::json!({"seconds": m.secs, "cpu_seconds": m.cpu_secs,
                "events_per_sec": rate(m), "max_rss_kib": m.max_rss_kib})
        };
        let out = serde_json::json!({
            "file": a.file.display().to_string(), "events": events, "tid": tid,
            "path_segments": segments, "why_events_read": v["events_read"],
            "offcpu": row(&offcpu), "why": row(&why),
        });
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("file:    {}  ({events} events)", a.file.display());
    println!(
        "thread:  {}-{tid}, a path of {segments} segments over {} events read",
        v["comm"].as_str().unwrap_or("?"),
        v["events_read"]
    );
    println!(
        "\n{:<36} {:>9} {:>9} {:>14} {:>10}",
        "command", "seconds", "CPU s", "file events/s", "peak RSS"
    );
    for (name, m) in [
        ("kstate analyze offcpu --stat", &offcpu),
        ("kstate why --tid", &why),
    ] {
        println!(
            "{name:<36} {:>9.3} {:>9.3} {:>14.0} {:>6} MiB",
            m.secs,
            m.cpu_secs,
            rate(m),
            m.max_rss_kib / 1024
        );
    }
    Ok(ExitCode::SUCCESS)
}
