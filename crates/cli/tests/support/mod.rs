//! What the live-kernel CLI tests share: running the kstate binary and reading its output.
//! Each test file that uses it says `mod support;` and takes what it needs.
#![allow(dead_code)]

pub mod tcline;

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

pub const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

/// Runs `kstate ARGS`; panics with its stderr unless it succeeds; returns stdout.
pub fn kstate<S: AsRef<OsStr>>(args: &[S]) -> String {
    let out = Command::new(KSTATE)
        .args(args)
        .output()
        .expect("run kstate");
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    assert!(
        out.status.success(),
        "kstate {} failed: {}",
        shown.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `kstate ARGS` whose output is one JSON value.
pub fn kstate_json<S: AsRef<OsStr>>(args: &[S]) -> Value {
    let text = kstate(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{text}"))
}

/// The events of `file` (a comma list of names) as `kstate dump --json` prints them.
pub fn dump(file: &Path, events: &str) -> Vec<Value> {
    kstate(&[
        "dump".as_ref(),
        "--json".as_ref(),
        "--events".as_ref(),
        events.as_ref(),
        file.as_os_str(),
    ])
    .lines()
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

/// `trace-cmd report OPTS -i FILE`: stdout; fails (never skips) without trace-cmd.
pub fn trace_cmd_report(file: &Path, opts: &[&str]) -> String {
    let out = Command::new("trace-cmd")
        .arg("report")
        .args(opts)
        .arg("-i")
        .arg(file)
        .output()
        .expect("trace-cmd is needed by these tests: apt-get install trace-cmd");
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "trace-cmd report {} ({}): {}",
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Records `kstate workload ARGS` with `kstate record -e EVENTS` (system-wide with
/// `all`, else only the workload and its children) into `dest`; returns the workload's
/// pid.
pub fn record_workload(events: &str, workload: &[&str], all: bool, dest: &Path) -> i32 {
    let mut cmd = Command::new(KSTATE);
    cmd.args(["record", "--sysinfo-interval", "0", "-e", events, "-o"])
        .arg(dest);
    if all {
        cmd.arg("-a");
    }
    cmd.args(["--", KSTATE, "workload"]).args(workload);
    let out = cmd.output().expect("cannot run kstate record");
    assert!(
        out.status.success(),
        "kstate record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = kstate_json(&["info".as_ref(), "--json".as_ref(), dest.as_os_str()]);
    info["recording"]["workload_pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no workload pid in {}", info["recording"])) as i32
}

/// Records THREADS O_DIRECT writers of COUNT blocks of SIZE bytes each with EVENTS, into
/// DIR/NAME.dat, system-wide with `all` (block completions come from interrupts, outside
/// the workload); the data files are removed.
pub fn record_direct_writers(
    events: &str,
    all: bool,
    dir: &Path,
    name: &str,
    threads: u64,
    count: u64,
    size: u64,
) -> std::path::PathBuf {
    let file = dir.join(format!("{name}.dat"));
    let prefix = dir.join(format!("{name}-data"));
    let (t, c, s) = (threads.to_string(), count.to_string(), size.to_string());
    let p = prefix.to_str().expect("UTF-8 path");
    let args = [
        "direct-writers",
        "--threads",
        &t,
        "--count",
        &c,
        "--size",
        &s,
        p,
    ];
    record_workload(events, &args, all, &file);
    for i in 0..threads {
        let _ = std::fs::remove_file(format!("{p}.{i}"));
    }
    file
}

/// The row of `sym` in a `--compare-events` or `cachesim` JSON table.
pub fn comparison_row<'a>(c: &'a Value, sym: &str) -> &'a Value {
    c["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["symbol"] == sym)
        .unwrap_or_else(|| panic!("no row for {sym}: {c}"))
}

/// A Python with `packages` from PyPI, in a venv made once under the target directory as
/// `name` (reused while `imports` imports). Fails (never skips) when PyPI cannot be reached.
pub fn python_venv(name: &str, packages: &[&str], imports: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let py = dir.join("bin/python");
    let check = || {
        Command::new(&py)
            .args(["-c", &format!("import {imports}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if check() {
        return py;
    }
    let o = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output()
        .expect("python3 must be installed");
    assert!(
        o.status.success(),
        "python3 -m venv (python3-venv installed?): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(&py)
        .args(["-m", "pip", "install", "-q"])
        .args(packages)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pip install {} failed (is PyPI reachable?): {}",
        packages.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(check(), "venv at {} is incomplete", dir.display());
    py
}
