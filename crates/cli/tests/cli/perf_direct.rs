//! perf.data read straight into the analysis (no pages built): on real recordings made at
//! test time, every analyzer, `dump` and `info` give exactly what the pages path gives
//! (`KSTATE_PERF_PAGES` selects it), losses included, and the counts match perf's own.
//! Where a CPU's records are a little out of time order (perf writes some twice), the
//! direct read sorts those stretches and gives what the crate's full sort gives.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

/// `kstate ARGS` with the perf.data read straight (`paged` false) or through pages.
fn kstate(args: &[&str], paged: bool) -> String {
    kstate_via(args, if paged { "1" } else { "" })
}

/// `kstate ARGS` with `KSTATE_PERF_PAGES` set to `via` (unset if empty).
fn kstate_via(args: &[&str], via: &str) -> String {
    let mut c = Command::new(KSTATE);
    c.args(args).env_remove("KSTATE_PERF_PAGES");
    let paged = !via.is_empty();
    if paged {
        c.env("KSTATE_PERF_PAGES", via);
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

/// Both paths' output of `kstate ARGS`, which must be the same. An analysis or a dump is
/// also run on one thread: by default each CPU is decoded on a thread of its own
/// (`kstate_format::prefetch`), which must not change a byte.
fn same(args: &[&str]) -> String {
    let direct = kstate(args, false);
    let paged = kstate(args, true);
    assert!(
        direct == paged,
        "kstate {}: the direct read differs from the pages",
        args.join(" ")
    );
    if args[0] == "analyze" || args[0] == "dump" {
        let one = kstate(&[args, &["--threads", "1"]].concat(), false);
        assert!(
            direct == one,
            "kstate {}: the threaded read differs from one thread",
            args.join(" ")
        );
    }
    direct
}

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
    sorted_agrees(f);
    // A scheduler event from an interrupt between a sample's timestamp and its place in
    // the buffer puts a CPU's records out of time order (CI's load did it with -a); such
    // a file is read straight with those stretches sorted, or, if they are too long, by
    // the sorting reader through pages.
    if !pages.iter().all(Value::is_null) {
        eprintln!("{}: read by the sorting reader (pages {pages:?})", f);
    }
    assert!(built.iter().all(|p| p.as_u64().unwrap() > 0), "{built:?}");
    serde_json::from_str(&same(&[
        "analyze", "syscall", "--stat", "--format", "json", f,
    ]))
    .unwrap()
}

/// The direct read gives what the crate's sorting reader gives (`KSTATE_PERF_PAGES=sorted`),
/// in a pass and in the order of every event.
fn sorted_agrees(f: &str) {
    for args in [
        &["analyze", "syscall", "--log", "--format", "json", f][..],
        &["analyze", "syscall", "--stat", "--format", "json", f],
        &["dump", "--json", f],
    ] {
        assert!(
            kstate_via(args, "") == kstate_via(args, "sorted"),
            "kstate {}: the direct read differs from the sorted one",
            args.join(" ")
        );
    }
}

/// Writes `f` to `out` with a copy of every `every`-th sample placed after the next
/// `later` samples of its CPU, as perf 6.x writes some records twice; the data and feature
/// sections' offsets move to match. Returns the copies made.
fn with_duplicates(f: &Path, out: &Path, every: usize, later: usize) -> usize {
    let b = std::fs::read(f).unwrap();
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (off, size) = (u64_at(40) as usize, u64_at(48) as usize);
    // Where the sample's CPU is: after the fields before it in sample_type's order
    // (IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID).
    let sample_type = u64_at(u64_at(24) as usize + 24);
    let before = sample_type & (1 << 16 | 1 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 6 | 1 << 9);
    assert!(sample_type & (1 << 7) != 0, "samples without CPU");
    let cpu_at = 8 + 8 * before.count_ones() as usize;
    let mut data = Vec::with_capacity(size * 2);
    let mut pending: Vec<(u32, usize, Vec<u8>)> = Vec::new();
    let (mut p, mut samples, mut copies) = (off, 0, 0);
    while p < off + size {
        let kind = u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
        let len = u16::from_le_bytes(b[p + 6..p + 8].try_into().unwrap()) as usize;
        let rec = &b[p..p + len];
        data.extend_from_slice(rec);
        if kind == 9 {
            let cpu = u32::from_le_bytes(rec[cpu_at..cpu_at + 4].try_into().unwrap());
            for c in pending.iter_mut().filter(|c| c.0 == cpu) {
                c.1 -= 1;
            }
            while let Some(i) = pending.iter().position(|c| c.1 == 0) {
                data.extend_from_slice(&pending.remove(i).2);
                copies += 1;
            }
            samples += 1;
            if samples % every == 0 {
                pending.push((cpu, later, rec.to_vec()));
            }
        }
        p += len;
    }
    let grown = (data.len() - size) as u64;
    let mut o = b[..off].to_vec();
    o[48..56].copy_from_slice(&(data.len() as u64).to_le_bytes());
    o.extend_from_slice(&data);
    // The feature sections follow the data; their table names where each one is.
    let mut tail = b[off + size..].to_vec();
    let features: u32 = b[72..104].iter().map(|x| x.count_ones()).sum();
    for e in tail.chunks_exact_mut(16).take(features as usize) {
        let at = u64::from_le_bytes(e[..8].try_into().unwrap()) + grown;
        e[..8].copy_from_slice(&at.to_le_bytes());
    }
    o.extend_from_slice(&tail);
    std::fs::write(out, o).unwrap();
    copies
}

/// A recording with records written twice, out of their CPU's time order: read straight
/// (no pages built), in the order the full sort gives, every copy read, and each call
/// still counted once (a copy is an unmatched entry or exit).
#[test]
fn records_written_twice_are_sorted_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let f = getppid_recording(dir.path(), 3000, false);
    let g = dir.path().join("twice.data");
    let copies = with_duplicates(&f, &g, 97, 5);
    assert!(copies > 50, "{copies} copies");
    // Each read straight, through pages and on one thread alike.
    let (once, twice) = (agree_syscall_only(&f), agree_syscall_only(&g));
    assert_eq!(
        twice["events_read"].as_u64().unwrap(),
        once["events_read"].as_u64().unwrap() + copies as u64
    );
    assert_eq!(count(&once, "getppid"), 3000);
    assert_eq!(count(&twice, "getppid"), 3000);
    let g = g.to_str().unwrap();
    sorted_agrees(g);
    let info: Value = serde_json::from_str(&kstate(&["info", "--json", g], false)).unwrap();
    for c in info["per_cpu"].as_array().unwrap() {
        assert!(c["pages"].is_null(), "read through pages: {c}");
    }
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
    args.extend_from_slice(support::PERF_SCHED);
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
    args.extend_from_slice(support::PERF_SCHED);
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
    let f = getppid_recording(dir.path(), 3000, true);
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

/// `perf record -e raw_syscalls:*` (to a file, or through a pipe) of `n` getppid calls,
/// in `dir`.
fn getppid_recording(dir: &Path, n: u32, pipe: bool) -> std::path::PathBuf {
    let f = dir.join("perf.data");
    let n = n.to_string();
    support::perf_record(
        &f,
        &["-m", "2048", "-e", "raw_syscalls:*"],
        pipe,
        &[KSTATE, "workload", "getppid", &n],
    );
    f
}

/// `kstate bench read` on a perf.data: kstate's read on one thread and on every core
/// next to `perf script`, the peer a perf user has, counting the file's events (no speed
/// is asserted: the machine is shared).
#[test]
fn bench_read_of_a_perf_data() {
    let dir = tempfile::tempdir().unwrap();
    let f = getppid_recording(dir.path(), 20000, false);
    let f = f.to_str().unwrap();
    let v: Value = serde_json::from_str(&kstate(
        &["bench", "read", "--runs", "1", "--json", f],
        false,
    ))
    .unwrap();
    let info: Value = serde_json::from_str(&kstate(&["info", "--json", f], false)).unwrap();
    assert_eq!(v["events"], info["events"], "{v}");
    assert!(v["events"].as_u64().unwrap() >= 40000, "{v}");
    assert_eq!(v["peer"], "perf script", "{v}");
    for key in ["kstate", "kstate_all_cores", "perf_script"] {
        assert!(
            v[key]["seconds"].as_f64().is_some_and(|s| s > 0.0),
            "{key}: {v}"
        );
    }
    assert!(
        v["kstate_all_cores"]["threads"].as_u64().unwrap() >= 1,
        "{v}"
    );
    assert!(v["speedup"].as_f64().is_some_and(|s| s > 0.0), "{v}");
    assert_eq!(v["text"]["peer"], "perf script", "{v}");
    assert!(v["trace_cmd"].is_null(), "{v}");
}

/// `kstate bench analyze --perf-script PERF.data` on a trace.dat: kstate's rate on the
/// trace next to `perf script`'s on a perf recording of the same workload, in the same
/// run. The perf.data's events are perf's own count (`perf report --stats`), which must
/// be kstate's; a file that is not a perf.data is refused by name.
#[test]
fn bench_analyze_against_perf_script_on_the_same_workload() {
    let dir = tempfile::tempdir().unwrap();
    let data = getppid_recording(dir.path(), 20000, false);
    let dat = dir.path().join("calls.dat");
    support::record_workload("syscall", &["getppid", "20000"], false, &dat);
    let (data, dat) = (data.to_str().unwrap(), dat.to_str().unwrap());
    let args = [
        "bench",
        "analyze",
        "--runs",
        "1",
        "--no-peer",
        "--threads",
        "1",
    ];
    let v: Value = serde_json::from_str(&kstate(
        &[&args[..], &["--perf-script", data, "--json", dat]].concat(),
        false,
    ))
    .unwrap();
    let info: Value = serde_json::from_str(&kstate(&["info", "--json", data], false)).unwrap();
    let p = &v["perf_script"];
    assert_eq!(p["events"], info["events"], "{v}");
    assert_eq!(p["file"], data, "{v}");
    assert!(p["seconds"].as_f64().is_some_and(|s| s > 0.0), "{v}");
    assert!(v["events"].as_u64().unwrap() >= 40000, "{v}");
    let text = kstate(&[&args[..], &["--perf-script", data, dat]].concat(), false);
    assert!(
        text.contains("as many events per second as perf script"),
        "{text}"
    );
    // The trace.dat is no perf.data; a perf.data has its own perf script row.
    for (args, named, why) in [
        (
            [&args[..], &["--perf-script", dat, dat]].concat(),
            dat,
            "not a perf.data",
        ),
        (
            [&args[..], &["--perf-script", data, data]].concat(),
            data,
            "is a perf.data already",
        ),
    ] {
        let o = Command::new(KSTATE).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(named) && err.contains(why),
            "{err}"
        );
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
