//! Sleeps of a task pinned to CPU 1 are all seen by the sched analyzers, whether or not the
//! kernel traces that CPU leaving idle (this VM's 6.18 kernel does not: see
//! `IdleExits` in crates/analyze/src/analyzers/sched.rs). Needs root and tracefs.

use crate::support;
use support::{dump, kstate, kstate_json};

const SLEEPS: u64 = 20;

#[test]
fn every_sleep_on_cpu_1_pairs_with_its_switch_in() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("sleep.dat");
    let f = file.to_str().unwrap();
    kstate(&[
        "record",
        "-e",
        "sched",
        "-o",
        f,
        "--",
        support::KSTATE,
        "workload",
        "sleep",
        &SLEEPS.to_string(),
        "10",
        "--cpu",
        "1",
    ]);
    let info = kstate_json(&["info", "--json", f]);
    let wl = info["recording"]["workload_pid"].as_i64().unwrap();

    // The oracle: the workload's switch-outs in the trace. Every one but the last (its
    // exit) is followed by a switch-in, traced or not; the first may come from pinning
    // itself to CPU 1 (a migration, no wake-up), which cannot be inferred.
    let outs = dump(&file, "sched:sched_switch")
        .iter()
        .filter(|e| e["fields"]["prev_pid"].as_i64() == Some(wl))
        .count() as u64;
    assert!(outs > SLEEPS, "{outs} switch-outs");

    let v = kstate_json(&[
        "analyze",
        "offcpu",
        "--by",
        "pid",
        "--pid",
        &wl.to_string(),
        "--format",
        "json",
        f,
    ]);
    let row = &v["rows"][0];
    let count = row["count"].as_u64().unwrap();
    assert!(
        count + 2 >= outs && count < outs && count >= SLEEPS,
        "offcpu pairs {count} for {outs} switch-outs: {v}"
    );
    // Each sleep is at least 10 ms off the CPU.
    assert!(
        row["total_ns"].as_u64().unwrap() >= SLEEPS * 10_000_000,
        "{row}"
    );

    // runq: each wake-up of the workload either has a latency or ran on an idle CPU at
    // once (an inferred switch-in, no latency to measure).
    let v = kstate_json(&[
        "analyze",
        "runq",
        "--pid",
        &wl.to_string(),
        "--format",
        "json",
        f,
    ]);
    let pairs = &v["pairs"];
    let seen = pairs["selected"].as_u64().unwrap() + pairs["inferred_switch_ins"].as_u64().unwrap();
    assert!(seen >= SLEEPS, "{pairs}");
}
