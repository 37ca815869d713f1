//! perf.data in every layout perf's options give, recorded at test time: each is read
//! straight from the file (not sorted whole through temporary files) and gives perf
//! script's events, one for one. Among them the recordings that used to take the slow
//! way: perf 6.x writes some records twice, and on a busy machine a copy can be tens of
//! thousands of records long (`perf_mmap__push` resumes from its first reading of the
//! ring's head but copied up to its second; a `-m 8M` recording of `dd bs=1` migrating
//! between CPUs held one CPU's records so far out of order). And a lossy recording's
//! losses counted once, as `perf report` counts them.

use crate::support;

use serde_json::Value;
use std::path::Path;

use support::{kstate, kstate_json};

/// `perf record ARGS -o OUT -- sh -c SCRIPT` (or into a pipe with `pipe`).
fn record(out: &Path, args: &[&str], pipe: bool, script: &str) {
    support::perf_record(out, args, pipe, &["sh", "-c", script]);
}

/// `dd bs=1` of `n` bytes: two system calls per byte, four events.
fn dd(n: u32) -> String {
    format!("dd if=/dev/zero of=/dev/null bs=1 count={n} 2>/dev/null")
}

/// [`dd`] moved between the CPUs while it runs (pinned to one, then another, then let
/// free), as the scheduler moves a task on a busy machine.
fn migrating_dd(n: u32) -> String {
    format!(
        "{} & p=$!; for c in 0 1 0 1 0,1; do taskset -pc $c $p >/dev/null 2>&1; sleep 0.03; done; wait $p",
        dd(n)
    )
}

/// (time, CPU, thread, event name): one event as perf script and kstate both name it.
type Ev = (u64, u32, i64, String);

/// Every event of `f` as `perf script` prints it, sorted.
fn perf_events(f: &Path) -> Vec<Ev> {
    let text = support::perf_stdout(&["script", "--ns", "-F", "tid,cpu,time,event", "-i"], f);
    let mut v: Vec<Ev> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let tid = it.next().unwrap().parse().unwrap();
            let cpu = it.next().unwrap().trim_matches(['[', ']']).parse().unwrap();
            let (s, ns) = it
                .next()
                .unwrap()
                .trim_end_matches(':')
                .split_once('.')
                .unwrap();
            let ts = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
            let name = it.next().unwrap().trim_end_matches(':');
            (ts, cpu, tid, name.rsplit(':').next().unwrap().to_string())
        })
        .collect();
    v.sort();
    v
}

/// Every event of `f` as `kstate dump` gives it: in time order (checked), then sorted
/// as [`perf_events`] is (events at one time may come in either order).
fn kstate_events(f: &Path) -> Vec<Ev> {
    let mut v: Vec<Ev> = kstate(&["dump", "--json", f.to_str().unwrap()])
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            (
                e["ts"].as_u64().unwrap(),
                e["cpu"].as_u64().unwrap() as u32,
                e["pid"].as_i64().unwrap(),
                e["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        v.windows(2).all(|w| w[0].0 <= w[1].0),
        "{}: kstate dump out of time order",
        f.display()
    );
    v.sort();
    v
}

/// `kstate info --json`'s word for how the file's samples are read.
fn read_how(f: &Path) -> String {
    let info = kstate_json(&["info", "--json", f.to_str().unwrap()]);
    info["perf"]["read"]
        .as_str()
        .unwrap_or("(none)")
        .to_string()
}

/// The file is read the way `how` says and gives perf script's events, one for one.
fn agrees(f: &Path, how: &str, what: &str) -> usize {
    assert_eq!(read_how(f), how, "{what}");
    let (want, got) = (perf_events(f), kstate_events(f));
    assert!(want.len() > 1000, "{what}: {} events", want.len());
    assert_eq!(got.len(), want.len(), "{what}: events");
    if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: event {i}: kstate {:?}, perf {:?}", got[i], want[i]);
    }
    want.len()
}

/// Every layout perf's options give a tracepoint recording, each read straight from the
/// file with perf script's events: perf's default buffers (which lose samples under
/// `dd bs=1`), a large buffer, a one-page one, system-wide, without inheritance, with the
/// sample identifier, a period of 2, asynchronous writes, per-thread buffers, an
/// overwritten ring (saved at the end, newest first), call chains, counter values (READ),
/// addresses, another clock, pipe mode, several events, and a task moved between CPUs
/// while it runs. Compressed records (`-z`) are read through pages built as they are
/// read, never sorted whole.
#[test]
fn every_layout_is_read_straight_with_perf_scripts_events() {
    let dir = tempfile::tempdir().unwrap();
    // The shell becomes dd: `--no-inherit` records the recorded process alone.
    let short = format!("exec {}", dd(5000));
    let layouts: &[(&str, &[&str], bool, &str)] = &[
        ("default", &[], false, "direct"),
        ("m8", &["-m", "8M"], false, "direct"),
        ("m1", &["-m", "1"], false, "direct"),
        ("system-wide", &["-a"], false, "direct"),
        ("no-inherit", &["--no-inherit"], false, "direct"),
        ("identifier", &["--sample-identifier"], false, "direct"),
        ("period", &["-c", "2"], false, "direct"),
        ("aio", &["--aio"], false, "direct"),
        ("per-thread", &["--per-thread"], false, "direct"),
        ("overwrite", &["--overwrite", "-m", "128"], false, "direct"),
        ("callchain", &["-g"], false, "direct"),
        ("read", &["-s"], false, "direct"),
        ("addr", &["-d"], false, "direct"),
        ("clock", &["-k", "mono"], false, "direct"),
        ("pipe", &[], true, "direct"),
        (
            "several",
            &["-e", "sched:sched_switch", "-e", "sched:sched_wakeup"],
            false,
            "direct",
        ),
        ("compressed", &["-z"], false, "pages"),
    ];
    for &(name, opts, pipe, how) in layouts {
        let f = dir.path().join(format!("{name}.data"));
        let mut args = vec!["-e", "raw_syscalls:*"];
        args.extend_from_slice(opts);
        // A system-wide recording takes every task's calls: a short workload.
        let script = match name {
            "system-wide" => short.clone(),
            _ => format!("exec {}", dd(20000)),
        };
        record(&f, &args, pipe, &script);
        agrees(&f, how, name);
    }
    for (name, opts) in [("migrating", &["-m", "8M"][..]), ("migrating-default", &[])] {
        let f = dir.path().join(format!("{name}.data"));
        let mut args = vec!["-e", "raw_syscalls:*"];
        args.extend_from_slice(opts);
        record(&f, &args, false, &migrating_dd(50_000));
        let n = agrees(&f, "direct", name);
        // Both CPUs ran dd.
        let info = kstate_json(&["info", "--json", f.to_str().unwrap()]);
        let cpus = info["per_cpu"].as_array().unwrap();
        let busy = cpus
            .iter()
            .filter(|c| c["events"].as_u64().unwrap() as usize > n / 20)
            .count();
        assert_eq!(busy, 2, "{name}: {cpus:?}");
    }
}

/// Writes `f` to `out` with a copy of the last `k` samples of one CPU before the FINISHED_ROUND
/// record nearest the middle of the data placed right after it, as perf 6.x writes the
/// records the kernel added between its two readings of a ring's head: once at the end of
/// one copy of the ring, again at the start of the next. The data size and the feature
/// sections' offsets move to match. Returns the CPU.
fn with_perfs_copy(f: &Path, out: &Path, k: usize) -> u32 {
    let b = std::fs::read(f).unwrap();
    let (off, size, cpu_at) = support::perf_data_layout(&b);
    // Each record's (offset, length, type, CPU of a sample).
    let mut recs = Vec::new();
    let mut p = off;
    while p < off + size {
        let kind = u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
        let len = u16::from_le_bytes(b[p + 6..p + 8].try_into().unwrap()) as usize;
        let cpu = (kind == 9)
            .then(|| u32::from_le_bytes(b[p + cpu_at..p + cpu_at + 4].try_into().unwrap()));
        recs.push((p, len, kind, cpu));
        p += len;
    }
    let round = recs
        .iter()
        .enumerate()
        .filter(|r| r.1 .2 == 68)
        .min_by_key(|r| r.1 .0.abs_diff(off + size / 2))
        .expect("a FINISHED_ROUND record")
        .0;
    let cpu = recs[..round].iter().rev().find_map(|r| r.3).unwrap();
    let mut copy: Vec<(usize, usize)> = recs[..round]
        .iter()
        .rev()
        .filter(|r| r.3 == Some(cpu))
        .take(k)
        .map(|r| (r.0, r.1))
        .collect();
    assert_eq!(
        copy.len(),
        k,
        "CPU {cpu} has fewer than {k} samples before the middle"
    );
    copy.reverse();
    let at = recs[round].0 + recs[round].1;
    let mut data = b[off..at].to_vec();
    for (o, len) in copy {
        data.extend_from_slice(&b[o..o + len]);
    }
    data.extend_from_slice(&b[at..off + size]);
    std::fs::write(out, support::perf_data_with(&b, &data)).unwrap();
    cpu
}

/// The recording the issue found on the slow path: `-m 8M`, `dd bs=1` moving between the
/// CPUs, and perf's copy of 30,000 records of one CPU (about 2.6 MB, what the kernel
/// writes in 10 ms of perf not running), placed as perf places it. Read straight from
/// the file, one stretch sorted in place, every copy read (perf script's events, each
/// call still counted once), and `bench analyze` says so beside perf trace -s.
#[test]
fn a_long_copy_in_an_m8_recording_is_read_straight() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    record(
        &f,
        &["-m", "8M", "-e", "raw_syscalls:*"],
        false,
        &migrating_dd(100_000),
    );
    let g = dir.path().join("copied.data");
    with_perfs_copy(&f, &g, 30_000);
    let once = agrees(&f, "direct", "as recorded");
    let twice = agrees(&g, "direct", "with perf's copy");
    assert_eq!(twice, once + 30_000);
    let info = kstate_json(&["info", "--json", g.to_str().unwrap()]);
    assert!(
        info["perf"]["stretches_sorted"].as_u64().unwrap() >= 1,
        "{}",
        info["perf"]
    );
    // Each read and write call counted once: a copy is an unmatched entry or exit.
    let calls = |f: &Path| -> u64 {
        let v = kstate_json(&[
            "analyze",
            "syscall",
            "--stat",
            "--format",
            "json",
            f.to_str().unwrap(),
        ]);
        ["read", "write"]
            .iter()
            .map(|k| {
                v["rows"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["key"] == *k)
                    .map_or(0, |r| r["count"].as_u64().unwrap())
            })
            .sum()
    };
    assert!(calls(&f) >= 200_000, "{}", calls(&f));
    assert_eq!(calls(&g), calls(&f));
    let v = kstate_json(&[
        "bench",
        "analyze",
        "--runs",
        "1",
        "--json",
        g.to_str().unwrap(),
    ]);
    assert_eq!(v["read"], "direct", "{v}");
    assert_eq!(v["events"].as_u64().unwrap() as usize, twice, "{v}");
    for row in ["kstate", "kstate_one_thread", "perf_trace_s", "perf_script"] {
        assert!(
            v[row]["seconds"].as_f64().is_some_and(|s| s > 0.0),
            "{row}: {v}"
        );
    }
}

/// The losses `perf report --stats` gives a lossy recording: the LOST_SAMPLES counts of
/// its per-event sections, summed (the aggregated section counts records, not samples).
fn perf_report_lost(f: &Path) -> u64 {
    let stats = support::perf_stdout(&["report", "--stats", "-i"], f);
    let mut per_event = false;
    let mut lost = 0;
    for l in stats.lines() {
        let l = l.trim();
        if l.ends_with("stats:") {
            per_event = !l.starts_with("Aggregated");
        } else if let Some(n) = l.strip_prefix("LOST_SAMPLES events:").filter(|_| per_event) {
            lost += n.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
    }
    lost
}

/// A recording that lost samples, with both LOST records (where a CPU's buffer dropped
/// them) and LOST_SAMPLES records (per event, at the end): `kstate info` gives one
/// number, the one `perf report --stats` gives, at the top and under the samples, and
/// says where it came from; the LOST records' own count is per CPU.
#[test]
fn info_counts_losses_once_as_perf_report_does() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("perf.data");
    record(
        &f,
        &["-m", "1", "-e", "raw_syscalls:*"],
        false,
        &dd(100_000),
    );
    let want = perf_report_lost(&f);
    assert!(want > 0, "perf lost nothing with a one-page buffer");
    let p = f.to_str().unwrap();
    let info = kstate_json(&["info", "--json", p]);
    assert_eq!(
        info["lost_total"].as_u64().unwrap(),
        want,
        "{}",
        info["samples"]
    );
    assert_eq!(info["lost_from"], "LOST_SAMPLES");
    assert_eq!(info["samples"]["lost"].as_u64().unwrap(), want);
    // The LOST records, per CPU, are perf script's.
    let per_cpu = support::lost_per_cpu(&info);
    assert_eq!(per_cpu, support::perf_lost(&f));
    assert_eq!(info["samples"]["lost_records"].as_u64().unwrap(), per_cpu);
    let text = kstate(&["info", p]);
    let top = text.lines().find(|l| l.starts_with("lost:")).unwrap();
    assert!(
        top.starts_with(&format!("lost:        {want} (perf's LOST_SAMPLES records")),
        "{top}"
    );
    let samples = text
        .lines()
        .find(|l| l.trim_start().starts_with("samples:"))
        .unwrap();
    assert!(
        samples.contains(&format!("; {want} lost (LOST_SAMPLES records)")),
        "{samples}"
    );
}
