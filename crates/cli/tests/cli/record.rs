//! `kstate record` against the running kernel: known workloads give known event counts,
//! the files read in trace-cmd with the same counts, and every way out leaves tracefs
//! clean. Needs root and tracefs (as the CI machine has); never skips.
use crate::support;

use support::{ok, run, KSTATE};

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INSTANCES: &str = "/sys/kernel/tracing/instances";
/// getppid on x86_64.
#[cfg(target_arch = "x86_64")]
const NR_GETPPID: i64 = 110;
#[cfg(target_arch = "aarch64")]
const NR_GETPPID: i64 = 173;

/// `kstate record --json ARGS`: the summary object (the last stdout line; the workload
/// may print before it).
fn record(args: &[&str]) -> Value {
    let mut all = vec!["record", "--json"];
    all.extend_from_slice(args);
    let out = ok(&all);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().expect("a summary line");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {last}"))
}

fn info(file: &Path) -> Value {
    let out = ok(&["info", "--json", file.to_str().unwrap()]);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every event of `file` as (event name, pid, fields), from `kstate dump --json`.
fn dump(file: &Path, events: &str) -> Vec<(String, i64, serde_json::Map<String, Value>)> {
    let out = ok(&["dump", "--json", "--events", events, file.to_str().unwrap()]);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["event"].as_str().unwrap().to_string(),
                v["pid"].as_i64().unwrap(),
                v["fields"].as_object().unwrap().clone(),
            )
        })
        .collect()
}

/// `trace-cmd report` of the file: (exit ok, stdout, stderr).
fn trace_cmd_report(file: &Path) -> (bool, String, String) {
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(file)
        .output()
        .expect("trace-cmd must be installed (apt-get install trace-cmd)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Event lines in trace-cmd report output (everything but the "cpus=N" header).
fn report_event_lines(report: &str) -> usize {
    report
        .lines()
        .filter(|l| !l.starts_with("cpus=") && !l.trim().is_empty())
        .count()
}

fn kstate_instances() -> Vec<String> {
    std::fs::read_dir(INSTANCES)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("kstate-"))
        .collect()
}

fn instances_of(pid: u32) -> Vec<String> {
    let prefix = format!("kstate-{pid}-");
    kstate_instances()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tmp() -> tempfile::TempDir {
    // Beside the target directory: on the real disk (not tmpfs), like a user's recording.
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(base).unwrap()
}

fn getppid_calls(file: &Path, pid: i64) -> (usize, usize) {
    let evs = dump(file, "raw_syscalls:sys_enter,raw_syscalls:sys_exit");
    let enter = evs
        .iter()
        .filter(|(e, p, f)| e == "sys_enter" && *p == pid && f["id"] == NR_GETPPID)
        .count();
    let exit = evs
        .iter()
        .filter(|(e, p, f)| e == "sys_exit" && *p == pid && f["id"] == NR_GETPPID)
        .count();
    (enter, exit)
}

fn recorded_pid(file: &Path) -> i64 {
    let i = info(file);
    let pids = i["recording"]["pids"].as_array().expect("recording pids");
    assert_eq!(pids.len(), 1, "one workload pid: {pids:?}");
    pids[0].as_i64().unwrap()
}

#[test]
fn getppid_calls_are_recorded_exactly_and_trace_cmd_agrees() {
    let dir = tmp();
    let out = dir.path().join("getppid.dat");
    let n = 12_345;
    let s = record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "syscall",
        "--",
        KSTATE,
        "workload",
        "getppid",
        &n.to_string(),
    ]);
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["workload_exit"], 0);
    let pid = recorded_pid(&out);
    assert_eq!(getppid_calls(&out, pid), (n, n));

    // The summary, kstate info and trace-cmd report count the same events.
    let i = info(&out);
    assert_eq!(i["events"], s["events"]);
    assert_eq!(i["truncated"], false);
    let (okay, report, stderr) = trace_cmd_report(&out);
    assert!(okay && stderr.trim().is_empty(), "trace-cmd: {stderr}");
    assert_eq!(
        report_event_lines(&report) as u64,
        i["events"].as_u64().unwrap()
    );
    let tc_getppid = report
        .lines()
        .filter(|l| {
            l.contains(&format!("-{pid} "))
                && l.contains(&format!("sys_enter:            NR {NR_GETPPID} ("))
        })
        .count();
    assert_eq!(tc_getppid, n, "trace-cmd sees the same getppid entries");

    // The pid filter kept other processes out; every event lies inside the recording.
    let evs = dump(&out, "raw_syscalls:sys_enter");
    assert!(evs.iter().all(|(_, p, _)| *p == pid));
    let rec = &i["recording"];
    let (start, stop) = (
        rec["start_ts"].as_u64().unwrap(),
        rec["stop_ts"].as_u64().unwrap(),
    );
    assert!(start <= i["first_ts"].as_u64().unwrap());
    assert!(i["last_ts"].as_u64().unwrap() <= stop);
    assert!(kstate_instances()
        .iter()
        .all(|n| !n.starts_with(&format!("kstate-{}-", std::process::id()))));
}

#[test]
fn fsync_writes_give_block_writes_on_the_files_device() {
    use std::os::unix::fs::MetadataExt;
    let dir = tmp();
    let out = dir.path().join("bio.dat");
    let data = dir.path().join("data");
    let n = 20;
    let s = record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "bio",
        "-a",
        "--",
        KSTATE,
        "workload",
        "fsync",
        &n.to_string(),
        data.to_str().unwrap(),
    ]);
    assert_eq!(s["lost"], 0);
    let dev = std::fs::metadata(&data).unwrap().dev();
    // The kernel's dev_t in events: major << 20 | minor.
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    let kdev = (major << 20) | minor;
    let writes = dump(&out, "block:block_rq_complete")
        .into_iter()
        .filter(|(_, _, f)| {
            f["dev"].as_u64() == Some(kdev) && f["rwbs"].as_str().is_some_and(|r| r.contains('W'))
        })
        .count();
    // Each fsync writes the data block, and the journal commits: at least one request each.
    assert!(
        writes >= n,
        "{writes} completed writes on {major}:{minor} for {n} fsyncs"
    );
}

#[test]
fn two_recorders_at_once_see_only_their_own_workload() {
    let dir = tmp();
    let spawn = |name: &str, n: u32| {
        let out = dir.path().join(name);
        let child = Command::new(KSTATE)
            .args(["record", "--json", "-e", "syscall", "-o"])
            .arg(&out)
            .args(["--", KSTATE, "workload", "getppid", &n.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (out, child, n)
    };
    let a = spawn("a.dat", 40_000);
    let b = spawn("b.dat", 30_000);
    for (out, child, n) in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let pid = recorded_pid(&out);
        assert_eq!(getppid_calls(&out, pid), (n as usize, n as usize));
        let others = dump(&out, "raw_syscalls:sys_enter")
            .iter()
            .filter(|(_, p, _)| *p != pid)
            .count();
        assert_eq!(
            others,
            0,
            "{} holds events of other processes",
            out.display()
        );
    }
}

/// Starts a recorder and waits until it is recording: its instance exists and, with a
/// command, the command runs; without one, it has said "recording".
fn start_background(out: &Path, extra: &[&str]) -> std::process::Child {
    let mut child = Command::new(KSTATE)
        .args(["record", "-e", "sched", "-o"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for("the recorder's instance appears", || {
        !instances_of(pid).is_empty()
    });
    if extra.contains(&"--") {
        wait_for("the command runs", || {
            children_of(pid).iter().any(|c| c == "sleep")
        });
    } else {
        // Read stderr up to the "recording" line, then keep draining it in the
        // background so the recorder never blocks on a full pipe.
        use std::io::BufRead;
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "recorder exited early"
            );
            if line.contains("recording") {
                break;
            }
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut rest);
            let _ = tx.send(rest);
        });
        STDERR_RX.with(|r| *r.borrow_mut() = Some(rx));
    }
    // Let it record something.
    std::thread::sleep(Duration::from_millis(200));
    child
}

thread_local! {
    /// The rest of a background recorder's stderr, when start_background took it.
    static STDERR_RX: std::cell::RefCell<Option<std::sync::mpsc::Receiver<String>>> =
        const { std::cell::RefCell::new(None) };
}

/// Waits for a background recorder; returns its status and stderr.
fn finish_background(child: std::process::Child) -> (std::process::ExitStatus, String) {
    let o = child.wait_with_output().unwrap();
    let mut err = String::from_utf8_lossy(&o.stderr).into_owned();
    if let Some(rx) = STDERR_RX.with(|r| r.borrow_mut().take()) {
        err += &rx.recv().unwrap_or_default();
    }
    (o.status, err)
}

/// comm of each child process of `pid`.
fn children_of(pid: u32) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|st| {
            let close = st.rfind(')')?;
            let comm = st[st.find('(')? + 1..close].to_string();
            let ppid: u32 = st[close + 2..].split(' ').nth(1)?.parse().ok()?;
            (ppid == pid).then_some(comm)
        })
        .collect()
}

#[test]
fn sigint_and_sigterm_finish_the_file_and_remove_the_instance() {
    let dir = tmp();
    for (sig, with_cmd) in [
        (libc::SIGINT, false),
        (libc::SIGTERM, false),
        (libc::SIGTERM, true),
    ] {
        let out = dir.path().join(format!("sig{sig}-{with_cmd}.dat"));
        let extra: &[&str] = if with_cmd {
            &["-a", "--", "sleep", "100"]
        } else {
            &[]
        };
        let child = start_background(&out, extra);
        let pid = child.id();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, sig) };
        let (status, stderr) = finish_background(child);
        if with_cmd {
            // SIGTERM is passed on to the command, and kstate exits with its status.
            assert_eq!(status.code(), Some(128 + sig), "signal {sig}: {stderr}");
            assert!(stderr.contains("killed by SIGTERM"), "{stderr}");
        } else {
            assert!(status.success(), "signal {sig}: {stderr}");
        }
        assert!(stderr.contains("stopped by SIG"), "{stderr}");
        assert!(
            instances_of(pid).is_empty(),
            "instance left after signal {sig}"
        );
        let i = info(&out);
        assert!(i["events"].as_u64().unwrap() > 0, "signal {sig}: no events");
        let (okay, report, err) = trace_cmd_report(&out);
        assert!(okay, "{err}");
        assert_eq!(
            report_event_lines(&report) as u64,
            i["events"].as_u64().unwrap()
        );
        // No scratch files left beside the output.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("scratch") || n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// Waits until recorder `pid`, writing into `dir`, has turned tracing on.
fn wait_until_tracing(dir: &Path, pid: u32) {
    // A new instance starts with tracing on for a moment; the scratch directory's
    // recorder file is written after that is turned off, before it is turned on again.
    let scratch_ready = || {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .any(|e| e.path().join("kstate-recorder").exists())
    };
    let tracing = || {
        let i = instances_of(pid);
        i.first().is_some_and(|i| {
            std::fs::read_to_string(Path::new(INSTANCES).join(i).join("tracing_on"))
                .is_ok_and(|t| t.trim() == "1")
        })
    };
    wait_for("the recorder traces", || scratch_ready() && tracing());
}

/// getppid pairs of `pid` in `file`, by `kstate analyze syscall`.
fn getppid_pairs(file: &Path, pid: u32) -> u64 {
    let out = ok(&[
        "analyze",
        "syscall",
        "--stat",
        "--format",
        "json",
        "--pid",
        &pid.to_string(),
        file.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "getppid")
        .map_or(0, |r| r["count"].as_u64().unwrap())
}

/// Per CPU, the instance's events in the buffer and those it overwrote.
/// None where the instance is gone.
fn ring_entries(instance: &Path) -> Option<Vec<(u64, u64)>> {
    let cpus = std::fs::read_dir(instance.join("per_cpu")).ok()?;
    let stats: Option<Vec<String>> = cpus
        .flatten()
        .filter(|c| c.file_name().to_string_lossy().starts_with("cpu"))
        .map(|c| std::fs::read_to_string(c.path().join("stats")).ok())
        .collect();
    let v = stats?
        .into_iter()
        .map(|t| {
            let field = |name: &str| {
                t.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            (field("entries:"), field("overrun:"))
        })
        .collect();
    Some(v)
}

/// A SIGKILLed recorder's instance: tracing off within a second, nothing more recorded,
/// trace_marker copies off and writable. None where the instance went away meanwhile.
fn the_dead_instance_is_quiet(pid: u32, killed: Instant) -> Option<()> {
    // The kernel closed the recorder's free_buffer as it died, which turned tracing off.
    let left = instances_of(pid);
    assert!(left.len() <= 1, "{left:?}");
    let instance = Path::new(INSTANCES).join(left.first()?);
    let tracing_on = || std::fs::read_to_string(instance.join("tracing_on")).ok();
    while tracing_on()?.trim() != "0" {
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the dead recorder's instance still traces a second after the kill"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // ... and it records nothing more: system calls now leave its buffer as it is. (One
    // run read no CPU's statistics at this point, and both a moment later.)
    let mut before = ring_entries(&instance)?;
    while before.is_empty() && killed.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        before = ring_entries(&instance)?;
    }
    assert!(
        !before.is_empty(),
        "no per-CPU statistics in {}",
        instance.display()
    );
    for _ in 0..20 {
        assert!(Command::new("true").status().unwrap().success());
    }
    assert_eq!(
        ring_entries(&instance)?,
        before,
        "the instance still records"
    );
    // Applications' markers still work: an instance that copies them with its tracing off
    // made the kernel fail every write to trace_marker (EBADF) until it was removed.
    let copy = instance.join("options/copy_trace_marker");
    if copy.exists() {
        while std::fs::read_to_string(&copy).ok()?.trim() != "0" {
            assert!(
                killed.elapsed() < Duration::from_secs(1),
                "the dead recorder's instance still copies trace_marker writes"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Other tests' recorders run meanwhile, and one killed as this one was breaks
        // markers for the few milliseconds until its guard switches the copy off.
        let tried = Instant::now();
        while let Err(e) = std::fs::write("/sys/kernel/tracing/trace_marker", "after the kill\n") {
            assert!(
                tried.elapsed() < Duration::from_secs(1),
                "writing trace_marker after a recorder was killed: {e}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    Some(())
}

/// The .scratch directories beside an output.
fn scratch_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".scratch"))
        .collect()
}

/// Issue 22 §4's proof as it is written: `record -e syscall` (the default buffer, the
/// whole system, no filter) while a workload makes 1,000,000 getppid calls and exits;
/// kill -9 the recorder a second later, without waiting for it to catch up; `kstate
/// recover`: exactly 1,000,000 getppid pairs in the recovered file, the instance stopped
/// tracing within a second of the kill, and no leftovers (scratch, unfinished output,
/// instance).
#[test]
fn a_killed_recorder_loses_nothing_it_had_read() {
    let dir = tmp();
    let out = dir.path().join("killed.dat");
    let n = 1_000_000;
    // The workload's shell starts before the recorder and waits on a FIFO, so what the
    // recording holds of its pid is the workload's calls alone (dash calls getppid as it
    // starts).
    let fifo = dir.path().join("go");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let w = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "read x < '{}'; exec {KSTATE} workload getppid {n}",
            fifo.display()
        ))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let wpid = w.id();
    let mut recorder = Command::new(KSTATE)
        .args(["record", "-e", "syscall", "-o", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = recorder.id();
    wait_until_tracing(dir.path(), pid);
    std::fs::write(&fifo, "go\n").unwrap();
    assert!(w.wait_with_output().unwrap().status.success());
    std::thread::sleep(Duration::from_secs(1));
    recorder.kill().unwrap(); // SIGKILL: no cleanup possible
    let killed = Instant::now();
    recorder.wait().unwrap();
    // Another test's recorder starting meanwhile removes the dead recorder's instance
    // (what `record` does with a killed recorder's leftovers): the instance's checks end
    // there (CI: its per_cpu directory was gone between two reads).
    if the_dead_instance_is_quiet(pid, killed).is_none() {
        println!("the dead recorder's instance was removed by another recorder");
    }
    assert!(!out.exists(), "no finished file after SIGKILL");

    // The scratch directory reads as a capture as it is.
    let scratch = scratch_dirs(dir.path());
    assert_eq!(scratch.len(), 1, "{scratch:?}");
    assert_eq!(getppid_pairs(&scratch[0], wpid), n);

    let r = run(&["recover", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(getppid_pairs(&out, wpid), n, "getppid pairs recovered");
    let i = info(&out);
    assert!(
        i["recovered"]
            .as_str()
            .unwrap()
            .contains(&format!("recorder {pid}")),
        "{i}"
    );
    let (okay, _, err) = trace_cmd_report(&out);
    assert!(okay, "{err}");
    // No leftovers: the output alone beside the FIFO, and no instance of the recorder.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["go", "killed.dat"], "leftovers");
    assert!(
        instances_of(pid).is_empty(),
        "the dead recorder's instance is left"
    );
    let r = run(&["recover", out.to_str().unwrap(), "--to", "/dev/null"]);
    assert_eq!(r.status.code(), Some(2), "nothing left to recover");
}

/// A killed recorder's leftovers are reported by the next recording of the same output and
/// kept for `kstate recover` (another output's recording does not mention them).
#[test]
fn the_next_recording_reports_a_killed_recorders_leftovers() {
    let dir = tmp();
    let out = dir.path().join("killed.dat");
    let mut recorder = Command::new(KSTATE)
        .args(["record", "-e", "sched", "-o", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = recorder.id();
    wait_until_tracing(dir.path(), pid);
    let scratch = scratch_dirs(dir.path());
    assert_eq!(scratch.len(), 1, "{scratch:?}");
    // Its first pages reach the scratch directory: switches happen every few ms.
    wait_for("the recorder moves pages", || {
        let r = run(&["info", "--json", scratch[0].to_str().unwrap()]);
        serde_json::from_slice::<Value>(&r.stdout).is_ok_and(|v| v["events"].as_u64() > Some(0))
    });
    recorder.kill().unwrap();
    recorder.wait().unwrap();
    let stderr_of_recording = |o: &Path| {
        let r = run(&[
            "record",
            "-e",
            "sched",
            "-o",
            o.to_str().unwrap(),
            "--",
            "true",
        ]);
        assert!(r.status.success());
        String::from_utf8_lossy(&r.stderr).into_owned()
    };
    let err = stderr_of_recording(&dir.path().join("other.dat"));
    assert!(!err.contains("kstate recover"), "another output's: {err}");
    let err = stderr_of_recording(&out);
    assert!(
        err.contains(&format!("recorder {pid} was killed")) && err.contains("kstate recover"),
        "{err}"
    );
    assert!(instances_of(pid).is_empty(), "stale instance still there");
    assert!(scratch[0].is_dir(), "the leftovers were deleted");
    let rec = dir.path().join("recovered.dat");
    ok(&[
        "recover",
        out.to_str().unwrap(),
        "--to",
        rec.to_str().unwrap(),
    ]);
    assert!(info(&rec)["events"].as_u64() > Some(0));
    assert!(!scratch[0].exists(), "recover left the scratch directory");
}

#[test]
fn kernel_filters_apply_and_bad_ones_are_explained() {
    let dir = tmp();
    let out = dir.path().join("filter.dat");
    let expr = format!("raw_syscalls:sys_enter:id == {NR_GETPPID}");
    record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "syscall",
        "--filter",
        &expr,
        "--",
        KSTATE,
        "workload",
        "getppid",
        "500",
    ]);
    let evs = dump(&out, "raw_syscalls:sys_enter");
    assert_eq!(evs.len(), 500, "only getppid entries pass the filter");
    assert!(
        !dump(&out, "raw_syscalls:sys_exit").is_empty(),
        "sys_exit is not filtered"
    );

    let o = run(&[
        "record",
        "-e",
        "syscall",
        "--filter",
        "raw_syscalls:sys_enter:no_such_field == 1",
        "-o",
        dir.path().join("bad.dat").to_str().unwrap(),
        "--",
        "true",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    // The expression is the user's: a bad argument, exit 2 as `record --help` says.
    assert_eq!(o.status.code(), Some(2), "{err}");
    // The kernel's own reason, from the instance's error_log, with its caret.
    assert!(
        err.contains("--filter") && err.contains("the kernel refused it"),
        "{err}"
    );
    assert!(err.contains("Field not found"), "{err}");
    assert!(err.contains("Command: no_such_field == 1"), "{err}");
    assert!(err.lines().any(|l| l.trim() == "^"), "{err}");
    assert!(!dir.path().join("bad.dat").exists());
}

#[test]
fn bad_requests_fail_clearly_and_leave_nothing_behind() {
    let dir = tmp();
    let before = kstate_instances();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--", "/nonexistent/kstate-cmd"],
            "cannot run /nonexistent/kstate-cmd",
        ),
        (&["-e", "shced", "--", "true"], "did you mean: sched"),
        (
            &["-e", "raw_syscalls:sys_entr", "--", "true"],
            "raw_syscalls:sys_enter",
        ),
        (
            &["-o", "/proc/kstate-test.dat", "--", "true"],
            "/proc/kstate-test.dat",
        ),
        (
            &["--clock", "sundial", "--", "true"],
            "trace clock 'sundial'",
        ),
    ];
    let default_out = dir.path().join("x.dat");
    for (args, expect) in cases {
        let mut all: Vec<&str> = vec!["record"];
        if !args.contains(&"-o") {
            all.extend(["-o", default_out.to_str().unwrap()]);
        }
        all.extend_from_slice(args);
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{all:?} succeeded");
        assert!(
            err.contains(expect),
            "{all:?}: expected '{expect}' in: {err}"
        );
    }
    // Instances present now were present before (or belong to concurrently running tests).
    for n in kstate_instances() {
        // Only recorders' instances (kstate-PID-START-N); other tests name theirs otherwise.
        let Some(pid) = n.split('-').nth(1).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        assert!(
            before.contains(&n) || Path::new(&format!("/proc/{pid}")).exists(),
            "instance {n} of a dead recorder left behind"
        );
    }
    assert!(!dir.path().join("x.dat").exists());
}

#[test]
fn non_root_is_told_what_is_missing() {
    // setpriv (util-linux) drops to nobody without a shell.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            KSTATE,
            "record",
            "-o",
            "/tmp/kstate-nonroot.dat",
            "--",
            "true",
        ])
        .output()
        .expect("setpriv (util-linux) is needed for this test");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("needs root"), "{err}");
}

#[test]
fn memory_snapshots_line_up_with_events() {
    let dir = tmp();
    let out = dir.path().join("sysinfo.dat");
    let s = record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "sched",
        "-a",
        "--sysinfo-interval",
        "50",
        "--",
        "sleep",
        "0.5",
    ]);
    let n = s["sysinfo_snapshots"].as_u64().unwrap();
    // One at start, one per 50 ms tick (a late tick is caught up), one at the end: as many
    // as the sampler ran, which a loaded machine makes longer than the 0.5 s asked. The
    // snapshots' own times bound the count: tick k is taken no earlier than k x 50 ms after
    // the first snapshot, so their span holds every tick but the last.
    let trace = kstate_format::Trace::open(&out).unwrap();
    let snaps = kstate_views::survey::snapshots(&trace);
    assert_eq!(snaps.len() as u64, n);
    assert!(n >= 5, "{n} snapshots in 0.5 s at 50 ms");
    assert!(snaps.windows(2).all(|w| w[0].ts <= w[1].ts));
    let span = snaps[snaps.len() - 1].ts - snaps[0].ts;
    assert!(
        n <= span / 50_000_000 + 3,
        "{n} snapshots over {span} ns at 50 ms"
    );
    let i = info(&out);
    assert_eq!(i["sysinfo_snapshots"].as_u64().unwrap(), n);
    let rec = &i["recording"];
    assert_eq!(rec["clock"], "mono");
    // The trace clock is CLOCK_MONOTONIC: the recording's start maps to about now.
    let wall = rec["wall_offset_ns"].as_i64().unwrap() + rec["start_ts"].as_i64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    assert!(
        (now - wall).abs() < 60_000_000_000,
        "start maps to {wall}, now is {now}"
    );
    let mut per_cpu = BTreeMap::new();
    for c in s["cpus"].as_array().unwrap() {
        per_cpu.insert(c["cpu"].as_u64().unwrap(), c["events"].as_u64().unwrap());
    }
    assert_eq!(per_cpu.values().sum::<u64>(), i["events"].as_u64().unwrap());
}

/// A tmpfs of `mib` MiB mounted for the life of the value.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn new(mib: u32) -> SmallDisk {
        let dir = tmp();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "mounting a tmpfs needs root");
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_ends_the_recording_with_a_readable_file() {
    let disk = SmallDisk::new(24);
    let out = disk.dir.path().join("full.dat");
    // ~100 bytes per call: far more than 24 MiB.
    let o = run(&[
        "record",
        "--json",
        "-e",
        "syscall",
        "-o",
        out.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "getppid",
        "1000000",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("holds what was recorded"), "{err}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let s: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(s["disk_full"].is_string());

    // The file says it was cut short: `info` shows why, and every command that reads it
    // says it lacks what came after, and exits 2 (the file is whole: not truncated).
    let file = out.to_str().unwrap();
    let o = run(&["info", "--json", file]);
    assert_eq!(o.status.code(), Some(2));
    let i: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(i["truncated"], false);
    let why = i["recording"]["cut_short"].as_str().unwrap();
    assert!(why.contains("No space left on device"), "{why}");
    assert_eq!(i["damage"].as_array().unwrap().len(), 1, "{}", i["damage"]);
    let text = run(&["info", file]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("CUT SHORT:"));
    // The report goes elsewhere: the disk is full.
    let elsewhere = tmp();
    let html = elsewhere.path().join("r.html");
    for args in [
        &["analyze", "syscall", file][..],
        &["report", file, "-o", html.to_str().unwrap()],
        &["dump", file],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let said = format!("{file}: the recording was cut short (the disk filled: ");
        assert!(err.contains(&said), "{args:?}: {err}");
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<section id=\"damage\">") && page.contains("cut short"));
    let events = i["events"].as_u64().unwrap();
    assert_eq!(events, s["events"].as_u64().unwrap());
    assert!(
        events > 50_000,
        "only {events} events before the disk filled"
    );
    let (okay, report, tc_err) = trace_cmd_report(&out);
    assert!(okay, "{tc_err}");
    assert_eq!(report_event_lines(&report) as u64, events);
    // Only the finished file is left on the disk.
    let names: Vec<_> = std::fs::read_dir(disk.dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["full.dat"]);
}

#[test]
fn pid_option_records_only_that_process() {
    let dir = tmp();
    let out = dir.path().join("pid.dat");
    // A process that sleeps in a loop: 300 sleeps of 10 ms, so that it outlives the 0.2 s
    // recording however long the recorder takes to start on a loaded machine.
    let mut target = Command::new(KSTATE)
        .args(["workload", "sleep", "300", "10"])
        .spawn()
        .unwrap();
    let pid = target.id() as i64;
    let s = record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "syscall",
        "-p",
        &pid.to_string(),
        "-d",
        "0.2",
    ]);
    let _ = target.kill();
    target.wait().unwrap();
    assert_eq!(s["lost"], 0);
    let evs = dump(&out, "raw_syscalls:sys_enter");
    assert!(evs.len() >= 5, "only {} syscalls of the sleeper", evs.len());
    assert!(
        evs.iter().all(|(_, p, _)| *p == pid),
        "events of other processes recorded"
    );
    assert_eq!(info(&out)["recording"]["pids"][0].as_i64(), Some(pid));
}

#[test]
fn tracefs_is_mounted_when_missing() {
    // In a private mount namespace tracefs can be unmounted without touching the host's.
    let dir = tmp();
    let out = dir.path().join("mounted.dat");
    let script = format!(
        "umount /sys/kernel/tracing && ! test -e /sys/kernel/tracing/events && \
         {KSTATE} record -e sched -d 0.2 --sysinfo-interval 0 -o {} && \
         grep -q ' /sys/kernel/tracing tracefs ' /proc/mounts",
        out.display()
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare (util-linux) is needed for this test");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(info(&out)["events"].as_u64().unwrap() > 0);
}

/// The recorder sleeps until something can end the recording (its threads' own events are
/// filtered out, but their wake-ups by others are not): in a one-second system-wide
/// recording its threads are woken a handful of times, not every few milliseconds.
#[test]
fn the_recorders_threads_are_seldom_woken() {
    let dir = tmp();
    let out = dir.path().join("quiet.dat");
    let child = Command::new(KSTATE)
        .args(["record", "--json", "-e", "sched", "-d", "1", "-o"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let recorder = child.id() as i64;
    // The snapshot thread's id (other tests' recorders have threads of the same name).
    let mut sysinfo = None;
    wait_for("the recorder's sysinfo thread", || {
        sysinfo = std::fs::read_dir(format!("/proc/{recorder}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .find(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "kstate-sysinfo")
            })
            .and_then(|t| t.file_name().to_str()?.parse::<i64>().ok());
        sysinfo.is_some()
    });
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let wakeups = dump(&out, "sched:sched_wakeup");
    let woken = |tid: i64| {
        wakeups
            .iter()
            .filter(|(_, _, f)| f["pid"].as_i64() == Some(tid))
            .count()
    };
    // Other threads woke someone during the second, so the events are there to count.
    assert!(wakeups.len() > 20, "{} wake-ups in all", wakeups.len());
    // The main thread polls at most every 200 ms; the snapshot thread wakes once a second.
    let main = woken(recorder);
    assert!(
        main <= 8,
        "the recorder's main thread was woken {main} times"
    );
    let snapshots = woken(sysinfo.unwrap());
    assert!(
        snapshots <= 3,
        "the sysinfo thread was woken {snapshots} times"
    );
}

/// Reading quiet CPUs' partly filled pages (so a killed recorder loses little) costs a
/// whole page each time: the file must still grow with the events, not with the reads.
/// (A recorder that read on until the buffer was empty chased the sched events of its
/// own writes, one nearly empty 512 KiB page per read: 1267 MiB for 1.2 MiB of events.)
#[test]
fn a_system_wide_sched_recording_grows_with_its_events() {
    let dir = tmp();
    let out = dir.path().join("sched.dat");
    // 1000 sleeps of 1 ms: about a second of steady context switches on top of the
    // machine's own.
    let sum = record(&[
        "-e",
        "sched",
        "-a",
        "-o",
        out.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "sleep",
        "1000",
        "1",
    ]);
    let i = info(&out);
    let page = i["page_size"].as_u64().unwrap();
    let recorded: BTreeMap<u64, u64> = sum["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cpu"].as_u64().unwrap(), c["bytes"].as_u64().unwrap()))
        .collect();
    let switches = i["event_counts"]["sched_switch"].as_u64().unwrap_or(0);
    // At least one switch away per sleep (this kernel does not trace CPU 1 leaving idle,
    // so the switch back may not be there).
    assert!(switches >= 1000, "only {switches} sched_switch events");
    assert_eq!(i["events"], sum["events"], "info and the summary disagree");
    let event_bytes: u64 = recorded.values().sum();
    let mut page_bytes = 0;
    for c in i["per_cpu"].as_array().unwrap() {
        let (cpu, bytes) = (c["cpu"].as_u64().unwrap(), c["bytes"].as_u64().unwrap());
        let data = recorded.get(&cpu).copied().unwrap_or(0);
        // Per CPU: partly filled pages are read at most every 200 ms, and more rarely
        // when they hold under an eighth of a page, so beyond 8x the events a CPU has
        // only its last page and the few early reads of a slow start.
        assert!(
            bytes <= 8 * data + 4 * page,
            "CPU {cpu}: {bytes} bytes of pages in the file for {data} bytes of events"
        );
        page_bytes += bytes;
    }
    let file = std::fs::metadata(&out).unwrap().len();
    assert_eq!(sum["file_bytes"].as_u64(), Some(file));
    assert!(
        file <= page_bytes + (32 << 20),
        "{file} bytes in the file, {page_bytes} of them pages"
    );
    eprintln!("{event_bytes} bytes of events, {page_bytes} of pages, {file} in the file");
}

/// A block request completes in the disk's interrupt, in whatever task is on the CPU
/// then: the pid filter of a recording scoped to a command dropped most completions (16
/// for 246 issues, so `analyze biotime` paired none). Every request the command issued
/// must complete in the file, and trace-cmd must read the merged pages with the same
/// counts.
#[test]
fn a_commands_block_requests_all_complete_in_the_file() {
    let dir = tmp();
    let out = dir.path().join("cmdbio.dat");
    let data = dir.path().join("data");
    // Through a shell, so that the writer is a child the pid filter follows.
    let dd = format!(
        "dd if=/dev/zero of={} bs=1M count=20 oflag=direct status=none",
        data.display()
    );
    let s = record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "bio",
        "--",
        "sh",
        "-c",
        &dd,
    ]);
    assert_eq!(s["lost"], 0);
    let evs = dump(&out, "block:block_rq_issue,block:block_rq_complete");
    let key = |f: &serde_json::Map<String, Value>| {
        ["dev", "sector", "nr_sector"].map(|k| f[k].as_u64().unwrap())
    };
    // In time order: each completion closes the open request it names.
    let mut open: Vec<[u64; 3]> = Vec::new();
    let (mut issues, mut completes) = (0, 0);
    for (e, _, f) in &evs {
        match e.as_str() {
            "block_rq_issue" => {
                issues += 1;
                open.push(key(f));
            }
            _ => {
                completes += 1;
                if let Some(i) = open.iter().position(|k| *k == key(f)) {
                    open.remove(i);
                }
            }
        }
    }
    // 20 MiB of direct writes: at least one request per MiB.
    assert!(issues >= 20, "{issues} requests issued");
    assert!(
        open.is_empty(),
        "{} of {issues} issued requests never completed in the file ({completes} completions): {open:?}",
        open.len()
    );
    let (ok, report, err) = trace_cmd_report(&out);
    assert!(ok, "trace-cmd report failed: {err}");
    let lines = |name: &str| {
        report
            .lines()
            .filter(|l| l.contains(&format!(" {name}: ")))
            .count()
    };
    assert_eq!(lines("block_rq_issue"), issues, "trace-cmd's issues");
    assert_eq!(
        lines("block_rq_complete"),
        completes,
        "trace-cmd's completions"
    );
}

/// `kstate record|run -- CMD` exit with CMD's status (128+N for signal N), say so in one
/// line, and the --json summary carries it.
#[test]
fn the_commands_exit_status_comes_back() {
    let dir = tmp();
    let out = dir.path().join("exit.dat");
    let o = out.to_str().unwrap();
    let r = run(&["record", "-e", "sched", "-o", o, "--", "sh", "-c", "exit 7"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(7), "{err}");
    assert!(err.contains("the command exited with status 7"), "{err}");
    assert!(
        info(&out)["events"].as_u64().unwrap() > 0,
        "the file is kept"
    );

    let r = run(&[
        "record",
        "--json",
        "-e",
        "sched",
        "-o",
        o,
        "--",
        "sh",
        "-c",
        "kill -SEGV $$",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(128 + libc::SIGSEGV), "{err}");
    assert!(err.contains("killed by SIGSEGV"), "{err}");
    let stdout = String::from_utf8(r.stdout).unwrap();
    let s: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(s["workload_exit"], 128 + libc::SIGSEGV);
    assert_eq!(s["workload_signal"], libc::SIGSEGV);

    let r = run(&["record", "-e", "sched", "-o", o, "--", "true"]);
    assert_eq!(r.status.code(), Some(0));

    let rundir = dir.path().join("run");
    let r = run(&[
        "run",
        "-o",
        rundir.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(7), "{err}");
    assert!(err.contains("the command exited with status 7"), "{err}");
    assert!(rundir.join("report.html").exists());
}

/// Arguments that can only fail at the end are refused before anything is recorded, with
/// exit status 2 (bad arguments).
#[test]
fn bad_arguments_are_refused_before_recording() {
    let dir = tmp();
    let out = dir.path().join("x.dat");
    let o = out.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    let missing = dir.path().join("no/such/dir/x.dat");
    let me = std::process::id().to_string();
    let cases: [(&[&str], String); 9] = [
        (&["-o", d, "--", "true"], format!("-o {d}: is a directory")),
        (
            &["-o", o, "--clock", "nosuch", "--", "true"],
            "trace clock 'nosuch' is not offered by this kernel".into(),
        ),
        (
            &["-o", o, "--filter", "net:len > 0", "--", "true"],
            "--filter 'net:len > 0': 'net' is not among the events being recorded".into(),
        ),
        // The function tracer writes ftrace:function; it has no enable file.
        (
            &["-o", o, "-e", "ftrace:function", "--", "true"],
            "-e ftrace:function: not an event that can be enabled: the kernel's function tracer"
                .into(),
        ),
        (
            &["-o", missing.to_str().unwrap(), "--", "true"],
            "does not exist".into(),
        ),
        (&["-o", o, "-p", "999999"], "no process 999999".into()),
        (
            &["-o", o, "-p", &me, "--", "true"],
            "-p and a command".into(),
        ),
        (
            &["-o", o, "--subbuf", "3", "--", "true"],
            "--subbuf 3: the sub-buffer size must be a power of two".into(),
        ),
        (
            &["-o", "/proc/kstate-test.dat", "--", "true"],
            "cannot create files in /proc".into(),
        ),
    ];
    for (args, expect) in cases {
        let mut all = vec!["record", "-e", "sched"];
        all.extend_from_slice(args);
        let r = run(&all);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{all:?}: {err}");
        assert!(
            err.contains(&expect),
            "{all:?}: expected '{expect}' in: {err}"
        );
        assert!(
            !err.contains("kstate: record"),
            "{all:?} started recording: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// A name kstate does not know, or a value it cannot read, is a usage error wherever it is
/// typed: exit 2 (as clap's own errors), a message naming it and saying what is valid, and
/// nothing recorded or created. `record -e nosuch` and `run -e nosuch` exited 1, and `run`
/// announced the recording first.
#[test]
fn unknown_names_and_bad_values_are_usage_errors() {
    let dir = tmp();
    let trace = dir.path().join("sched.dat");
    let t = trace.to_str().unwrap();
    record(&["-o", t, "-e", "sched", "--", "true"]);
    let out = dir.path().join("x.dat");
    let o = out.to_str().unwrap();
    let rundir = dir.path().join("run");
    let r = rundir.to_str().unwrap();
    let presets =
        "a preset (syscall, softirq, mem, bio, net, lock, sched, proc, futex, perf, why, all)";
    let analyzers = "there are: syscall, runq, offcpu";
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["record", "-o", o, "-e", "nosuch", "--", "true"],
            vec!["'nosuch'", presets, "available_events"],
        ),
        (
            vec!["record", "-o", o, "-e", "sched:no_such_event", "--", "true"],
            vec!["'sched:no_such_event'", presets],
        ),
        (
            vec!["record", "-o", o, "-e", "shced", "--", "true"],
            vec!["did you mean: sched?", presets],
        ),
        (
            vec!["run", "-o", r, "-e", "nosuch", "--", "true"],
            vec!["'nosuch'", presets],
        ),
        (
            vec!["watch", "-o", o, "-d", "1", "-e", "nosuch"],
            vec!["'nosuch'", presets],
        ),
        (
            vec!["watch", "-o", o, "-d", "1", "--shed", "nosuch"],
            vec!["'nosuch'", presets],
        ),
        (
            vec!["record", "-o", o, "--duration", "soon", "--", "true"],
            vec![
                "'soon'",
                "--duration",
                "expected seconds (1.5) or a duration",
            ],
        ),
        (
            vec!["record", "-o", o, "--filter", "pid == 1", "--", "true"],
            vec!["--filter 'pid == 1'", "expected EVENT:EXPR"],
        ),
        (
            vec!["analyze", "nosuch", t],
            vec!["no analyzer \"nosuch\"", analyzers],
        ),
        (
            vec!["plot", "nosuch", "-o", o, t],
            vec!["no analyzer \"nosuch\"", analyzers],
        ),
        (
            vec!["compare", "--analyzer", "nosuch", t, t],
            vec!["no analyzer \"nosuch\"", analyzers],
        ),
        (
            vec!["watch", "-o", o, "-d", "1", "--alarm", "nosuch.p99 > 1ms"],
            vec!["no analyzer \"nosuch\"", analyzers],
        ),
        (
            vec!["analyze", "runq", "--sort", "nosuch", t],
            vec!["\"nosuch\"", "columns are key, count"],
        ),
        (
            vec!["dump", "--events", "nosuch", t],
            vec!["no event \"nosuch\""],
        ),
    ];
    for (args, expect) in cases {
        let res = run(&args);
        let err = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(2), "{args:?}: {err}");
        for e in expect {
            assert!(err.contains(e), "{args:?}: expected '{e}' in: {err}");
        }
        assert!(
            !err.contains("recording"),
            "{args:?} announced a recording: {err}"
        );
        assert!(!out.exists(), "{args:?} wrote {o}");
        assert!(!rundir.exists(), "{args:?} left {r}");
    }
}

/// An application writes its markers to the standard /sys/kernel/tracing/trace_marker,
/// not to kstate's private instance's: the kernel copies them into the recording
/// (options/copy_trace_marker), where `kstate dump` prints them as trace-cmd does.
#[test]
fn an_applications_trace_markers_are_recorded() {
    let dir = tmp();
    let out = dir.path().join("markers.dat");
    let marker = format!("hello-kstate-{}", std::process::id());
    let script =
        format!("for i in 1 2 3; do echo {marker}-$i > /sys/kernel/tracing/trace_marker; done");
    record(&[
        "-o",
        out.to_str().unwrap(),
        "-e",
        "sched",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let text = String::from_utf8(ok(&["dump", out.to_str().unwrap()]).stdout).unwrap();
    let marks: Vec<&str> = text.lines().filter(|l| l.contains(&marker)).collect();
    assert_eq!(marks.len(), 3, "three markers in:\n{}", marks.join("\n"));
    for (i, l) in marks.iter().enumerate() {
        assert!(
            l.contains(" print: ") && l.trim_end().ends_with(&format!("{marker}-{}", i + 1)),
            "{l}"
        );
    }
    assert!(
        text.contains("sched_switch"),
        "sched events recorded beside them"
    );

    // Markers come with any event: asking for them alone is explained, not recorded.
    let r = run(&[
        "record",
        "-o",
        out.to_str().unwrap(),
        "-e",
        "ftrace:print",
        "--",
        "true",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("trace markers (print)"), "{err}");
}

/// `-p PID` ends when the process does (like `perf record -p`), and says so.
#[test]
fn recording_a_pid_ends_when_it_exits() {
    let dir = tmp();
    let out = dir.path().join("p.dat");
    // The process waits on a FIFO until the recorder traces, then exits.
    let fifo = dir.path().join("go");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut waiter = Command::new("sh")
        .arg("-c")
        .arg(format!("read x < '{}'", fifo.display()))
        .spawn()
        .unwrap();
    let pid = waiter.id().to_string();
    let recorder = Command::new(KSTATE)
        .args(["record", "--json", "-e", "sched", "-p", &pid, "-d", "600"])
        .args(["-o", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_tracing(dir.path(), recorder.id());
    std::fs::write(&fifo, "go\n").unwrap();
    assert!(waiter.wait().unwrap().success());
    let o = recorder.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("every traced process has exited"), "{err}");
    let stdout = String::from_utf8(o.stdout).unwrap();
    let s: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        s["stopped_by"], "stopped: every traced process has exited",
        "{s}"
    );
    // The process's own switches (it slept on the FIFO) are in the file.
    let switches = dump(&out, "sched_switch")
        .iter()
        .filter(|(_, p, _)| p.to_string() == pid)
        .count();
    assert!(switches > 0, "no sched_switch of {pid}");
}

/// A disk too full to hold even the metadata: refused before any event is enabled.
#[test]
fn a_nearly_full_disk_is_refused_at_the_start() {
    let disk = SmallDisk::new(4);
    let out = disk.dir.path().join("tiny.dat");
    let r = run(&[
        "record",
        "-e",
        "sched",
        "-o",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success());
    let mount = disk.dir.path().canonicalize().unwrap();
    assert!(
        err.contains(&format!("MB free on {}", mount.display())),
        "{err}"
    );
    assert!(
        err.contains("only 3 MB free") || err.contains("only 4 MB free"),
        "{err}"
    );
    assert!(!err.contains("kstate: record"), "started recording: {err}");
    assert_eq!(std::fs::read_dir(disk.dir.path()).unwrap().count(), 0);
}
