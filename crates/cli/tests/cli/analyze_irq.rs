//! `kstate analyze softirq|irq|lockwait|net|netsize` on workloads recorded from the live
//! kernel at test time, against figures computed here from `trace-cmd report` of the same
//! file and against what the workload did by construction.

use crate::support;
use support::tcline::{field, num, parse_line};
use support::{kstate, record_workload};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn kstate_json(args: &[&str], file: &Path) -> Value {
    let mut a: Vec<&std::ffi::OsStr> = vec!["analyze".as_ref()];
    a.extend(args.iter().map(std::ffi::OsStr::new));
    a.extend(["--format".as_ref(), "json".as_ref(), file.as_os_str()]);
    let text = kstate(&a);
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{text}"));
    for (cpu, n) in v["lost_events"].as_object().unwrap() {
        assert_eq!(n, 0, "events lost on cpu {cpu}: {}", file.display());
    }
    v
}

/// `trace-cmd report -t -N`: the kernel's print fmt, no plugins.
fn trace_cmd_report(file: &Path) -> String {
    support::trace_cmd_report(file, &["-t", "-N"])
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Stat {
    count: u64,
    total: u64,
    min: u64,
    max: u64,
    flagged: u64,
}

impl Stat {
    fn add(&mut self, v: u64, flag: bool) {
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.count += 1;
        self.total += v;
        self.flagged += flag as u64;
    }
}

/// kstate's rows as Stats (value columns named for `unit`; `flag` the flag column).
fn rows(v: &Value, unit: &str, flag: Option<&str>) -> BTreeMap<String, Stat> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let n = |c: &str| r[c].as_u64().unwrap_or_else(|| panic!("no {c} in {r}"));
            (
                r["key"].as_str().unwrap().to_string(),
                Stat {
                    count: n("count"),
                    total: n(&format!("total_{unit}")),
                    min: n(&format!("min_{unit}")),
                    max: n(&format!("max_{unit}")),
                    flagged: flag.map_or(0, n),
                },
            )
        })
        .collect()
}

// ---- softirq, irq ---------------------------------------------------------------------

/// `vec=N [action=NAME]` -> (N, NAME), as trace-cmd prints it from the print fmt.
fn vector(rest: &str) -> (i64, String) {
    let name = rest
        .split_once("[action=")
        .and_then(|(_, n)| n.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no action in {rest:?}"));
    (num(rest, "vec"), name.to_string())
}

/// softirq handler times and raise-to-entry delays per vector name, with the rules of
/// `analyzers/softirq.rs`; irq handler times per `irq N NAME` (flag: unhandled).
struct IrqOracle {
    handler: BTreeMap<String, Stat>,
    delay: BTreeMap<String, Stat>,
    irq: BTreeMap<String, Stat>,
}

fn irq_oracle(report: &str) -> IrqOracle {
    let mut o = IrqOracle {
        handler: BTreeMap::new(),
        delay: BTreeMap::new(),
        irq: BTreeMap::new(),
    };
    let mut running: BTreeMap<u32, (u64, i64)> = BTreeMap::new();
    let mut raised: BTreeMap<(u32, i64), u64> = BTreeMap::new();
    let mut in_irq: BTreeMap<u32, (u64, i64, String)> = BTreeMap::new();
    for l in report.lines().filter_map(parse_line) {
        match l.event {
            "softirq_raise" => {
                let (v, _) = vector(l.rest);
                raised.entry((l.cpu, v)).or_insert(l.ts);
            }
            "softirq_entry" => {
                let (v, name) = vector(l.rest);
                if let Some(t) = raised.remove(&(l.cpu, v)) {
                    o.delay.entry(name).or_default().add(l.ts - t, false);
                }
                running.insert(l.cpu, (l.ts, v));
            }
            "softirq_exit" => {
                let (v, name) = vector(l.rest);
                if let Some((t, rv)) = running.remove(&l.cpu) {
                    if rv == v {
                        o.handler.entry(name).or_default().add(l.ts - t, false);
                    }
                }
            }
            "irq_handler_entry" => {
                let irq = num(l.rest, "irq");
                let name = field(l.rest, "name").to_string();
                in_irq.insert(l.cpu, (l.ts, irq, name));
            }
            "irq_handler_exit" => {
                let irq = num(l.rest, "irq");
                if let Some((t, i, name)) = in_irq.remove(&l.cpu) {
                    if i == irq {
                        let unhandled = field(l.rest, "ret") == "unhandled";
                        o.irq
                            .entry(format!("irq {irq} {name}"))
                            .or_default()
                            .add(l.ts - t, unhandled);
                    }
                }
            }
            _ => {}
        }
    }
    o
}

const FSYNCS: u64 = 20;

/// System-wide softirq and irq events while a process writes and fsyncs a file FSYNCS
/// times: each fsync waits for the disk, whose completions arrive as hard interrupts.
#[test]
fn softirq_and_irq_match_trace_cmd() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("irq.dat");
    let target = tmp.path().join("written");
    record_workload(
        "softirq",
        &["fsync", &FSYNCS.to_string(), target.to_str().unwrap()],
        true,
        &cap,
    );
    let o = irq_oracle(&trace_cmd_report(&cap));
    let handler = kstate_json(&["softirq"], &cap);
    assert_eq!(handler["by"], "handler");
    assert_eq!(rows(&handler, "ns", None), o.handler);
    let delay = kstate_json(&["softirq", "--by", "delay"], &cap);
    assert_eq!(rows(&delay, "ns", None), o.delay);
    let irq = kstate_json(&["irq"], &cap);
    assert_eq!(rows(&irq, "ns", Some("unhandled")), o.irq);
    // Every fsync waited for at least one write to complete: one interrupt or more each.
    let irqs: u64 = o.irq.values().map(|s| s.count).sum();
    assert!(irqs >= FSYNCS, "{irqs} hard interrupts for {FSYNCS} fsyncs");
    // Vectors were named: something ran, and nothing fell back to `vec N`.
    assert!(!o.handler.is_empty() && !o.delay.is_empty());
    for k in o.handler.keys().chain(o.delay.keys()) {
        assert!(!k.starts_with("vec "), "{k}");
    }
    // Per CPU, the handler pairs add up to the per-vector ones.
    let by_cpu = kstate_json(&["irq", "--by", "cpu"], &cap);
    let n: u64 = rows(&by_cpu, "ns", Some("unhandled"))
        .values()
        .map(|s| s.count)
        .sum();
    assert_eq!(n, irqs);
    for (k, s) in rows(&by_cpu, "ns", Some("unhandled")) {
        assert!(k.starts_with("cpu"), "{k}");
        assert!(s.count > 0);
    }
}

// ---- lockwait ------------------------------------------------------------------------

/// `ADDR (flags=A|B)` of contention_begin as trace-cmd decodes the flags -> the lock's
/// type and the wait's kind, by the kernel's lock.h and perf lock's names.
fn lock_kind(flags: &str) -> (&'static str, String) {
    let mut f: Vec<&str> = flags.split('|').filter(|x| !x.is_empty()).collect();
    let mode = if f.contains(&"READ") {
        ":R"
    } else if f.contains(&"WRITE") {
        ":W"
    } else {
        ""
    };
    f.retain(|x| *x != "READ" && *x != "WRITE");
    f.sort();
    let ty = match (f.as_slice(), mode) {
        ([], "") => "semaphore",
        ([], _) => "rwsem",
        (["SPIN"], "") => "spinlock",
        (["SPIN"], _) => "rwlock",
        (["MUTEX"] | ["MUTEX", "SPIN"], "") => "mutex",
        (["RT"], "") => "rt-mutex",
        (["RT"], _) => "rwlock-rt",
        (["PERCPU"], m) if !m.is_empty() => "percpu-rwsem",
        _ => panic!("unexpected lock flags {flags}"),
    };
    let kind = match ty {
        "percpu-rwsem" => format!("pcpu-sem{mode}"),
        "rwsem" | "rwlock" | "rwlock-rt" => format!("{ty}{mode}"),
        _ => ty.to_string(),
    };
    (ty, kind)
}

/// How a lock address should print, from this machine's /proc/kallsyms by a plain scan:
/// the closest symbol at or below it, unless that is a linker section marker (or there is
/// none, as for the heap), then hex.
struct Kallsyms(Vec<(u64, String)>);

impl Kallsyms {
    fn load() -> Kallsyms {
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (a, t, n) = (w.next()?, w.next()?, w.next()?);
                let a = u64::from_str_radix(a, 16).ok()?;
                (a != 0 && t != "a" && t != "A").then(|| (a, n.to_string()))
            })
            .collect();
        assert!(syms.len() > 1000, "/proc/kallsyms hides addresses");
        Kallsyms(syms)
    }

    fn key(&self, addr: u64, ty: &str) -> String {
        let marker = |n: &str| {
            ["__start_", "__stop_", "__end_"]
                .iter()
                .any(|p| n.starts_with(p))
                || [
                    "_text",
                    "_stext",
                    "_etext",
                    "_sdata",
                    "_edata",
                    "_sinittext",
                    "_einittext",
                    "__bss_start",
                    "__bss_stop",
                    "_end",
                    "__init_begin",
                    "__init_end",
                    "__brk_base",
                    "__brk_limit",
                ]
                .contains(&n)
        };
        let best = self.0.iter().filter(|s| s.0 <= addr).map(|s| s.0).max();
        let last = self.0.iter().map(|s| s.0).max().unwrap();
        let name = best.filter(|b| addr <= last || *b == addr).and_then(|b| {
            self.0
                .iter()
                .find(|s| s.0 == b && !marker(&s.1))
                .map(|s| (s.1.clone(), addr - b))
        });
        match name {
            Some((n, 0)) => format!("{n} ({ty})"),
            Some((n, off)) => format!("{n}+{off:#x} ({ty})"),
            None => format!("{addr:#x} ({ty})"),
        }
    }
}

/// Waits per lock address (with its type), per kind and per waiting tid, by the rules in
/// `analyzers/lockwait.rs`: per (waiter, address), the first begin to the next end.
#[derive(Default)]
struct LockOracle {
    by_addr: BTreeMap<u64, (&'static str, Stat)>,
    by_kind: BTreeMap<String, Stat>,
    by_tid: BTreeMap<i64, Stat>,
    unmatched: u64,
}

fn lock_oracle(report: &str) -> LockOracle {
    let mut o = LockOracle::default();
    let mut open: BTreeMap<(i64, u64), (u64, String)> = BTreeMap::new();
    for l in report.lines().filter_map(parse_line) {
        let waiter = if l.pid == 0 { -1 - l.cpu as i64 } else { l.pid };
        let (addr, rest) = l.rest.split_once(' ').unwrap();
        let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
        let paren = rest.trim().trim_start_matches('(').trim_end_matches(')');
        match l.event {
            "contention_begin" => {
                let flags = paren.strip_prefix("flags=").unwrap().to_string();
                open.entry((waiter, addr)).or_insert((l.ts, flags));
            }
            "contention_end" => {
                let ret: i64 = paren.strip_prefix("ret=").unwrap().parse().unwrap();
                let Some((t, flags)) = open.remove(&(waiter, addr)) else {
                    o.unmatched += 1;
                    continue;
                };
                let (ty, kind) = lock_kind(&flags);
                let d = l.ts - t;
                let e = o.by_addr.entry(addr).or_insert((ty, Stat::default()));
                assert_eq!(e.0, ty, "lock {addr:#x} changed type");
                e.1.add(d, ret != 0);
                o.by_kind.entry(kind).or_default().add(d, ret != 0);
                o.by_tid.entry(l.pid).or_default().add(d, ret != 0);
            }
            _ => {}
        }
    }
    o
}

const MMAP_THREADS: u64 = 4;

/// Four threads of one process map and unmap pages: mmap and munmap take the process's
/// mmap_lock (a rwsem) for writing, so the threads wait for each other on it.
#[test]
fn lockwait_matches_trace_cmd() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("lock.dat");
    let pid = record_workload(
        "lock",
        &["mmap", &MMAP_THREADS.to_string(), "20000"],
        false,
        &cap,
    );
    let o = lock_oracle(&trace_cmd_report(&cap));
    let ksyms = Kallsyms::load();
    let v = kstate_json(&["lockwait"], &cap);
    assert_eq!(v["by"], "lock");
    assert_eq!(v["pairs"]["unmatched"], o.unmatched);
    let got = rows(&v, "ns", Some("failed"));
    let want: BTreeMap<String, Stat> = o
        .by_addr
        .iter()
        .map(|(addr, (ty, st))| (ksyms.key(*addr, ty), st.clone()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), o.by_addr.len(), "two locks printed alike: {v}");
    for k in got.keys() {
        let (name, ty) = k.rsplit_once(" (").unwrap();
        assert!(!name.is_empty() && ty.len() > 1, "{k}");
    }
    // The rows are ranked by count x average (= total).
    let totals: Vec<u64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["total_ns"].as_u64().unwrap())
        .collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
    let pairs: u64 = got.values().map(|s| s.count).sum();
    assert!(
        pairs > 0,
        "no contention between {MMAP_THREADS} mmap threads"
    );
    // The mmap_lock: a rwsem the workload's threads waited on for writing.
    let kinds = rows(
        &kstate_json(&["lockwait", "--by", "kind"], &cap),
        "ns",
        Some("failed"),
    );
    assert_eq!(kinds, o.by_kind);
    assert!(
        kinds.get("rwsem:W").is_some_and(|s| s.count > 0),
        "{kinds:?}"
    );
    let tasks = rows(
        &kstate_json(&["lockwait", "--by", "task"], &cap),
        "ns",
        Some("failed"),
    );
    let want: BTreeMap<String, Stat> = tasks
        .keys()
        .map(|k| {
            let tid: i64 = k.rsplit_once('-').unwrap().1.parse().unwrap();
            (k.clone(), o.by_tid[&tid].clone())
        })
        .collect();
    assert_eq!(tasks, want);
    assert_eq!(tasks.len(), o.by_tid.len());
    // Only the workload was recorded: its threads waited, at least two of them.
    assert!(tasks.len() >= 2, "{tasks:?}");
    let threads = tasks.keys().filter(|k| k.starts_with("kstate-")).count();
    assert!(threads >= 2 && pid > 0, "{tasks:?}");
}

// ---- net ------------------------------------------------------------------------------

/// Transmit times (net_dev_queue to net_dev_xmit of the same skbaddr) and xmit sizes per
/// device, from trace-cmd's text.
fn net_oracle(report: &str) -> (BTreeMap<String, Stat>, BTreeMap<String, Stat>) {
    let mut time: BTreeMap<String, Stat> = BTreeMap::new();
    let mut size: BTreeMap<String, Stat> = BTreeMap::new();
    let mut open: BTreeMap<String, u64> = BTreeMap::new();
    for l in report.lines().filter_map(parse_line) {
        match l.event {
            "net_dev_queue" => {
                open.insert(field(l.rest, "skbaddr").to_string(), l.ts);
            }
            "net_dev_xmit" => {
                let dev = field(l.rest, "dev").to_string();
                let failed = num(l.rest, "rc") != 0;
                size.entry(dev.clone())
                    .or_default()
                    .add(num(l.rest, "len") as u64, failed);
                if let Some(t) = open.remove(field(l.rest, "skbaddr")) {
                    time.entry(dev).or_default().add(l.ts - t, failed);
                }
            }
            _ => {}
        }
    }
    (time, size)
}

const DATAGRAMS: u64 = 200;
const PAYLOAD: u64 = 300;
/// UDP (8) + IPv4 (20) + the loopback device's Ethernet header (14).
const HEADERS: u64 = 8 + 20 + 14;

/// DATAGRAMS UDP datagrams of PAYLOAD bytes to 127.0.0.1: as many transmits on `lo`, each
/// PAYLOAD + HEADERS bytes long.
#[test]
fn net_counts_loopback_datagrams() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("net.dat");
    record_workload(
        "net",
        &["udp", &DATAGRAMS.to_string(), &PAYLOAD.to_string()],
        false,
        &cap,
    );
    let (time, size) = net_oracle(&trace_cmd_report(&cap));
    let t = kstate_json(&["net"], &cap);
    assert_eq!(rows(&t, "ns", Some("failed")), time);
    let lo = &time["lo"];
    assert_eq!(lo.count, DATAGRAMS, "{t}");
    assert!(lo.min > 0 && lo.max < 1_000_000_000, "{lo:?}");
    let s = kstate_json(&["netsize"], &cap);
    assert_eq!(s["by"], "dev");
    let got = rows(&s, "bytes", Some("failed"));
    assert_eq!(got, size);
    let want = PAYLOAD + HEADERS;
    assert_eq!(
        got["lo"],
        Stat {
            count: DATAGRAMS,
            total: DATAGRAMS * want,
            min: want,
            max: want,
            flagged: 0
        }
    );
    // The distribution puts every packet in the bucket holding PAYLOAD + HEADERS.
    let d = kstate_json(&["netsize", "--dist", "--key", "lo"], &cap);
    let buckets = d["rows"][0]["buckets"].as_array().unwrap();
    let full: Vec<&Value> = buckets.iter().filter(|b| b["count"] != 0).collect();
    assert_eq!(full.len(), 1, "{d}");
    assert_eq!(full[0]["count"], DATAGRAMS);
    let (lo_b, hi_b) = (
        full[0]["lo_bytes"].as_u64().unwrap(),
        full[0]["hi_bytes"].as_u64().unwrap(),
    );
    assert!(lo_b <= want && want <= hi_b, "{d}");
    let text = kstate(&["la".as_ref(), "netsize".as_ref(), cap.as_os_str()]);
    assert!(text.contains(&format!(" {want} ")), "{text}");
}

#[test]
fn missing_events_name_the_preset() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = tmp.path().join("sys.dat");
    record_workload("syscall", &["getppid", "10"], false, &cap);
    for (a, preset) in [("softirq", "softirq"), ("irq", "softirq")] {
        let out = Command::new(env!("CARGO_BIN_EXE_kstate"))
            .args(["analyze", a])
            .arg(&cap)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{a}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("kstate record -e {preset}")),
            "{a}: {err}"
        );
    }
    let list = kstate(&["analyze", "--list"]);
    for a in ["softirq", "irq", "lockwait", "net", "netsize"] {
        assert!(list.lines().any(|l| l.starts_with(a)), "{list}");
    }
}
