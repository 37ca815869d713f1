//! `kstate analyze biotime|blkqueue` on block I/O recorded from the live kernel at test
//! time (`kstate record -e bio -a`), against figures computed here from `trace-cmd
//! report -t -R` of the same file, and against what the workloads do by construction
//! (N fsync'd writes; six O_DIRECT writers of known size).
//!
//! The oracle follows the pairing rules documented in `analyzers/block.rs` and
//! `biotime.rs`: a request is its device, first sector and direction class (flushes: the
//! device alone); a completion measures the request whose issue was seen.
//! Needs root, tracefs and trace-cmd; never skips.

use crate::support;
use support::block::{in_flight, op, report, req_id, requests};
use support::{kstate, kstate_json};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

fn tmp() -> tempfile::TempDir {
    // Beside the target directory: on the real disk (not tmpfs), so writes reach a device.
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// `kstate record -e bio -a -o DEST -- kstate workload ARGS`; asserts nothing was lost.
fn record(workload: &[&str], dest: &Path) {
    let mut cmd = Command::new(KSTATE);
    cmd.args(["record", "--sysinfo-interval", "0", "-e", "bio", "-a", "-o"])
        .arg(dest)
        .args(["--", KSTATE, "workload"])
        .args(workload);
    let out = cmd.output().expect("cannot run kstate record");
    assert!(
        out.status.success(),
        "kstate record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = kstate_json(&["info", "--json", dest.to_str().unwrap()]);
    assert_eq!(
        info["lost_total"], 0,
        "events lost: {}",
        info["lost_events"]
    );
    assert_eq!(info["lost_unknown_cpus"], 0);
}

/// The whole disk holding `file` (a partition's parent): (major, minor, name).
fn disk_of(file: &Path) -> (u32, u32, String) {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(file).unwrap().dev();
    let (mut major, mut minor) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists() {
        let parent = std::fs::read_to_string(sys.join("../dev")).unwrap();
        let (a, b) = parent.trim().split_once(':').unwrap();
        (major, minor) = (a.parse().unwrap(), b.parse().unwrap());
    }
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).unwrap();
    let name = uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .unwrap()
        .to_string();
    (major, minor, name)
}

// ---- checks ------------------------------------------------------------------------------

/// `biotime --log` rows of `key` as (start, dur).
fn log_rows(file: &Path, by: &str, key: &str) -> Vec<(u64, u64)> {
    let csv = kstate(&[
        "la",
        "biotime",
        "--log",
        "--by",
        by,
        "--format",
        "csv",
        "--key",
        key,
        file.to_str().unwrap(),
    ]);
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("ts_ns,key,value,unit"));
    let mut rows: Vec<(u64, u64)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[1], key);
            assert_eq!(f[3], "ns");
            (f[0].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect();
    rows.sort();
    rows
}

/// Checks biotime and blkqueue on the writes to `data`'s disk; returns the number of
/// completed write requests measured there.
fn check_writes(file: &Path, data: &Path) -> u64 {
    let (major, minor, name) = disk_of(data);
    let kdev = ((major as u64) << 20) | minor as u64;
    let key = format!("{:08x}-W({name})", (major << 8) | minor);
    let evs = report(file);
    let (want, unmatched) = requests(&evs, kdev, 'W');
    assert!(!want.is_empty(), "no write requests on {major}:{minor}");
    let path = file.to_str().unwrap();

    // --stat: the count, and min/max/total from the same requests.
    let v = kstate_json(&["la", "biotime", "--format", "json", path]);
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key.as_str())
        .unwrap_or_else(|| panic!("no {key} row: {v}"));
    let durs: Vec<u64> = want.iter().map(|m| m.done - m.issued).collect();
    assert_eq!(row["count"], want.len() as u64, "{row}");
    assert_eq!(row["total_ns"], durs.iter().sum::<u64>());
    assert_eq!(row["min_ns"], *durs.iter().min().unwrap());
    assert_eq!(row["max_ns"], *durs.iter().max().unwrap());
    assert_eq!(row["errors"], 0);
    assert!(v["pairs"]["unmatched"].as_u64().unwrap() >= unmatched);

    // --log, both keyings: every request, exactly; issue->complete within insert->complete.
    let by_issue = log_rows(file, "issue", &key);
    let by_insert = log_rows(file, "insert", &key);
    let mut w_issue: Vec<(u64, u64)> = want.iter().map(|m| (m.issued, m.done - m.issued)).collect();
    let mut w_insert: Vec<(u64, u64)> =
        want.iter().map(|m| (m.queued, m.done - m.queued)).collect();
    w_issue.sort();
    w_insert.sort();
    assert_eq!(by_issue, w_issue);
    assert_eq!(by_insert, w_insert);
    let ends = |rows: &[(u64, u64)]| -> BTreeMap<u64, u64> {
        rows.iter().map(|(s, d)| (s + d, *d)).collect()
    };
    let (ei, eq) = (ends(&by_issue), ends(&by_insert));
    assert_eq!(ei.len(), eq.len());
    for (end, d) in &ei {
        assert!(*d > 0, "a zero-length request ending at {end}");
        assert!(
            *d <= eq[end],
            "issue->complete {d} > insert->complete {}",
            eq[end]
        );
    }

    // --log --sort value --top 5: the five longest, longest first.
    let top = kstate(&[
        "la", "biotime", "--log", "--sort", "value", "--top", "5", "--format", "csv", "--key",
        &key, path,
    ]);
    let got: Vec<u64> = top
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect();
    let mut longest = durs.clone();
    longest.sort_unstable_by(|a, b| b.cmp(a));
    longest.truncate(5);
    assert_eq!(got, longest);

    // blkqueue: time-weighted length and max in flight, and one sample per arrival.
    let (changes, area, max, arrivals, span) = in_flight(&evs, kdev, 'W');
    let q = kstate_json(&["la", "blkqueue", "--format", "json", path]);
    let t = q["queue"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key.as_str())
        .unwrap_or_else(|| panic!("no {key} in the queue table: {q}"));
    assert_eq!(t["changes"], changes, "{t}");
    assert_eq!(t["max_len"], max, "{t}");
    let requeues = evs
        .iter()
        .filter(|e| e.event == "block_rq_requeue" && req_id(e).0 == kdev && req_id(e).2 == 'W')
        .count() as u64;
    assert_eq!(t["requeues"], requeues, "{t}");
    assert!(max >= 1);
    let avg = area as f64 / span as f64;
    let got = t["avg_len"].as_f64().unwrap();
    assert!(
        (got - avg).abs() <= 1e-6 + avg * 1e-9,
        "avg_len {got}, computed {avg}"
    );
    assert!(avg > 0.0);
    let r = q["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key.as_str())
        .unwrap();
    assert_eq!(r["count"], arrivals);
    assert_eq!(r["max_len"], max);
    // Every change is a --log row with the new length.
    let log = kstate(&[
        "la", "blkqueue", "--log", "--format", "csv", "--key", &key, path,
    ]);
    let levels: Vec<u64> = log
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(levels.len() as u64, changes);
    assert_eq!(levels.iter().max().copied(), Some(max));
    eprintln!(
        "{key}: {} requests ({unmatched} completions without an issue), issue->complete max {} ns; in flight: {changes} changes, avg {avg:.6}, max {max}, {requeues} requeues",
        want.len(),
        durs.iter().max().unwrap()
    );
    want.len() as u64
}

#[test]
fn fsync_writes_measured_per_request() {
    let dir = tmp();
    let cap = dir.path().join("fsync.dat");
    let data = dir.path().join("data");
    let n = 30u64;
    record(&["fsync", &n.to_string(), data.to_str().unwrap()], &cap);
    let writes = check_writes(&cap, &data);
    // Each fsync writes the data block to the device (the journal adds more).
    assert!(writes >= n, "{writes} write requests for {n} fsyncs");
}

#[test]
fn direct_writers_measured_per_request() {
    let dir = tmp();
    let cap = dir.path().join("direct.dat");
    let prefix = dir.path().join("w");
    let (threads, count, size) = (6u64, 8u64, 1u64 << 20);
    record(
        &[
            "direct-writers",
            "--threads",
            &threads.to_string(),
            "--count",
            &count.to_string(),
            "--size",
            &size.to_string(),
            prefix.to_str().unwrap(),
        ],
        &cap,
    );
    let data = dir.path().join("w.0");
    assert_eq!(std::fs::metadata(&data).unwrap().len(), count * size);
    let writes = check_writes(&cap, &data);
    // O_DIRECT: every byte went to the device in requests of at most max_sectors_kb.
    let (major, minor, _) = disk_of(&data);
    let max_kb: u64 = std::fs::read_to_string(format!(
        "/sys/dev/block/{major}:{minor}/queue/max_sectors_kb"
    ))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    let least = (threads * count * size).div_ceil(max_kb * 1024);
    assert!(
        writes >= least,
        "{writes} write requests, at least {least} expected"
    );
    // The bytes of the measured writes cover nearly all the writers wrote: ext4 may turn
    // an O_DIRECT write that extends a file into a buffered one, written back after the
    // recording ends (seen here as up to ~2 % short).
    let evs = report(&cap);
    let kdev = ((major as u64) << 20) | minor as u64;
    let written: u64 = evs
        .iter()
        .filter(|e| e.event == "block_rq_complete" && e.dev == kdev && op(&e.rwbs) == 'W')
        .map(|e| e.nr_sector * 512)
        .sum();
    let wrote = threads * count * size;
    assert!(
        written >= wrote - wrote / 10,
        "{written} bytes written of {wrote}"
    );
}

#[test]
fn without_block_events_the_preset_is_named() {
    let p = support::fixture("lisa-rtapp/trace.dat");
    assert!(p.is_file(), "fixture {} is missing", p.display());
    for a in ["biotime", "blkqueue"] {
        let out = Command::new(KSTATE)
            .args(["la", a])
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("kstate record -e bio"), "{err}");
    }
    let out = Command::new(KSTATE)
        .args(["la", "biotime", "--log", "--sort", "value"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--top N"));
}
