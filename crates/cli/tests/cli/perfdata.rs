//! perf.data in: files recorded by `perf record` at test time read like any other trace.
//! `perf script` is the oracle for events and field values; an analyzer gives the same
//! figures on a perf.data and on a kstate recording of the same deterministic workload.

use crate::support;

use support::{kstate, KSTATE};

use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[cfg(target_arch = "x86_64")]
const NR_GETPPID: u64 = 110;
#[cfg(target_arch = "aarch64")]
const NR_GETPPID: u64 = 173;

/// `perf record -o OUT EXTRA -- kstate workload WORKLOAD`.
fn perf_record(out: &Path, extra: &[&str], workload: &[&str]) {
    let mut w = vec![KSTATE, "workload"];
    w.extend_from_slice(workload);
    support::perf_record(out, extra, false, &w);
}

/// (ts ns, cpu, tid, event name, syscall NR when the event has one)
type Ev = (u64, u32, i64, String, Option<u64>);

/// `perf script --ns -F tid,cpu,time,event,trace`: "  1234 [001]  6313.310020127: raw_syscalls:sys_exit: NR 59 = 0".
fn perf_script(file: &Path) -> Vec<Ev> {
    support::perf_stdout(
        &["script", "--ns", "-F", "tid,cpu,time,event,trace", "-i"],
        file,
    )
    .lines()
    .filter(|l| !l.trim().is_empty())
    .map(|l| {
        let mut it = l.split_whitespace();
        let tid: i64 = it.next().unwrap().parse().unwrap();
        let cpu: u32 = it
            .next()
            .unwrap()
            .trim_matches(|c| c == '[' || c == ']')
            .parse()
            .unwrap();
        let t = it.next().unwrap().trim_end_matches(':');
        let (s, ns) = t.split_once('.').unwrap();
        let ts = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        let event = it.next().unwrap().trim_end_matches(':');
        let name = event.rsplit(':').next().unwrap().to_string();
        let nr = match it.next() {
            Some("NR") => it.next().and_then(|n| n.parse().ok()),
            _ => None,
        };
        (ts, cpu, tid, name, nr)
    })
    .collect()
}

fn kstate_dump(file: &Path) -> Vec<Ev> {
    kstate(&["dump", "--json", file.to_str().unwrap()])
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["ts"].as_u64().unwrap(),
                v["cpu"].as_u64().unwrap() as u32,
                v["pid"].as_i64().unwrap(),
                v["event"].as_str().unwrap().to_string(),
                v["fields"]["id"].as_u64(),
            )
        })
        .collect()
}

#[test]
fn perf_data_events_and_fields_match_perf_script() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    perf_record(
        &f,
        // A large buffer: perf must not lose samples here (the loss test is separate).
        &[
            "-m",
            "2048",
            "-e",
            "raw_syscalls:*",
            "-e",
            "sched:sched_switch",
        ],
        &["getppid", "3000"],
    );
    let mut want = perf_script(&f);
    let mut got = kstate_dump(&f);
    assert!(want.len() > 6000, "{} perf samples", want.len());
    // Same multiset of events; ties at one timestamp may be ordered differently.
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    let getppid = got
        .iter()
        .filter(|e| e.3 == "sys_enter" && e.4 == Some(NR_GETPPID))
        .count();
    assert_eq!(getppid, 3000);
    let info: Value =
        serde_json::from_str(&kstate(&["info", "--json", f.to_str().unwrap()])).unwrap();
    assert_eq!(info["events"].as_u64().unwrap() as usize, want.len());
    assert_eq!(info["lost_total"], 0);
}

#[test]
fn an_analyzer_agrees_on_perf_data_and_a_kstate_recording() {
    let dir = tempfile::tempdir().unwrap();
    let pf = dir.path().join("perf.data");
    let kf = dir.path().join("kstate.dat");
    perf_record(
        &pf,
        &["-m", "2048", "-e", "raw_syscalls:*"],
        &["getppid", "4321"],
    );
    kstate(&[
        "record",
        "-e",
        "syscall",
        "--sysinfo-interval",
        "0",
        "-o",
        kf.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "getppid",
        "4321",
    ]);
    let count = |f: &Path| -> u64 {
        let v: Value = serde_json::from_str(&kstate(&[
            "analyze",
            "syscall",
            "--key",
            "getppid",
            "--format",
            "json",
            f.to_str().unwrap(),
        ]))
        .unwrap();
        v["rows"][0]["count"].as_u64().unwrap()
    };
    assert_eq!(count(&pf), 4321);
    assert_eq!(count(&kf), 4321);
}

#[test]
fn perfs_lost_records_are_lost_events() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    // One data page per CPU buffer: perf drops samples of a system-call storm.
    perf_record(
        &f,
        &["-m", "1", "-e", "raw_syscalls:*"],
        &["getppid", "200000"],
    );
    let perf_lost = support::perf_lost(&f);
    assert!(perf_lost > 0, "perf lost nothing with a one-page buffer");
    let info: Value =
        serde_json::from_str(&kstate(&["info", "--json", f.to_str().unwrap()])).unwrap();
    assert_eq!(info["lost_total"].as_u64().unwrap(), perf_lost);
    let samples = perf_script(&f).len() as u64;
    assert_eq!(info["events"].as_u64().unwrap(), samples);
}

/// Reading a perf.data copies nothing to disk: a reader killed with SIGKILL in the middle of
/// an analysis leaves its TMPDIR empty, and the analysis it would have finished counts
/// every call the workload made.
#[test]
fn a_killed_reader_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    perf_record(
        &f,
        &["-m", "8192", "-e", "raw_syscalls:*"],
        &["getppid", "400000"],
    );
    counts_all_and_leaves_nothing_when_killed(&f, 400_000, &[0, 20, 100]);
}

/// Swaps the two SAMPLE records `i` and `i + 2` of a perf.data (same size: two sys_enter
/// samples of one system-call loop), so the file's records are out of time order.
fn swap_samples(file: &Path, i: usize) {
    let mut b = std::fs::read(file).unwrap();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (off, size) = (u64_at(&b, 40) as usize, u64_at(&b, 48) as usize);
    let mut samples = Vec::new();
    let mut p = off;
    while p < off + size {
        let kind = u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
        let len = u16::from_le_bytes(b[p + 6..p + 8].try_into().unwrap()) as usize;
        if kind == 9 {
            samples.push((p, len));
        }
        p += len;
    }
    let ((a, la), (c, lc)) = (samples[i], samples[i + 2]);
    assert_eq!(la, lc);
    let first = b[a..a + la].to_vec();
    b.copy_within(c..c + lc, a);
    b[c..c + lc].copy_from_slice(&first);
    std::fs::write(file, b).unwrap();
}

/// A perf.data whose records are out of time order is sorted through unnamed temporary
/// files: the analysis still counts every call, and a reader killed midway leaves its
/// TMPDIR empty.
#[test]
fn an_out_of_order_perf_data_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    perf_record(
        &f,
        &["-m", "8192", "-e", "raw_syscalls:*"],
        &["getppid", "200000"],
    );
    swap_samples(&f, 1000);
    counts_all_and_leaves_nothing_when_killed(&f, 200_000, &[20, 100, 300]);
}

/// Analyses `f` for its getppid calls with TMPDIR an empty directory: the count is
/// `calls`, and a reader killed with SIGKILL after each of `waits_ms` leaves TMPDIR empty.
fn counts_all_and_leaves_nothing_when_killed(f: &Path, calls: u64, waits_ms: &[u64]) {
    let tmp = tempfile::tempdir().unwrap();
    let analyze = || {
        let mut c = Command::new(KSTATE);
        c.args([
            "analyze", "syscall", "--stat", "--key", "getppid", "--format", "json",
        ])
        .arg(f)
        .env("TMPDIR", tmp.path());
        c
    };
    let o = analyze().output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"][0]["count"], calls);
    for &wait_ms in waits_ms {
        let mut child = analyze()
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(wait_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "killed after {wait_ms} ms, left {left:?}");
    }
}
