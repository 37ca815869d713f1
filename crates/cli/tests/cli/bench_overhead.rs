//! `kstate bench overhead` against the running kernel, with short iterations: every cell
//! is a positive time, the no-tracer column is the baseline, and the kept recordings hold
//! exactly the operations the workload was told to do (counted from `kstate dump`, not
//! from the bench's own figures). Needs root and tracefs; never skips.

use crate::support;
use support::{dump, kstate as ok};

use serde_json::Value;

#[cfg(target_arch = "x86_64")]
const NR_GETPPID: i64 = 110;
#[cfg(target_arch = "aarch64")]
const NR_GETPPID: i64 = 173;
// send() is sendto; std::fs::remove_file is unlink (unlinkat where there is no unlink).
#[cfg(target_arch = "x86_64")]
const NR_SENDTO: i64 = 44;
#[cfg(target_arch = "aarch64")]
const NR_SENDTO: i64 = 206;
#[cfg(target_arch = "x86_64")]
const NR_UNLINK: i64 = 87;
#[cfg(target_arch = "aarch64")]
const NR_UNLINK: i64 = 35;
/// The chat row's threads: 2 rooms x 5 users x 4.
const CHAT_THREADS: u64 = 40;

const CONFIGS: &[&str] = &["none", "norec", "perf", "perf-nolock", "all"];

#[test]
fn overhead_table_short() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let keep = dir.path().join("keep");
    let out = ok(&[
        "bench",
        "overhead",
        "--iters",
        "0.01",
        "--runs",
        "1",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
        "--keep",
        keep.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["bench"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "null",
            "stat",
            "openclose",
            "pipe",
            "unix",
            "fork",
            "ctxsw",
            "chat",
            "fs"
        ]
    );
    let mut ops = std::collections::BTreeMap::new();
    for r in rows {
        let b = r["bench"].as_str().unwrap();
        for c in CONFIGS {
            let ns = r["ns_per_op"][c].as_f64().unwrap();
            assert!(ns > 0.0 && ns.is_finite(), "{b} under {c}: {ns} ns/op");
            assert!(r["ratio"][c].as_f64().unwrap() > 0.0);
        }
        assert_eq!(r["ratio"]["none"].as_f64().unwrap(), 1.0, "{b}");
        // Every configuration ran the same number of operations.
        let per: Vec<u64> = r["ops_per_config"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(per.len(), CONFIGS.len());
        assert!(per.iter().all(|&n| n == per[0] && n > 0), "{b}: {per:?}");
        ops.insert(b.to_string(), per[0]);
        // LKST's own baseline is 1.0 too.
        assert_eq!(r["lkst_2004_ratio"][0].as_f64().unwrap(), 1.0);
    }
    // --iters 0.01 of the default counts.
    assert_eq!(ops["null"], 10_000);
    assert_eq!(ops["fork"], 20);
    // chat: 400 deliveries are 10 messages from each of 10 users to 4 others.
    assert_eq!(ops["chat"], 400);
    assert_eq!(ops["fs"], 50);

    for c in &CONFIGS[1..] {
        assert!(keep.join(format!("{c}.dat")).is_file(), "{c}.dat kept");
        assert_eq!(v["lost_max"][c].as_u64(), Some(0), "{c} lost events");
    }
    // `all` records system calls: the workload process made exactly `null` getppid calls.
    let all = keep.join("all.dat");
    let getppid: Vec<Value> = dump(&all, "raw_syscalls:sys_enter")
        .into_iter()
        .filter(|e| e["fields"]["id"].as_i64() == Some(NR_GETPPID))
        .collect();
    assert_eq!(getppid.len() as u64, ops["null"]);
    let wl = getppid[0]["pid"].as_i64().unwrap();
    assert!(getppid.iter().all(|e| e["pid"].as_i64() == Some(wl)));
    // chat: one send per message from its sender (ops / 4 receivers each) and one per
    // delivery from the server; fs: one unlink per file.
    let calls = |nr: i64| {
        dump(&all, "raw_syscalls:sys_enter")
            .into_iter()
            .filter(|e| e["fields"]["id"].as_i64() == Some(nr))
            .count() as u64
    };
    assert_eq!(calls(NR_SENDTO), ops["chat"] + ops["chat"] / 4);
    assert_eq!(calls(NR_UNLINK), ops["fs"]);
    // Its forks: the fork benchmark's children, one echo thread each for pipe, unix and
    // ctxsw (a thread's clone fires sched_process_fork too), and the chat's threads.
    let forks = dump(&all, "sched:sched_process_fork")
        .into_iter()
        .filter(|e| e["fields"]["parent_pid"].as_i64() == Some(wl))
        .count() as u64;
    assert_eq!(forks, ops["fork"] + 3 + CHAT_THREADS);
    // `perf` records the same forks (another workload process: the busiest parent).
    let mut by_parent = std::collections::BTreeMap::new();
    for e in dump(&keep.join("perf.dat"), "sched:sched_process_fork") {
        *by_parent
            .entry(e["fields"]["parent_pid"].as_i64().unwrap())
            .or_insert(0u64) += 1;
    }
    assert_eq!(
        by_parent.values().max(),
        Some(&(ops["fork"] + 3 + CHAT_THREADS))
    );
    // `norec` enabled only an event that does not fire.
    assert_eq!(v["events"]["norec"].as_f64(), Some(0.0));
    assert!(v["events"]["all"].as_f64().unwrap() > v["events"]["perf"].as_f64().unwrap());
}
