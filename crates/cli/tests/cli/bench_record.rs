//! `kstate bench record` small: every row runs, kstate records every call's entry and
//! exit without losing one, and the figures the targets are judged on are present.
//! No timing is asserted (these machines are shared). Needs root, tracefs and perf.

use crate::support;

const CALLS: u64 = 100_000;

#[test]
fn the_recording_benchmark_runs_every_row() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let v = support::kstate_json(&[
        "bench",
        "record",
        "--calls",
        &CALLS.to_string(),
        "--runs",
        "1",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["row"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "no tracer",
            "events enabled, nothing read",
            "same + pid filter, nothing read",
            "kstate record -e syscall",
            "kstate watch -e syscall",
            "perf record -e raw_syscalls:*"
        ]
    );
    let k = &rows[3];
    // Each getppid is one sys_enter and one sys_exit; the workload's own start-up and
    // exit add a few more.
    let events = k["events"].as_f64().unwrap() as u64;
    assert!((2 * CALLS..2 * CALLS + 2_000).contains(&events), "{k}");
    assert_eq!(k["lost_max"].as_u64(), Some(0), "{k}");
    assert!(k["recorder_cpu_ns"].as_f64().unwrap() > 0.0, "{k}");
    for r in rows {
        assert!(r["ns_per_call"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(v["kstate_over_enabled_pid_filter_pct"].is_number());
    // kstate watch's intervals counted the same calls, none lost.
    let w = &rows[4];
    let events = w["events"].as_f64().unwrap() as u64;
    assert!((2 * CALLS..2 * CALLS + 2_000).contains(&events), "{w}");
    assert_eq!(w["lost_max"].as_u64(), Some(0), "{w}");
    assert!(v["watch_over_record_pct"].is_number());
    // perf saw the same calls (less what it lost).
    assert!(rows[5]["events"].as_f64().unwrap() > 0.0);
}
