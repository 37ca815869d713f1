//! The memory and process analyzers (proc, futex, palloc, kmalloc, vmscan, sysinfo) on
//! workloads recorded from the live kernel at test time with `kstate record`, against
//! what the workload does by construction and against counts computed here from
//! `trace-cmd report` of the same file.

use crate::support;
use support::tcline::{field, num, parse_line};
use support::{kstate, kstate_json};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const KSTATE: &str = env!("CARGO_BIN_EXE_kstate");

/// `kstate analyze NAME --format json ARGS FILE`.
fn analyze(name: &str, args: &[&str], file: &Path) -> Value {
    let mut a: Vec<&std::ffi::OsStr> = vec!["analyze".as_ref(), name.as_ref()];
    a.extend(["--format", "json"].iter().map(std::ffi::OsStr::new));
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.push(file.as_os_str());
    let v = kstate_json(&a);
    for (cpu, n) in v["lost_events"].as_object().unwrap() {
        assert_eq!(
            n, 0,
            "events lost on cpu {cpu}: the test buffer is too small"
        );
    }
    v
}

/// Records `CMD` with `kstate record OPTS -o dest -- CMD`; returns the workload's pid and
/// what the recorder printed on standard output (the workload's output goes there too).
fn record(opts: &[&str], cmd: &[&str], dest: &Path) -> (i32, String) {
    let mut c = Command::new(KSTATE);
    c.arg("record")
        .args(opts)
        .arg("-o")
        .arg(dest)
        .arg("--")
        .args(cmd);
    let out = c.output().expect("cannot run kstate record");
    assert!(
        out.status.success(),
        "kstate record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = kstate_json(&["info".as_ref(), "--json".as_ref(), dest.as_os_str()]);
    let pid = info["recording"]["workload_pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("no workload pid in {}", info["recording"])) as i32;
    (pid, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `trace-cmd report -t -R` (raw field values) or `-t` with its plugins (symbols).
fn trace_cmd_report(file: &Path, raw: bool) -> String {
    support::trace_cmd_report(file, if raw { &["-t", "-R"] } else { &["-t"] })
}

fn rows(v: &Value) -> &Vec<Value> {
    v["rows"].as_array().unwrap()
}

fn row<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    rows(v).iter().find(|r| r["key"] == key)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

// ---- proc -----------------------------------------------------------------------------

#[test]
fn proc_counts_forks_and_lifetimes() {
    const K: u64 = 6;
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("fork.dat");
    let (pid, _) = record(
        &["--sysinfo-interval", "0", "-e", "proc"],
        &[KSTATE, "workload", "fork", &K.to_string(), "--ms", "10"],
        &f,
    );
    // Independent: forks and exits in trace-cmd's report, lifetimes paired by pid.
    let report = trace_cmd_report(&f, true);
    let (mut forks, mut exits) = (0u64, 0u64);
    let mut born: BTreeMap<i64, u64> = BTreeMap::new();
    let mut lives: Vec<u64> = Vec::new();
    for l in report.lines().filter_map(parse_line) {
        match l.event {
            "sched_process_fork" => {
                forks += 1;
                assert_eq!(num(l.rest, "parent_pid"), pid as i64, "{l:?}");
                assert_eq!(l.pid, pid as i64, "{l:?}");
                born.insert(num(l.rest, "child_pid"), l.ts);
            }
            "sched_process_exit" => {
                exits += 1;
                if let Some(t) = born.remove(&num(l.rest, "pid")) {
                    lives.push(l.ts - t);
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        (forks, exits),
        (K, K + 1),
        "trace-cmd's view of the workload"
    );
    let v = analyze("proc", &[], &f);
    let all = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["comm"] == "(all)")
        .unwrap_or_else(|| panic!("no (all) row: {v}"));
    assert_eq!(u(&all["forks"]), forks, "{v}");
    assert_eq!(u(&all["exits"]), exits, "{v}");
    assert_eq!(
        u(&all["execs"]),
        1,
        "the recorder execs the workload once: {v}"
    );
    // The children live from fork to exit: each sleeps 10 ms.
    let r = row(&v, "kstate").unwrap_or_else(|| panic!("no kstate row: {v}"));
    assert_eq!(u(&r["count"]), K, "{v}");
    assert_eq!(u(&r["total_ns"]), lives.iter().sum::<u64>(), "{v}");
    assert_eq!(u(&r["min_ns"]), *lives.iter().min().unwrap());
    assert_eq!(u(&r["max_ns"]), *lives.iter().max().unwrap());
    assert!(u(&r["min_ns"]) >= 10_000_000, "{r}");
    // The workload's own fork predates the recording: open, never a lifetime.
    assert_eq!(u(&v["pairs"]["unmatched"]), 0);
    // --pid selects the workload's forks (as parent) only; --by pid names each child.
    let w = analyze("proc", &["--pid", &pid.to_string()], &f);
    let wall = w["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["comm"] == "(all)")
        .unwrap();
    assert_eq!((u(&wall["forks"]), u(&wall["exits"])), (K, 1), "{w}");
    let by = analyze("proc", &["--by", "pid"], &f);
    assert_eq!(rows(&by).len() as u64, K, "{by}");
    assert!(rows(&by)
        .iter()
        .all(|r| r["key"].as_str().unwrap().starts_with("kstate-")));
    // The log is the timeline: K forks, K+1 exits, one exec, K lifetimes.
    let log = kstate(&[
        "la".as_ref(),
        "proc".as_ref(),
        "--log".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
        f.as_os_str(),
    ]);
    let count = |k: &str| {
        log.lines()
            .filter(|l| l.split(',').nth(1) == Some(k))
            .count() as u64
    };
    assert_eq!(
        (count("fork"), count("exit"), count("kstate")),
        (K, K + 1, K)
    );
    assert_eq!(
        log.lines()
            .filter(|l| l.split(',').nth(1).unwrap_or("").starts_with("exec "))
            .count(),
        1,
        "{log}"
    );
}

// ---- futex ----------------------------------------------------------------------------

#[test]
fn futex_waits_on_one_contended_mutex() {
    const ITERS: u64 = 4000;
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("futex.dat");
    let (pid, stdout) = record(
        &["--sysinfo-interval", "0", "-e", "futex,task:task_newtask"],
        &[
            KSTATE,
            "workload",
            "mutex-fight",
            "--threads",
            "2",
            "--iters",
            &ITERS.to_string(),
        ],
        &f,
    );
    // `mutex 0x... size N`: the futex word lies inside.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mutex "))
        .unwrap_or_else(|| panic!("no mutex line in {stdout:?}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let base = u64::from_str_radix(w[1].trim_start_matches("0x"), 16).unwrap();
    let size: u64 = w[3].parse().unwrap();
    // Independent: waits per uaddr (count, errors, total time) from trace-cmd's report.
    let report = trace_cmd_report(&f, true);
    let mut open: BTreeMap<i64, (u64, u64, u64)> = BTreeMap::new();
    let mut waits: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    let mut wakes: BTreeMap<u64, u64> = BTreeMap::new();
    let mut threads = std::collections::BTreeSet::new();
    for l in report.lines().filter_map(parse_line) {
        match l.event {
            "sys_enter_futex" => {
                let op = num(l.rest, "op") as u64 & 127;
                open.insert(l.pid, (num(l.rest, "uaddr") as u64, op, l.ts));
            }
            "sys_exit_futex" => {
                let Some((uaddr, op, t)) = open.remove(&l.pid) else {
                    continue;
                };
                if [0, 6, 9, 11, 13].contains(&op) {
                    let e = waits.entry(uaddr).or_default();
                    e.0 += 1;
                    e.1 += (num(l.rest, "ret") < 0) as u64;
                    e.2 += l.ts - t;
                    threads.insert(l.pid);
                } else if [1, 3, 4, 5, 7, 10, 12].contains(&op) {
                    *wakes.entry(uaddr).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "unfinished futex calls: {open:?}");
    assert_eq!(waits.len(), 1, "one contended lock: {waits:?}");
    let (&uaddr, &(n, errors, total)) = waits.iter().next().unwrap();
    assert!(
        uaddr >= base && uaddr < base + size,
        "{uaddr:#x} is not inside the mutex at {base:#x}"
    );
    assert!(n > 0 && n <= 2 * ITERS, "{n} waits");
    assert!(
        !threads.contains(&(pid as i64)),
        "the main thread waits on a pipe"
    );
    let v = analyze("futex", &["--pid", &pid.to_string()], &f);
    let wait_rows: Vec<&Value> = rows(&v)
        .iter()
        .filter(|r| r["key"].as_str().unwrap().ends_with(" wait"))
        .collect();
    assert_eq!(wait_rows.len(), 1, "{v}");
    let r = wait_rows[0];
    assert_eq!(r["key"], format!("{uaddr:#x}@{pid} wait"), "{v}");
    assert_eq!(
        (u(&r["count"]), u(&r["errors"]), u(&r["total_ns"])),
        (n, errors, total),
        "{v}"
    );
    let wake = row(&v, &format!("{uaddr:#x}@{pid} wake")).unwrap_or_else(|| panic!("{v}"));
    assert_eq!(u(&wake["count"]), wakes[&uaddr], "{v}");
    // Per thread: the two fighters, and their waits add up.
    let by = analyze("futex", &["--by", "tid"], &f);
    let tw: Vec<&Value> = rows(&by)
        .iter()
        .filter(|r| r["key"].as_str().unwrap().ends_with(" wait"))
        .collect();
    assert_eq!(tw.len(), threads.len(), "{by}");
    assert_eq!(tw.iter().map(|r| u(&r["count"])).sum::<u64>(), n);
}

// ---- palloc ---------------------------------------------------------------------------

#[test]
fn palloc_counts_the_pages_a_workload_touches() {
    const N: u64 = 3000;
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("pages.dat");
    let (pid, _) = record(
        &["--sysinfo-interval", "0", "-e", "mem"],
        &[KSTATE, "workload", "touch-pages", &N.to_string()],
        &f,
    );
    // Independent: trace-cmd's decoding (with the kernel's print format for gfp_flags).
    let report = trace_cmd_report(&f, false);
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_gfp: BTreeMap<String, u64> = BTreeMap::new();
    for l in report.lines().filter_map(parse_line) {
        if l.pid != pid as i64 {
            continue;
        }
        let key = match l.event {
            "mm_page_alloc" => {
                *by_gfp
                    .entry(format!("alloc {}", field(l.rest, "gfp_flags")))
                    .or_default() += 1;
                format!("alloc order {}", num(l.rest, "order"))
            }
            "mm_page_free" => format!("free order {}", num(l.rest, "order")),
            _ => continue,
        };
        *want.entry(key).or_default() += 1;
    }
    // Every touched page is a fresh order-0 page (huge pages are advised off), freed
    // again by munmap in the workload.
    assert!(want["alloc order 0"] >= N, "{want:?}");
    assert!(want["free order 0"] >= N, "{want:?}");
    let v = analyze("palloc", &["--pid", &pid.to_string()], &f);
    let got: BTreeMap<String, u64> = rows(&v)
        .iter()
        .map(|r| (r["key"].as_str().unwrap().to_string(), u(&r["count"])))
        .collect();
    assert_eq!(got, want, "{v}");
    // Pages = calls x 2^order.
    for r in rows(&v) {
        let order: u32 = r["key"]
            .as_str()
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(u(&r["total_pages"]), u(&r["count"]) << order, "{r}");
    }
    let g = analyze("palloc", &["--by", "gfp", "--pid", &pid.to_string()], &f);
    let got: BTreeMap<String, u64> = rows(&g)
        .iter()
        .filter(|r| r["key"].as_str().unwrap().starts_with("alloc "))
        .map(|r| (r["key"].as_str().unwrap().to_string(), u(&r["count"])))
        .collect();
    assert_eq!(got, by_gfp, "{g}");
    let m = analyze(
        "palloc",
        &["--by", "migratetype", "--pid", &pid.to_string()],
        &f,
    );
    assert!(u(&row(&m, "alloc Movable").unwrap_or_else(|| panic!("{m}"))["count"]) >= N);
    // The log: one row per event of the workload.
    let log = kstate(&[
        "la".as_ref(),
        "palloc".as_ref(),
        "--log".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
        "--pid".as_ref(),
        pid.to_string().as_ref(),
        f.as_os_str(),
    ]);
    assert_eq!(log.lines().count() as u64 - 1, want.values().sum::<u64>());
}

// ---- kmalloc --------------------------------------------------------------------------

#[test]
fn kmalloc_call_sites_match_trace_cmd_symbols() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("slab.dat");
    let (pid, _) = record(
        &["--sysinfo-interval", "0", "-e", "mem"],
        &[KSTATE, "workload", "fork", "3", "--ms", "1"],
        &f,
    );
    // Independent: trace-cmd symbolizes call_site (%pS) with the file's kallsyms.
    let report = trace_cmd_report(&f, false);
    let mut sites: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut caches: BTreeMap<String, u64> = BTreeMap::new();
    for l in report.lines().filter_map(parse_line) {
        if l.pid != pid as i64 || !matches!(l.event, "kmalloc" | "kmem_cache_alloc") {
            continue;
        }
        let site = field(l.rest, "call_site");
        let func = site.split('+').next().unwrap().to_string();
        let e = sites.entry(func).or_default();
        e.0 += 1;
        e.1 += num(l.rest, "bytes_req") as u64;
        let cache = match l.event {
            "kmalloc" => format!("kmalloc-{}", num(l.rest, "bytes_alloc")),
            _ => field(l.rest, "name").to_string(),
        };
        *caches.entry(cache).or_default() += 1;
    }
    assert!(
        sites.len() > 5,
        "a fork allocates from many places: {sites:?}"
    );
    let v = analyze("kmalloc", &["--pid", &pid.to_string()], &f);
    let got: BTreeMap<String, (u64, u64)> = rows(&v)
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                (u(&r["count"]), u(&r["total_bytes"])),
            )
        })
        .collect();
    assert_eq!(got, sites, "{v}");
    let c = analyze("kmalloc", &["--by", "cache", "--pid", &pid.to_string()], &f);
    let got: BTreeMap<String, u64> = rows(&c)
        .iter()
        .map(|r| (r["key"].as_str().unwrap().to_string(), u(&r["count"])))
        .collect();
    assert_eq!(got, caches, "{c}");
    // Requested never exceeds allocated.
    for b in c["bytes"].as_array().unwrap() {
        assert!(u(&b["requested"]) <= u(&b["allocated"]), "{b}");
    }
}

// ---- sysinfo --------------------------------------------------------------------------

/// A /proc/meminfo value in bytes.
fn meminfo(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in /proc/meminfo"));
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

#[test]
fn sysinfo_rows_follow_the_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("sysinfo.dat");
    record(
        &["--sysinfo-interval", "50", "-e", "proc"],
        &[KSTATE, "workload", "sleep", "15", "20"],
        &f,
    );
    let info = kstate_json(&["info".as_ref(), "--json".as_ref(), f.as_os_str()]);
    let snaps = u(&info["sysinfo_snapshots"]);
    // 300 ms of sleeps at one snapshot per 50 ms (a loaded VM may take fewer).
    assert!(snaps >= 3, "{snaps} snapshots");
    let total = meminfo("MemTotal");
    let log = kstate(&[
        "la".as_ref(),
        "sysinfo".as_ref(),
        "--log".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
        f.as_os_str(),
    ]);
    let lines: Vec<&str> = log.lines().skip(1).collect();
    assert_eq!(lines.len() as u64, snaps * 6, "{log}");
    let mut per_field: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut times = std::collections::BTreeSet::new();
    for l in &lines {
        let c: Vec<&str> = l.split(',').collect();
        times.insert(c[0]);
        per_field
            .entry(c[1])
            .or_default()
            .push(c[2].parse().unwrap());
    }
    assert_eq!(times.len() as u64, snaps);
    let keys: Vec<&str> = per_field.keys().copied().collect();
    assert_eq!(
        keys,
        [
            "AnonPages",
            "Cached",
            "Dirty",
            "MemFree",
            "Slab",
            "Writeback"
        ]
    );
    for v in &per_field["MemFree"] {
        assert!(*v > 0 && *v < total, "MemFree {v} of {total}");
    }
    // --stat: per field, as many samples as snapshots; MemTotal never changes.
    let v = analyze("sysinfo", &["--key", "MemTotal,MemFree"], &f);
    let t = row(&v, "MemTotal").unwrap_or_else(|| panic!("{v}"));
    assert_eq!(u(&t["count"]), snaps);
    assert_eq!(
        (u(&t["min_bytes"]), u(&t["max_bytes"])),
        (total, total),
        "{t}"
    );
    let m = row(&v, "MemFree").unwrap();
    let mf = &per_field["MemFree"];
    assert_eq!(u(&m["min_bytes"]), *mf.iter().min().unwrap());
    assert_eq!(u(&m["max_bytes"]), *mf.iter().max().unwrap());
    assert_eq!(u(&m["total_bytes"]), mf.iter().sum::<u64>());
    // A window keeps the snapshots inside it; its complement the rest.
    let n = |w: &str| {
        u(&analyze("sysinfo", &[w, "0:150ms", "--key", "MemTotal"], &f)["rows"][0]["count"])
    };
    assert_eq!(n("--window") + n("--not-window"), snaps);
}

// ---- vmscan ---------------------------------------------------------------------------

/// A memory cgroup with a small limit, removed however the test ends: cgroup v2 where
/// its memory controller is there, else v1's memory hierarchy.
struct Cgroup {
    dir: std::path::PathBuf,
}

impl Cgroup {
    fn new(limit: u64) -> Cgroup {
        let name = format!("kstate-test-{}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup");
        let v2_mem = std::fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"));
        let (dir, file) = if v2_mem {
            (v2.join(&name), "memory.max")
        } else {
            (
                Path::new("/sys/fs/cgroup/memory").join(&name),
                "memory.limit_in_bytes",
            )
        };
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("mkdir {} (need root, memory cgroups): {e}", dir.display()));
        let cg = Cgroup { dir };
        std::fs::write(cg.dir.join(file), limit.to_string()).unwrap();
        cg
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

#[test]
fn vmscan_times_memcg_reclaim() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    // On disk (not tmpfs: shmem pages need swap to be reclaimed, and there is none).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = tmp.path().join("data");
    {
        let mut w = std::fs::File::create(&data).unwrap();
        let block = vec![0x5au8; 1 << 20];
        for _ in 0..64 {
            w.write_all(&block).unwrap();
        }
        w.sync_all().unwrap();
        // Out of the page cache, so reading it charges the reader's cgroup.
        // SAFETY: a valid descriptor.
        unsafe { libc::posix_fadvise(w.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    let cg = Cgroup::new(16 << 20);
    let f = tmp.path().join("vmscan.dat");
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec dd if={} of=/dev/null bs=1M",
        cg.dir.display(),
        data.display()
    );
    record(
        &[
            "--sysinfo-interval",
            "0",
            "-e",
            "mem,vmscan:mm_vmscan_memcg_reclaim_begin,vmscan:mm_vmscan_memcg_reclaim_end",
        ],
        &["sh", "-c", &script],
        &f,
    );
    drop(cg);
    // Independent: episodes paired per thread in trace-cmd's report.
    let report = trace_cmd_report(&f, true);
    let mut open: BTreeMap<i64, u64> = BTreeMap::new();
    let (mut n, mut total, mut pages, mut empty) = (0u64, 0u64, 0u64, 0u64);
    for l in report.lines().filter_map(parse_line) {
        match l.event {
            "mm_vmscan_memcg_reclaim_begin" => {
                open.insert(l.pid, l.ts);
            }
            "mm_vmscan_memcg_reclaim_end" => {
                let t = open.remove(&l.pid).expect("an end without a begin");
                let r = num(l.rest, "nr_reclaimed") as u64;
                n += 1;
                total += l.ts - t;
                pages += r;
                empty += (r == 0) as u64;
            }
            _ => {}
        }
    }
    // 64 MiB read through a 16 MiB limit: at least 48 MiB had to be reclaimed.
    assert!(n > 0, "no memcg reclaim recorded");
    assert!(pages * 4096 >= 48 << 20, "{pages} pages reclaimed");
    let v = analyze("vmscan", &[], &f);
    let r = row(&v, "memcg dd").unwrap_or_else(|| panic!("no memcg dd row: {v}"));
    assert_eq!(
        (u(&r["count"]), u(&r["total_ns"]), u(&r["empty"])),
        (n, total, empty),
        "{v}"
    );
    assert_eq!(rows(&v).len(), 1, "{v}");
    let t = v["reclaimed"].as_array().unwrap();
    assert_eq!(t.len(), 1, "{v}");
    assert_eq!(
        (t[0]["key"].as_str(), u(&t[0]["pages"])),
        (Some("memcg dd"), pages)
    );
}

/// Threads that existed before recording started belong to their process through the
/// process table kstate stores (no task_newtask recorded): --pid selects them, and their
/// futex waits are keyed by the process.
#[test]
fn pid_filter_uses_the_recorded_process_table() {
    /// The fighters would run for minutes: killed however the test ends.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Kill(
        Command::new(KSTATE)
            .args([
                "workload",
                "mutex-fight",
                "--threads",
                "2",
                "--iters",
                "1000000000",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id() as i32;
    let task = format!("/proc/{pid}/task");
    let t0 = std::time::Instant::now();
    while std::fs::read_dir(&task).map_or(0, |d| d.count()) < 3 {
        assert!(
            t0.elapsed().as_secs() < 10,
            "the workload's threads did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let tids: Vec<i32> = std::fs::read_dir(&task)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .filter(|t| *t != pid)
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("table.dat");
    let out = Command::new(KSTATE)
        .args(["record", "--sysinfo-interval", "0", "-e", "futex", "-p"])
        .arg(pid.to_string())
        .args(["-d", "0.2", "-o"])
        .arg(&f)
        .output()
        .unwrap();
    drop(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = analyze("futex", &["--pid", &pid.to_string()], &f);
    let keys: Vec<&str> = rows(&v)
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(!keys.is_empty(), "the fighters wait and wake: {v}");
    assert!(
        keys.iter().all(|k| k.contains(&format!("@{pid} "))),
        "keyed by the process: {keys:?}"
    );
    // The same calls, thread by thread.
    let by = analyze("futex", &["--by", "tid", "--pid", &pid.to_string()], &f);
    let n = |v: &Value| rows(v).iter().map(|r| u(&r["count"])).sum::<u64>();
    assert_eq!(n(&by), n(&v));
    for r in rows(&by) {
        let label = r["key"].as_str().unwrap().split(' ').next().unwrap();
        let tid: i32 = label.rsplit_once('-').unwrap().1.parse().unwrap();
        assert!(tids.contains(&tid), "{tid} is not one of {tids:?}");
    }
}
