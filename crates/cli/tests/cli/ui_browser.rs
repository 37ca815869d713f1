//! `kstate ui` in a real browser: Debian's headless Chromium driven by Playwright for
//! Python (installed into a venv under the target directory; KSTATE_TEST_UI_PYTHON names
//! a Python that already has it). The scenario is the seed's write-stall drill-down on a
//! live recording of six O_DIRECT writers (20 MB each), then one writer against six; the
//! page's numbers are checked against the kstate CLI's for the same filters
//! (ui_browser.py beside this file), and the drill-down's findings against trace-cmd's report of the
//! same file. Screenshots of every view land in target/tmp/ui-shots. Needs
//! root, tracefs, python3 and /usr/bin/chromium; never skips.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    // The seed's six writers of 20 MB each, with scheduling, system calls and block I/O,
    // on a disk that stalls once (frozen for 300 ms a quarter of the way through).
    let disk = StallingDisk::new(dir.path());
    let stall = disk.record_writers(dir.path(), "six", 6, 20, 1 << 20);
    // One writer against six, as many writes on each side (as compare.rs), on the
    // stalling disk (not frozen): no other job's writes reach it, so six writers queue
    // behind one another on its one loop worker and only on it.
    let (one, six) = pair_with_p99_regressed(&disk.b);
    let bad = dir.path().join("not-a-trace.dat");
    std::fs::write(&bad, "this is not a trace\n").unwrap();

    let s1 = Server::start(&[&stall]);
    let s2 = Server::start(&[&one, &six]);
    let s3 = Server::start(&[&bad]);
    // Scheduling only against system calls only: no analyzer in common.
    let sched = support::fixture("lisa-sched_load/trace.dat");
    let s4 = Server::start(&[&sched, &one]);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/ui_browser.py");
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
        .arg(disk.key_prefix())
        .arg(&sched)
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
    let oracle = Oracle::of(&stall, report["window"].as_str().unwrap(), disk.dev);
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
    // The finding: the requests issued while the longest writes waited (the
    // disk frozen) took longer than the others, on the page and in trace-cmd's report.
    assert!(
        page_in > page_out && oracle.p99_in > oracle.p99_out,
        "p99 inside the stall window {page_in} ns (trace-cmd {}), outside {page_out} ns (trace-cmd {})",
        oracle.p99_in,
        oracle.p99_out
    );
    assert_eq!(
        (peaks[0].as_u64(), peaks[1].as_u64()),
        (Some(oracle.peak_in), Some(oracle.peak_whole)),
        "{key}: most requests in flight"
    );
}

/// Recording pairs tried before p99's regression is called absent. On the machine's
/// shared disk other jobs' stray slow writes made one writer's p99 as slow as six's (1
/// pair in 4 measured, 3 in 3 under two builds); on the loop-backed disk they cannot.
/// The test fails if no pair is.
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
/// requests on the stalling disk (`dev`, the kernel's dev_t), issue to complete, issued inside the window or not.
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
    fn of(file: &Path, window: &str, dev: u64) -> Oracle {
        let evs = block::report(file);
        let t0 = first_event(file);
        let (a, b) = window.split_once(':').unwrap();
        let abs = |x: &str| t0 + parse_timestamp(x).unwrap();
        let w = (abs(a), abs(b));
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

/// A disk that stalls on demand, with no hardware: an ext4 file system (B) on a loop
/// device whose backing file lies in another loop-mounted ext4 (A). Freezing A
/// (`fsfreeze`) holds every request of B in flight, issued but not completed, until A
/// thaws: the write stall of the seed's drill-down, at a known time and for a known
/// length, where the shared disk's own slow writes came and went at random (biotime p99
/// inside the stall window larger than outside held in 4 of 6 recordings on it). Outside
/// the freeze B's requests land in A's page cache (fast). Torn down when dropped.
struct StallingDisk {
    /// Mount points of A and B, and their loop devices (A's first).
    a: PathBuf,
    b: PathBuf,
    loops: Vec<String>,
    /// B's device: the kernel's dev_t (MKDEV: major << 20 | minor) and kstate's key
    /// prefix (major << 8 | minor, 8 hex digits).
    dev: u64,
    major_minor: (u64, u64),
}

/// Runs a command that must succeed; its standard output.
fn must(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

impl StallingDisk {
    fn new(dir: &Path) -> StallingDisk {
        let mut disk = StallingDisk {
            a: dir.join("disk-a"),
            b: dir.join("disk-b"),
            loops: Vec::new(),
            dev: 0,
            major_minor: (0, 0),
        };
        let image_a = dir.join("a.img");
        disk.make(&image_a, 1024, &disk.a.clone());
        let image_b = disk.a.join("b.img");
        // The pair's 300 MiB of data at a time, and the recordings.
        disk.make(&image_b, 640, &disk.b.clone());
        let name = disk.loops[1].trim_start_matches("/dev/").to_string();
        let mm = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
        let (ma, mi) = mm.trim().split_once(':').unwrap();
        disk.major_minor = (ma.parse().unwrap(), mi.parse().unwrap());
        disk.dev = disk.major_minor.0 << 20 | disk.major_minor.1;
        disk
    }

    /// An ext4 of `mb` MB in `image`, on a loop device, mounted at `at`.
    fn make(&mut self, image: &Path, mb: u64, at: &Path) {
        std::fs::File::create(image)
            .unwrap()
            .set_len(mb << 20)
            .unwrap();
        must(
            Command::new("mkfs.ext4")
                .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
                .arg(image),
        );
        let dev = must(
            Command::new("losetup")
                .args(["--find", "--show"])
                .arg(image),
        );
        self.loops.push(dev.clone());
        std::fs::create_dir_all(at).unwrap();
        must(Command::new("mount").arg(&dev).arg(at));
    }

    /// kstate's key of B's writes begins with this (`00000705-W(loop5)`).
    fn key_prefix(&self) -> String {
        format!("{:08x}-W", self.major_minor.0 << 8 | self.major_minor.1)
    }

    /// Records THREADS O_DIRECT writers of COUNT blocks of SIZE bytes on B (system-wide,
    /// scheduling, system calls and block I/O) into DIR/NAME.dat; once a quarter of the
    /// data is written, A is frozen for 300 ms.
    /// Records `threads` writers of `count` writes of `size` bytes on B, with A frozen
    /// for 300 ms once a quarter of their data is written. Recorded again (up to three
    /// times) where no write waited out the freeze: `fsfreeze -f` first syncs A, and on a
    /// loaded machine the writers could finish during that sync, leaving nothing to find.
    fn record_writers(
        &self,
        dir: &Path,
        name: &str,
        threads: u64,
        count: u64,
        size: u64,
    ) -> PathBuf {
        let file = dir.join(format!("{name}.dat"));
        let mut tried = Vec::new();
        for _ in 0..3 {
            let _ = std::fs::remove_file(&file);
            let froze = self.record_writers_once(&file, name, threads, count, size);
            let longest = longest_write_ns(&file);
            if froze && longest >= 200_000_000 {
                return file;
            }
            tried.push(format!("froze: {froze}, longest write {longest} ns"));
        }
        panic!("no recording caught a write stalled by the 300 ms freeze: {tried:?}");
    }

    /// One recording of [`StallingDisk::record_writers`]; whether A was frozen while
    /// the writers ran.
    fn record_writers_once(
        &self,
        file: &Path,
        name: &str,
        threads: u64,
        count: u64,
        size: u64,
    ) -> bool {
        let prefix = self.b.join(format!("{name}-data"));
        let mut child = Command::new(KSTATE)
            .args([
                "record",
                "--sysinfo-interval",
                "0",
                "-e",
                "perf,syscall,bio",
                "-a",
                "-o",
            ])
            .arg(file)
            .args(["--", KSTATE, "workload", "direct-writers", "--threads"])
            .arg(threads.to_string())
            .arg("--count")
            .arg(count.to_string())
            .arg("--size")
            .arg(size.to_string())
            .arg(&prefix)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run kstate record");
        let written = || -> u64 {
            (0..threads)
                .map(|i| {
                    std::fs::metadata(format!("{}.{i}", prefix.display())).map_or(0, |m| m.len())
                })
                .sum()
        };
        let quarter = threads * count * size / 4;
        let t = std::time::Instant::now();
        while written() < quarter && t.elapsed().as_secs() < 60 {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let froze = written() >= quarter && child.try_wait().unwrap().is_none();
        if froze {
            must(Command::new("fsfreeze").arg("-f").arg(&self.a));
            std::thread::sleep(std::time::Duration::from_millis(300));
            must(Command::new("fsfreeze").arg("-u").arg(&self.a));
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kstate record failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for i in 0..threads {
            let _ = std::fs::remove_file(format!("{}.{i}", prefix.display()));
        }
        froze
    }
}

/// The longest write call in `file` (ns), as `kstate analyze syscall --log` sorts them.
fn longest_write_ns(file: &Path) -> u64 {
    let out = must(
        Command::new(KSTATE)
            .args([
                "analyze", "syscall", "--key", "write", "--log", "--sort", "value",
            ])
            .args(["--top", "1", "--format", "json"])
            .arg(file),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["rows"][0]["dur_ns"].as_u64().unwrap_or(0)
}

impl Drop for StallingDisk {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze").arg("-u").arg(&self.a).output();
        // B's loop device holds A's file open: A unmounts only once B is detached.
        let mounts = [&self.a, &self.b];
        for (at, dev) in mounts.iter().zip(&self.loops).rev() {
            let _ = Command::new("umount").arg(at).output();
            let _ = Command::new("losetup").arg("-d").arg(dev).output();
        }
    }
}
