//! perf.data without tracepoints, the kind `perf record` makes by default: recorded at test
//! time by Debian's perf in every layout a user meets (`-g`, `--call-graph dwarf`, `-a`,
//! two events, `-z`, pipe mode), read by `info`, `dump` and `profile`. `perf script` is the
//! oracle for the samples per event and per command, `perf report` for the top functions.
//! There is no hardware PMU here: the events are software ones.
use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{kstate_json, perf_record, perf_stdout, run};

const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

/// Samples per event and per (command, thread) as `perf script` prints them.
type Counts = (BTreeMap<String, u64>, BTreeMap<(String, u32), u64>);

fn perf_script_counts(file: &Path) -> Counts {
    let text = perf_stdout(&["script", "-G", "-F", "comm,tid,event", "-i"], file);
    let mut by_event = BTreeMap::new();
    let mut by_comm = BTreeMap::new();
    // "              ls 17385 page-faults: "
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 3 {
            continue;
        }
        let event = w[w.len() - 1].trim_end_matches(':').to_string();
        // A system-wide recording has samples perf prints as ":-1 -1" (no task).
        let tid = w[w.len() - 2]
            .parse::<i64>()
            .unwrap_or_else(|_| panic!("perf script line {l:?}")) as u32;
        let comm = w[..w.len() - 2].join(" ");
        *by_event.entry(event).or_default() += 1;
        *by_comm.entry((comm, tid)).or_default() += 1;
    }
    (by_event, by_comm)
}

fn kstate_counts(file: &Path) -> Counts {
    let o = run(&["dump", "--json", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut by_event = BTreeMap::new();
    let mut by_comm = BTreeMap::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        *by_event
            .entry(v["event"].as_str().unwrap().to_string())
            .or_default() += 1;
        let key = (
            v["comm"].as_str().unwrap().to_string(),
            v["tid"].as_u64().unwrap() as u32,
        );
        *by_comm.entry(key).or_default() += 1;
    }
    (by_event, by_comm)
}

/// Each layout: samples per event and per command equal perf script's; `info` counts the
/// same per event and names the file's layout.
#[test]
fn samples_per_event_and_command_match_perf_script() {
    let dir = tempfile::tempdir().unwrap();
    let spin = [KSTATE, "workload", "spin", "--ms", "300"];
    // In pipe mode perf's standard output is the file: the workload must write elsewhere.
    let quiet_spin = [
        "sh",
        "-c",
        "exec \"$0\" workload spin --ms 300 > /dev/null",
        KSTATE,
    ];
    let cases: [(&str, &[&str], bool, &[&str]); 6] = [
        ("g", &["-g", "-F", "999"], false, &spin),
        (
            "dwarf",
            &["--call-graph", "dwarf", "-F", "499"],
            false,
            &spin,
        ),
        ("all", &["-F", "999", "-a"], false, &["sleep", "0.3"]),
        (
            "two-events",
            &["-e", "cpu-clock,page-faults", "-g"],
            false,
            &["sh", "-c", "ls -R /usr/share/doc > /dev/null"],
        ),
        ("z", &["-z", "-g", "-F", "999"], false, &spin),
        ("pipe", &["-g", "-F", "999"], true, &quiet_spin),
    ];
    for (name, args, pipe, workload) in cases {
        let f = dir.path().join(format!("{name}.data"));
        perf_record(&f, args, pipe, workload);
        let want = perf_script_counts(&f);
        assert!(
            want.0.values().sum::<u64>() > 20,
            "{name}: perf script shows too few samples: {want:?}"
        );
        let got = kstate_counts(&f);
        assert_eq!(got.0, want.0, "{name}: samples per event");
        assert_eq!(got.1, want.1, "{name}: samples per command and thread");
        let info = kstate_json(&["info", "--json", f.to_str().unwrap()]);
        let per_event: BTreeMap<String, u64> = info["samples"]["per_event"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["event"].as_str().unwrap().to_string(),
                    e["samples"].as_u64().unwrap(),
                )
            })
            // `-a` adds perf's `dummy` event, which samples nothing.
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(per_event, want.0, "{name}: info per event");
        // The samples are the file's events: counted in the top lines as perf script lists them.
        assert_eq!(
            info["events"].as_u64(),
            Some(want.0.values().sum::<u64>()),
            "{name}: info events"
        );
        let counts: BTreeMap<String, u64> =
            serde_json::from_value(info["event_counts"].clone()).unwrap();
        assert_eq!(counts, want.0, "{name}: info event_counts");
        assert_eq!(info["perf"]["pipe_mode"], pipe, "{name}: {info}");
        assert!(
            info["perf"]["perf_version"].is_string(),
            "{name}: no perf version: {info}"
        );
    }
}

/// `kstate info` of the smallest sample files (`perf record -e page-faults -- sleep 0.2`) and
/// of tracepoint and software samples together, system-wide: events in all, per event and
/// per CPU as `perf script` lists them (it said "events: 0" and listed no CPU or event).
#[test]
fn info_counts_samples_per_event_and_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("pf.data");
    perf_record(&small, &["-e", "page-faults"], false, &["sleep", "0.2"]);
    let want = perf_script_counts(&small).0;
    let total: u64 = want.values().sum();
    assert!(total > 0, "perf script shows no page fault of sleep");
    let text = support::kstate(&["info", small.to_str().unwrap()]);
    assert!(
        text.contains(&format!("\nevents:      {total}\n")),
        "perf script has {total} samples:\n{text}"
    );
    assert!(
        text.contains(&format!("\n  {total:>10}  page-faults\n")),
        "per event:\n{text}"
    );
    // Samples of one command carry no CPU: a row says so, with the samples' time span.
    assert!(
        text.contains("(samples that do not record their CPU)"),
        "{text}"
    );
    assert!(!text.contains("(no events)"), "{text}");

    let mixed = dir.path().join("mixed.data");
    perf_record(
        &mixed,
        &["-a", "-e", "sched:sched_switch,cpu-clock,page-faults"],
        false,
        &["sh", "-c", "ls -R /usr/share/doc > /dev/null; sleep 0.1"],
    );
    let want = perf_script_counts(&mixed).0;
    let info = kstate_json(&["info", "--json", mixed.to_str().unwrap()]);
    let counts: BTreeMap<String, u64> =
        serde_json::from_value(info["event_counts"].clone()).unwrap();
    // perf names a tracepoint system:name; kstate's tracepoint events are named as in
    // trace.dat, without the system.
    let want_named: BTreeMap<String, u64> = want
        .iter()
        .map(|(e, n)| (e.rsplit(':').next().unwrap().to_string(), *n))
        .collect();
    assert_eq!(counts, want_named, "{info}");
    assert_eq!(info["events"].as_u64(), Some(want.values().sum::<u64>()));
    let mut per_cpu_want: BTreeMap<u64, u64> = BTreeMap::new();
    for l in perf_stdout(&["script", "-F", "cpu", "-i"], &mixed).lines() {
        let cpu = l.trim().trim_start_matches('[').trim_end_matches(']');
        *per_cpu_want.entry(cpu.parse().unwrap()).or_default() += 1;
    }
    let per_cpu: BTreeMap<u64, u64> = info["per_cpu"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["events"].as_u64() > Some(0))
        .map(|c| (c["cpu"].as_u64().unwrap(), c["events"].as_u64().unwrap()))
        .collect();
    assert_eq!(per_cpu, per_cpu_want, "{info}");
}

/// `perf report --stdio --no-children` rows: (share, dso, symbol).
fn perf_report(file: &Path) -> Vec<(f64, String, String)> {
    let args = ["report", "--stdio", "--no-children", "-g", "none"];
    let text = perf_stdout(&[&args[..], &["--sort", "dso,sym", "-i"]].concat(), file);
    // "    98.40%  kstate  [.] kstate_spin_hot_loop"
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains('%'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let pct = w.next()?.strip_suffix('%')?.parse().ok()?;
            let dso = w.next()?.to_string();
            let _mark = w.next()?;
            Some((pct, dso, w.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// kstate's top functions on a perf.data of a binary with symbols are perf report's: the
/// same symbols with the same shares (both weigh by period), in the same order where the
/// shares differ.
#[test]
fn profile_top_functions_match_perf_report() {
    let dir = tempfile::tempdir().unwrap();
    for (name, args) in [
        ("g", &["-g", "-F", "999"][..]),
        ("dwarf", &["--call-graph", "dwarf", "-F", "499"][..]),
        ("z", &["-z", "-F", "999"][..]),
    ] {
        let f = dir.path().join(format!("{name}.data"));
        perf_record(
            &f,
            args,
            false,
            &[KSTATE, "workload", "spin", "--ms", "500"],
        );
        let perf = perf_report(&f);
        let p = kstate_json(&["profile", "--json", f.to_str().unwrap()]);
        let ours: Vec<(f64, String)> = p["symbols"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["percent"].as_f64().unwrap(),
                    r["symbol"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        // Rows perf names (not an address), above 1 %: kstate has each with its share.
        let named: Vec<&(f64, String, String)> = perf
            .iter()
            .filter(|(pct, _, sym)| *pct >= 1.0 && !sym.starts_with("0x"))
            .collect();
        assert!(!named.is_empty(), "{name}: {perf:?}");
        assert!(
            named[0].2.contains("kstate_spin_hot_loop"),
            "{name}: perf's top is {:?}",
            named[0]
        );
        let mut last_pos = 0usize;
        let mut last_pct = f64::MAX;
        for (pct, dso, sym) in named {
            let pos = ours.iter().position(|(_, s)| s == sym).unwrap_or_else(|| {
                panic!("{name}: {sym} ({dso}, {pct}%) not in kstate's {ours:?}")
            });
            assert!(
                (ours[pos].0 - pct).abs() < 0.011,
                "{name}: {sym}: perf {pct:.2}% kstate {:.2}%",
                ours[pos].0
            );
            if *pct < last_pct - 0.011 {
                assert!(
                    pos >= last_pos,
                    "{name}: {sym} comes before a larger share in kstate's order: {ours:?}"
                );
            }
            last_pos = pos;
            last_pct = *pct;
        }
    }
}

/// A C++ program, built here by g++ with frame pointers: `shapes::Acc<double>::add` (a
/// template member), `shapes::spin_double` (static) and `plain_c`. `SQUARE_OFFSET` changes
/// the code, so two builds have different build ids.
const CPP_SOURCE: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace shapes {
template <typename T> struct Acc {
    T total{};
    __attribute__((noinline)) void add(const std::vector<T>& v) {
        for (auto x : v) total += x * x + SQUARE_OFFSET;
    }
};
static __attribute__((noinline)) double spin_double(long n) {
    Acc<double> a;
    std::vector<double> v(1000, 1.5);
    for (long i = 0; i < n; i++) a.add(v);
    return a.total;
}
}
extern "C" __attribute__((noinline)) long plain_c(long n) {
    long s = 0;
    for (long i = 0; i < n * 3000; i++) s += i ^ (s >> 3);
    return s;
}
int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    double d = shapes::spin_double(n);
    long c = plain_c(n);
    printf("%f %ld\n", d, c);
}
"#;

fn gxx(dir: &Path, name: &str, offset: &str) -> PathBuf {
    let src = dir.join(format!("{name}.cpp"));
    std::fs::write(&src, CPP_SOURCE).unwrap();
    let exe = dir.join(name);
    let o = std::process::Command::new("g++")
        .args(["-O1", "-g", "-fno-omit-frame-pointer"])
        .arg(format!("-DSQUARE_OFFSET={offset}"))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("g++ must be installed (apt-get install g++)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

/// kstate's (share, symbol) rows.
fn profile_rows(file: &Path) -> Vec<(f64, String)> {
    let p = kstate_json(&["profile", "--json", "--top", "0", file.to_str().unwrap()]);
    p["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["percent"].as_f64().unwrap(),
                r["symbol"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Each of perf's rows (share, kstate's name for it) is kstate's, with the same share, in
/// the same order where the shares differ.
fn same_rows(what: &str, perf: &[(f64, String)], ours: &[(f64, String)]) {
    let mut last_pos = 0usize;
    let mut last_pct = f64::MAX;
    for (pct, sym) in perf {
        let pos = ours
            .iter()
            .position(|(_, s)| s == sym)
            .unwrap_or_else(|| panic!("{what}: {sym} ({pct}%) not in kstate's {ours:?}"));
        assert!(
            (ours[pos].0 - pct).abs() < 0.011,
            "{what}: {sym}: perf {pct:.2}% kstate {:.2}%",
            ours[pos].0
        );
        if *pct < last_pct - 0.011 {
            assert!(
                pos >= last_pos,
                "{what}: {sym} comes before a larger share in kstate's order: {ours:?}"
            );
        }
        last_pos = pos;
        last_pct = *pct;
    }
}

/// C++ names are demangled as perf shows them (`shapes::Acc<double>::add`, no parameters),
/// and code of a stripped binary is named by image and address (`app2+0x12ba`) where
/// perf report has `0x00000000000012ba` in app2 (it said `[unknown]`, one row for all):
/// the rows above 1 % equal `perf report --no-children`'s, at test time.
#[test]
fn cpp_names_and_stripped_code_match_perf_report() {
    let dir = tempfile::tempdir().unwrap();
    let exe = gxx(dir.path(), "app", "1");
    let f = dir.path().join("cpp.data");
    perf_record(
        &f,
        &["-g", "-F", "999"],
        false,
        &[exe.to_str().unwrap(), "20000"],
    );
    let perf: Vec<(f64, String)> = perf_report(&f)
        .into_iter()
        .filter(|(pct, _, _)| *pct >= 1.0)
        .map(|(pct, _, sym)| (pct, sym))
        .collect();
    let names: Vec<&str> = perf.iter().map(|(_, s)| s.as_str()).collect();
    assert!(
        names.contains(&"shapes::Acc<double>::add") && names.contains(&"plain_c"),
        "perf report: {perf:?}"
    );
    let ours = profile_rows(&f);
    assert!(
        !ours.iter().any(|(_, s)| s.starts_with("_Z")),
        "mangled: {ours:?}"
    );
    same_rows("C++ with symbols", &perf, &ours);

    // Stripped, with other code (another build id, so no copy with symbols is found).
    let exe = gxx(dir.path(), "app2", "2");
    assert!(std::process::Command::new("strip")
        .arg(&exe)
        .status()
        .unwrap()
        .success());
    let f = dir.path().join("stripped.data");
    perf_record(
        &f,
        &["-g", "-F", "999"],
        false,
        &[exe.to_str().unwrap(), "20000"],
    );
    let perf: Vec<(f64, String)> = perf_report(&f)
        .into_iter()
        .filter(|(pct, _, _)| *pct >= 1.0)
        .map(|(pct, dso, sym)| match sym.strip_prefix("0x") {
            Some(hex) => {
                let at = u64::from_str_radix(hex, 16).unwrap();
                (pct, format!("{dso}+{at:#x}"))
            }
            None => (pct, sym),
        })
        .collect();
    assert!(
        perf.iter()
            .filter(|(_, s)| s.starts_with("app2+0x"))
            .count()
            >= 2,
        "perf report: {perf:?}"
    );
    let ours = profile_rows(&f);
    assert!(!ours.iter().any(|(_, s)| s == "[unknown]"), "{ours:?}");
    same_rows("stripped C++", &perf, &ours);
}

/// A newer perf's attributes (152 bytes, which Debian's perf 6.1 refuses) are read: the
/// file's attribute table rewritten with 24 more bytes each gives the same profile.
#[test]
fn larger_attributes_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    perf_record(
        &f,
        &["-e", "cpu-clock,page-faults", "-F", "999"],
        false,
        &[KSTATE, "workload", "spin", "--ms", "200"],
    );
    let mut b = std::fs::read(&f).unwrap();
    let u = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (attr_size, at, size) = (u(&b, 16) as usize, u(&b, 24) as usize, u(&b, 32) as usize);
    let grown = attr_size + 24;
    let mut table = Vec::new();
    for a in b[at..at + size].chunks(attr_size) {
        let attr = &a[..attr_size - 16];
        table.extend_from_slice(attr);
        table.extend_from_slice(&[0u8; 24]);
        table.extend_from_slice(&a[attr_size - 16..]);
        let n = table.len() - grown;
        table[n + 4..n + 8].copy_from_slice(&((grown - 16) as u32).to_le_bytes());
    }
    // The new table goes at the end (nothing else is located relative to it).
    let new_at = b.len() as u64;
    b.extend_from_slice(&table);
    b[16..24].copy_from_slice(&(grown as u64).to_le_bytes());
    b[24..32].copy_from_slice(&new_at.to_le_bytes());
    b[32..40].copy_from_slice(&(table.len() as u64).to_le_bytes());
    let g = dir.path().join("grown.data");
    std::fs::write(&g, &b).unwrap();
    let want = kstate_counts(&f);
    assert_eq!(kstate_counts(&g), want);
    assert_eq!(want, perf_script_counts(&f));
    let info = kstate_json(&["info", "--json", g.to_str().unwrap()]);
    assert_eq!(info["perf"]["attr_size"], grown as u64 - 16, "{info}");
}

/// Tracepoints recorded to a pipe read like any other trace: the analyzer gets every
/// system call perf script shows.
#[test]
fn pipe_mode_tracepoints() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("pipe.data");
    perf_record(
        &f,
        &["-e", "raw_syscalls:*"],
        true,
        &["sh", "-c", "ls /usr > /dev/null"],
    );
    let text = perf_stdout(&["script", "-F", "event", "-i"], &f);
    let enters = text.lines().filter(|l| l.contains("sys_enter")).count() as u64;
    assert!(enters > 20, "{text}");
    let info = kstate_json(&["info", "--json", f.to_str().unwrap()]);
    assert_eq!(
        info["event_counts"]["sys_enter"].as_u64(),
        Some(enters),
        "{info}"
    );
    // And from standard input, as `perf record -o - ... | kstate analyze syscall -`.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_kstate"))
        .args(["analyze", "syscall", "-"])
        .stdin(std::fs::File::open(&f).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let from_file = run(&["analyze", "syscall", f.to_str().unwrap()]);
    let without_name = |b: &[u8]| -> String {
        String::from_utf8_lossy(b)
            .lines()
            .filter(|l| !l.starts_with("file:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_name(&o.stdout), without_name(&from_file.stdout));
    assert!(without_name(&o.stdout).contains("pairs:"));
}

fn stderr_of(args: &[&str]) -> (i32, String) {
    let o = run(args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Empty, version-1 and cut files each say what they are; a cut one reads what came
/// before the cut and says where it ended.
#[test]
fn empty_old_and_cut_files_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.data");
    std::fs::write(&empty, b"").unwrap();
    let (code, err) = stderr_of(&["info", empty.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("empty (0 bytes): nothing was recorded"),
        "{err}"
    );

    let v1 = dir.path().join("v1.data");
    let mut b = b"PERFFILE".to_vec();
    b.extend_from_slice(&[0u8; 200]);
    std::fs::write(&v1, &b).unwrap();
    let (code, err) = stderr_of(&["profile", v1.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("version 1") && err.contains("PERFFILE"),
        "{err}"
    );

    let f = dir.path().join("perf.data");
    perf_record(
        &f,
        &["-F", "999", "-g"],
        false,
        &[KSTATE, "workload", "spin", "--ms", "300"],
    );
    let whole = kstate_counts(&f).0.values().sum::<u64>();
    let b = std::fs::read(&f).unwrap();
    let data_at = u64::from_le_bytes(b[40..48].try_into().unwrap()) as usize;
    let data_len = u64::from_le_bytes(b[48..56].try_into().unwrap()) as usize;
    let cut: PathBuf = dir.path().join("cut.data");
    std::fs::write(&cut, &b[..data_at + data_len / 2 + 3]).unwrap();
    let o = run(&["dump", "--json", cut.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("runs past the end") && err.contains("record") && err.contains("offset"),
        "{err}"
    );
    let part = String::from_utf8_lossy(&o.stdout).lines().count() as u64;
    assert!(
        part > 0 && part < whole,
        "{part} of {whole} samples before the cut"
    );
    // `profile` (and `diff`) print the profile of what came before the cut, then the
    // damage as an error, once, and exit 2 as `dump` does (they exited 0 with a warning).
    for args in [&["profile", "--json"][..], &["diff", "--json"][..]] {
        let mut args = args.to_vec();
        if args[0] == "diff" {
            args.push(f.to_str().unwrap());
        }
        args.push(cut.to_str().unwrap());
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let lines = err.lines().filter(|l| l.contains("runs past the end"));
        assert_eq!(lines.count(), 1, "{err}");
        assert!(err.contains(cut.to_str().unwrap()), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON output");
        if args[0] == "profile" {
            let n = v["samples"].as_u64().unwrap_or(0);
            assert!(n > 0 && n < whole, "{n} of {whole} samples before the cut");
        }
    }
}
