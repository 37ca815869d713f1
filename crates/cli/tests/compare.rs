//! `kstate compare` on two live recordings of the O_DIRECT writers: one writer alone,
//! then six sharing the disk, the same number of writes in all. Each of the six waits
//! behind the others' requests, so a write takes longer on average: `write` must be
//! flagged as regressed by its average, and --threshold must turn that into exit status
//! 3. (The average, not p99: on a machine whose disk other jobs share, one writer's p99
//! is their stray slow writes; the average is the contention the six writers make.)
//! Needs root and tracefs; never skips.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod support;

use support::{record_direct_writers, KSTATE};

const WRITES: u64 = 200;

/// One writer's or six writers' 6 x WRITES 256 KiB blocks in all: as many samples on each
/// side, so that a p99 is not one stray slow write on a busy machine. Only the workload's
/// system calls are recorded: other kstate processes on the machine stay out.
fn record(dir: &Path, threads: u64) -> std::path::PathBuf {
    let count = 6 * WRITES / threads;
    record_direct_writers(
        "syscall",
        false,
        dir,
        &format!("w{threads}"),
        threads,
        count,
        256 << 10,
    )
}

fn compare(a: &Path, b: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(KSTATE)
        .arg("compare")
        .args([a, b])
        .args(extra)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn six_writers_regress_write_p99_against_one() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let one = record(dir.path(), 1);
    let six = record(dir.path(), 6);
    let only_write = ["--analyzer", "syscall", "--key", "write", "--metric", "avg"];
    let (code, json) = compare(
        &one,
        &six,
        &[&only_write[..], &["--format", "json"]].concat(),
    );
    assert_eq!(
        code,
        Some(0),
        "without --threshold the status is 0:\n{json}"
    );
    let v: Value = serde_json::from_str(&json).unwrap();
    let row = &v["analyzers"][0]["rows"][0];
    assert_eq!(row["key"], "write");
    // The workload's own writes (plus the line each run prints at the end).
    let (na, nb) = (
        row["a"]["count"].as_u64().unwrap(),
        row["b"]["count"].as_u64().unwrap(),
    );
    assert!(
        (6 * WRITES..=6 * WRITES + 2).contains(&na),
        "{na} writes by one writer"
    );
    assert!(
        (6 * WRITES..=6 * WRITES + 2).contains(&nb),
        "{nb} writes by six"
    );
    assert_eq!(v["metric"], "avg");
    assert_eq!(row["regressed"], true, "write avg not flagged:\n{json}");
    assert!(row["ratio"]["avg"].as_f64().unwrap() >= 1.5);
    assert_eq!(v["changes"][0]["key"], "write");

    // The same numbers `kstate analyze` prints for each recording.
    for (side, file) in [("a", &one), ("b", &six)] {
        let out = Command::new(KSTATE)
            .args(["analyze", "syscall"])
            .arg(file)
            .args(["--key", "write", "--format", "json"])
            .output()
            .unwrap();
        let s: Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &s["rows"][0];
        assert_eq!(row[side]["count"], r["count"]);
        assert_eq!(row[side]["total"], r["total_ns"]);
        assert_eq!(row[side]["p99"], r["p99_ns"]);
    }

    // The gate: exit 3 beyond the threshold, 0 when the threshold is out of reach.
    let (code, text) = compare(
        &one,
        &six,
        &[&only_write[..], &["--threshold", "1.5"]].concat(),
    );
    assert_eq!(code, Some(3), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("write") && l.ends_with("REGRESSED")),
        "{text}"
    );
    let (code, _) = compare(
        &one,
        &six,
        &[&only_write[..], &["--threshold", "1000"]].concat(),
    );
    assert_eq!(code, Some(0));
    // Reversed, the six writers are the baseline: nothing regressed.
    let (code, _) = compare(
        &six,
        &one,
        &[&only_write[..], &["--threshold", "1.5"]].concat(),
    );
    assert_eq!(code, Some(0));
    // CSV: one row per key, the header names the metrics.
    let (_, csv) = compare(
        &one,
        &six,
        &[&only_write[..], &["--format", "csv"]].concat(),
    );
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("analyzer,by,unit,key,count_a,count_b,"));
    assert!(lines
        .next()
        .unwrap()
        .starts_with(&format!("syscall,name,ns,write,{na},{nb},")));
}

#[test]
fn recordings_with_nothing_in_common_are_bad_input() {
    let fx = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/external"
    );
    let a = format!("{fx}/lisa-sched_load/trace.dat");
    let out = Command::new(KSTATE)
        .args(["compare", &a, &a, "--analyzer", "biotime"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no analyzer in common"), "{err}");
    let out = Command::new(KSTATE)
        .args(["compare", &a, "/etc/hostname"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/etc/hostname"));
}
