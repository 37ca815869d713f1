//! Two sampled events in one recording and `kstate profile --compare-events`, against the
//! running kernel: `kstate workload cache-pollution` reads one byte of every line of a fresh
//! buffer in `stream_once` (one page fault per 4 KiB page, a known number) and spins over a
//! small table in `hot_table` (no faults). Sampling page-faults:1 next to cpu-clock, the
//! streamer's share of the faults is many times its share of the CPU time: flagged; the
//! spinner's is not. Needs root; never skips.

use crate::support;

use serde_json::Value;
use std::process::Command;
use support::{comparison_row as row, kstate, kstate_json, KSTATE};

const STREAM: &str = "kstate_lab::workload::cache_pollution::stream_once";
const HOT: &str = "kstate_lab::workload::cache_pollution::hot_table";

#[test]
fn page_faults_against_cpu_time() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.dat");
    let f = file.to_str().unwrap();
    let out = kstate(&[
        "record",
        "--json",
        "--sample",
        "page-faults:1",
        "--sample",
        "cpu-clock",
        // Leaf addresses are what this test reads; 8 KiB stack copies with each of 4096
        // faults in a few ms (33 MiB) overflow the 16 MiB ring, and the losses are counted.
        "--stack-bytes",
        "0",
        "-o",
        f,
        "--",
        KSTATE,
        "workload",
        "cache-pollution",
        "--mib",
        "16",
        "--hot",
        "30000000",
    ]);
    let mut lines: Vec<&str> = out.lines().collect();
    let sum: Value = serde_json::from_str(lines.pop().unwrap()).unwrap();
    let report = lines
        .iter()
        .find(|l| l.starts_with("cache-pollution:"))
        .expect("the workload's report");
    // "... (4096 pages) ..."
    let pages: u64 = report
        .split(" lines (")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(pages, 4096);
    let s = &sum["samples"];
    assert_eq!(
        s["what"], "page-faults every 1 events, cpu-clock at 999 Hz",
        "{sum}"
    );
    let per: Vec<(String, u64)> = s["per_event"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap().to_string(),
                e["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(per[0].0, "page-faults");
    assert_eq!(per[1].0, "cpu-clock");
    assert_eq!(per[0].1 + per[1].1, s["samples"].as_u64().unwrap());
    assert_eq!(s["lost"], 0, "{sum}");

    // One event at a time: the first by default, the other with --event.
    let pf = kstate_json(&["profile", "--json", "--top", "0", f]);
    assert_eq!(pf["event"], "page-faults");
    assert_eq!(pf["samples"].as_u64().unwrap(), per[0].1);
    // Every page of the buffer faulted once, in the streamer (exact: period 1).
    let top = &pf["symbols"][0];
    assert_eq!(top["symbol"], STREAM, "{pf}");
    // Unless the kernel throttled the sampler (more samples in a tick than
    // perf_event_max_sample_rate allows: it happens when the machine is loaded), and
    // then the recording says so.
    let faults = top["samples"].as_u64().unwrap();
    if s["throttled"] == 0 {
        assert_eq!(faults, pages, "{top} {sum}");
    } else {
        assert!(faults > 0 && faults <= pages, "{top} {sum}");
    }
    let cc = kstate_json(&["profile", "--json", "--event", "cpu-clock", f]);
    assert_eq!(cc["event"], "cpu-clock");
    assert_eq!(cc["samples"].as_u64().unwrap(), per[1].1);

    let c = kstate_json(&[
        "profile",
        "--json",
        "--compare-events",
        "page-faults,cpu-clock",
        f,
    ]);
    assert_eq!(c["simulated"], false);
    assert_eq!(c["base"]["name"], "cpu-clock");
    assert_eq!(c["tested"][0]["name"], "page-faults");
    assert_eq!(c["tested"][0]["total"].as_u64().unwrap(), per[0].1);
    let (ratio, min) = (
        c["ratio"].as_f64().unwrap(),
        c["min_share"].as_f64().unwrap(),
    );
    assert_eq!((ratio, min), (3.0, 5.0));
    let st = row(&c, STREAM);
    let st_pf = st["tested"][0]["percent"].as_f64().unwrap();
    let st_cpu = st["base_percent"].as_f64().unwrap();
    // The shares are those of the single-event profiles.
    assert_eq!(st["tested"][0]["count"].as_u64().unwrap(), pages);
    assert!((st_pf - top["percent"].as_f64().unwrap()).abs() < 1e-9);
    assert!(st_pf > 50.0 && st_pf >= ratio * st_cpu, "{st}");
    assert_eq!(st["flagged"], true, "{st}");
    assert_eq!(c["symbols"][0]["symbol"], STREAM, "the flagged first");
    let hot = row(&c, HOT);
    assert_eq!(hot["tested"][0]["count"], 0, "{hot}");
    assert!(hot["base_percent"].as_f64().unwrap() > 5.0, "{hot}");
    assert_eq!(hot["flagged"], false);
    // Nothing else is flagged without being at least min_share of the faults.
    for r in c["symbols"].as_array().unwrap() {
        if r["flagged"] == true {
            assert!(r["tested"][0]["percent"].as_f64().unwrap() >= min, "{r}");
        }
    }

    // The text table marks the streamer, and a higher --min-share unmarks it.
    let text = kstate(&["profile", "--compare-events", "page-faults,cpu-clock", f]);
    let line = text.lines().find(|l| l.ends_with(STREAM)).unwrap();
    assert!(line.starts_with(" * "), "{text}");
    let text = kstate(&[
        "profile",
        "--compare-events",
        "page-faults,cpu-clock",
        "--min-share",
        "99.9",
        f,
    ]);
    assert!(!text.lines().any(|l| l.starts_with(" * ")), "{text}");

    // Bad requests are clear errors.
    for (args, want) in [
        (
            vec!["--event", "cycles"],
            "no samples of cycles in this recording; it has page-faults, cpu-clock",
        ),
        (vec!["--compare-events", "page-faults"], "takes two events"),
        (
            vec!["--compare-events", "page-faults,cycles"],
            "no samples of cycles",
        ),
        (
            vec!["--compare-events", "page-faults,cpu-clock", "--ratio", "0"],
            "--ratio 0 must be",
        ),
    ] {
        let mut a = vec!["profile"];
        a.extend(args);
        a.push(f);
        let out = Command::new(KSTATE).args(&a).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
    // The same event twice is refused before recording.
    let out = Command::new(KSTATE)
        .args([
            "record",
            "--sample",
            "cpu-clock,cpu-clock",
            "-o",
            f,
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cpu-clock is given more than once"));
}
