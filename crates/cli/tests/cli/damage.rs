//! Damage is never silent: every command that reads a damaged or cut file names what it
//! skipped (the file, the offset, the problem) on stderr, marks its output as covering
//! only what could be read, and exits 2, as `info` and `dump` do. The damage is made in
//! a real recording, by the mutations that found commands silent: a file cut short, a
//! page header overwritten, an event format that does not parse, and an event id whose
//! format is gone.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::KSTATE;

/// A system-wide scheduler recording, uncompressed (so that the tests can reach its
/// format texts and pages), with events on more than one CPU.
fn record(dir: &Path) -> PathBuf {
    let f = dir.join("whole.dat");
    let o = Command::new(KSTATE)
        .args(["record", "--compress", "none", "--sysinfo-interval", "0"])
        .args(["-a", "-e", "sched", "-o"])
        .arg(&f)
        .args(["--", KSTATE, "workload", "sleep", "50", "2"])
        .output()
        .expect("kstate record runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    f
}

/// Each CPU's data as trace-cmd (the oracle for the layout) places it: (offset, size).
fn cpu_data(file: &Path) -> Vec<(u64, u64)> {
    let o = Command::new("trace-cmd")
        .args(["dump", "--flyrecord", "-i"])
        .arg(file)
        .output()
        .expect("trace-cmd runs");
    let text = String::from_utf8_lossy(&o.stdout);
    let mut v: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| l.contains("[id, data offset and size]"))
        .map(|l| {
            let n: Vec<u64> = l
                .split_whitespace()
                .take(3)
                .map(|w| w.parse().unwrap())
                .collect();
            (n[1], n[2])
        })
        .collect();
    v.dedup();
    assert!(!v.is_empty(), "no CPU data in trace-cmd's dump: {text}");
    v
}

fn find(bytes: &[u8], what: &[u8], from: usize) -> usize {
    from + bytes[from..]
        .windows(what.len())
        .position(|w| w == what)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(what)))
}

/// A damaged copy of `whole`: its name, and a word of what the commands must say.
struct Damaged {
    file: PathBuf,
    problem: &'static str,
    /// Whether the file cannot be read at all (so no command writes an output).
    refused: bool,
}

fn damaged(whole: &Path, dir: &Path) -> Vec<Damaged> {
    let src = std::fs::read(whole).unwrap();
    let cpus = cpu_data(whole);
    let (first, _) = cpus[0];
    let mut out = Vec::new();
    let mut put = |name: &str, bytes: &[u8], problem| {
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        out.push(Damaged {
            file,
            problem,
            refused: name == "cut.dat",
        });
    };
    // Cut inside the first CPU's data: the rest of it, the other CPUs' and the section
    // table after them (v7 writes it last) are gone.
    put("cut.dat", &src[..first as usize + 3000], "the file ends");
    // The first page's commit (after its 8-byte timestamp) runs past the page.
    let mut b = src.clone();
    let at = first as usize + 8;
    b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    put("page.dat", &b, "commit");
    // sched_switch's format does not parse: a field's size is not a number.
    let mut b = src.clone();
    let name = find(&b, b"name: sched_switch\n", 0);
    let size = find(&b, b"size:16;", name);
    b[size..size + 8].copy_from_slice(b"size:zz;");
    put("format.dat", &b, "does not parse");
    // sched_switch's id is changed in its format: its records have an id with no format.
    let mut b = src.clone();
    let id = find(&b, b"ID: ", name) + 4;
    let digits = b[id..].iter().take_while(|c| c.is_ascii_digit()).count();
    b[id..id + digits].fill(b'9');
    put("id.dat", &b, "no event format");
    out
}

fn run(args: &[&str]) -> Output {
    Command::new(KSTATE)
        .args(args)
        .output()
        .expect("kstate runs")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Exit 2, and stderr names the file, an offset and the problem.
fn says(o: &Output, d: &Damaged, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    let file = d.file.display().to_string();
    assert_eq!(o.status.code(), Some(2), "{what} of {file}: {err}");
    assert!(
        err.contains(&file),
        "{what}: stderr does not name {file}: {err}"
    );
    assert!(
        err.contains("offset"),
        "{what} of {file}: no offset in: {err}"
    );
    assert!(
        err.contains(d.problem),
        "{what} of {file}: {:?} not in: {err}",
        d.problem
    );
}

/// The JSON output's "damage" names the file and the problem.
fn marked(v: &Value, d: &Damaged, what: &str) {
    let damage = v["damage"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {v}"));
    assert!(
        damage
            .iter()
            .any(|e| e["file"] == s(&d.file)
                && e["problem"].as_str().unwrap_or("").contains(d.problem)),
        "{what} of {}: damage {damage:?}",
        d.file.display()
    );
}

/// Where the command printed JSON (an analysis that could not run prints none), it is
/// marked.
fn marked_json(o: &Output, d: &Damaged, what: &str) {
    if !o.stdout.is_empty() {
        marked(&serde_json::from_slice(&o.stdout).unwrap(), d, what);
    }
}

#[test]
fn every_command_names_the_damage_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let whole = record(dir.path());
    // The whole file is read without a word (the premise of every check below).
    for args in [&["info"][..], &["analyze", "runq"], &["classify"]] {
        let o = run(&[args, &[s(&whole)]].concat());
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stderr.is_empty() || !String::from_utf8_lossy(&o.stderr).contains("offset"));
    }
    let chart = dir.path().join("whole.svg");
    assert!(run(&["plot", "runq", "-o", s(&chart), s(&whole)])
        .status
        .success());
    let chart = std::fs::read_to_string(&chart).unwrap();
    assert!(
        !chart.contains("damaged input"),
        "a whole file's chart is marked"
    );
    let mut charts_drawn = 0;
    for d in damaged(&whole, dir.path()) {
        let f = s(&d.file);
        let out = |name: &str| {
            dir.path().join(format!(
                "{}-{name}",
                d.file.file_stem().unwrap().to_str().unwrap()
            ))
        };

        let o = run(&["info", "--json", f]);
        says(&o, &d, "info");
        if !d.refused {
            marked(
                &serde_json::from_slice(&o.stdout).unwrap(),
                &d,
                "info --json",
            );
        }
        says(&run(&["dump", f]), &d, "dump");

        // An analysis either reports on what could be read, marked, or (where the damage
        // took its events) says the damage may hide them.
        let o = run(&["analyze", "runq", "--format", "json", f]);
        says(&o, &d, "analyze runq");
        marked_json(&o, &d, "analyze --format json");

        let html = out("report.html");
        let o = run(&["report", f, "-o", s(&html)]);
        says(&o, &d, "report");
        if !d.refused {
            let page = std::fs::read_to_string(&html).unwrap();
            assert!(
                page.contains("<section id=\"damage\">"),
                "report of {f}: no damage section"
            );
            assert!(
                page.contains(d.problem),
                "report of {f}: {:?} not on the page",
                d.problem
            );
        }

        says(&run(&["classify", f]), &d, "classify");
        let o = run(&["compare", "--format", "json", s(&whole), f]);
        says(&o, &d, "compare");
        marked_json(&o, &d, "compare --format json");
        let svg = out("plot.svg");
        let o = run(&["plot", "runq", "-o", s(&svg), f]);
        says(&o, &d, "plot");
        if let Ok(chart) = std::fs::read_to_string(&svg) {
            charts_drawn += 1;
            assert!(
                chart.contains("damaged input: "),
                "plot of {f}: the chart is not marked as drawn from a damaged file"
            );
        }

        for to in ["dat", "chrome-json", "perfetto"] {
            let o = run(&["convert", "--to", to, "-o", s(&out(to)), f]);
            says(&o, &d, &format!("convert --to {to}"));
        }
        let o = run(&["split", "--per-cpu", "-o", s(&out("split")), f]);
        says(&o, &d, "split");
    }
    assert!(charts_drawn > 0, "no damaged file was charted");
}
