//! perf.data read straight into the analysis (no pages built): on real recordings made at
//! test time, every analyzer, `dump` and `info` give exactly what the pages path gives
//! (`KSTATE_PERF_PAGES` selects it), losses included, and the counts match perf's own.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

/// `kstate ARGS` with the perf.data read straight (`paged` false) or through pages.
fn kstate(args: &[&str], paged: bool) -> String {
    let mut c = Command::new(KSTATE);
    c.args(args).env_remove("KSTATE_PERF_PAGES");
    if paged {
        c.env("KSTATE_PERF_PAGES", "1");
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "kstate {} (paged: {paged}): {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Both paths' output of `kstate ARGS`, which must be the same.
fn same(args: &[&str]) -> String {
    let direct = kstate(args, false);
    let paged = kstate(args, true);
    assert!(
        direct == paged,
        "kstate {}: the direct read differs from the pages",
        args.join(" ")
    );
    direct
}

const SCHED: &[&str] = &[
    "-e",
    "raw_syscalls:*",
    "-e",
    "sched:sched_switch",
    "-e",
    "sched:sched_wakeup",
    "-e",
    "sched:sched_wakeup_new",
    "-e",
    "sched:sched_migrate_task",
    "-e",
    "sched:sched_process_fork",
    "-e",
    "sched:sched_process_exit",
];

/// Every analyzer the events allow, in statistics and distribution modes and as a log,
/// plus `dump --json` and `info --json`: identical on both paths. Returns the syscall
/// statistics.
fn agree(f: &Path) -> Value {
    let f = f.to_str().unwrap();
    for a in ["offcpu", "runq", "proc", "microstate"] {
        let v: Value = serde_json::from_str(&same(&["analyze", a, "--format", "json", f])).unwrap();
        assert!(v["events_read"].as_u64().unwrap() > 0, "{a}: {v}");
    }
    same(&["analyze", "syscall", "--dist", "--format", "json", f]);
    let log = same(&["analyze", "syscall", "--log", "--format", "json", f]);
    assert!(
        log.lines().count() > 1000,
        "{} log lines",
        log.lines().count()
    );
    let dump = same(&["dump", "--json", f]);
    assert!(dump.lines().count() > 2000);
    // The same, but for the pages the direct read does not build (and counts as none).
    let info = |paged| {
        let mut v: Value = serde_json::from_str(&kstate(&["info", "--json", f], paged)).unwrap();
        let mut pages = Vec::new();
        for c in v["per_cpu"].as_array_mut().unwrap() {
            pages.push(c.as_object_mut().unwrap().remove("pages").unwrap());
        }
        (v, pages)
    };
    let (direct, pages) = info(false);
    let (paged, built) = info(true);
    assert_eq!(direct, paged);
    // A scheduler event from an interrupt between a sample's timestamp and its place in
    // the buffer puts a CPU's records out of time order (CI's load did it with -a); such
    // a file is read by the sorting reader, through pages. The direct path itself is
    // asserted where no event comes from interrupts (raw_syscalls only, below).
    if !pages.iter().all(Value::is_null) {
        eprintln!("{}: read by the sorting reader (pages {pages:?})", f);
    }
    assert!(built.iter().all(|p| p.as_u64().unwrap() > 0), "{built:?}");
    serde_json::from_str(&same(&[
        "analyze", "syscall", "--stat", "--format", "json", f,
    ]))
    .unwrap()
}

fn count(v: &Value, key: &str) -> u64 {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .map_or(0, |r| r["count"].as_u64().unwrap())
}

#[test]
fn direct_reads_give_what_pages_give() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    // System-wide: a per-task recording's wake-ups are written to the wakee's buffer on
    // another CPU, so a CPU's records can fall out of time order and the file then goes
    // to the sorting reader (pages) instead of the direct one (once in three runs).
    let mut args = vec!["-a", "-m", "2048"];
    args.extend_from_slice(SCHED);
    let scratch = dir.path().to_str().unwrap();
    support::perf_record(
        &f,
        &args,
        false,
        &[KSTATE, "workload", "demo", "--dir", scratch],
    );
    let v = agree(&f);
    assert!(v["events_read"].as_u64().unwrap() > 5000, "{v}");
    assert_eq!(v["lost"], Value::Null, "{v}");
}

/// A one-page perf buffer under a system-call storm loses samples: the losses are the same
/// on both paths, where they fall (pairs broken by them) and in total, and the total is
/// what perf reports.
#[test]
fn direct_reads_give_the_same_losses() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    let mut args = vec!["-m", "1"];
    args.extend_from_slice(SCHED);
    support::perf_record(&f, &args, false, &[KSTATE, "workload", "getppid", "200000"]);
    // System calls only: the storm's fork and exit events may all be lost, and then the
    // proc analyzer has nothing to run on.
    let v = agree_syscall_only(&f);
    let info: Value =
        serde_json::from_str(&kstate(&["info", "--json", f.to_str().unwrap()], false)).unwrap();
    let perf_lost = support::perf_lost(&f);
    assert!(perf_lost > 0, "perf lost nothing with a one-page buffer");
    assert_eq!(info["lost_total"].as_u64().unwrap(), perf_lost);
    assert!(
        v["pairs"]["broken_by_loss"].as_u64().unwrap() > 0,
        "{}",
        v["pairs"]
    );
    assert!(count(&v, "getppid") < 200_000);
}

/// A pipe-mode perf.data (`perf record -o -`) holds its tracing data in a record inside
/// the data section: read straight, it gives the same as through pages, and every call.
#[test]
fn direct_reads_of_a_pipe_mode_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    support::perf_record(
        &f,
        &["-m", "2048", "-e", "raw_syscalls:*"],
        true,
        &[KSTATE, "workload", "getppid", "3000"],
    );
    let v = agree_syscall_only(&f);
    assert_eq!(count(&v, "getppid"), 3000);
    // No event here comes from an interrupt, so every CPU's records are in time order
    // and read straight: no pages built.
    let info: Value =
        serde_json::from_str(&kstate(&["info", "--json", f.to_str().unwrap()], false)).unwrap();
    for c in info["per_cpu"].as_array().unwrap() {
        assert!(c["pages"].is_null(), "{c}");
    }
}

fn agree_syscall_only(f: &Path) -> Value {
    let f = f.to_str().unwrap();
    same(&["dump", "--json", f]);
    same(&["analyze", "syscall", "--log", "--format", "json", f]);
    serde_json::from_str(&same(&[
        "analyze", "syscall", "--stat", "--format", "json", f,
    ]))
    .unwrap()
}
