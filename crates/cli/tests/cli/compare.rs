//! `kstate compare` on two live recordings of the O_DIRECT writers: one writer alone,
//! then six sharing the disk, the same number of writes in all. Each of the six waits
//! behind the others' requests, so a write's p99 grows (3.1-4.3 x in three of four pairs
//! measured on this machine): `write` must be flagged as regressed by p99 (the issue's
//! wording), and --threshold must turn that into exit status 3.
//!
//! The disk is shared with other jobs, whose stray slow writes can make the one writer's
//! p99 as slow as the six's (1 pair in 4 measured: 3.79 ms against 4.04 ms, while the
//! average still grew 3.5 x; in a full run of the suite, whose other tests write too, 3
//! pairs in a row: 2.8-4.0 ms against 3.0-4.4 ms). So a pair whose p99 is not flagged is
//! recorded again, a second later, at most [`ATTEMPTS`] pairs in all; the test fails if
//! none is, and every later check is made on the pair that was. Needs root and tracefs;
//! never skips.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

use crate::support;

use support::{record_direct_writers, KSTATE};

const WRITES: u64 = 200;

/// Recording pairs tried before p99's regression is called absent (see the module's doc).
const ATTEMPTS: usize = 5;

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

/// One writer and six writers, recorded until `write`'s p99 is flagged (at most
/// [`ATTEMPTS`] pairs); the p99 figures of every pair tried, for the failure message.
fn pair_with_p99_regressed(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut tried = Vec::new();
    for n in 0..ATTEMPTS {
        if n > 0 {
            // Out of the other writer's burst, if one caused it.
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        let sub = dir.join(format!("pair{n}"));
        std::fs::create_dir_all(&sub).unwrap();
        let (one, six) = (record(&sub, 1), record(&sub, 6));
        let (_, json) = compare(
            &one,
            &six,
            &[
                "--analyzer",
                "syscall",
                "--key",
                "write",
                "--format",
                "json",
            ],
        );
        let v: Value = serde_json::from_str(&json).unwrap();
        let row = &v["analyzers"][0]["rows"][0];
        if row["regressed"] == true {
            eprintln!("write p99 flagged in pair {} of {ATTEMPTS}", n + 1);
            return (one, six);
        }
        tried.push(format!(
            "one {} ns, six {} ns",
            row["a"]["p99"], row["b"]["p99"]
        ));
    }
    panic!(
        "write p99 not flagged in {ATTEMPTS} pairs: {}",
        tried.join("; ")
    );
}

#[test]
fn six_writers_regress_write_p99_against_one() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (one, six) = pair_with_p99_regressed(dir.path());
    let only_write = ["--analyzer", "syscall", "--key", "write", "--metric", "p99"];
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
    assert_eq!(v["metric"], "p99");
    assert_eq!(row["regressed"], true, "write p99 not flagged:\n{json}");
    assert!(row["ratio"]["p99"].as_f64().unwrap() >= 1.5);
    // The contention shows in the average too (3.5-5.4 x measured).
    assert!(row["ratio"]["avg"].as_f64().unwrap() >= 1.5, "{json}");
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
    let a = support::fixture("lisa-sched_load/trace.dat")
        .display()
        .to_string();
    let out = Command::new(KSTATE)
        .args(["compare", &a, &a, "--analyzer", "biotime"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no analyzer in common"), "{err}");
    // What applies to each side, a line a side: not every analyzer's reason on one line.
    assert!(
        err.contains(&format!("\n  A {a}: no analyzer applies\n")),
        "{err}"
    );
    assert!(
        err.contains(&format!("\n  B {a}: no analyzer applies\n")),
        "{err}"
    );
    assert!(err.lines().all(|l| l.len() < 200), "{err}");
    let out = Command::new(KSTATE)
        .args(["compare", &a, "/etc/hostname"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/etc/hostname"));
}
