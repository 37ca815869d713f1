//! Issue 40 §9: call chains under a lock storm. A C program whose threads fight over
//! glibc's one malloc arena and hand a counter over through a condition variable makes
//! 50,000-150,000 futex() calls a second; `kstate record --stacks` keeps their call chains
//! (it lost 67-91 % of them with 8 KiB stack copies), and `kstate top-locks`
//! names the functions that waited, never a lost chain, with the share of waits that had
//! none. perf's own DWARF unwinding of the same program is the oracle for the callers.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::support::{self, KSTATE};
use serde_json::Value;

const LOCKSTORM_C: &str = r#"
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn = PTHREAD_COND_INITIALIZER;
static long counter;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* malloc and free of 16..4096 bytes, a few live at a time. */
__attribute__((noinline)) static long alloc_worker(unsigned long x) {
  void *live[8] = {0};
  long n = 0;
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < 1000; i++, n++) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      free(live[n % 8]);
      live[n % 8] = malloc(16 + x % 4080);
      if (live[n % 8]) *(volatile char *)live[n % 8] = 1;
    }
  }
  for (int i = 0; i < 8; i++) free(live[i]);
  return n;
}

/* Waits (1 ms at most) for the counter to have this thread's parity, then passes it on. */
__attribute__((noinline)) static long cond_worker(long parity) {
  long n = 0;
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < 100; i++, n++) {
      struct timespec t;
      clock_gettime(CLOCK_REALTIME, &t);
      t.tv_nsec += 1000000;
      if (t.tv_nsec >= 1000000000) { t.tv_sec++; t.tv_nsec -= 1000000000; }
      pthread_mutex_lock(&m);
      while (counter % 2 != parity && pthread_cond_timedwait(&turn, &m, &t) == 0) {}
      counter++;
      pthread_cond_broadcast(&turn);
      pthread_mutex_unlock(&m);
    }
  }
  return n;
}

static void *run(void *arg) {
  long i = (long)arg;
  return (void *)(i % 2 ? alloc_worker(i * 0x9e3779b97f4a7c15UL | 1) : cond_worker(i / 2 % 2));
}

/* THREADS threads for SECONDS: the odd ones in alloc_worker, the even ones in cond_worker. */
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 8;
  seconds = argc > 2 ? atof(argv[2]) : 2;
  if (threads < 1 || threads > 256) return 2;
  mallopt(M_ARENA_MAX, 1);
  pthread_t t[256];
  for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, run, (void *)i);
  long total = 0;
  for (int i = 0; i < threads; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
  printf("%ld turns\n", total);
  return 0;
}
"#;

/// futex() operations that wait (FUTEX_WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI,
/// LOCK_PI2), without the private and clock flags.
fn waits(op: u64) -> bool {
    [0, 6, 9, 11, 13].contains(&(op & 127))
}

/// Per caller of the waiting futex() calls, from `perf script` of the program recorded
/// with perf's DWARF unwinding: the first frame (leaf first) in the program itself.
fn perf_wait_callers(dir: &Path, exe: &str) -> BTreeMap<String, u64> {
    let text = support::perf_script(
        &dir.join("perf.data"),
        &[
            "-q",
            "-e",
            "syscalls:sys_enter_futex",
            "--call-graph",
            "dwarf",
            "-m",
            "16M",
        ],
        &[exe, "8", "1"],
        &["-F", "trace,ip,sym,dso"],
    );
    let mut counts = BTreeMap::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(op) = lines
            .next()
            .and_then(|h| h.split("op: 0x").nth(1))
            .and_then(|o| u64::from_str_radix(&o[..8], 16).ok())
        else {
            continue;
        };
        if !waits(op) {
            continue;
        }
        if let Some(f) = lines.find(|l| l.contains(&format!("({exe})"))) {
            let name = f.split_whitespace().nth(1).unwrap_or_default();
            *counts.entry(name.to_string()).or_default() += 1;
        }
    }
    counts
}

/// The callers named for at least `pct` % of the waits counted.
fn main_callers(counts: &BTreeMap<String, u64>, pct: u64) -> Vec<String> {
    let all: u64 = counts.values().sum();
    counts
        .iter()
        .filter(|(_, &n)| n * 100 >= all * pct)
        .map(|(c, _)| c.clone())
        .collect()
}

#[test]
fn a_lock_storm_keeps_its_chains_and_names_the_callers() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = support::gcc(
        tmp.path(),
        "lockstorm",
        LOCKSTORM_C,
        &["-O2", "-g", "-pthread"],
    );
    let file = tmp.path().join("storm.dat");
    let out = Command::new(KSTATE)
        .args([
            "record",
            "--json",
            "--stacks",
            "-e",
            "futex,task:task_newtask",
            "-o",
        ])
        .arg(&file)
        .args(["--", &exe, "8", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    let stacks = &summary["stacks"];
    let (chains, lost) = (
        stacks["chains"].as_u64().unwrap(),
        stacks["lost"].as_u64().unwrap(),
    );
    // A storm it was: 50,000 to 150,000 futex() calls a second on this 2-CPU VM, whatever
    // else ran (fewer would prove nothing about keeping up).
    assert!(chains + lost >= 20_000, "{summary}");
    // The old recorder lost 67-91 % of them (2 s storms, the VM shared with other work at
    // a load of 16-25); this one none in 7 of 8 such recordings, and 5.7 % in one with two
    // CPU-bound processes added. What it can still lose is a burst outlasting its ring
    // (16 MiB a CPU, some 15,000 chains) while its copier finds no CPU; 10 % is twice the
    // worst seen, and far below what the old recorder kept losing.
    assert!(
        lost * 100 <= (chains + lost) * 10,
        "{lost} of {} chains lost: {summary}",
        chains + lost
    );

    let v = support::kstate_json(&[
        "top-locks",
        "--json",
        "--top",
        "10",
        "--callers",
        "10",
        file.to_str().unwrap(),
    ]);
    let locks = v["locks"].as_array().unwrap();
    // Never a lost chain or lock machinery as a caller; their shares are said apart.
    let mut kstate_callers: BTreeMap<String, u64> = BTreeMap::new();
    for l in locks {
        let waits = l["waits"].as_u64().unwrap();
        for c in l["callers"].as_array().unwrap() {
            let name = c["caller"].as_str().unwrap();
            assert!(!name.starts_with('['), "{name} shown as a caller: {l}");
            *kstate_callers.entry(name.to_string()).or_default() += c["waits"].as_u64().unwrap();
        }
        let no_chain = l["no_chain_waits"].as_u64().unwrap();
        let pct = l["no_chain_pct_of_waits"].as_f64().unwrap();
        assert!(
            (pct - no_chain as f64 * 100.0 / waits as f64).abs() < 0.01,
            "{l}"
        );
    }
    // glibc's arena lock (main_arena, named where libc's debug symbols are installed)
    // was taken from alloc_worker, the mutex and condition variable from cond_worker.
    let top_caller = |lock: &Value| lock["callers"][0]["caller"].as_str().map(String::from);
    let arena = locks
        .iter()
        .find(|l| {
            let n = l["lock"].as_str().unwrap();
            n.starts_with("main_arena@") || n.starts_with("libc.so.6+0x")
        })
        .unwrap_or_else(|| panic!("no wait on the arena: {v}"));
    assert_eq!(
        top_caller(arena).as_deref(),
        Some("alloc_worker"),
        "{arena}"
    );
    // (A condition variable's futex words are inside it: `turn+0x28`.)
    let cond_locks: Vec<&Value> = locks
        .iter()
        .filter(|l| {
            let n = l["lock"].as_str().unwrap();
            n.starts_with("m@") || n.starts_with("turn@") || n.starts_with("turn+")
        })
        .collect();
    assert!(
        !cond_locks.is_empty(),
        "no wait on the mutex or condition variable: {v}"
    );
    for l in cond_locks {
        assert_eq!(top_caller(l).as_deref(), Some("cond_worker"), "{l}");
    }
    // The text answer names the top known caller, and says what had no chain.
    let text = support::kstate(&["top-locks", "--top", "10", file.to_str().unwrap()]);
    let arena_name = arena["lock"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "waiting on {arena_name} taken from alloc_worker ("
        )),
        "{text}"
    );
    assert!(!text.contains("from [no chain]"), "{text}");
    if arena["no_chain_waits"].as_u64().unwrap() > 0 {
        assert!(
            text.contains("% of the waits had no call chain (lost while recording)"),
            "{text}"
        );
    }

    // Oracle: perf's DWARF unwinding of the same program names the same callers of the
    // waits (each for 2 % of them or more; how the waits split between the two kinds of
    // lock differs from run to run).
    let perf = perf_wait_callers(tmp.path(), &exe);
    let (ours, theirs) = (main_callers(&kstate_callers, 2), main_callers(&perf, 2));
    assert!(
        theirs.contains(&"alloc_worker".to_string()) || theirs.contains(&"cond_worker".to_string()),
        "perf named neither worker: {perf:?}"
    );
    for c in &theirs {
        assert!(
            kstate_callers.contains_key(c),
            "perf {perf:?}, kstate {kstate_callers:?}"
        );
    }
    for c in &ours {
        assert!(
            perf.contains_key(c),
            "kstate {kstate_callers:?}, perf {perf:?}"
        );
    }
}
