//! What the CLI tests share: running the kstate binary and reading its output, the
//! fixtures, and the oracles (trace-cmd's report, parsed once in `tracecmd`, compared with
//! kstate's NDJSON through `normalize`). Each test module says `use crate::support;` and
//! takes what it needs.
#![allow(dead_code)]

pub mod block;
pub mod built;
pub mod normalize;
pub mod tcline;
pub mod tracecmd;

use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use tracecmd::{EventLine, Formats, Kallsyms, Report};

pub const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

/// Runs `kstate ARGS`; panics with its stderr unless it succeeds; returns stdout.
pub fn kstate<S: AsRef<OsStr>>(args: &[S]) -> String {
    String::from_utf8(ok(args).stdout).expect("UTF-8 output")
}

/// Runs `kstate ARGS`; panics with its status and output unless it succeeds; returns the
/// whole output (for tests that read stderr or bytes too).
pub fn ok<S: AsRef<OsStr>>(args: &[S]) -> std::process::Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "kstate {} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        shown(args),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The arguments as a command line, for messages.
fn shown<S: AsRef<OsStr>>(args: &[S]) -> String {
    let v: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    v.join(" ")
}

/// Runs `kstate ARGS` whatever its outcome: status, stdout and stderr to inspect.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> std::process::Output {
    Command::new(KSTATE)
        .args(args)
        .output()
        .expect("run kstate")
}

/// Runs `kstate ARGS FILE` whatever its outcome.
pub fn run_on<S: AsRef<OsStr>>(args: &[S], file: &Path) -> std::process::Output {
    Command::new(KSTATE)
        .args(args)
        .arg(file)
        .output()
        .expect("run kstate")
}

/// `kstate ARGS` whose output is one JSON value.
pub fn kstate_json<S: AsRef<OsStr>>(args: &[S]) -> Value {
    let text = kstate(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{text}"))
}

/// The one JSON value a kstate run printed; panics with both streams unless it succeeded
/// (for runs that need their own environment, made with `Command::new(KSTATE)`).
pub fn success_json(out: &std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `gcc FLAGS -o DIR/NAME DIR/NAME.c` of `source`: the program's path.
pub fn gcc(dir: &Path, name: &str, source: &str, flags: &[&str]) -> String {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let st = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc is needed by these tests");
    assert!(st.success(), "gcc {flags:?} {}", src.display());
    exe.to_str().unwrap().to_string()
}

/// `perf record RECORD -o DATA -- CMD`, then `perf script SCRIPT -i DATA`: what perf
/// script prints. Panics where perf fails.
pub fn perf_script(data: &Path, record: &[&str], cmd: &[&str], script: &[&str]) -> String {
    let st = Command::new("perf")
        .arg("record")
        .args(record)
        .arg("-o")
        .arg(data)
        .arg("--")
        .args(cmd)
        .output()
        .expect("perf is needed by these tests");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let out = Command::new("perf")
        .arg("script")
        .args(script)
        .arg("-i")
        .arg(data)
        .output()
        .expect("perf script");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The events of `file` (a comma list of names) as `kstate dump --json` prints them.
pub fn dump(file: &Path, events: &str) -> Vec<Value> {
    kstate(&[
        "dump".as_ref(),
        "--json".as_ref(),
        "--events".as_ref(),
        events.as_ref(),
        file.as_os_str(),
    ])
    .lines()
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

/// `trace-cmd report OPTS -i FILE`: stdout; fails (never skips) without trace-cmd.
pub fn trace_cmd_report(file: &Path, opts: &[&str]) -> String {
    let mut args = vec!["report"];
    args.extend_from_slice(opts);
    trace_cmd(&args, file)
}

/// Records `kstate workload ARGS` with `kstate record -e EVENTS` (system-wide with
/// `all`, else only the workload and its children) into `dest`; returns the workload's
/// pid.
pub fn record_workload(events: &str, workload: &[&str], all: bool, dest: &Path) -> i32 {
    let mut cmd = Command::new(KSTATE);
    cmd.args(["record", "--sysinfo-interval", "0", "-e", events, "-o"])
        .arg(dest);
    if all {
        cmd.arg("-a");
    }
    cmd.args(["--", KSTATE, "workload"]).args(workload);
    let out = cmd.output().expect("cannot run kstate record");
    assert!(
        out.status.success(),
        "kstate record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = kstate_json(&["info".as_ref(), "--json".as_ref(), dest.as_os_str()]);
    info["recording"]["workload_pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no workload pid in {}", info["recording"])) as i32
}

/// Records THREADS O_DIRECT writers of COUNT blocks of SIZE bytes each with EVENTS, into
/// DIR/NAME.dat, system-wide with `all` (block completions come from interrupts, outside
/// the workload); the data files are removed.
pub fn record_direct_writers(
    events: &str,
    all: bool,
    dir: &Path,
    name: &str,
    threads: u64,
    count: u64,
    size: u64,
) -> std::path::PathBuf {
    let file = dir.join(format!("{name}.dat"));
    let prefix = dir.join(format!("{name}-data"));
    let (t, c, s) = (threads.to_string(), count.to_string(), size.to_string());
    let p = prefix.to_str().expect("UTF-8 path");
    let args = [
        "direct-writers",
        "--threads",
        &t,
        "--count",
        &c,
        "--size",
        &s,
        p,
    ];
    record_workload(events, &args, all, &file);
    for i in 0..threads {
        let _ = std::fs::remove_file(format!("{p}.{i}"));
    }
    file
}

/// The row of `sym` in a `--compare-events` or `cachesim` JSON table.
pub fn comparison_row<'a>(c: &'a Value, sym: &str) -> &'a Value {
    c["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["symbol"] == sym)
        .unwrap_or_else(|| panic!("no row for {sym}: {c}"))
}

/// A Python with `packages` from PyPI, in a venv made once under the target directory as
/// `name` (reused while `imports` imports). Fails (never skips) when PyPI cannot be reached.
pub fn python_venv(name: &str, packages: &[&str], imports: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let py = dir.join("bin/python");
    let check = || {
        Command::new(&py)
            .args(["-c", &format!("import {imports}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if check() {
        return py;
    }
    let o = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output()
        .expect("python3 must be installed");
    assert!(
        o.status.success(),
        "python3 -m venv (python3-venv installed?): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(&py)
        .args(["-m", "pip", "install", "-q"])
        .args(packages)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pip install {} failed (is PyPI reachable?): {}",
        packages.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(check(), "venv at {} is incomplete", dir.display());
    py
}

/// The external fixtures compared against trace-cmd (same two traces in
/// format v6, v7 uncompressed and v7 zstd).
pub const FIXTURES: [&str; 6] = [
    "lisa-rtapp/trace.dat",
    "lisa-rtapp/trace.v7-none.dat",
    "lisa-rtapp/trace.v7-zstd.dat",
    "lisa-sched_load/trace.dat",
    "lisa-sched_load/trace.v7-none.dat",
    "lisa-sched_load/trace.v7-zstd.dat",
];

/// The test file `name` (testdata/ at the repository's root, or a v7 copy made from a file
/// there); panics if it is missing or cannot be made (never skips).
pub fn fixture(name: &str) -> PathBuf {
    kstate_testdata::path(name)
}

/// Paths of all [`FIXTURES`]; panics if one is missing (never skips).
pub fn fixture_paths() -> Vec<PathBuf> {
    FIXTURES.iter().map(|f| fixture(f)).collect()
}

/// Runs `trace-cmd ARGS -i FILE` and returns its stdout. Fails (does not
/// skip) when trace-cmd is not installed.
///
/// A report whose times come out as raw counts is taken again: trace-cmd 3.1.6 reads past
/// the end of an empty TRACECLOCK option (valgrind: "Invalid read of size 1 ... strtok_r
/// ... tracecmd_parse_trace_clock ... 0 bytes after a block of size 0"), so on the v7
/// fixtures it now and then takes whatever follows for a counter clock and prints
/// `[002]259445106948920:` instead of `[002] 259445.106949:`.
pub fn trace_cmd(args: &[&str], file: &Path) -> String {
    let raw_times = |text: &str| {
        text.lines().skip(1).take(20).any(|l| {
            l.split_once("] ")
                .is_none_or(|(_, rest)| !rest.split(':').next().unwrap_or("").contains('.'))
        })
    };
    let mut text = trace_cmd_once(args, file);
    if args.first() == Some(&"report") {
        for _ in 0..5 {
            if !raw_times(&text) {
                break;
            }
            text = trace_cmd_once(args, file);
        }
    }
    text
}

fn trace_cmd_once(args: &[&str], file: &Path) -> String {
    let out = match Command::new("trace-cmd")
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "trace-cmd is not installed, but the oracle tests need it: \
             run `apt-get install trace-cmd` (Debian trace-cmd 3.1.6 / libtraceevent 1.7 \
             is the reference). These tests are never skipped."
        ),
        Err(e) => panic!("cannot run trace-cmd: {e}"),
    };
    assert!(
        out.status.success(),
        "`trace-cmd {} -i {}` failed ({}):\n{}",
        args.join(" "),
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Everything trace-cmd says about one trace file.
pub struct Oracle {
    pub report_text: String,
    pub report: Report,
    pub formats: Formats,
    pub kallsyms: Kallsyms,
    pub big_endian: bool,
}

impl Oracle {
    fn load(file: &Path) -> Oracle {
        let mut formats =
            tracecmd::parse_ftrace_formats(&trace_cmd(&["dump", "--ftrace-events"], file));
        formats.extend(tracecmd::parse_formats(&trace_cmd(
            &["dump", "--events"],
            file,
        )));
        let report_text = trace_cmd(&["report", "-t", "-R"], file);
        let report = tracecmd::parse_report(&report_text, &formats);
        let kallsyms = Kallsyms::parse(&trace_cmd(&["dump", "--kallsyms"], file));
        let big_endian = tracecmd::summary_is_big_endian(&trace_cmd(&["dump", "--summary"], file));
        Oracle {
            report_text,
            report,
            formats,
            kallsyms,
            big_endian,
        }
    }

    pub fn ctx(&self) -> normalize::Ctx<'_> {
        normalize::Ctx {
            kallsyms: &self.kallsyms,
            big_endian: self.big_endian,
        }
    }
}

/// The oracle of `file`, computed once per test binary.
pub fn oracle(file: &Path) -> &'static Oracle {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, &'static Oracle>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry(file.to_path_buf())
        .or_insert_with(|| Box::leak(Box::new(Oracle::load(file))))
}

/// One line of `kstate dump --json`.
#[derive(Debug, Clone)]
pub struct JsonEvent {
    pub line_no: usize,
    pub text: String,
    pub ts: u64,
    pub cpu: u32,
    pub pid: i64,
    pub event: String,
    pub fields: Map<String, Value>,
}

/// Parses NDJSON: every line must be exactly
/// `{"ts": u64, "cpu": u32, "pid": int, "event": str, "fields": {...}, "text": str|null}`.
pub fn parse_ndjson(out: &str) -> Vec<JsonEvent> {
    out.lines()
        .enumerate()
        .map(|(i, line)| {
            let fail = |why: &str| -> ! { panic!("kstate --json line {}: {why}:\n{line}", i + 1) };
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| fail(&format!("invalid JSON ({e})")));
            let Value::Object(mut o) = v else {
                fail("not a JSON object")
            };
            let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
            keys.sort_unstable();
            if keys != ["cpu", "event", "fields", "pid", "text", "ts"] {
                fail(&format!(
                    "keys are {keys:?}, expected cpu, event, fields, pid, text, ts"
                ));
            }
            if !(o["text"].is_string() || o["text"].is_null()) {
                fail("text is neither a string nor null");
            }
            let ts = o["ts"]
                .as_u64()
                .unwrap_or_else(|| fail("ts is not a non-negative integer (ns)"));
            let cpu = o["cpu"]
                .as_u64()
                .and_then(|c| u32::try_from(c).ok())
                .unwrap_or_else(|| fail("cpu is not a small non-negative integer"));
            let pid = o["pid"]
                .as_i64()
                .unwrap_or_else(|| fail("pid is not an integer"));
            let event = o["event"]
                .as_str()
                .unwrap_or_else(|| fail("event is not a string"))
                .to_string();
            let Some(Value::Object(fields)) = o.remove("fields") else {
                fail("fields is not an object")
            };
            if let Some(k) = fields.keys().find(|k| k.starts_with("common_")) {
                fail(&format!("fields contains the common field `{k}`"));
            }
            JsonEvent {
                line_no: i + 1,
                text: line.to_string(),
                ts,
                cpu,
                pid,
                event,
                fields,
            }
        })
        .collect()
}

/// `(ts_ns, cpu, pid, event)`: what the column comparisons compare.
pub type Key = (u64, u32, i64, String);

pub fn key_of_line(e: &EventLine) -> Key {
    (e.ts_ns, e.cpu, e.pid, e.event.clone())
}

pub fn key_of_json(e: &JsonEvent) -> Key {
    (e.ts, e.cpu, e.pid, e.event.clone())
}

fn counts<'a>(keys: impl Iterator<Item = &'a Key>) -> BTreeMap<&'a str, usize> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k.3.as_str()).or_insert(0) += 1;
    }
    m
}

fn show_key(k: &Key) -> String {
    format!(
        "ts={} cpu={} pid={} event={}",
        tracecmd::format_timestamp(k.0),
        k.1,
        k.2,
        k.3
    )
}

/// Compares two event sequences by (ts, cpu, pid, event) and the event
/// count per name. `expected`/`actual` carry a description of each event
/// (e.g. `trace-cmd line 12: ...`) for the failure message, which shows only
/// the count differences and the first mismatch.
pub fn compare_keys(
    what: &str,
    expected: &[(Key, String)],
    actual: &[(Key, String)],
) -> Result<(), String> {
    let ce = counts(expected.iter().map(|(k, _)| k));
    let ca = counts(actual.iter().map(|(k, _)| k));
    let mut msg = String::new();
    if ce != ca {
        msg.push_str("event counts per name differ (name: trace-cmd vs kstate):\n");
        let names: std::collections::BTreeSet<&str> = ce.keys().chain(ca.keys()).copied().collect();
        for n in names {
            let (a, b) = (
                ce.get(n).copied().unwrap_or(0),
                ca.get(n).copied().unwrap_or(0),
            );
            if a != b {
                msg.push_str(&format!("  {n}: {a} vs {b}\n"));
            }
        }
    }
    if let Some(i) = (0..expected.len().min(actual.len())).find(|&i| expected[i].0 != actual[i].0) {
        msg.push_str(&format!(
            "first mismatch at event index {i}:\n  trace-cmd: {}\n             {}\n  kstate:    {}\n             {}\n",
            show_key(&expected[i].0),
            expected[i].1,
            show_key(&actual[i].0),
            actual[i].1
        ));
    } else if expected.len() != actual.len() {
        let n = expected.len().min(actual.len());
        let (who, extra) = if expected.len() > actual.len() {
            ("trace-cmd", &expected[n])
        } else {
            ("kstate", &actual[n])
        };
        msg.push_str(&format!(
            "the first {n} events agree; then {who} has more, starting with:\n  {}\n  {}\n",
            show_key(&extra.0),
            extra.1
        ));
    }
    if msg.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {} events from trace-cmd, {} from kstate\n{msg}",
            expected.len(),
            actual.len()
        ))
    }
}

/// Oracle events (optionally filtered) as comparison input.
pub fn oracle_keys(o: &Oracle, keep: impl Fn(&EventLine) -> bool) -> Vec<(Key, String)> {
    o.report
        .events
        .iter()
        .filter(|e| keep(e))
        .map(|e| {
            (
                key_of_line(e),
                format!("trace-cmd line {}: {}", e.line_no, e.text),
            )
        })
        .collect()
}

/// `perf record ARGS -o FILE -- WORKLOAD`, or with `pipe` `perf record ARGS -o - > FILE`.
/// The events perf says it lost in `data`: the sum of its PERF_RECORD_LOST records.
pub fn perf_lost(data: &Path) -> u64 {
    let o = Command::new("perf")
        .args(["script", "--show-lost-events", "-F", "event", "-i"])
        .arg(data)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains("PERF_RECORD_LOST"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

pub fn perf_record(out: &Path, args: &[&str], pipe: bool, workload: &[&str]) {
    let mut c = Command::new("perf");
    c.arg("record").arg("-q").args(args);
    if pipe {
        c.args(["-o", "-"])
            .stdout(std::fs::File::create(out).unwrap());
    } else {
        c.arg("-o").arg(out).stdout(std::process::Stdio::null());
    }
    let o = c
        .arg("--")
        .args(workload)
        .output()
        .expect("perf must be installed (apt-get install linux-perf)");
    assert!(
        o.status.success(),
        "perf record {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `perf ARGS FILE`'s standard output; perf must succeed.
pub fn perf_stdout(args: &[&str], file: &Path) -> String {
    let o = Command::new("perf")
        .args(args)
        .arg(file)
        .output()
        .expect("perf must be installed (apt-get install linux-perf)");
    assert!(
        o.status.success(),
        "perf {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Chromium's flags for a quiet, offline, headless load. Every request goes to a proxy
/// that is not there, so anything the page asked for would fail (and be in the net log).
pub fn chromium(profile: &Path, extra: &[&str], url: &str) -> std::process::Output {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--proxy-server=127.0.0.1:9",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output();
    match out {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("chromium is not installed (.ci/run installs Debian's chromium)")
        }
        Err(e) => panic!("cannot run chromium: {e}"),
    }
}

/// `perf record` options for system calls and the scheduler events kstate's analyzers
/// read.
pub const PERF_SCHED: &[&str] = &[
    "-e",
    "raw_syscalls:*",
    "-e",
    "sched:sched_switch",
    "-e",
    "sched:sched_wakeup",
    "-e",
    "sched:sched_wakeup_new",
    "-e",
    "sched:sched_migrate_task",
    "-e",
    "sched:sched_process_fork",
    "-e",
    "sched:sched_process_exit",
];
