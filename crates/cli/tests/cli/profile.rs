//! `kstate record --sample` and `kstate profile` against the running kernel, on a workload
//! with a known profile: `kstate workload spin` burns its CPU in `kstate_spin_hot_loop`,
//! reached two thirds of the time through `kstate_spin_caller_a` and one third through
//! `kstate_spin_caller_b`. `perf` (installed by CI) is the oracle. Needs root; never skips.
use crate::support;

use support::{ok, run, KSTATE};

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const HOT: &str = "kstate_spin_hot_loop";

/// `kstate record --json ARGS`: (the summary, the workload's own stdout lines).
fn record(args: &[&str]) -> (Value, Vec<String>) {
    let mut all = vec!["record", "--json"];
    all.extend_from_slice(args);
    let out = ok(&all);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    let last = lines.pop().expect("a summary line");
    let v =
        serde_json::from_str(&last).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {last}"));
    (v, lines)
}

fn profile(file: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["profile", "--json"];
    args.extend_from_slice(extra);
    args.push(file.to_str().unwrap());
    serde_json::from_slice(&ok(&args).stdout).unwrap()
}

/// The CPU seconds `kstate workload spin` reports.
fn spin_cpu_s(lines: &[String]) -> f64 {
    let l = lines
        .iter()
        .find(|l| l.starts_with("spin:"))
        .expect("the workload's report");
    let cpu = l.split("cpu ").nth(1).unwrap();
    cpu.split(' ').next().unwrap().parse().unwrap()
}

/// The calls through caller A and through caller B that `kstate workload spin` reports
/// (`spin: A calls via kstate_spin_caller_a, B via kstate_spin_caller_b; ...`).
fn spin_calls(lines: &[String]) -> (u64, u64) {
    let l = lines
        .iter()
        .find(|l| l.starts_with("spin:"))
        .expect("the workload's report");
    let n: Vec<u64> = l
        .split([' ', ','])
        .filter_map(|w| w.parse().ok())
        .take(2)
        .collect();
    (n[0], n[1])
}

fn rows(p: &Value) -> &Vec<Value> {
    p["symbols"].as_array().unwrap()
}

fn share_of(p: &Value, sym: &str) -> f64 {
    rows(p)
        .iter()
        .find(|r| r["symbol"] == sym)
        .map_or(0.0, |r| r["percent"].as_f64().unwrap())
}

fn no_instances_left() {
    let left: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("kstate-{}-", std::process::id())))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The hot function tops the profile with most of the samples, its two callers come out
/// in their 2:1 ratio, and the sample count matches the rate times the CPU time used.
#[test]
fn spin_profile_names_the_hot_function_and_its_callers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spin.dat");
    // With the default stack copy: the callers come from the CFI walk of kstate's own
    // binary (the workload's assembly carries CFI directives).
    let (sum, lines) = record(&[
        "--sample",
        "-e",
        "sched",
        "-o",
        file.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "spin",
        "--ms",
        "1500",
    ]);
    let cpu_s = spin_cpu_s(&lines);
    let s = &sum["samples"];
    assert_eq!(s["what"], "cpu-clock at 999 Hz", "{sum}");
    assert_eq!(s["lost"], 0, "{sum}");
    let n = s["samples"].as_u64().unwrap();
    // cpu-clock fires every 1/999 s of the workload's CPU time (the recording follows only
    // the command). On top of the spin's own CPU time come its exec and start-up (a few
    // ms); against that, the hrtimer period is rounded to the tick and a sample can be lost
    // at each context switch. 10 % plus 5 samples covers both with room; a rate off by a
    // factor (Hz vs period, a missed CPU) is far outside it.
    let want = 999.0 * cpu_s;
    assert!(
        (n as f64 - want).abs() <= want * 0.10 + 5.0,
        "{n} samples for {cpu_s} s of CPU at 999 Hz (want about {want:.0})"
    );

    let p = profile(&file, &[]);
    assert_eq!(p["samples"].as_u64().unwrap(), n, "{p}");
    assert_eq!(p["samples_in_file"].as_u64().unwrap(), n);
    // kstate info describes the section with the same totals.
    let info: Value =
        serde_json::from_slice(&ok(&["info", "--json", file.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(
        info["samples"]["samples"].as_u64(),
        Some(n),
        "{}",
        info["samples"]
    );
    assert_eq!(info["samples"]["event"], "cpu-clock");
    let top = &rows(&p)[0];
    assert_eq!(top["symbol"], HOT, "{p}");
    assert_eq!(top["kind"], "binary");
    assert_eq!(top["image"], "kstate");
    // The loop is nearly all the workload does: > 50 % by the issue, > 90 % in practice.
    let hot = top["percent"].as_f64().unwrap();
    assert!(hot > 90.0, "{HOT} has {hot:.1}% of the samples");
    let cum = rows(&p).last().unwrap()["cumulative_percent"]
        .as_f64()
        .unwrap();
    assert!((cum - 100.0).abs() < 1e-6, "{cum}");
    // Kernel/user split: the workload enters the kernel only for getrusage between calls,
    // for its exec and for interrupts: a little kernel time, never none and never most.
    let (k, u) = (
        p["kernel_samples"].as_u64().unwrap(),
        p["user_samples"].as_u64().unwrap(),
    );
    assert_eq!(k + u, n);
    assert!(k > 0 && (k as f64) < 0.1 * n as f64, "kernel {k} of {n}");
    assert!(rows(&p)
        .iter()
        .filter(|r| r["kind"] == "kernel")
        .all(|r| r["image"] == "[kernel.kallsyms]" && !r["symbol"].as_str().unwrap().is_empty()));

    // Callers in the ratio of the calls the workload made through each (two to one, in
    // an order that repeats no pattern, so that the fixed sampling rate cannot lock onto
    // one caller; the counts it prints are exact). Each call does the same work, so A's
    // share of the samples is its share of the calls within five standard deviations of
    // sampling: a binomial draw leaves that once in 1.7 million runs (about 6 points for
    // 1500 samples); callers swapped (33 points off) or merged (17) never stay inside it.
    let c = profile(&file, &["--callers", HOT]);
    let v = &c["callers"];
    let total = v["samples"].as_f64().unwrap();
    assert!(total >= hot / 100.0 * n as f64 - 1.0, "{v}");
    let pct = |name: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["symbol"] == name)
            .map_or(0.0, |r| r["percent"].as_f64().unwrap())
    };
    let (a, b) = (pct("kstate_spin_caller_a"), pct("kstate_spin_caller_b"));
    let (calls_a, calls_b) = spin_calls(&lines);
    let want = 100.0 * calls_a as f64 / (calls_a + calls_b) as f64;
    let sd = (want * (100.0 - want) / total).sqrt();
    assert!(
        (a - want).abs() <= 5.0 * sd && (b - (100.0 - want)).abs() <= 5.0 * sd,
        "A {a:.1}%, B {b:.1}% of {total} samples; calls {calls_a}:{calls_b} ({want:.1}% A): {v}"
    );
    // The debug binary's frames outgrow the default stack copy below the workload's
    // entry; there the kernel's frame-pointer chain, which agrees with the CFI walk so
    // far, completes it: next to no chain is cut.
    let chains = &c["user_chains"];
    let cut = chains["cut"].as_u64().unwrap();
    assert!(cut * 20 <= n, "{chains}");
    assert_eq!(v["rows"][0]["symbol"], "kstate_spin_caller_a");
    // What caller A calls: the hot loop, always.
    let c = profile(&file, &["--callees", "kstate_spin_caller_a"]);
    assert_eq!(c["callees"]["rows"][0]["symbol"], HOT, "{c}");
    assert!(c["callees"]["rows"][0]["percent"].as_f64().unwrap() > 95.0);

    // Filters cut the same samples as the analyzers': a window past the end, another
    // process, the workload's own comm, its CPUs.
    let none = profile(&file, &["--window", "1000:"]);
    assert_eq!(none["samples"], 0);
    assert_eq!(profile(&file, &["--pid", "1"])["samples"], 0);
    let mine = profile(&file, &["--comm", "kstate"]);
    assert!(mine["samples"].as_u64().unwrap() >= n - 5, "{mine}");
    let first_half = profile(&file, &["--window", ":0.5"])["samples"]
        .as_u64()
        .unwrap();
    let second = profile(&file, &["--not-window", ":0.5"])["samples"]
        .as_u64()
        .unwrap();
    assert_eq!(first_half + second, n);
    assert!(first_half > 0 && second > 0);
    let cpus: u64 = sum["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let c = c["cpu"].as_u64().unwrap();
            profile(&file, &["--cpu", &c.to_string()])["samples"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(cpus, n);

    // The text report says the same.
    let out = ok(&["profile", file.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    let first_row = text.lines().find(|l| !l.starts_with('#')).unwrap();
    assert!(
        first_row.contains(HOT) && first_row.contains("binary"),
        "{text}"
    );

    // A flame graph of the same samples: the hot loop over both callers.
    let svg = dir.path().join("f.svg");
    ok(&[
        "profile",
        "--flame",
        "-o",
        svg.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(&format!("<title>all ({n} samples, 100.00%)</title>")));
    for f in [
        "kstate_spin_caller_a (",
        "kstate_spin_caller_b (",
        "kstate_spin_hot_loop (",
    ] {
        assert!(svg.contains(&format!("<title>{f}")), "{f} missing");
    }

    // A profile against itself: every symbol unchanged.
    let out = ok(&[
        "diff",
        "--json",
        file.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let syms = d["symbols"].as_array().unwrap();
    assert_eq!(syms.len(), rows(&p).len());
    assert!(syms
        .iter()
        .all(|r| r["delta_percent"].as_f64().unwrap() == 0.0
            && r["before_samples"] == r["after_samples"]));
    no_instances_left();
}

/// Hardware events on a machine without a PMU: a plain refusal and exit status 1, or
/// cpu-clock with --sample-fallback. Where the machine has a PMU, cycles are sampled.
#[test]
fn hardware_events_need_a_pmu_or_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hw.dat");
    let f = file.to_str().unwrap();
    let spin = [KSTATE, "workload", "spin", "--ms", "200"];
    let mut args = vec!["record", "--json", "--sample", "cycles", "-o", f, "--"];
    args.extend_from_slice(&spin);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let has_pmu = out.status.success();
    if has_pmu {
        let p = profile(&file, &[]);
        assert_eq!(p["event"], "cycles");
        assert!(p["samples"].as_u64().unwrap() > 0);
    } else {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(
                "this machine has no hardware PMU: cycles is not available; use --sample cpu-clock or add --sample-fallback"
            ),
            "{stderr}"
        );
        // Refused before anything was set up: no file, no instance.
        assert!(!file.exists());
        no_instances_left();
    }
    let mut args = vec!["--sample", "cycles", "--sample-fallback", "-o", f, "--"];
    args.extend_from_slice(&spin);
    let (sum, _) = record(&args);
    let s = &sum["samples"];
    assert!(s["samples"].as_u64().unwrap() > 100, "{sum}");
    if !has_pmu {
        assert_eq!(s["what"], "cpu-clock at 999 Hz", "{sum}");
        assert_eq!(s["fell_back_from"], "cycles");
        let p = profile(&file, &[]);
        assert_eq!(p["event"], "cpu-clock");
        assert_eq!(rows(&p)[0]["symbol"], HOT);
    }
    // An event kstate does not know is a usage error.
    let out = run(&["record", "--sample", "nosuch", "-o", f, "--", "true"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown event"));
    no_instances_left();
}

/// The top symbols of `perf report --no-children` for the same run: kstate records with
/// --sample while `perf record -e cpu-clock -g` runs the workload under it, so both
/// sample the same execution; kstate's profile is cut to the workload by --comm.
#[test]
fn agrees_with_perf_report() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("both.dat");
    let pdata = dir.path().join("perf.data");
    record(&[
        "--sample",
        "-e",
        "sched",
        "-o",
        file.to_str().unwrap(),
        "--",
        "perf",
        "record",
        "-q",
        "-F",
        "999",
        "-e",
        "cpu-clock",
        "-g",
        "-o",
        pdata.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "spin",
        "--ms",
        "1000",
    ]);
    let out = Command::new("perf")
        .args(["report", "--stdio", "--no-children", "-g", "none"])
        .args(["--sort", "sym", "--comm", "kstate", "-i"])
        .arg(&pdata)
        .output()
        .expect("perf must be installed (apt-get install linux-perf)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // "    98.40%  [.] kstate_spin_hot_loop"
    let perf: Vec<(f64, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('%'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let pct = w.next()?.strip_suffix('%')?.parse().ok()?;
            let _mark = w.next()?;
            Some((pct, w.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    assert!(!perf.is_empty(), "{text}");
    let p = profile(&file, &["--comm", "kstate"]);
    let ours = rows(&p);
    assert_eq!(perf[0].1, HOT, "{text}");
    assert_eq!(ours[0]["symbol"], HOT, "{p}");
    let d = (perf[0].0 - ours[0]["percent"].as_f64().unwrap()).abs();
    assert!(d < 3.0, "{HOT}: perf {:.2}% vs kstate {p}", perf[0].0);
    // Below the top, both see a long tail of single samples (kernel entry, page faults,
    // start-up); every perf symbol above 0.5 % is in kstate's profile within 2 points.
    for (pct, name) in perf.iter().filter(|(pct, _)| *pct > 0.5) {
        let mine = share_of(&p, name);
        assert!(
            (pct - mine).abs() < 2.0,
            "{name}: perf {pct:.2}% vs kstate {mine:.2}%"
        );
    }
}

/// A mapped file that changed since the recording (a rebuilt binary) gives no names for
/// its samples, and says why; with the original in perf's build-id cache (`~/.debug`),
/// its names come from there.
#[test]
fn build_id_mismatch_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("spinner");
    std::fs::copy(KSTATE, &exe).unwrap();
    let file = dir.path().join("m.dat");
    record(&[
        "--sample",
        "-e",
        "sched",
        "-o",
        file.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "workload",
        "spin",
        "--ms",
        "300",
    ]);
    // perf may have cached this binary for other tests: a home of its own has no cache.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let profile_in = |home: &Path| -> Value {
        let o = Command::new(KSTATE)
            .args(["profile", "--json", file.to_str().unwrap()])
            .env("HOME", home)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let p = profile_in(&home);
    assert_eq!(rows(&p)[0]["symbol"], HOT);
    // Replace the binary with another ELF file (a different build id).
    let other = std::fs::read_link("/proc/self/exe").unwrap();
    std::fs::copy(other, &exe).unwrap();
    let p = profile_in(&home);
    let top = &rows(&p)[0];
    assert_eq!(top["symbol"], "[build-id mismatch]", "{p}");
    assert_eq!(top["image"], "spinner");
    let w = p["warnings"].to_string();
    assert!(
        w.contains("spinner: build id") && w.contains("differs"),
        "{w}"
    );
    assert!(!rows(&p).iter().any(|r| r["symbol"] == HOT));
    // The original in the cache, where perf keeps it: .debug/.build-id/ab/cdef.../elf.
    let notes = Command::new("readelf")
        .args(["-n", KSTATE])
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&notes.stdout);
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("readelf shows the build id")
        .to_string();
    let slot = home.join(".debug/.build-id").join(&id[..2]).join(&id[2..]);
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::copy(KSTATE, slot.join("elf")).unwrap();
    let p = profile_in(&home);
    assert_eq!(rows(&p)[0]["symbol"], HOT, "{p}");
    assert_eq!(rows(&p)[0]["image"], "spinner", "{p}");
}

/// Without --sample there is nothing to profile: a clear error.
#[test]
fn profile_of_a_recording_without_samples() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain.dat");
    record(&["-e", "sched", "-o", file.to_str().unwrap(), "--", "true"]);
    let out = run(&["profile", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kstate record --sample"));
}
