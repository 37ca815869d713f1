//! `kstate bench sample` against the running kernel, with short iterations: the table's
//! structure, the untraced baseline, and samples taken only where sampling was on — about
//! one per millisecond of the workload's CPU time (cpu-clock at 999 Hz). No timing is
//! asserted (the machine is shared). Needs root and tracefs; never skips.

use crate::support;
use support::kstate as ok;

use serde_json::Value;

#[test]
fn sample_overhead_table_short() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = ok(&[
        "bench",
        "sample",
        "--iters",
        "0.006",
        "--runs",
        "2",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["runs"], 2);
    let works = v["workloads"].as_array().unwrap();
    let names: Vec<&str> = works.iter().map(|w| w["work"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu", "syscall"]);
    // The default counts scaled by --iters.
    assert_eq!(works[0]["ops"], 9_000_000);
    assert_eq!(works[1]["ops"], 30_000);
    for w in works {
        let configs = w["configs"].as_array().unwrap();
        let names: Vec<&str> = configs
            .iter()
            .map(|c| c["config"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["none", "record", "sample"], "{w}");
        for c in configs {
            assert_eq!(c["wall_s_runs"].as_array().unwrap().len(), 2, "{c}");
            assert!(c["wall_s"].as_f64().unwrap() > 0.0, "{c}");
            assert!(c["ratio"].as_f64().unwrap() > 0.0, "{c}");
        }
        let (none, record, sample) = (&configs[0], &configs[1], &configs[2]);
        assert_eq!(none["ratio"], 1.0);
        assert_eq!(none["recorder_cpu_s"], Value::Null);
        assert_eq!(none["samples"], Value::Null);
        assert_eq!(
            record["samples"],
            Value::Null,
            "no sampling without --sample"
        );
        assert!(record["recorder_cpu_s"].as_f64().unwrap() >= 0.0);
        assert!(sample["recorder_cpu_s"].as_f64().unwrap() >= 0.0);
        assert_eq!(sample["lost"], 0, "{sample}");
        // cpu-clock samples the workload's CPU time at 999 Hz: about one sample per ms
        // of it, plus the process's exec and start-up (not in cpu_s); a tick can be
        // missed at each switch. A wrong rate or no sampling is far outside this.
        let n = sample["samples"].as_f64().unwrap();
        let want = 999.0 * sample["cpu_s"].as_f64().unwrap();
        assert!(n >= 1.0, "{sample}");
        assert!(
            n >= want * 0.8 - 3.0 && n <= want * 1.2 + 25.0,
            "{n} samples for {want:.0} ms of CPU: {sample}"
        );
    }
}
