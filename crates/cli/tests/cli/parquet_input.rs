//! A directory written by `kstate convert --to parquet` read back as a trace: every
//! command gives on it exactly what it gives on the trace it was converted from (only the
//! file name differs, and `info`'s container fields). Parquet is in the default build;
//! built without it (`--no-default-features`), the directory is recognised and refused
//! with a clear message.

use crate::support;

#[cfg(feature = "parquet")]
use serde_json::Value;
#[cfg(feature = "parquet")]
use std::path::Path;
use std::process::Command;

use support::KSTATE;

/// `v` without the fields that name the input or its container.
#[cfg(feature = "parquet")]
fn strip(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        for k in ["file", "kind", "version", "compression"] {
            o.remove(k);
        }
        if let Some(cpus) = o.get_mut("per_cpu").and_then(Value::as_array_mut) {
            for c in cpus {
                // How the container stored the events, not what they are: the bytes of
                // page data, and the pages. The recorder's pages are as full as they were
                // when its reader took them (partly filled wherever it caught up with the
                // kernel, and at the stop); the rebuild fills its pages in one pass, and a
                // Parquet table keeps no page boundaries. On one recording here: 9 and 2
                // pages on CPUs 0 and 1, rebuilt as 8 and 1; on another, 11 and 2 rebuilt as
                // 11 and 1. The events, their times and losses per CPU are compared.
                let c = c.as_object_mut().unwrap();
                c.remove("bytes");
                c.remove("pages");
            }
        }
    }
    v
}

#[cfg(feature = "parquet")]
fn convert(file: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    support::kstate(&[
        "convert".as_ref(),
        file.as_os_str(),
        "--to".as_ref(),
        "parquet".as_ref(),
        "--analyzers".as_ref(),
        "none".as_ref(),
        "-o".as_ref(),
        dir.path().as_os_str(),
    ]);
    dir
}

/// `v` without what a window-local pass counts over the pages it read around the window
/// (events read, pairs outside the filters, unmatched, open at the end, and the note
/// saying so): the trace's pages and the rebuilt ones start at other events. On one
/// recording of 701 k events, `--window 0.01:0.05` read 701,448 events of the trace and
/// 701,450 of the rebuild, with the same rows.
#[cfg(feature = "parquet")]
fn stretch_counts_out(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("events_read");
        if let Some(p) = o.get_mut("pairs").and_then(Value::as_object_mut) {
            for k in ["filtered_out", "unmatched", "open_at_end"] {
                p.remove(k);
            }
        }
        if let Some(n) = o.get_mut("notes").and_then(Value::as_array_mut) {
            n.retain(|n| !n.as_str().is_some_and(|n| n.starts_with("read from @")));
        }
    }
    v
}

/// `kstate ARGS... FILE` on the trace and on its conversion, as JSON, must be equal.
#[cfg(feature = "parquet")]
fn same_json(trace: &Path, dir: &Path, args: &[&str]) -> Value {
    let run = |f: &Path| {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        a.insert(2.min(a.len()), f.as_os_str());
        let v = strip(support::kstate_json(&a));
        if args.contains(&"--window") {
            stretch_counts_out(v)
        } else {
            v
        }
    };
    let want = run(trace);
    let got = run(dir);
    if let Some(d) = first_difference(&want, &got, String::new()) {
        // The whole outputs run to kilobytes; where they part is what explains a failure.
        panic!("kstate {} differs: {d}", args.join(" "));
    }
    want
}

/// Where `a` (the trace's answer) and `b` (the directory's) first part: a JSON path and
/// the two values there.
#[cfg(feature = "parquet")]
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (u, v) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if let Some(d) = first_difference(u, v, format!("{at}.{k}")) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => {
            let cut = |v: &Value| v.to_string().chars().take(600).collect::<String>();
            Some(format!("at {at}: trace {} / parquet {}", cut(a), cut(b)))
        }
    }
}

/// `kstate dump --json` (NDJSON) on both, byte for byte.
#[cfg(feature = "parquet")]
fn same_dump(trace: &Path, dir: &Path, extra: &[&str]) -> usize {
    let run = |f: &Path| {
        let mut a: Vec<&std::ffi::OsStr> = vec!["dump".as_ref(), f.as_os_str()];
        a.extend(extra.iter().map(|x| x.as_ref() as &std::ffi::OsStr));
        support::kstate(&a)
    };
    let want = run(trace);
    let got = run(dir);
    if got != want {
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
        let i = w.iter().zip(&g).take_while(|(a, b)| a == b).count();
        panic!(
            "kstate dump {} differs at line {} of {} (parquet: {} lines):\ntrace:   {:?}\nparquet: {:?}",
            extra.join(" "),
            i + 1,
            w.len(),
            g.len(),
            w.get(i),
            g.get(i)
        );
    }
    want.lines().count()
}

/// A recording of this machine: system calls, scheduling and futex contention while
/// kstate's sleep and mutex-fight workloads run on CPU 0.
#[cfg(feature = "parquet")]
fn recording(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("rec.dat");
    let o = Command::new(KSTATE)
        .args(["record", "-e", "sched,syscall,futex", "-a"])
        .args(["--sysinfo-interval", "0", "-o"])
        .arg(&f)
        .args(["--", "taskset", "-c", "0", "sh", "-c"])
        .arg(format!(
            "{KSTATE} workload sleep 10 2 && {KSTATE} workload mutex-fight --threads 3 --iters 2000"
        ))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "kstate record: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    f
}

#[cfg(feature = "parquet")]
#[test]
fn analyzers_dump_and_info_on_the_parquet_directory_equal_the_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = recording(tmp.path());
    let out = convert(&rec);
    let dir = out.path();
    let stat = same_json(
        &rec,
        dir,
        &["analyze", "syscall", "--stat", "--format", "json"],
    );
    let rows = stat["rows"].as_array().unwrap();
    let count = |key: &str| {
        rows.iter()
            .find(|r| r["key"] == key)
            .map_or(0, |r| r["count"].as_u64().unwrap())
    };
    assert!(count("clock_nanosleep") >= 10, "{stat}");
    assert!(count("futex") > 0, "{stat}");
    let futex = same_json(
        &rec,
        dir,
        &["analyze", "futex", "--stat", "--format", "json"],
    );
    assert!(!futex["rows"].as_array().unwrap().is_empty(), "{futex}");
    same_json(&rec, dir, &["analyze", "runq", "--log", "--format", "json"]);
    same_json(
        &rec,
        dir,
        &["analyze", "offcpu", "--stat", "--format", "json"],
    );
    // Re-filtering, the point of the intermediate files: comm, time window, CPU.
    same_json(
        &rec,
        dir,
        &["analyze", "syscall", "--comm", "kstate", "--format", "json"],
    );
    same_json(
        &rec,
        dir,
        &[
            "analyze",
            "syscall",
            "--window",
            "0.01:0.05",
            "--format",
            "json",
        ],
    );
    same_json(
        &rec,
        dir,
        &["analyze", "runq", "--cpu", "0", "--format", "json"],
    );
    let info = same_json(&rec, dir, &["info", "--json"]);
    assert!(info["events"].as_u64().unwrap() > 1000, "{info}");
    // kstate's own sections come back: the recording's command and its process table.
    assert!(info["recording"].is_object() && info["processes"].as_u64() > Some(0));
    assert!(same_dump(&rec, dir, &["--json", "--events", "sched_switch,sys_exit"]) > 100);
    same_dump(&rec, dir, &[]);
    // The directory of one host, as well as the -o directory above it.
    let host = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    same_json(&rec, &host, &["analyze", "syscall", "--format", "json"]);
}

/// A trace recorded elsewhere by trace-cmd (LISA's sched_load): its own events (PELT
/// signals, frequency, idle, print) and text dump come back byte for byte.
#[cfg(feature = "parquet")]
#[test]
fn a_trace_cmd_fixture_round_trips_through_parquet() {
    let f = support::fixture("lisa-sched_load/trace.dat");
    assert!(f.is_file(), "fixture missing: {}", f.display());
    let out = convert(&f);
    let info = same_json(&f, out.path(), &["info", "--json"]);
    assert_eq!(info["events"], 3724);
    for a in ["runq", "offcpu", "microstate"] {
        same_json(&f, out.path(), &["analyze", a, "--format", "json"]);
    }
    assert_eq!(same_dump(&f, out.path(), &["--json"]), 3724);
    // The text form prints print events' strings and every field as trace-cmd does.
    same_dump(&f, out.path(), &[]);
}

/// Tables of an older conversion (no `_kstate.parquet`) are not a trace; a damaged
/// metadata file is an error naming it, not a panic.
#[cfg(feature = "parquet")]
#[test]
fn a_damaged_metadata_file_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("_kstate.parquet"), b"not parquet").unwrap();
    let o = Command::new(KSTATE)
        .args(["info"])
        .arg(d.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("_kstate.parquet"), "{err}");
}

#[cfg(not(feature = "parquet"))]
#[test]
fn without_the_feature_a_parquet_directory_is_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    let host = d.path().join("host=x");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("_kstate.parquet"), b"").unwrap();
    let o = Command::new(KSTATE)
        .args(["analyze", "syscall"])
        .arg(d.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("kstate Parquet directory") && err.contains("--features parquet"),
        "{err}"
    );
}
