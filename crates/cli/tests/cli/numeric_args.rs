//! No number a user types makes kstate panic (issue 24 §5): every numeric option of every
//! command gets huge, negative, zero, NaN and infinite values, with and without units, and
//! must answer with a clear error that names the option, or run with the value — never
//! exit 101 or die of a signal. Needs root and tracefs (record, run); never skips.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;

use support::KSTATE;

const VALUES: [&str; 17] = [
    "1e20",
    "-1",
    "0",
    "NaN",
    "inf",
    "-inf",
    "18446744073709551616",
    "9223372036854775807",
    "4294967296",
    "100000",
    "1e20s",
    "-5s",
    "5s",
    "99999999G",
    // Tiny durations: `watch -i 1ns` once grew memory without bound.
    "1ns",
    "1e-9",
    "0.000000001",
];

/// A value that runs (a benchmark at a valid setting) is let run this long, then stopped
/// with SIGINT as a user would: it was accepted, which is a sane answer.
const LET_RUN: Duration = Duration::from_secs(3);

/// Values of one option tried at once.
const AT_ONCE: usize = 4;

enum End {
    Exited(i32, String),
    Stopped,
}

fn kstate(args: &[String]) -> End {
    // Benchmarks write scratch files in the current directory, and one stopped midway
    // may leave them: run where nothing is kept.
    static CWD: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let cwd = CWD.get_or_init(|| tempfile::tempdir().unwrap());
    let mut child = Command::new(KSTATE)
        .current_dir(cwd.path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let start = Instant::now();
    let mut stopped = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        let waited = start.elapsed();
        let pgid = child.id() as i32;
        if waited > LET_RUN && !stopped {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGINT) };
            stopped = true;
        }
        if waited > LET_RUN * 8 {
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = reader.join().unwrap();
    if stopped {
        return End::Stopped;
    }
    assert!(
        status.signal().is_none(),
        "kstate {} died of signal {:?}:\n{err}",
        args.join(" "),
        status.signal()
    );
    End::Exited(status.code().unwrap(), err)
}

/// `prefix --OPTION=VALUE suffix` for each value: a clear answer every time.
fn check(prefix: &[&str], names: &[&str], suffix: &[&str], values: &[String]) {
    check_in(prefix, names, suffix, values, None)
}

/// [`check`], with `fresh` (an output directory) removed before each run.
fn check_in(
    prefix: &[&str],
    names: &[&str],
    suffix: &[&str],
    values: &[String],
    fresh: Option<&Path>,
) {
    check_any(prefix, names, suffix, values, fresh, false)
}

/// `prefix VALUE suffix` for each value, VALUE the positional argument `name` (`<N>`): a
/// clear answer every time.
fn check_positional(prefix: &[&str], name: &str, suffix: &[&str], values: &[String]) {
    check_any(prefix, &[name], suffix, values, None, true)
}

fn check_any(
    prefix: &[&str],
    names: &[&str],
    suffix: &[&str],
    values: &[String],
    fresh: Option<&Path>,
    positional: bool,
) {
    let kstate = |args: &[String]| {
        if let Some(d) = fresh {
            let _ = std::fs::remove_dir_all(d);
        }
        kstate(args)
    };
    let base: Vec<String> = prefix.iter().chain(suffix).map(|s| s.to_string()).collect();
    let base_code = match kstate(&base) {
        End::Exited(c, _) => Some(c),
        End::Stopped => None,
    };
    let runs: Vec<Vec<String>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut args: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
            args.push(match positional {
                true => v.clone(),
                false => format!("{}={v}", names[0]),
            });
            args.extend(suffix.iter().map(|s| s.to_string()));
            // Runs at once write files of their own.
            if fresh.is_none() {
                for k in 1..args.len() {
                    if args[k - 1] == "-o" {
                        // Before the extension: plot's format is the file's.
                        let p = Path::new(&args[k]);
                        let ext = p.extension().map(|e| e.to_string_lossy().into_owned());
                        let base = p.with_extension("").to_string_lossy().into_owned();
                        args[k] = match ext {
                            Some(e) => format!("{base}.{i}.{e}"),
                            None => format!("{base}.{i}"),
                        };
                    }
                }
            }
            args
        })
        .collect();
    let judge = |args: &[String], end: End| {
        let End::Exited(code, err) = end else {
            return;
        };
        let shown = args.join(" ");
        assert_ne!(code, 101, "kstate {shown} panicked:\n{err}");
        assert!(!err.contains("panicked"), "kstate {shown}:\n{err}");
        if code != 0 && Some(code) != base_code {
            assert!(
                names.iter().any(|n| err.contains(n)),
                "kstate {shown} failed ({code}) without naming {}:\n{err}",
                names[0]
            );
        }
    };
    // Runs that share an output directory go one at a time; the others a few at once
    // (most wait: a value accepted runs for LET_RUN).
    match fresh {
        Some(_) => runs.iter().for_each(|a| judge(a, kstate(a))),
        None => {
            let next = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|s| {
                for _ in 0..AT_ONCE {
                    s.spawn(|| loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(a) = runs.get(i) else { break };
                        judge(a, kstate(a));
                    });
                }
            });
        }
    }
}

fn values() -> Vec<String> {
    VALUES.iter().map(|v| v.to_string()).collect()
}

/// A small recording with events and CPU samples, for the commands that read one.
fn recording(dir: &Path) -> String {
    let out = dir.join("n.dat");
    let o = out.to_str().unwrap().to_string();
    let st = Command::new(KSTATE)
        .args(["record", "-e", "sched,syscall,futex", "--sample", "-o", &o])
        .args(["--", "sh", "-c", "ls -R /usr/share/doc > /dev/null"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    o
}

#[test]
fn numbers_in_commands_that_read_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = recording(dir.path());
    let f = f.as_str();
    let all = values();
    // Window bounds: each side, and both.
    let windows: Vec<String> = all
        .iter()
        .flat_map(|v| [format!("{v}:"), format!("0:{v}"), format!("{v}:{v}")])
        .collect();
    let svg = dir.path().join("p.svg");
    let svg = svg.to_str().unwrap();
    let sizes: Vec<String> = all
        .iter()
        .flat_map(|v| [format!("{v}x300"), format!("300x{v}")])
        .collect();
    for opt in ["--cpu", "--pid", "--from", "--to"] {
        check(&["dump"], &[opt], &[f], &all);
    }
    for opt in ["--top", "--pid", "--tid", "--cpu", "--min", "--max"] {
        check(&["analyze", "syscall"], &[opt], &[f], &all);
    }
    check(&["analyze", "microstate"], &["--interval"], &[f], &all);
    for opt in ["--window", "--not-window"] {
        check(&["analyze", "syscall"], &[opt], &[f], &windows);
        check(&["profile"], &[opt], &[f], &windows);
    }
    for opt in ["--top", "--pid", "--tid", "--cpu", "--ratio", "--min-share"] {
        check(&["profile"], &[opt], &[f], &all);
    }
    for opt in ["--top", "--pid", "--cpu"] {
        check(&["diff"], &[opt], &[f, f], &all);
    }
    check(&["diff"], &["--window"], &[f, f], &windows);
    for opt in ["--top", "--callers", "--pid"] {
        check(&["top-locks"], &[opt], &[f], &all);
    }
    check(&["top-locks"], &["--window"], &[f], &windows);
    check(&["plot", "syscall", "-o", svg], &["--top"], &[f], &all);
    check(&["plot", "syscall", "-o", svg], &["--size"], &[f], &sizes);
    check(&["bench", "read"], &["--runs"], &[f], &all);
    check(&["bench", "analyze"], &["--runs"], &[f], &all);
}

#[test]
fn numbers_in_commands_that_record_or_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.dat");
    let o = out.to_str().unwrap();
    let all = values();
    let rec = ["record", "-e", "sched", "-o", o];
    for (opt, short) in [
        ("--duration", "-d"),
        ("--pid", "-p"),
        ("--buffer", "-b"),
        ("--subbuf", "--subbuf"),
        ("--sysinfo-interval", "--sysinfo-interval"),
    ] {
        let suffix: &[&str] = match opt {
            "--pid" => &[],
            _ => &["--", "true"],
        };
        check(&rec, &[opt, short], suffix, &all);
    }
    let samples: Vec<String> = all
        .iter()
        .flat_map(|v| [v.clone(), format!("cpu-clock:{v}")])
        .collect();
    check(&rec, &["--sample"], &["--", "true"], &samples);
    let run_dir = dir.path().join("run");
    for opt in ["--sysinfo-interval", "--buffer"] {
        check_in(
            &["run", "-e", "sched", "-o", run_dir.to_str().unwrap()],
            &[opt],
            &["--", "true"],
            &all,
            Some(&run_dir),
        );
    }
    check(&["scale"], &["--cpus"], &["--", "true"], &all);
    for opt in ["--top", "--ratio", "--min-share", "--ll"] {
        check(&["cachesim"], &[opt], &["--", "true"], &all);
    }
    for opt in ["--level", "--min-lines", "--cache"] {
        check(&["cachesim", "--sets"], &[opt], &["--", "true"], &all);
    }
    for opt in ["--calls", "--runs", "--cpu"] {
        check(&["bench", "record"], &[opt], &[], &all);
    }
    for opt in ["--rooms", "--users", "--messages", "--runs"] {
        check(&["bench", "chat"], &[opt], &[], &all);
    }
    for opt in [
        "--workers",
        "--nodes",
        "--stride",
        "--fields",
        "--colours",
        "--runs",
        "--passes",
        "--level",
    ] {
        check(&["bench", "colour"], &[opt], &[], &all);
    }
    for opt in ["--iters", "--runs"] {
        check(&["bench", "overhead"], &[opt], &[], &all);
        check(&["bench", "sample"], &[opt], &[], &all);
    }
    // The files go to a scratch directory, 8 MiB per run (one pattern where the option is not
    // --pattern): a checkout's own disk may be small.
    let io_dir = dir.path().join("io");
    std::fs::create_dir(&io_dir).unwrap();
    let io_dir = io_dir.to_str().unwrap();
    for opt in ["--pattern", "--size", "--record", "--cpus"] {
        let suffix: &[&str] = match opt {
            "--size" => &["--dir", io_dir, "--pattern", "1"],
            "--pattern" => &["--dir", io_dir, "--size", "8M"],
            _ => &["--dir", io_dir, "--size", "8M", "--pattern", "1"],
        };
        check(&["bench", "io"], &[opt], suffix, &all);
    }
    for opt in [
        "--threads",
        "--sizes",
        "--per-loop",
        "--samples",
        "--interval",
        "--fixed",
    ] {
        check(&["bench", "malloc"], &[opt], &[], &all);
    }
}

/// The hidden `kstate workload` programs (tests and benchmarks run them): their positional
/// numbers and options. Files go to the test's scratch working directory.
#[test]
fn numbers_in_workloads() {
    let all = values();
    let w = |rest: &[&'static str]| -> Vec<&'static str> {
        let mut v = vec!["workload"];
        v.extend_from_slice(rest);
        v
    };
    check_positional(&w(&["getppid"]), "<N>", &[], &all);
    check_positional(&w(&["fsync"]), "<N>", &["f"], &all);
    check(&w(&["fsync", "1", "f"]), &["--size"], &[], &all);
    check_positional(&w(&["sleep"]), "<N>", &["0"], &all);
    check_positional(&w(&["sleep", "1"]), "<MS>", &[], &all);
    check_positional(&w(&["mmap"]), "<THREADS>", &["1"], &all);
    check_positional(&w(&["mmap", "1"]), "<N>", &[], &all);
    check_positional(&w(&["udp"]), "<N>", &["1"], &all);
    check_positional(&w(&["udp", "1"]), "<SIZE>", &[], &all);
    check_positional(&w(&["fork"]), "<K>", &["--ms", "0"], &all);
    check(&w(&["fork", "1"]), &["--ms"], &[], &all);
    check_positional(&w(&["touch-pages"]), "<N>", &[], &all);
    // One block per thread (a count of thousands of MiB blocks would fill a small disk).
    check(
        &w(&["direct-writers", "--count", "1"]),
        &["--threads"],
        &["dw"],
        &all,
    );
    for opt in ["--threads", "--iters"] {
        check(&w(&["mutex-fight"]), &[opt], &[], &all);
        check(&w(&["lock-callers"]), &[opt], &[], &all);
        check(&w(&["malloc-fight"]), &[opt], &[], &all);
    }
    check(&w(&["malloc-fight"]), &["--arenas"], &[], &all);
    check(&w(&["cache-pollution"]), &["--mib"], &[], &all);
    check(&w(&["cache-pollution"]), &["--hot"], &[], &all);
    check(&w(&["spin"]), &["--ms"], &[], &all);
    check(&w(&["micro", "--bench", "null"]), &["--scale"], &[], &all);
    check(&w(&["pin"]), &["--cpus"], &["--", "true"], &all);
}
