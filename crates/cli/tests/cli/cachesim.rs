//! `kstate cachesim` on `kstate workload cache-pollution`: `stream_once` reads each 64-byte
//! line of a 16 MiB buffer once (every read a D1 and LL miss) while `hot_table` makes 6 M
//! reads of a 4 KiB table (all hits after the first). The streamer must come out with most
//! of the misses in a small share of the references, flagged; the table not. cachegrind's
//! own annotator, `cg_annotate`, is the oracle for the per-function counts and the totals.
//! Needs valgrind (CI installs it); never skips.

use crate::support;

use serde_json::Value;
use std::collections::HashMap;
use std::process::Command;
use support::{comparison_row as row, kstate, KSTATE};

const STREAM: &str = "kstate_lab::workload::cache_pollution::stream_once";
const HOT: &str = "kstate_lab::workload::cache_pollution::hot_table";

/// `cg_annotate`'s per-function rows (`file:function`) summed per function, and its
/// program totals; counts by event name.
fn cg_annotate(
    file: &std::path::Path,
) -> (HashMap<String, HashMap<String, u64>>, HashMap<String, u64>) {
    let out = Command::new("cg_annotate")
        .args(["--auto=no", "--threshold=0"])
        .arg(file)
        .output()
        .expect("cg_annotate (valgrind) is needed by this test: apt-get install valgrind");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let events: Vec<String> = text
        .lines()
        .find_map(|l| l.strip_prefix("Events shown:"))
        .expect("an Events shown: line")
        .split_whitespace()
        .map(String::from)
        .collect();
    // "1,234 (12.3%) 0 ... file:function": counts, with their percentages dropped.
    let counts = |l: &str| -> Option<(Vec<u64>, String)> {
        let mut v = Vec::new();
        let mut rest = l.trim_start();
        while v.len() < events.len() {
            let (tok, r) = rest.split_once(char::is_whitespace)?;
            v.push(if tok == "." {
                0
            } else {
                tok.replace(',', "").parse().ok()?
            });
            rest = r.trim_start();
            if rest.starts_with('(') {
                rest = rest.split_once(')')?.1.trim_start();
            }
        }
        Some((v, rest.to_string()))
    };
    let named = |v: Vec<u64>| -> HashMap<String, u64> { events.iter().cloned().zip(v).collect() };
    let mut totals = None;
    let mut fns: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for l in text.lines() {
        let Some((v, what)) = counts(l) else { continue };
        if what == "PROGRAM TOTALS" {
            totals = Some(named(v));
        } else if let Some((_, func)) = what.split_once(':') {
            let e = fns.entry(func.to_string()).or_default();
            for (k, n) in named(v) {
                *e.entry(k).or_default() += n;
            }
        }
    }
    (fns, totals.expect("PROGRAM TOTALS"))
}

#[test]
fn the_streamer_is_the_polluter() {
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("cg.out");
    // The command's own output comes first; the JSON object is the last line.
    let out = kstate(&[
        "cachesim",
        "--json",
        "--top",
        "0",
        "--keep",
        cg.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "cache-pollution",
        "--mib",
        "16",
        "--hot",
        "6000000",
    ]);
    assert!(
        out.starts_with("cache-pollution: stream_once read 262144 lines"),
        "{out}"
    );
    let c: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(c["simulated"], true);
    assert!(
        c["valgrind"].as_str().unwrap().starts_with("valgrind-"),
        "{}",
        c["valgrind"]
    );
    assert!(c["caches"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.as_str().unwrap().starts_with("D1 cache:")));
    assert_eq!(c["exit_status"], 0);
    assert_eq!(c["base"]["name"], "data refs");
    assert_eq!(c["tested"][0]["name"], "D1 misses");
    assert_eq!(c["tested"][1]["name"], "LL misses");

    let st = row(&c, STREAM);
    let d1 = st["tested"][0]["percent"].as_f64().unwrap();
    let refs = st["base_percent"].as_f64().unwrap();
    assert!(d1 > 50.0 && refs < 10.0, "{st}");
    assert_eq!(st["flagged"], true);
    assert_eq!(c["symbols"][0]["symbol"], STREAM, "the flagged first");
    // One miss per line read: 16 MiB / 64 B.
    assert!(
        st["tested"][0]["count"].as_u64().unwrap() >= 262_144,
        "{st}"
    );
    let hot = row(&c, HOT);
    assert!(hot["base_percent"].as_f64().unwrap() > 50.0, "{hot}");
    assert!(hot["tested"][0]["percent"].as_f64().unwrap() < 1.0, "{hot}");
    assert_eq!(hot["flagged"], false);

    // The oracle: cg_annotate on the same output file.
    let (fns, totals) = cg_annotate(&cg);
    let sum = |m: &HashMap<String, u64>, a: &str, b: &str| m[a] + m[b];
    assert_eq!(
        c["base"]["total"].as_u64().unwrap(),
        sum(&totals, "Dr", "Dw")
    );
    assert_eq!(
        c["tested"][0]["total"].as_u64().unwrap(),
        sum(&totals, "D1mr", "D1mw")
    );
    assert_eq!(
        c["tested"][1]["total"].as_u64().unwrap(),
        sum(&totals, "DLmr", "DLmw")
    );
    for sym in [STREAM, HOT] {
        let (r, o) = (row(&c, sym), &fns[sym]);
        assert_eq!(r["base"].as_u64().unwrap(), sum(o, "Dr", "Dw"), "{sym}");
        assert_eq!(
            r["tested"][0]["count"].as_u64().unwrap(),
            sum(o, "D1mr", "D1mw"),
            "{sym}"
        );
        assert_eq!(
            r["tested"][1]["count"].as_u64().unwrap(),
            sum(o, "DLmr", "DLmw"),
            "{sym}"
        );
    }
    assert_eq!(
        fns[STREAM]["D1mr"],
        st["tested"][0]["count"].as_u64().unwrap() - fns[STREAM]["D1mw"]
    );

    // The text report, from the kept file: labelled as simulation, the streamer marked.
    let text = kstate(&["cachesim", "--input", cg.to_str().unwrap()]);
    assert!(
        text.starts_with("# SIMULATED caches (valgrind cachegrind)"),
        "{text}"
    );
    assert!(text.contains("#   D1 cache:"), "{text}");
    let line = |s: &str| text.lines().find(|l| l.ends_with(s)).unwrap().to_string();
    assert!(line(STREAM).starts_with(" * "), "{text}");
    assert!(!line(HOT).starts_with(" * "), "{text}");
}

#[test]
fn missing_valgrind_and_bad_input_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, "not cachegrind\n").unwrap();
    for (args, want) in [
        (
            vec!["--valgrind", "/nonexistent/valgrind", "--", "true"],
            "/nonexistent/valgrind not found",
        ),
        (
            vec!["--valgrind", "/bin/true", "--", "true"],
            "does not look like valgrind",
        ),
        (vec![], "give the command to simulate after --"),
        (vec!["--input", junk.to_str().unwrap()], "no events: line"),
        (
            vec!["--ll", "8M,16,64", "--", "true"],
            "expected SIZE,ASSOC,LINE",
        ),
        (
            vec!["--", "/nonexistent/prog"],
            "cachegrind wrote no output",
        ),
    ] {
        let mut a = vec!["cachesim"];
        a.extend(args);
        let out = Command::new(KSTATE).args(&a).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(want), "{a:?}: {err}");
    }
}

/// A cachesim stopped by SIGKILL (kstate and valgrind alike, as a test harness or an OOM
/// kill stops them) leaves nothing in $TMPDIR: valgrind writes into memory files, not a
/// scratch directory that only a clean exit removed.
#[test]
fn a_killed_cachesim_leaves_nothing_in_tmpdir() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut child = Command::new(KSTATE)
        .args(["cachesim", "--", "sleep", "30"])
        .env("TMPDIR", tmp.path())
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // valgrind is running the command once it has a child of its own under it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let pid = child.id() as i32;
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .is_ok_and(|c| !c.trim().is_empty())
    };
    while !running() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(running(), "valgrind did not start");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill of the child's own process group.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    child.wait().unwrap();
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}
