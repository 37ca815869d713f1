//! `kstate why`: the critical path of a chain of waits known by construction (`kstate
//! workload why-chain`: A asks B on a pipe; B blocks on a mutex C holds while sleeping,
//! then writes and fsyncs, then answers), recorded system-wide from the real kernel. The
//! oracles are what the workload timed in the same run: C's sleep, A's CPU time (the
//! scheduler's own count, as /proc's schedstat keeps it), the fsync's wall time and B's CPU time in it.
use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{kstate_json, ok, run, KSTATE};

const REQUEST: &str = "marker:why-request begin,why-request end";
const FSYNC: &str = "marker:why-fsync begin,why-fsync end";

/// One system-wide recording at a time: two chains in one recording would each have a
/// `why-a`.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Records the chain with `events`; returns what the workload printed per request.
pub(crate) fn record_chain(events: &str, sleep_ms: u64, dest: &Path) -> Vec<Value> {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = dest.parent().unwrap();
    let sleep = sleep_ms.to_string();
    let out = ok(&[
        "record",
        "--sysinfo-interval",
        "0",
        "-a",
        "-e",
        events,
        "-o",
        dest.to_str().unwrap(),
        "--",
        KSTATE,
        "workload",
        "why-chain",
        "--requests",
        "2",
        "--sleep-ms",
        &sleep,
        "--write-mib",
        "64",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("{\"request\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(lines.iter().all(|l| l["marker"] == true), "no trace_marker");
    lines
}

fn why(file: &Path, who: &[&str], span: &str) -> Value {
    let mut args = vec![
        "why",
        file.to_str().unwrap(),
        "--format",
        "json",
        "--span",
        span,
    ];
    args.extend_from_slice(who);
    kstate_json(&args)
}

/// A path's requests in time order.
fn requests(v: &Value) -> Vec<&Value> {
    let mut r: Vec<&Value> = v["requests"].as_array().unwrap().iter().collect();
    r.sort_by_key(|p| p["window"][0].as_u64().unwrap());
    r
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// A path's time summed over its states.
fn state_total(path: &Value) -> u64 {
    path["by_state"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| n(&s["ns"]))
        .sum()
}

/// Time of `tid` in `state` on a path (its segments summed).
fn thread_state(path: &Value, tid: i64, state: &str) -> u64 {
    path["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["tid"].as_i64() == Some(tid) && s["state"] == state)
        .map(|s| n(&s["end_ns"]) - n(&s["start_ns"]))
        .sum()
}

/// A path's segments, and where the first of `tid`'s timer sleeps is among them.
fn sleep_at(path: &Value, tid: i64) -> (&[Value], Option<usize>) {
    let segs = path["segments"].as_array().unwrap();
    let at = segs
        .iter()
        .position(|s| s["tid"].as_i64() == Some(tid) && s["state"] == "sleep");
    (segs, at)
}

fn span_ns(segs: &[Value]) -> u64 {
    segs.iter()
        .map(|s| n(&s["end_ns"]) - n(&s["start_ns"]))
        .sum()
}

/// C's sleep as C times it: its stretch on the path from its timer sleep on (the sleep,
/// then its wait for a CPU, then the unlock), up to the next thread's segment.
fn sleep_run(path: &Value, tid: i64) -> u64 {
    let (segs, Some(at)) = sleep_at(path, tid) else {
        return 0;
    };
    let mine = segs[at..]
        .iter()
        .take_while(|s| s["tid"].as_i64() == Some(tid))
        .count();
    span_ns(&segs[at..at + mine])
}

/// The part of C's sleep the path spent elsewhere: from C's segment before its sleep
/// (C took the mutex and answered B) to the sleep's segment, the path is on B, which
/// has to run (or wait for a CPU, 4-20 ms under load) before it blocks on the mutex
/// and the path follows C again. (Where B blocked at once, C's sleep is its first
/// segment on the path.)
fn before_sleep(path: &Value, tid: i64) -> u64 {
    let (segs, Some(at)) = sleep_at(path, tid) else {
        return 0;
    };
    match segs[..at]
        .iter()
        .rposition(|s| s["tid"].as_i64() == Some(tid))
    {
        Some(c) => span_ns(&segs[c + 1..at]),
        None => 0,
    }
}

/// The segments of `path` cut to `[a, b)`.
fn cut(path: &Value, (a, b): (u64, u64)) -> Vec<(u64, u64, i64, String, String)> {
    path["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let (lo, hi) = (n(&s["start_ns"]).max(a), n(&s["end_ns"]).min(b));
            (lo < hi).then(|| {
                let detail = s["detail"].as_str().unwrap_or("").to_string();
                let state = s["state"].as_str().unwrap().to_string();
                (lo, hi, s["tid"].as_i64().unwrap(), state, detail)
            })
        })
        .collect()
}

/// A path in brief, for a failure's message: time per thread and state (ms), largest
/// first, and what the unknown stretches say.
fn brief(path: &Value) -> String {
    let mut per: std::collections::BTreeMap<(String, String), u64> = Default::default();
    let mut unknown = std::collections::BTreeSet::new();
    for s in path["segments"].as_array().unwrap() {
        let (comm, state) = (
            s["comm"].as_str().unwrap_or("?"),
            s["state"].as_str().unwrap(),
        );
        *per.entry((comm.to_string(), state.to_string()))
            .or_default() += n(&s["end_ns"]) - n(&s["start_ns"]);
        if state == "unknown" {
            unknown.insert(s["detail"].as_str().unwrap_or("").to_string());
        }
    }
    let mut per: Vec<_> = per.into_iter().collect();
    per.sort_by_key(|p| std::cmp::Reverse(p.1));
    let per: Vec<String> = per
        .iter()
        .map(|((c, st), ns)| format!("{c}:{st} {:.1}", *ns as f64 / 1e6))
        .collect();
    format!("path (ms): {}; unknown: {unknown:?}", per.join(", "))
}

fn within(got: u64, want: u64, pct: f64, what: &str) {
    let err = (got as f64 - want as f64).abs() / want.max(1) as f64 * 100.0;
    assert!(
        err <= pct,
        "{what}: the path gives {got} ns, the workload timed {want} ns ({err:.2} % apart)"
    );
}

/// The disk of the filesystem holding `dir`, as the block events name it (`major:minor`
/// of the whole disk, not the partition).
fn disk_of(dir: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).unwrap().dev();
    let (major, minor) = (libc_major(dev), libc_minor(dev));
    let sys = format!("/sys/dev/block/{major}:{minor}");
    // A partition's directory has a `partition` file; its disk is the parent directory.
    if Path::new(&format!("{sys}/partition")).exists() {
        let parent = std::fs::canonicalize(format!("{sys}/..")).unwrap();
        let d = std::fs::read_to_string(parent.join("dev")).unwrap();
        return d.trim().to_string();
    }
    format!("{major}:{minor}")
}

fn libc_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)
}

fn libc_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0xff)
}

#[test]
fn chain_path_names_the_sleep_the_disk_and_the_cpu() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("chain.dat");
    let timed = record_chain("why", 300, &file);
    let (a_tid, b_tid, c_tid) = (
        timed[0]["a_tid"].as_i64().unwrap(),
        timed[0]["b_tid"].as_i64().unwrap(),
        timed[0]["c_tid"].as_i64().unwrap(),
    );
    let a = why(&file, &["--comm", "why-a"], REQUEST);
    assert_eq!(a["tid"].as_i64(), Some(a_tid));
    assert_eq!(a["comm"], "why-a");
    let b = why(&file, &["--tid", &b_tid.to_string()], FSYNC);
    let (reqs, fsyncs) = (requests(&a), requests(&b));
    assert_eq!(
        (reqs.len(), fsyncs.len()),
        (2, 2),
        "requests and fsyncs cut"
    );
    let disk = disk_of(dir.path());
    for (i, (r, t)) in reqs.iter().zip(&timed).enumerate() {
        // The path covers the request: its segments add up to its wall time.
        assert_eq!(state_total(r), n(&r["wall_ns"]), "request {i}");
        // C's sleep, reached through B's wait on the mutex: as C timed it, it includes
        // C's wait for a CPU after the timer (this machine is shared), which the path
        // tells apart.
        let elsewhere = before_sleep(r, c_tid);
        within(
            sleep_run(r, c_tid) + elsewhere,
            n(&t["sleep_ns"]),
            5.0,
            &format!(
                "request {i}: C's sleep ({}; lost events {})",
                brief(r),
                a["lost_events"]
            ),
        );
        let timer = thread_state(r, c_tid, "sleep");
        assert!(
            timer + elsewhere >= 299_000_000 && timer <= n(&t["sleep_ns"]),
            "request {i}: C's time in sleep {timer} ns and {elsewhere} ns on B's way to \
             the mutex, timed {}",
            t["sleep_ns"]
        );
        // A's own running time: its CPU time between the markers. The trace counts the
        // time the hypervisor gave another guest while A was on a CPU (steal); the
        // scheduler's count does not: up to the steal seen on all CPUs meanwhile (to the
        // tick) comes off. And this kernel leaves some switch-ins untraced: the walk
        // puts each at the last sign of the CPU's previous task, up to a tick (4 ms)
        // early; so the path may give up to 10 % more, never 5 % less.
        let (running, cpu) = (thread_state(r, a_tid, "running"), n(&t["a_cpu_ns"]));
        let steal = match n(&t["steal_ns"]) {
            0 => 0,
            s => s + n(&t["tick_ns"]),
        };
        let over = running.saturating_sub(steal).saturating_sub(cpu / 20);
        within(
            over.max(cpu.min(running)),
            cpu,
            5.0,
            &format!(
                "request {i}: A's running time ({running} ns, steal {steal} ns; {})",
                brief(r)
            ),
        );
        // The fsync, as B's markers cut it: A waits on B all along, so A's path there is
        // B's path there.
        let f = fsyncs[i];
        let w = (n(&f["window"][0]), n(&f["window"][1]));
        let on_a = cut(r, w);
        let on_b = cut(f, w);
        assert_eq!(on_a, on_b, "request {i}: A's path in the fsync is B's");
        // The fsync's wait (its wall time less B's time on a CPU in it) is, on the path,
        // the disk, the waits for a CPU (this machine is shared) and the kernel threads
        // that write the journal, and nothing else. Its wall time between B's markers,
        // where the path is cut: B may wait for a CPU between a marker and its clock
        // reading (8 ms under load). B's time on a CPU is the path's: the scheduler's
        // count of a few ms around sync_all() differs from it by 0.8-2.4x under load
        // (steal, and the clock readings outside the markers).
        let b_running = thread_state(f, b_tid, "running");
        let wait = (w.1 - w.0).saturating_sub(b_running);
        let timed = n(&t["fsync_ns"]);
        assert!(
            w.1 - w.0 >= timed,
            "request {i}: the markers hold the fsync ({} ns), timed {timed} ns",
            w.1 - w.0
        );
        let of = |state: &str| -> u64 {
            on_b.iter()
                .filter(|s| s.3 == state)
                .map(|s| s.1 - s.0)
                .sum()
        };
        let others_running: u64 = on_b
            .iter()
            .filter(|s| s.3 == "running" && s.2 != b_tid)
            .map(|s| s.1 - s.0)
            .sum();
        within(
            of("disk") + of("runnable") + others_running,
            wait,
            5.0,
            &format!("request {i}: the fsync's wait (disk + runnable + kernel threads)"),
        );
        assert!(
            of("disk") > 0,
            "request {i}: no disk time in the fsync: {on_b:?}"
        );
        assert_eq!(of("unknown"), 0, "request {i}: {on_b:?}");
        // Block completions woke the waits, in interrupt context: the disk is named.
        let named: Vec<&String> = on_b
            .iter()
            .filter(|s| s.3 == "disk")
            .map(|s| &s.4)
            .collect();
        assert!(
            !named.is_empty() && named.iter().all(|d| d.starts_with(&format!("{disk} "))),
            "request {i}: disk segments do not name {disk}: {named:?}"
        );
    }
}

#[test]
fn a_missing_event_class_gives_unknown_not_a_wrong_thread() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("nosoftirq.dat");
    // The scheduler and timers, but no interrupt, softirq or block events.
    let events = "sched:sched_switch,sched:sched_waking,sched:sched_wakeup,timer:hrtimer_expire_entry,timer:hrtimer_expire_exit";
    let timed = record_chain(events, 300, &file);
    let (a_tid, b_tid, c_tid) = (
        timed[0]["a_tid"].as_i64().unwrap(),
        timed[0]["b_tid"].as_i64().unwrap(),
        timed[0]["c_tid"].as_i64().unwrap(),
    );
    let a = why(&file, &["--comm", "why-a"], REQUEST);
    let b = why(&file, &["--comm", "why-b"], FSYNC);
    let names: std::collections::BTreeMap<i64, String> = a["by_thread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tid"].as_i64().unwrap(),
                t["comm"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut unknown_seen = 0;
    for (i, (r, f)) in requests(&a).iter().zip(requests(&b)).enumerate() {
        // C's sleep is still named: the timer events are there.
        let elsewhere = before_sleep(r, c_tid);
        within(
            sleep_run(r, c_tid) + elsewhere,
            n(&timed[i]["sleep_ns"]),
            5.0,
            &format!("C's sleep ({})", brief(r)),
        );
        assert!(
            thread_state(r, c_tid, "sleep") + elsewhere >= 299_000_000,
            "C's sleep"
        );
        let w = (n(&f["window"][0]), n(&f["window"][1]));
        let segs = cut(r, w);
        // The block completions' wake-ups came in softirq context the recording does not
        // name: unknown, saying which events are missing, never another task.
        let unknown: Vec<&String> = segs
            .iter()
            .filter(|s| s.3 == "unknown")
            .map(|s| &s.4)
            .collect();
        unknown_seen += unknown.len();
        assert!(
            unknown.iter().all(|d| d.contains("irq")),
            "request {i}: unknown without naming the missing events: {unknown:?}"
        );
        assert!(segs.iter().all(|s| s.3 != "disk"), "request {i}: {segs:?}");
        for s in &segs {
            let comm = names.get(&s.2).map_or("", String::as_str);
            assert!(
                [a_tid, b_tid, c_tid].contains(&s.2)
                    || comm.starts_with("kworker")
                    || comm.starts_with("jbd2"),
                "request {i}: the path names {comm}-{}, not a thread of the chain: {segs:?}",
                s.2
            );
        }
    }
    // (A request whose I/O all completed while B ran or waited for a CPU has no such
    // wait: the two together have one.)
    assert!(unknown_seen > 0, "no unknown stretch in either fsync");
}

#[test]
fn a_doubled_sleep_is_what_grew() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (fa, fb) = (dir.path().join("a.dat"), dir.path().join("b.dat"));
    record_chain("why", 300, &fa);
    let timed = record_chain("why", 600, &fb);
    let args = [
        "why",
        fa.to_str().unwrap(),
        fb.to_str().unwrap(),
        "--comm",
        "why-a",
        "--span",
        REQUEST,
        "--format",
        "json",
    ];
    let c = kstate_json(&args);
    let grew = &c["grew"];
    let key = grew["key"].as_str().unwrap();
    assert!(
        key.ends_with("> why-c: sleep timer hrtimer_wakeup") || key.ends_with("> why-c: sleep"),
        "what grew: {grew}"
    );
    // C's sleep, as B measured it, doubled; so did its line, within 5 %.
    let want = n(&timed[0]["sleep_ns"]) as f64 / 2.0;
    let ratio = grew["ratio"].as_f64().unwrap();
    assert!(
        (ratio - 2.0).abs() < 0.1,
        "ratio {ratio} (B's sleep {want} ns x 2)"
    );
    // Text says it first.
    let text = run(&args[..7]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.lines()
            .nth(2)
            .is_some_and(|l| l.starts_with("what grew: ") && l.contains("why-c: sleep")),
        "{out}"
    );
}

#[test]
fn a_thread_not_found_or_not_unique_is_bad_input() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("s.dat");
    let out = Command::new(KSTATE)
        .args(["record", "--sysinfo-interval", "0", "-e", "why", "-o"])
        .arg(&file)
        .args(["--", KSTATE, "workload", "sleep", "3", "5"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let f = file.to_str().unwrap();
    let none = run(&["why", f, "--comm", "no-such-thread"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--comm no-such-thread: no such thread"));
    let bad = run(&["why", f, "--tid", "1", "--span", "marker:x"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `--max-segments N` bounds the JSON's list to the latest N segments and says how many
/// were left out; the totals and the tree still count every one (they add up to the wall
/// time, and are the same as with every segment listed).
#[test]
fn the_segment_list_is_bounded_and_the_totals_are_not() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("chain.dat");
    record_chain("why", 50, &file);
    let f = file.to_str().unwrap();
    let ask = |max: &str| {
        kstate_json(&[
            "why",
            f,
            "--comm",
            "why-a",
            "--format",
            "json",
            "--max-segments",
            max,
        ])
    };
    let (all, three) = (ask("1000000"), ask("3"));
    let listed = all["segments"].as_array().unwrap().len() as u64;
    assert!(listed > 3, "too short a path to cut: {listed} segments");
    assert_eq!(all["segments_left_out"], 0);
    assert_eq!(
        n(&all["segments_total"]),
        listed + n(&all["segments_merged"])
    );
    // The latest three, ending at the window's end.
    let kept = three["segments"].as_array().unwrap();
    assert_eq!(kept.len(), 3);
    let tail = &all["segments"].as_array().unwrap()[listed as usize - 3..];
    assert_eq!(kept.as_slice(), tail);
    assert_eq!(kept[2]["end_ns"], three["window"][1]);
    assert_eq!(three["segments_total"], all["segments_total"]);
    assert_eq!(
        n(&three["segments_left_out"]) + 3 + n(&three["segments_merged"]),
        n(&three["segments_total"])
    );
    assert!(three["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s.as_str().unwrap().contains("left out (--max-segments 3)")));
    for k in ["by_state", "by_thread", "tree", "wall_ns"] {
        assert_eq!(three[k], all[k], "{k}");
    }
    assert_eq!(state_total(&three), n(&three["wall_ns"]));
}
