//! `kstate bench colour`: the cache geometry comes from sysfs (a missing one is a clear
//! error), and the simulated misses of the seed's own configuration — a 512 KB 4-way L2
//! with 32 B lines, 1,024 structures 8 KB apart — stay at one per hot field per visit
//! below the model's threshold (1,024 / (512 KB / 8 KB) = 16 colours, computed here from
//! the seed's formula) and fall to none from it on. The timed walks on this machine are
//! printed, not asserted (a shared machine's timings are not a test).

use crate::support;
use support::*;

use std::path::Path;

fn fake_sysfs(root: &Path, caches: &[(u32, &str, &str, u32, u32)]) {
    for (i, (level, ty, size, ways, line)) in caches.iter().enumerate() {
        let d = root.join(format!("devices/system/cpu/cpu0/cache/index{i}"));
        std::fs::create_dir_all(&d).unwrap();
        for (f, v) in [
            ("level", level.to_string()),
            ("type", ty.to_string()),
            ("size", size.to_string()),
            ("ways_of_associativity", ways.to_string()),
            ("coherency_line_size", line.to_string()),
        ] {
            std::fs::write(d.join(f), format!("{v}\n")).unwrap();
        }
    }
}

#[test]
fn no_cache_information_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let out = run(&["bench", "colour", "--sysfs", t.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no cache information"), "{err}");
    assert!(err.contains("devices/system/cpu/cpu0/cache"), "{err}");
    // A level the machine does not have is named.
    fake_sysfs(t.path(), &[(1, "Data", "32K", 8, 64)]);
    let out = run(&["bench", "colour", "--sysfs", t.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--level 2") && err.contains("levels 1"),
        "{err}"
    );
}

#[test]
fn simulated_misses_fall_to_the_seeds_threshold_then_flatten() {
    let t = tempfile::tempdir().unwrap();
    fake_sysfs(
        t.path(),
        &[
            (1, "Instruction", "16K", 4, 32),
            (2, "Unified", "512K", 4, 32),
        ],
    );
    let (p, s, stride, fields) = (1024u64, 512u64 << 10, 8192u64, 3u64);
    let seed_threshold = p / (s / stride);
    assert_eq!(seed_threshold, 16);
    let v = kstate_json(&[
        "bench",
        "colour",
        "--sysfs",
        t.path().to_str().unwrap(),
        "--simulate-only",
        "--json",
        "--nodes",
        "1024",
        "--colours",
        "1,2,4,8,15,16,20,32",
    ]);
    assert_eq!(v["model"]["threshold"], seed_threshold);
    assert_eq!(v["model"]["seed_formula"], seed_threshold as f64);
    let misses: Vec<(u64, u64)> = v["simulated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["colours"].as_u64().unwrap(),
                s["levels"][0]["misses"].as_u64().unwrap(),
            )
        })
        .collect();
    let all = p * fields;
    for w in misses.windows(2) {
        assert!(w[1].1 <= w[0].1, "misses rose with colours: {misses:?}");
    }
    for &(c, m) in &misses {
        if c < seed_threshold && (seed_threshold % c == 0) {
            // p / c structures per colour, 16 set positions: more than 4 lines per set.
            assert_eq!(m, all, "c = {c}: {misses:?}");
        }
        if c >= seed_threshold {
            assert_eq!(m, 0, "c = {c}: {misses:?}");
        }
    }
    // 15 colours: of the 64 runs of 16 structures, 4 colours get 5 runs (5 lines in a
    // 4-way set: all miss) and 11 get 4 (they fit).
    assert!(misses.iter().any(|&(c, m)| c == 15 && m > 0 && m < all));
    // Sets touched grow with the colours: 3 fields x 16 positions x c.
    let sets: Vec<u64> = v["simulated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["levels"][0]["sets_touched"].as_u64().unwrap())
        .collect();
    assert_eq!(sets[0], 3 * 16);
    assert_eq!(sets[5], 3 * 16 * 16);
}

#[test]
fn times_the_walk_on_this_machine_and_draws_the_chart() {
    if !Path::new("/sys/devices/system/cpu/cpu0/cache/index0").exists() {
        panic!("this machine describes no caches in sysfs: the host run cannot be tested");
    }
    let t = tempfile::tempdir().unwrap();
    let chart = t.path().join("colour.svg");
    let v = kstate_json(&[
        "bench",
        "colour",
        "--json",
        "--runs",
        "1",
        "--passes",
        "2",
        "--workers",
        "1,2",
        "--colours",
        "1,4",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert!(c["ns_per_visit"].as_f64().unwrap() > 0.0, "{c}");
        // CPU time over wall time: a thread cannot run longer than the wall clock (a
        // little slack for the two clocks' reads).
        let on_cpu = c["on_cpu"].as_f64().unwrap();
        assert!(on_cpu > 0.0 && on_cpu <= 1.05, "{c}");
        assert_eq!(c["contended"], on_cpu < 0.9, "{c}");
    }
    assert!(v["pmu"].is_null() || v["pmu"]["why"].as_str().is_some());
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains("model threshold: c &gt;= "), "{svg}");
    assert!(svg.contains("2 workers"));
}

/// Without --nodes, the list is long enough to overflow the target level's ways: on a
/// 1 MiB 8-way L2 with 64 B lines (this machine's), 2,048 structures 8 KiB apart, whose
/// 3 hot lines each fill 3/8 of the L2 when spread, and the model's threshold is
/// 2,048 / (8 ways x 16 sets) = 16 colours; uncoloured, every visit misses the L2.
#[test]
fn the_default_list_overflows_the_ways() {
    let t = tempfile::tempdir().unwrap();
    fake_sysfs(
        t.path(),
        &[(1, "Data", "32K", 8, 64), (2, "Unified", "1024K", 8, 64)],
    );
    let v = kstate_json(&[
        "bench",
        "colour",
        "--sysfs",
        t.path().to_str().unwrap(),
        "--simulate-only",
        "--json",
    ]);
    assert_eq!(v["nodes"], 2048);
    assert_eq!(v["model"]["threshold"], 16);
    let sims = v["simulated"].as_array().unwrap();
    assert_eq!(sims[0]["colours"], 1);
    assert_eq!(sims[0]["levels"][1]["misses"], 2048 * 3, "{}", sims[0]);
    let last = sims.last().unwrap();
    assert!(last["colours"].as_u64().unwrap() >= 16);
    assert_eq!(last["levels"][1]["misses"], 0, "{last}");
}
