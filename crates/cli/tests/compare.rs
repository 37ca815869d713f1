//! `kstate compare` on two live recordings of the O_DIRECT writers: one writer alone,
//! then six sharing the disk. Each of the six waits behind the others' requests, so its
//! writes take longer: `write` p99 must be flagged as regressed, and --threshold must turn
//! that into exit status 3. Needs root and tracefs; never skips.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");
const WRITES: u64 = 200;

/// Records `threads` writers of WRITES 256 KiB blocks each, system-wide.
fn record(dir: &Path, threads: u64) -> std::path::PathBuf {
    let file = dir.join(format!("w{threads}.dat"));
    let prefix = dir.join(format!("d{threads}"));
    let out = Command::new(KSTATE)
        .args([
            "record",
            "-a",
            "--sysinfo-interval",
            "0",
            "-e",
            "syscall,bio",
            "-o",
        ])
        .arg(&file)
        .args(["--", KSTATE, "workload", "direct-writers", "--threads"])
        .arg(threads.to_string())
        .args(["--count", &WRITES.to_string(), "--size", "262144"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for i in 0..threads {
        let _ = std::fs::remove_file(format!("{}.{i}", prefix.display()));
    }
    file
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
    let only_write = [
        "--analyzer",
        "syscall",
        "--key",
        "write",
        "--comm",
        "kstate",
    ];
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
        (WRITES..=WRITES + 2).contains(&na),
        "{na} writes by one writer"
    );
    assert!(
        (6 * WRITES..=6 * WRITES + 2).contains(&nb),
        "{nb} writes by six"
    );
    assert_eq!(row["regressed"], true, "write p99 not flagged:\n{json}");
    assert!(row["ratio"]["p99"].as_f64().unwrap() >= 1.5);
    assert_eq!(v["changes"][0]["key"], "write");

    // The same numbers `kstate analyze` prints for each recording.
    for (side, file) in [("a", &one), ("b", &six)] {
        let out = Command::new(KSTATE)
            .args(["analyze", "syscall"])
            .arg(file)
            .args(["--key", "write", "--comm", "kstate", "--format", "json"])
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
