//! User-lock hold times (`kstate record --holds`, `kstate analyze lockhold`): a C
//! program holding a mutex for a known time measures its own holds, and kstate's must
//! agree; the uprobes are gone after a normal end, Ctrl-C, SIGTERM, and (by the next
//! recorder) SIGKILL.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::{kstate, kstate_json};

/// Threads taking one mutex in `hold_it` and sleeping `HOLD_US` inside; the program
/// prints its own count, median and total of the time between lock and unlock.
const HOLD_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long rounds, hold_us;
static double holds[64][1000];
static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
__attribute__((noinline)) static void hold_it(int me, long i) {
    pthread_mutex_lock(&lock);
    double a = now_ns();
    struct timespec d = {0, hold_us * 1000};
    nanosleep(&d, 0);
    double b = now_ns();
    pthread_mutex_unlock(&lock);
    holds[me][i] = b - a;
}
static void *worker(void *arg) {
    for (long i = 0; i < rounds; i++) hold_it((int)(long)arg, i);
    return 0;
}
static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    rounds = atol(argv[2]);
    hold_us = atol(argv[3]);
    if (n < 1 || n > 64 || rounds < 1 || rounds > 1000) return 2;
    pthread_t t[64];
    for (int i = 0; i < n; i++) pthread_create(&t[i], 0, worker, (void *)(long)i);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    static double all[64000];
    long k = 0;
    double sum = 0;
    for (int i = 0; i < n; i++)
        for (long j = 0; j < rounds; j++) sum += all[k++] = holds[i][j];
    qsort(all, k, sizeof all[0], cmp);
    printf("holds %ld p50_ns %.0f total_ns %.0f\n", k, all[k / 2], sum);
    return 0;
}
"#;

/// The program's own line `holds N p50_ns X total_ns Y`: (N, X, Y).
fn own_measure(out: &str) -> (u64, f64, f64) {
    let v: Vec<f64> = out
        .lines()
        .find(|l| l.starts_with("holds "))
        .unwrap_or_else(|| panic!("no line from the program: {out}"))
        .split_whitespace()
        .skip(1)
        .step_by(2)
        .map(|w| w.parse().unwrap())
        .collect();
    (v[0] as u64, v[1], v[2])
}

/// kstate's uprobe groups of recorder `pid` in uprobe_events.
fn probes_of(pid: u32) -> Vec<String> {
    std::fs::read_to_string("/sys/kernel/tracing/uprobe_events")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!(":kstate_{pid}_")))
        .map(str::to_string)
        .collect()
}

/// A row of `kstate analyze lockhold --format json`.
fn row<'a>(v: &'a serde_json::Value, prefix: &str) -> &'a serde_json::Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no row {prefix}: {v}"))
}

#[test]
fn hold_times_agree_with_the_program_s_own() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = support::gcc(tmp.path(), "hold", HOLD_C, &["-O1", "-pthread"]);
    let file = tmp.path().join("hold.dat");
    let f = file.to_str().unwrap();
    let e = "sched:sched_process_exit";
    // 3 threads, 60 holds each of 2 ms: the others wait meanwhile.
    let out = kstate(&[
        "record", "--holds", "-e", e, "-o", f, "--", &exe, "3", "60", "2000",
    ]);
    let (n, p50, total) = own_measure(&out);
    assert_eq!(n, 180);

    let v = kstate_json(&["analyze", "lockhold", "--format", "json", f]);
    // The static `lock`, named from the program's symbols, in its process.
    let r = row(&v, "lock@");
    assert_eq!(r["count"].as_u64().unwrap(), n, "{r}");
    let got = r["p50_ns"].as_f64().unwrap();
    assert!(
        (got - p50).abs() <= p50 * 0.10,
        "p50 {got} vs the program's {p50}: {r}"
    );
    // kstate's holds run from lock's return to unlock's entry, a little wider than the
    // program's clock reads inside them.
    let sum = r["total_ns"].as_f64().unwrap();
    assert!(
        sum >= total && sum <= total * 1.10,
        "total {sum} vs {total}: {r}"
    );

    let v = kstate_json(&[
        "analyze", "lockhold", "--by", "caller", "--format", "json", f,
    ]);
    let r = row(&v, "lock@");
    assert!(r["key"].as_str().unwrap().ends_with(" from hold_it"), "{r}");
    assert_eq!(r["count"].as_u64().unwrap(), n, "{r}");

    // The probes went with the recording: any left belong to recorders still running
    // (other tests).
    let list = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap();
    for l in list.lines().filter(|l| l.contains(":kstate_")) {
        let pid = l
            .split(":kstate_")
            .nth(1)
            .unwrap()
            .split('_')
            .next()
            .unwrap();
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "left behind: {l}"
        );
    }
}

/// `kstate top-locks` (which records with --holds) prints hold next to wait, and names
/// the function that waited inside pthread_mutex_lock although the uretprobe hides it
/// from the chain.
#[test]
fn top_locks_shows_hold_next_to_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = support::gcc(tmp.path(), "hold", HOLD_C, &["-O1", "-pthread"]);
    let file = tmp.path().join("top.dat");
    let f = file.to_str().unwrap();
    let out = kstate(&[
        "top-locks",
        "--json",
        "-o",
        f,
        "--",
        &exe,
        "3",
        "40",
        "2000",
    ]);
    let (n, _, total) = own_measure(&out);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let lock = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["lock"].as_str().unwrap().starts_with("lock@"))
        .unwrap_or_else(|| panic!("no lock@: {v}"));
    assert_eq!(lock["holds"].as_u64().unwrap(), n, "{lock}");
    let held = lock["hold_ns"].as_f64().unwrap();
    assert!(
        held >= total && held <= total * 1.10,
        "{held} vs {total}: {lock}"
    );
    // Every wait on it was inside pthread_mutex_lock called from hold_it.
    let callers = lock["callers"].as_array().unwrap();
    assert_eq!(callers.len(), 1, "{lock}");
    assert_eq!(callers[0]["caller"], "hold_it", "{lock}");
}

/// Starts `kstate record --holds` of a long sleep; returns once its probes exist.
fn start_holding(file: &Path) -> std::process::Child {
    let mut child = Command::new(support::KSTATE)
        .args(["record", "--holds", "-e", "sched:sched_process_exit", "-o"])
        .arg(file)
        .args(["--", "sleep", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Waiting for the recorder to set up (not a timing assertion: it is given up to a
    // minute on a loaded machine).
    for _ in 0..600 {
        if !probes_of(child.id()).is_empty() {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the recorder never defined its uprobes");
}

#[test]
fn uprobes_are_removed_on_ctrl_c_sigterm_and_after_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let child = start_holding(&tmp.path().join(format!("sig{sig}.dat")));
        let pid = child.id();
        assert_eq!(probes_of(pid).len(), 3, "{:?}", probes_of(pid));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, sig) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("stopped by SIG"), "{err}");
        assert!(
            probes_of(pid).is_empty(),
            "signal {sig}: {:?}",
            probes_of(pid)
        );
    }
    // SIGKILL leaves them; the next recorder removes them, as it does dead instances.
    let mut child = start_holding(&tmp.path().join("kill.dat"));
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(probes_of(pid).len(), 3);
    let next = tmp.path().join("next.dat");
    let out = Command::new(support::KSTATE)
        .args(["record", "--holds", "-e", "sched:sched_process_exit", "-o"])
        .arg(&next)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("removed uprobes kstate_{pid}_")),
        "{err}"
    );
    assert!(probes_of(pid).is_empty(), "{:?}", probes_of(pid));
}

/// Kernel lock hold times need lock:lock_acquired (CONFIG_LOCK_STAT); where the kernel
/// lacks it, `analyze lockwait` says so in its header instead of staying silent.
#[test]
fn lockwait_says_kernel_hold_times_are_not_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("lock.dat");
    let f = file.to_str().unwrap();
    // Threads mapping and unmapping contend on their mmap_lock: lockwait has waits to
    // show (a trace without any is refused).
    kstate(&[
        "record",
        "-e",
        "lock",
        "-o",
        f,
        "--",
        support::KSTATE,
        "workload",
        "mmap",
        "4",
        "20000",
    ]);
    let text = kstate(&["analyze", "lockwait", f]);
    let has = Path::new("/sys/kernel/tracing/events/lock/lock_acquired").exists();
    let want = match has {
        false => "note:     kernel lock hold times: not recorded (this kernel has no lock:lock_acquired; needs CONFIG_LOCK_STAT)",
        // The lock preset records contention only: the file lacks them either way.
        true => "note:     kernel lock hold times: not recorded (no lock:lock_acquired in this file; a kernel has it only with CONFIG_LOCK_STAT)",
    };
    assert!(text.lines().any(|l| l == want), "{text}");
}
