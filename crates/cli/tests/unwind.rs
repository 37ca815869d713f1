//! Callers through code without frame pointers: user chains unwound through the files'
//! DWARF CFI from the registers and stack copy each sample carries (`--stack-bytes`),
//! checked against `perf record --call-graph dwarf` on the same programs, and against
//! what the programs do by construction.

mod support;

use std::collections::HashMap;
use std::path::Path;

use support::{kstate, kstate_json, KSTATE};

/// A leaf gcc builds without a frame at -O1 (even with -mno-omit-leaf-frame-pointer),
/// called by `twice` with twice the work `once` gives it.
const LEAF_C: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) unsigned long leaf(unsigned long n) {
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) x = x * 31 + i;
    return x;
}
__attribute__((noinline)) unsigned long twice(unsigned long n) { return leaf(2 * n) + 1; }
__attribute__((noinline)) unsigned long once(unsigned long n) { return leaf(n) + 2; }
int main(int argc, char **argv) {
    unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 200, s = 0;
    for (unsigned long r = 0; r < rounds; r++)
        s += twice(1000000 + (r & 1)) + once(1000000 + (r & 1));
    return s == 42;
}
"#;

fn build_leaf(dir: &Path) -> String {
    let flags = [
        "-O1",
        "-fno-omit-frame-pointer",
        "-mno-omit-leaf-frame-pointer",
    ];
    support::gcc(dir, "leaf", LEAF_C, &flags)
}

/// Callers of `leaf` in `perf script` of a cpu-clock recording with `--call-graph MODE`.
fn perf_leaf_callers(exe: &str, mode: &str, dir: &Path) -> HashMap<String, u64> {
    let text = support::perf_script(
        &dir.join(format!("perf-{mode}.data")),
        &["-q", "-e", "cpu-clock", "-F", "999", "--call-graph", mode],
        &[exe, "150"],
        &["--no-inline", "-F", "ip,sym"],
    );
    let mut callers = HashMap::new();
    for chain in text.split("\n\n") {
        let syms: Vec<&str> = chain
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        if syms.first() == Some(&"leaf") {
            let c = syms.get(1).copied().unwrap_or("[no caller]");
            *callers.entry(c.to_string()).or_default() += 1;
        }
    }
    callers
}

/// `kstate record --sample --stack-bytes BYTES` of the leaf program running ROUNDS, then
/// `kstate profile --callers leaf --json`: caller -> samples, and the chain counts.
fn record_leaf(
    exe: &str,
    file: &Path,
    bytes: &str,
    rounds: &str,
) -> (HashMap<String, u64>, serde_json::Value) {
    let f = file.to_str().unwrap();
    let e = "sched:sched_process_exit";
    kstate(&[
        "record",
        "-e",
        e,
        "--sample",
        "--stack-bytes",
        bytes,
        "-o",
        f,
        "--",
        exe,
        rounds,
    ]);
    let v = kstate_json(&[
        "profile",
        "--callers",
        "leaf",
        "--json",
        file.to_str().unwrap(),
    ]);
    let rows = v["callers"]["rows"].as_array().unwrap();
    let m = rows
        .iter()
        .map(|r| {
            (
                r["symbol"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    (m, v["user_chains"].clone())
}

#[test]
fn a_frameless_leaf_shows_its_two_callers_in_their_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_leaf(tmp.path());
    let file = tmp.path().join("leaf.dat");
    let (callers, chains) = record_leaf(&exe, &file, "8192", "150");
    let (twice, once) = (callers["twice"], callers["once"]);
    let shown: u64 = callers.values().sum();
    // Nothing but the two real callers (not `main`, which a frame-pointer walk shows).
    assert!(twice + once >= shown * 98 / 100, "{callers:?}");
    let ratio = twice as f64 / once as f64;
    assert!(
        (1.6..=2.5).contains(&ratio),
        "twice:once {ratio:.2} {callers:?}"
    );
    assert!(chains["cfi"].as_u64().unwrap() >= shown, "{chains}");

    // The oracle: perf's DWARF unwinding sees the same two callers in the same ratio,
    // and its frame-pointer walk skips to main (why the stack copy is needed).
    let dwarf = perf_leaf_callers(&exe, "dwarf", tmp.path());
    let r = dwarf["twice"] as f64 / dwarf["once"] as f64;
    assert!((1.6..=2.5).contains(&r), "perf dwarf: {dwarf:?}");
    let fp = perf_leaf_callers(&exe, "fp", tmp.path());
    assert!(
        !fp.contains_key("twice") && fp.contains_key("main"),
        "perf fp: {fp:?}"
    );

    // Without a stack copy kstate sees what perf's frame-pointer walk sees.
    let plain = tmp.path().join("plain.dat");
    let (callers, chains) = record_leaf(&exe, &plain, "0", "50");
    assert!(
        !callers.contains_key("twice") && callers.contains_key("main"),
        "{callers:?}"
    );
    assert_eq!(chains["cfi"], 0, "{chains}");
}

#[test]
fn a_stack_copy_cut_short_cuts_chains_and_never_names_a_wrong_caller() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_leaf(tmp.path());
    let file = tmp.path().join("short.dat");
    let (callers, chains) = record_leaf(&exe, &file, "16", "50");
    let total = chains["cfi"].as_u64().unwrap()
        + chains["frame_pointers"].as_u64().unwrap()
        + chains["cut"].as_u64().unwrap();
    // 16 bytes hold no frame of main: every chain ends before the process's root.
    assert!(
        total > 0 && chains["cut"].as_u64().unwrap() == total,
        "{chains}"
    );
    for c in callers.keys() {
        assert!(
            ["twice", "once", "[no caller]"].contains(&c.as_str()),
            "{callers:?}"
        );
    }
}

/// Per caller of futex() calls made inside glibc's malloc or free, from `perf script` of
/// a `--call-graph dwarf` recording: the first frame outside libc.
fn perf_malloc_lock_callers(workload: &[&str], dir: &Path) -> HashMap<String, u64> {
    let mut cmd = vec![KSTATE, "workload"];
    cmd.extend(workload);
    let text = support::perf_script(
        &dir.join("perf-futex.data"),
        &[
            "-q",
            "-e",
            "syscalls:sys_enter_futex",
            "--call-graph",
            "dwarf",
        ],
        &cmd,
        &["--no-inline", "-F", "ip,sym,dso"],
    );
    let mut callers = HashMap::new();
    for chain in text.split("\n\n") {
        let frames: Vec<(&str, bool)> = chain
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (_, sym) = (w.next()?, w.next()?);
                Some((sym, l.contains("libc.so")))
            })
            .collect();
        let in_malloc = frames
            .iter()
            .any(|(s, libc)| *libc && (s.contains("malloc") || s.contains("free")));
        if let Some((caller, _)) = frames.iter().find(|(_, libc)| !libc).filter(|_| in_malloc) {
            *callers.entry(caller.to_string()).or_default() += 1;
        }
    }
    callers
}

#[test]
fn glibc_malloc_lock_is_taken_from_the_harness_function() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("malloc.dat");
    let workload = [
        "malloc-fight",
        "--threads",
        "8",
        "--iters",
        "100000",
        "--arenas",
        "1",
    ];
    let mut args = vec![
        "top-locks",
        "--json",
        "-o",
        file.to_str().unwrap(),
        "--",
        KSTATE,
    ];
    args.push("workload");
    args.extend(workload);
    let out = kstate(&args);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let arena = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"].as_str().unwrap().starts_with("main_arena@"))
        .unwrap_or_else(|| panic!("no main_arena lock (libc6-dbg installed?): {v}"));
    // Most waits (not most time: the few waits at thread start, in std's thread set-up,
    // can be long ones; they show as `[unknown caller]`, std's frames being machinery).
    let top = arena["callers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["caller"] != "[unknown caller]")
        .max_by_key(|c| c["waits"].as_u64().unwrap())
        .map(|c| c["caller"].as_str().unwrap())
        .unwrap();
    // The harness's own code: malloc_churn is the one function that calls malloc/free.
    assert_eq!(top, "kstate_lab::workload::malloc_churn", "{arena}");
    // Most chains were unwound through CFI to their root (`N unwound by CFI, ...`); the
    // main thread's, from a wait in join, may end past the stack copy, counted as cut.
    let notes = v["notes"][0].as_str().unwrap();
    let count = |what: &str| -> u64 {
        let before = notes.split(what).next().unwrap();
        before
            .rsplit([' ', ','])
            .find(|w| !w.is_empty())
            .unwrap()
            .parse()
            .unwrap()
    };
    let (cfi, cut) = (count(" unwound by CFI"), count(" cut short"));
    assert!(cfi > cut, "{notes}");

    // The oracle: perf's DWARF unwinding of the futex calls made inside malloc/free.
    let perf = perf_malloc_lock_callers(&workload, tmp.path());
    let best = perf
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(c, _)| c.as_str());
    assert_eq!(best, Some(top), "perf --call-graph dwarf: {perf:?}");
}
