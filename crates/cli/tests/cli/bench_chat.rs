//! `kstate workload chat` and `kstate bench chat` against the running kernel: the
//! recording (read by `trace-cmd report`, not by kstate) shows the threads the benchmark
//! says it has and exactly one send per message sent and per message relayed. Needs root
//! and tracefs; never skips.

use crate::support;
use support::{kstate as ok, kstate_json, trace_cmd_report, KSTATE};

use std::collections::BTreeMap;

#[test]
fn chat_sends_every_message_once_per_receiver() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("chat.dat");
    let (rooms, users, messages) = (2u64, 3u64, 50u64);
    let out = ok(&[
        "record",
        "-e",
        "syscall,proc",
        "-o",
        file.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "chat",
        "--json",
        "--rooms",
        &rooms.to_string(),
        "--users",
        &users.to_string(),
        "--messages",
        &messages.to_string(),
    ]);
    let line = out.lines().find(|l| l.contains("\"delivered\"")).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let delivered = rooms * users * (users - 1) * messages;
    assert_eq!(v["delivered"].as_u64(), Some(delivered), "{v}");
    assert_eq!(v["threads"].as_u64(), Some(4 * rooms * users));
    assert!(v["messages_per_s"].as_f64().unwrap() > 0.0);

    let report = trace_cmd_report(&file, &[]);
    // sendto (send on a TCP socket) per thread name.
    let nr_sendto = if cfg!(target_arch = "aarch64") {
        "NR 206 "
    } else {
        "NR 44 "
    };
    let mut sends: BTreeMap<String, u64> = BTreeMap::new();
    for l in report.lines().filter(|l| l.contains("sys_enter:")) {
        let Some(args) = l.split("sys_enter:").nth(1) else {
            continue;
        };
        if args.trim_start().starts_with(nr_sendto) {
            let task = l.split_whitespace().next().unwrap();
            let comm = task.rsplit_once('-').unwrap().0;
            *sends.entry(comm.to_string()).or_default() += 1;
        }
    }
    assert_eq!(
        sends.get("chat-cli-tx"),
        Some(&(rooms * users * messages)),
        "{sends:?}"
    );
    assert_eq!(sends.get("chat-srv-wr"), Some(&delivered), "{sends:?}");
    assert_eq!(sends.len(), 2, "{sends:?}");
    // The threads: every clone of the benchmark's process.
    let forks = report
        .lines()
        .filter(|l| l.contains("sched_process_fork:"))
        .count() as u64;
    assert_eq!(forks, 4 * rooms * users);
}

#[test]
fn bench_chat_reports_the_median_run() {
    let v = kstate_json(&[
        "bench",
        "chat",
        "--rooms",
        "1",
        "--users",
        "4",
        "--messages",
        "20",
        "--runs",
        "3",
        "--json",
    ]);
    assert_eq!(v["delivered"].as_u64(), Some(4 * 3 * 20));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let mut rates: Vec<f64> = runs
        .iter()
        .map(|r| r["messages_per_s"].as_f64().unwrap())
        .collect();
    rates.sort_by(f64::total_cmp);
    assert_eq!(v["messages_per_s"].as_f64(), Some(rates[1]));
    let r = v["messages_per_s"].as_f64().unwrap();
    let e = v["elapsed_s"].as_f64().unwrap();
    assert!((r * e - 240.0).abs() < 1e-6, "{v}");
    assert!(v["user_s"].as_f64().unwrap() >= 0.0 && v["sys_s"].as_f64().unwrap() >= 0.0);
}
