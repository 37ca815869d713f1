//! Issue 40 §5: a recording killed with SIGKILL and finished by `kstate recover` names the
//! command's tasks as a finished recording does (the recorder keeps the process table, the
//! command it started and the tasks the pid filter follows in its scratch capture from the
//! first second), so `--comm` finds their calls, all of them.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{run, KSTATE};
use serde_json::Value;

/// Waits until `path` exists.
fn wait_for(path: &Path, what: &str) {
    let t = Instant::now();
    while !path.exists() {
        assert!(t.elapsed() < Duration::from_secs(120), "no {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kstate analyze syscall ARGS --format csv FILE`: (key, count) per row.
fn syscall_rows(file: &Path, args: &[&str]) -> Vec<(String, u64)> {
    let mut a = vec!["analyze", "syscall", "--format", "csv"];
    a.extend(args);
    a.push(file.to_str().unwrap());
    let out = run(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split(',');
            Some((f.next()?.to_string(), f.next()?.parse().ok()?))
        })
        .collect()
}

#[test]
fn a_killed_recording_of_a_command_names_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("killed.dat");
    // A real program under a name of its own: the kernel names a task after the file it
    // executes, so its calls are told apart from the recorder's (also kstate).
    let link = dir.path().join("ppidloop");
    std::os::unix::fs::symlink(KSTATE, &link).unwrap();
    let (done, fifo) = (dir.path().join("done"), dir.path().join("go"));
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The command (sh) starts ppidloop after the recording began, then waits on the FIFO
    // until the recorder has been killed.
    let n = 300_000u64;
    let script = format!(
        "'{}' workload getppid {n} >/dev/null && : > '{}' && read x < '{}'",
        link.display(),
        done.display(),
        fifo.display()
    );
    let mut recorder = Command::new(KSTATE)
        .args(["record", "-e", "syscall", "-o", out.to_str().unwrap()])
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&done, "end of the getppid calls");
    // Long enough for the readers to move the partly filled pages (a CPU quiet for
    // 200 ms) and for the recorder to look the tasks up again (every second).
    std::thread::sleep(Duration::from_millis(1500));
    recorder.kill().unwrap(); // SIGKILL: the recorder writes nothing more
    recorder.wait().unwrap();
    std::fs::write(&fifo, "go\n").unwrap();

    let r = run(&["recover", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let info: Value =
        serde_json::from_slice(&run(&["info", "--json", out.to_str().unwrap()]).stdout)
            .expect("info --json");
    let rec = &info["recording"];
    let sh = rec["workload_pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("{info}"));
    assert_eq!(rec["workload"][0], "sh", "{info}");
    assert!(info["recovered"].is_string(), "{info}");

    // Every task the recording saw is named, the command and what it started.
    let by_tid = syscall_rows(&out, &["--by", "tid"]);
    assert!(!by_tid.is_empty());
    assert!(
        by_tid.iter().all(|(k, _)| !k.starts_with("<...>")),
        "{by_tid:?}"
    );
    assert!(
        by_tid.iter().any(|(k, _)| *k == format!("sh-{sh}")),
        "{by_tid:?}"
    );
    // --comm finds the started program's calls: as many as it made.
    let calls = syscall_rows(&out, &["--comm", "ppidloop"]);
    let getppid = calls.iter().find(|(k, _)| k == "getppid");
    assert_eq!(getppid.map(|r| r.1), Some(n), "{calls:?}");
    assert!(!syscall_rows(&out, &["--comm", "sh"]).is_empty());

    // The oracle: the same workload recorded to its end names its tasks the same.
    let whole = dir.path().join("whole.dat");
    let script = format!("'{}' workload getppid {n} >/dev/null", link.display());
    let r = run(&[
        "record",
        "-e",
        "syscall",
        "-o",
        whole.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        comms(&by_tid),
        comms(&syscall_rows(&whole, &["--by", "tid"]))
    );
}

/// The task names of `--by tid` rows (`comm-tid`).
fn comms(rows: &[(String, u64)]) -> std::collections::BTreeSet<String> {
    rows.iter()
        .map(|(k, _)| {
            k.rsplit_once('-')
                .map_or(k.as_str(), |(c, _)| c)
                .to_string()
        })
        .collect()
}
