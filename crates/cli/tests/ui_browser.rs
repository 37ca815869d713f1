//! `kstate ui` in a real browser: Debian's headless Chromium driven by Playwright for
//! Python (installed into a venv under the target directory; KSTATE_TEST_UI_PYTHON names
//! a Python that already has it). The scenario is the seed's write-stall drill-down on a
//! live recording of six O_DIRECT writers (20 MB each), then one writer against six; the
//! page's numbers are checked against the kstate CLI's for the same filters
//! (tests/ui_browser.py), and the drill-down's findings against trace-cmd's report of the
//! same file. Screenshots of every view land in target/tmp/ui-shots. Needs
//! root, tracefs, python3 and /usr/bin/chromium; never skips.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use std::collections::HashMap;

use support::block;
use support::tracecmd::{parse_header, parse_timestamp};
use support::{record_direct_writers, KSTATE};

/// A `kstate ui` server, stopped when dropped.
struct Server {
    child: Child,
    url: String,
    _out: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start(files: &[&Path]) -> Server {
        let mut child = Command::new(KSTATE)
            .arg("ui")
            .args(files)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start kstate ui");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("kstate ui printed no URL: {line:?}"))
            .to_string();
        Server {
            child,
            url,
            _out: out,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Python with Playwright.
fn python() -> PathBuf {
    if let Ok(p) = std::env::var("KSTATE_TEST_UI_PYTHON") {
        return p.into();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("uivenv");
    let py = dir.join("bin/python");
    let has = |py: &Path| {
        Command::new(py)
            .args(["-c", "import playwright.sync_api"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has(&py) {
        return py;
    }
    let o = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output()
        .expect("python3 must be installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(&py)
        .args(["-m", "pip", "install", "-q", "playwright"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pip install playwright failed (is PyPI reachable?): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    py
}

#[test]
fn write_stall_drill_down_and_one_against_six_writers_in_chromium() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // The seed's six writers of 20 MB each, with scheduling, system calls and block I/O.
    let stall = record_direct_writers("perf,syscall,bio", true, dir.path(), "six", 6, 20, 1 << 20);
    // One writer against six, as many writes on each side (as tests/compare.rs).
    let (one, six) = pair_with_p99_regressed(dir.path());
    let bad = dir.path().join("not-a-trace.dat");
    std::fs::write(&bad, "this is not a trace\n").unwrap();

    let s1 = Server::start(&[&stall]);
    let s2 = Server::start(&[&one, &six]);
    let s3 = Server::start(&[&bad]);
    // Scheduling only against system calls only: no analyzer in common.
    let sched = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/external/lisa-sched_load/trace.dat"
    ));
    let s4 = Server::start(&[sched, &one]);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ui_browser.py");
    let out = Command::new(python())
        .arg(script)
        .arg(KSTATE)
        .arg(&shots)
        .arg(&s1.url)
        .arg(&stall)
        .arg(&s2.url)
        .arg(&one)
        .arg(&six)
        .arg(&s3.url)
        .arg(&s4.url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // The seed's question: were the block requests issued while the longest writes
    // waited slower than the others, and was the queue at its fullest then? The page's
    // answer must be trace-cmd's for the same file, paired here: p99 within the
    // histogram's 0.4 % (plus a nanosecond), the same way round, the same peaks.
    let key = report["biotime_key"].as_str().unwrap();
    let oracle = Oracle::of(&stall, report["window"].as_str().unwrap());
    let page_in = report["biotime_p99_inside_ns"].as_u64().unwrap();
    let page_out = report["biotime_p99_outside_ns"].as_u64().unwrap_or(0);
    let peaks = &report["blkqueue_peaks"][key];
    println!(
        "{key}: p99 inside the window {page_in} ns (trace-cmd {} ns, {} requests), outside {page_out} ns (trace-cmd {} ns, {}); \
         most in flight inside {} of {} (trace-cmd {} of {})",
        oracle.p99_in, oracle.n_in, oracle.p99_out, oracle.n_out, peaks[0], peaks[1], oracle.peak_in, oracle.peak_whole
    );
    let near = |a: u64, b: u64| a.abs_diff(b) <= b / 250 + 1;
    assert!(
        oracle.n_in > 0,
        "trace-cmd: no write request issued in the window"
    );
    assert!(
        near(page_in, oracle.p99_in),
        "p99 inside: page {page_in}, trace-cmd {}",
        oracle.p99_in
    );
    assert!(
        near(page_out, oracle.p99_out),
        "p99 outside: page {page_out}, trace-cmd {}",
        oracle.p99_out
    );
    // The issue asks that p99 inside the stall window (the longest write and those
    // overlapping it) be larger than outside. On this VM's disk that held in 4 of 6
    // recordings (inside 9.4 ms against 1.7 ms; but also 636 us against 788 us): with six
    // writers of one 1 MiB request each, at most 6 are in flight and the device serves
    // them at one pace, so the longest writes wait elsewhere (CPU, file system) as often
    // as on the disk. Asserting it would fail half the runs, so the page is held to what
    // trace-cmd says of the same file instead: the same way round.
    if !near(oracle.p99_in, oracle.p99_out) {
        assert_eq!(
            page_in > page_out,
            oracle.p99_in > oracle.p99_out,
            "inside vs outside the other way round"
        );
    }
    assert_eq!(
        (peaks[0].as_u64(), peaks[1].as_u64()),
        (Some(oracle.peak_in), Some(oracle.peak_whole)),
        "{key}: most requests in flight"
    );
}

/// Recording pairs tried before p99's regression is called absent: the disk is shared
/// with other jobs, whose stray slow writes can make one writer's p99 as slow as six's
/// (1 pair in 4 measured; tests/compare.rs says more). The test fails if no pair is.
const ATTEMPTS: usize = 3;

/// One writer and six writers (1,200 writes of 256 KiB on each side), recorded until
/// `kstate compare` flags `write`'s p99 (at most [`ATTEMPTS`] pairs); the page is then
/// checked on that pair.
fn pair_with_p99_regressed(dir: &Path) -> (PathBuf, PathBuf) {
    let mut tried = Vec::new();
    for n in 0..ATTEMPTS {
        let sub = dir.join(format!("pair{n}"));
        std::fs::create_dir_all(&sub).unwrap();
        let one = record_direct_writers("syscall", false, &sub, "w1", 1, 1200, 256 << 10);
        let six = record_direct_writers("syscall", false, &sub, "w6", 6, 200, 256 << 10);
        let out = Command::new(KSTATE)
            .arg("compare")
            .args([&one, &six])
            .args(["--analyzer", "syscall", "--key", "write", "--metric", "p99"])
            .args(["--format", "json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = &v["analyzers"][0]["rows"][0];
        if row["regressed"] == true {
            return (one, six);
        }
        tried.push(format!(
            "one {} ns, six {} ns",
            row["a"]["p99"], row["b"]["p99"]
        ));
    }
    panic!(
        "write p99 not flagged in {ATTEMPTS} pairs: {}",
        tried.join("; ")
    );
}

/// The drill-down's figures from `trace-cmd report -t -R` of the recording: write
/// requests on the busiest device, issue to complete, issued inside the window or not.
struct Oracle {
    p99_in: u64,
    p99_out: u64,
    n_in: usize,
    n_out: usize,
    peak_in: u64,
    peak_whole: u64,
}

impl Oracle {
    /// `window`: `FROM:TO`, seconds after the trace's first event (as the page sets it).
    fn of(file: &Path, window: &str) -> Oracle {
        let evs = block::report(file);
        let t0 = first_event(file);
        let (a, b) = window.split_once(':').unwrap();
        let abs = |x: &str| t0 + parse_timestamp(x).unwrap();
        let w = (abs(a), abs(b));
        let mut writes: HashMap<u64, usize> = HashMap::new();
        for e in evs.iter().filter(|e| e.event == "block_rq_complete") {
            if block::op(&e.rwbs) == 'W' {
                *writes.entry(e.dev).or_default() += 1;
            }
        }
        let dev = *writes
            .iter()
            .max_by_key(|d| d.1)
            .expect("no write requests")
            .0;
        let (done, _) = block::requests(&evs, dev, 'W');
        let (inside, outside): (Vec<_>, Vec<_>) =
            done.iter().partition(|m| (w.0..=w.1).contains(&m.issued));
        let dur = |v: &[&block::Measured]| v.iter().map(|m| m.done - m.issued).collect();
        let (peak_in, peak_whole) = block::peak_in(&evs, dev, 'W', w);
        Oracle {
            p99_in: block::p99(dur(&inside)),
            p99_out: block::p99(dur(&outside)),
            n_in: inside.len(),
            n_out: outside.len(),
            peak_in,
            peak_whole,
        }
    }
}

/// The time of the trace's first event, as trace-cmd reports it.
fn first_event(file: &Path) -> u64 {
    let mut child = Command::new("trace-cmd")
        .args(["report", "-t", "-R", "-i"])
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("trace-cmd is needed: apt-get install trace-cmd");
    let out = BufReader::new(child.stdout.take().unwrap());
    let ts = out
        .lines()
        .map_while(Result::ok)
        .find_map(|l| parse_header(&l).map(|h| h.ts_ns));
    let _ = child.kill();
    let _ = child.wait();
    ts.expect("trace-cmd reported no event")
}
