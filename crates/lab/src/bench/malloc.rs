//! `kstate bench malloc`: the seed's malloc_test harness. THREADS threads each loop:
//! allocate N blocks (one fixed size, or random sizes up to the maximum drawn with a
//! `rand_r` generator), optionally `memset` them, then free them all — one loop. The
//! loops done by all threads are counted over `-c` samples of `-i` seconds (or each
//! thread runs `-f` loops and the time is taken), giving loops per second per sample and
//! overall.
//!
//! Each measurement runs in a child process (`kstate bench malloc-pass`, hidden), so
//! that an allocator can be put under it with LD_PRELOAD and its peak RSS read from
//! wait4's rusage. The harness calls the C library's `malloc`/`free` through `extern "C"`,
//! the symbols LD_PRELOAD interposes. The child reports the shared objects mapped into
//! it (/proc/self/maps), and the parent checks that the allocator asked for is among
//! them: a preload that did not take effect is an error, not a mislabelled column.
//!
//! Allocators: glibc (no preload) and the Debian packages libjemalloc2,
//! libtcmalloc-minimal4 and libmimalloc2.0, found with `dpkg -L`; a path to a shared
//! object works too. One that is not installed is reported as missing.
//!
//! `--locks` adds seed 002's lock view: per allocator, one more run under the recorder
//! names the most waited-on lock, its wait and hold shares and its top callers (see
//! `locks`).

mod locks;

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Error;
use serde_json::{json, Value};

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

/// The harness's options, shared by `bench malloc` and its child pass.
#[derive(clap::Args, Debug, Clone)]
pub struct Harness {
    /// Memset each allocation (touches the memory)
    #[arg(short = 's', long)]
    memset: bool,
    /// Random sizes from 1 to the maximum (rand_r), instead of the maximum every time
    #[arg(short = 'r', long)]
    random: bool,
    /// Allocations per loop (each is freed before the next loop)
    #[arg(short = 'n', long, default_value_t = 5000, value_parser = kstate_args::int::<usize>(1..=100_000_000))]
    per_loop: usize,
    /// Samples per measurement
    #[arg(short = 'c', long, default_value_t = 3, value_parser = kstate_args::int::<u32>(1..=1000))]
    samples: u32,
    /// Seconds per sample
    #[arg(short = 'i', long, default_value_t = 1.0, value_parser = kstate_args::float(0.001..=3600.0))]
    interval: f64,
    /// Run this many loops per thread instead of timed samples; the time is measured
    #[arg(short = 'f', long, value_name = "LOOPS", value_parser = kstate_args::int::<u64>(1..=1_000_000_000_000))]
    fixed: Option<u64>,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Threads; a comma-separated list sweeps (1,2,4,8,16,32)
    #[arg(
        short = 't',
        long = "threads",
        value_delimiter = ',',
        default_value = "1",
        value_parser = kstate_args::int::<usize>(1..=4096)
    )]
    threads: Vec<usize>,
    /// Allocation size in bytes (the maximum with -r); a list sweeps (256,1024,4096)
    #[arg(
        short = 'm',
        long = "sizes",
        visible_alias = "max",
        value_delimiter = ',',
        default_value = "1024",
        value_parser = kstate_args::int::<usize>(1..=1 << 30)
    )]
    sizes: Vec<usize>,
    /// Allocators to compare, each run under LD_PRELOAD: glibc, jemalloc, tcmalloc,
    /// mimalloc, or a path to a malloc shared object
    #[arg(long, value_delimiter = ',', default_value = "glibc")]
    allocators: Vec<String>,
    #[command(flatten)]
    harness: Harness,
    /// Also, per allocator, record one run (the most threads, the first size) with the
    /// futex events, call chains and mutex hold probes, and show its top lock: wait and
    /// hold share of thread time and top callers (as `kstate top-locks`)
    #[arg(long)]
    locks: bool,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// One child measurement (hidden subcommand `bench malloc-pass`).
#[derive(clap::Args, Debug)]
pub struct PassArgs {
    #[arg(short = 't', long, default_value_t = 1, value_parser = kstate_args::int::<usize>(1..=4096))]
    threads: usize,
    #[arg(short = 'm', long, default_value_t = 1024, value_parser = kstate_args::int::<usize>(1..=1 << 30))]
    max: usize,
    #[command(flatten)]
    harness: Harness,
    /// Also print the shared objects mapped into this process, one per line, first
    #[arg(long)]
    maps: bool,
    /// Write the result to this file instead of standard output (`--locks` records the
    /// child, whose standard output is the terminal's)
    #[arg(long, value_name = "FILE", hide = true)]
    result: Option<std::path::PathBuf>,
}

// ---- the harness (runs in the child) --------------------------------------------------

extern "C" {
    // The C library's allocator entry points: LD_PRELOAD replaces these symbols.
    fn malloc(size: libc::size_t) -> *mut libc::c_void;
    fn free(p: *mut libc::c_void);
}

/// glibc's `rand_r`, bit for bit: three steps of the same LCG, 31 bits of result.
pub fn rand_r(seed: &mut u32) -> u32 {
    let mut next = *seed;
    next = next.wrapping_mul(1_103_515_245).wrapping_add(12345);
    let mut result = (next / 65536) % 2048;
    next = next.wrapping_mul(1_103_515_245).wrapping_add(12345);
    result <<= 10;
    result ^= (next / 65536) % 1024;
    next = next.wrapping_mul(1_103_515_245).wrapping_add(12345);
    result <<= 10;
    result ^= (next / 65536) % 1024;
    *seed = next;
    result
}

/// Log2 bucket of a requested size: 0 for 1, 1 for 2-3, 2 for 4-7, ...
fn bucket(size: usize) -> usize {
    (usize::BITS - 1 - size.max(1).leading_zeros()) as usize
}

/// A counter on its own cache line, so threads do not share lines.
#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

struct Shared {
    loops: Vec<Padded>,
    stop: AtomicBool,
    ready: AtomicUsize,
}

// Not inlined: the lock view names it as malloc's caller.
#[inline(never)]
fn worker(idx: usize, threads: usize, max: usize, h: &Harness, sh: &Shared) -> [u64; 64] {
    let mut sizes_seen = [0u64; 64];
    let mut ptrs: Vec<*mut libc::c_void> = vec![std::ptr::null_mut(); h.per_loop];
    let mut seed = idx as u32 + 1;
    sh.ready.fetch_add(1, Ordering::SeqCst);
    while sh.ready.load(Ordering::SeqCst) < threads {
        std::hint::spin_loop();
    }
    let mut done = 0u64;
    loop {
        if let Some(f) = h.fixed {
            if done >= f {
                break;
            }
        } else if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        for p in ptrs.iter_mut() {
            let size = if h.random {
                (rand_r(&mut seed) as usize % max) + 1
            } else {
                max
            };
            sizes_seen[bucket(size)] += 1;
            // SAFETY: malloc has no preconditions; a null result is checked below.
            let q = unsafe { malloc(size) };
            assert!(!q.is_null(), "malloc({size}) failed");
            if h.memset {
                // SAFETY: q points to at least `size` writable bytes.
                unsafe { libc::memset(q, 0x5a, size) };
            }
            *p = q;
        }
        for p in &ptrs {
            // SAFETY: each pointer came from malloc above and is freed once.
            unsafe { free(*p) };
        }
        done += 1;
        sh.loops[idx].0.store(done, Ordering::Relaxed);
    }
    sizes_seen
}

/// Shared objects mapped into this process (paths from /proc/self/maps, in order).
fn mapped_objects() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        if path.starts_with('/') && path.contains(".so") && !v.iter().any(|p| p == path) {
            v.push(path.to_string());
        }
    }
    v
}

/// The child: runs the harness once and prints one JSON object.
pub fn pass(a: PassArgs) -> Result<ExitCode, Error> {
    let h = a.harness;
    if a.threads == 0 || a.max == 0 || h.per_loop == 0 {
        return Err(Error::usage(
            "threads, size and allocations per loop must be positive",
        ));
    }
    let libs = mapped_objects();
    if a.maps {
        for l in &libs {
            println!("{l}");
        }
    }
    let sh = Arc::new(Shared {
        loops: (0..a.threads).map(|_| Padded::default()).collect(),
        stop: AtomicBool::new(false),
        ready: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..a.threads)
        .map(|i| {
            let sh = Arc::clone(&sh);
            let h = h.clone();
            let (threads, max) = (a.threads, a.max);
            std::thread::spawn(move || worker(i, threads, max, &h, &sh))
        })
        .collect();
    while sh.ready.load(Ordering::SeqCst) < a.threads {
        std::thread::yield_now();
    }
    let total = |sh: &Shared| -> u64 { sh.loops.iter().map(|c| c.0.load(Ordering::Relaxed)).sum() };
    let t0 = Instant::now();
    let mut samples = Vec::new();
    if h.fixed.is_none() {
        let mut prev = (t0, 0u64);
        for k in 1..=h.samples.max(1) {
            let due = t0 + Duration::from_secs_f64(h.interval * k as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let (t, n) = (Instant::now(), total(&sh));
            samples.push((n - prev.1) as f64 / (t - prev.0).as_secs_f64());
            prev = (t, n);
        }
        sh.stop.store(true, Ordering::Relaxed);
    }
    let mut sizes = [0u64; 64];
    for hd in handles {
        let s = hd.join().map_err(|_| err("a harness thread panicked"))?;
        for (a, b) in sizes.iter_mut().zip(s) {
            *a += b;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let loops = total(&sh);
    if h.fixed.is_some() {
        samples.push(loops as f64 / secs);
    }
    // Timed runs: overall over the sampled time (the loops finished after the last
    // sample are not counted); fixed runs: all loops over all the time.
    let (counted, counted_secs) = if h.fixed.is_some() {
        (loops, secs)
    } else {
        let n: f64 = samples.iter().sum::<f64>() * h.interval;
        (n.round() as u64, h.interval * samples.len() as f64)
    };
    let dist: Vec<Value> = sizes
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(b, n)| json!({"from": 1u64 << b, "to": (2u64 << b) - 1, "count": n}))
        .collect();
    let v = json!({
        "threads": a.threads,
        "max": a.max,
        "random": h.random,
        "memset": h.memset,
        "per_loop": h.per_loop,
        "samples": samples,
        "loops": counted,
        "secs": counted_secs,
        "loops_per_sec": counted as f64 / counted_secs.max(1e-9),
        "sizes": dist,
        "libs": libs,
    });
    match &a.result {
        Some(f) => std::fs::write(f, format!("{v}\n"))
            .map_err(|e| err(format!("{}: cannot write the result: {e}", f.display())))?,
        None => println!("{v}"),
    }
    Ok(ExitCode::SUCCESS)
}

// ---- the parent ---------------------------------------------------------------------

/// An allocator to put under the harness.
#[derive(Debug, Clone)]
struct Allocator {
    name: String,
    /// None: the C library's own (no preload).
    so: Option<String>,
    /// Why it cannot run, when it cannot.
    missing: Option<String>,
}

/// Known allocators: name, Debian package, shared object name.
const KNOWN: [(&str, &str, &str); 3] = [
    ("jemalloc", "libjemalloc2", "libjemalloc.so.2"),
    (
        "tcmalloc",
        "libtcmalloc-minimal4",
        "libtcmalloc_minimal.so.4",
    ),
    ("mimalloc", "libmimalloc2.0", "libmimalloc.so.2"),
];

/// The path of `soname` among the files of Debian package `pkg`.
fn dpkg_find(pkg: &str, soname: &str) -> Option<String> {
    let out = Command::new("dpkg")
        .args(["-L", pkg])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.rsplit('/').next() == Some(soname) && std::path::Path::new(l).exists())
        .map(str::to_string)
}

fn resolve(name: &str) -> Result<Allocator, Error> {
    if name == "glibc" {
        return Ok(Allocator {
            name: name.into(),
            so: None,
            missing: None,
        });
    }
    if name.contains('/') {
        let exists = std::path::Path::new(name).is_file();
        return Ok(Allocator {
            name: name.rsplit('/').next().unwrap_or(name).to_string(),
            so: Some(name.to_string()),
            missing: (!exists).then(|| format!("{name}: no such file")),
        });
    }
    let Some((_, pkg, soname)) = KNOWN.iter().find(|k| k.0 == name) else {
        let names: Vec<&str> = std::iter::once("glibc")
            .chain(KNOWN.iter().map(|k| k.0))
            .collect();
        return Err(Error::usage(format!(
            "unknown allocator {name:?}: choose from {} or give a path to a shared object",
            names.join(", ")
        )));
    };
    let so = dpkg_find(pkg, soname);
    Ok(Allocator {
        name: name.into(),
        missing: so
            .is_none()
            .then(|| format!("{soname} not installed (apt-get install {pkg})")),
        so,
    })
}

/// One cell of the table.
struct Cell {
    alloc: usize,
    threads: usize,
    size: usize,
    result: Value,
    max_rss_kib: i64,
}

fn harness_args(h: &Harness) -> Vec<String> {
    let mut v = vec![
        "-n".to_string(),
        h.per_loop.to_string(),
        "-c".into(),
        h.samples.to_string(),
        "-i".into(),
        h.interval.to_string(),
    ];
    if h.memset {
        v.push("-s".into());
    }
    if h.random {
        v.push("-r".into());
    }
    if let Some(f) = h.fixed {
        v.extend(["-f".into(), f.to_string()]);
    }
    v
}

/// Runs one child pass and checks the preload took effect.
fn run_pass(a: &Allocator, threads: usize, size: usize, h: &Harness) -> Result<Cell, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "malloc-pass", "-t"])
        .arg(threads.to_string())
        .arg("-m")
        .arg(size.to_string())
        .args(harness_args(h))
        .env_remove("LD_PRELOAD")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(so) = &a.so {
        cmd.env("LD_PRELOAD", so);
    }
    let child = cmd
        .spawn()
        .map_err(|e| err(format!("cannot run the harness: {e}")))?;
    let pid = child.id() as i32;
    // Read the pipes before waiting: the outputs are small, but a full pipe would block.
    let mut child = child;
    let mut stdout = String::new();
    let mut stderr = String::new();
    use std::io::Read;
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut stdout);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 waits for our own child and fills both.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if r < 0 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(err(format!(
            "the harness under {} ({threads} threads, size {size}) failed (status {status}): {}",
            a.name,
            stderr.trim()
        )));
    }
    let result: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| err(format!("the harness printed no result: {stdout:?}")))?;
    check_libs(a, &result)?;
    Ok(Cell {
        alloc: 0,
        threads,
        size,
        result,
        max_rss_kib: ru.ru_maxrss,
    })
}

/// Checks that the harness child mapped the allocator asked for (and, for glibc, no
/// other): a preload that did not take effect is an error, not a mislabelled column.
fn check_libs(a: &Allocator, result: &Value) -> Result<(), Error> {
    let libs: Vec<&str> = result["libs"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match &a.so {
        Some(so) => {
            let want = std::fs::canonicalize(so).unwrap_or_else(|_| so.into());
            let found = libs
                .iter()
                .any(|l| std::fs::canonicalize(l).unwrap_or_else(|_| l.into()) == want || *l == so);
            if !found {
                return Err(err(format!(
                    "LD_PRELOAD={so} did not take effect: the harness maps {}",
                    libs.join(", ")
                )));
            }
        }
        None => {
            if let Some(l) = libs.iter().find(|l| {
                KNOWN
                    .iter()
                    .any(|k| l.contains(k.2.split(".so").next().unwrap_or("")))
            }) {
                return Err(err(format!(
                    "the glibc run maps another allocator ({l}); is LD_PRELOAD set in /etc/ld.so.preload?"
                )));
            }
        }
    }
    Ok(())
}

/// The lock view of every allocator that can run: the most threads, the first size.
fn lock_views(a: &Args, allocs: &[Allocator]) -> Result<Vec<locks::View>, Error> {
    let threads = a.threads.iter().copied().max().unwrap_or(1);
    let size = a.sizes.first().copied().unwrap_or(1024);
    let mut pass = vec![
        "bench".to_string(),
        "malloc-pass".into(),
        "-t".into(),
        threads.to_string(),
        "-m".into(),
        size.to_string(),
    ];
    pass.extend(harness_args(&a.harness));
    let mut v = Vec::new();
    for al in allocs.iter().filter(|al| al.missing.is_none()) {
        let view = locks::view(&al.name, al.so.as_deref(), threads, size, &pass)?;
        check_libs(al, &view.result)?;
        v.push(view);
    }
    Ok(v)
}

fn group(n: f64) -> String {
    let s = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn size_name(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let h = &a.harness;
    if a.threads.contains(&0) || a.sizes.contains(&0) || h.per_loop == 0 {
        return Err(Error::usage("threads, sizes and -n must be positive"));
    }
    if h.fixed.is_none() && !(h.interval > 0.0 && h.samples > 0) {
        return Err(Error::usage("-c and -i must be positive"));
    }
    let allocs: Vec<Allocator> = a
        .allocators
        .iter()
        .map(|n| resolve(n.trim()))
        .collect::<Result<_, _>>()?;
    let mut cells = Vec::new();
    for (i, al) in allocs.iter().enumerate() {
        if al.missing.is_some() {
            continue;
        }
        for &size in &a.sizes {
            for &t in &a.threads {
                let mut c = run_pass(al, t, size, h)?;
                c.alloc = i;
                cells.push(c);
            }
        }
    }
    let views = match a.locks {
        true => lock_views(&a, &allocs)?,
        false => Vec::new(),
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut sizes_total = [0u64; 64];
    for c in &cells {
        for b in c.result["sizes"].as_array().into_iter().flatten() {
            let from = b["from"].as_u64().unwrap_or(1);
            sizes_total[bucket(from as usize)] += b["count"].as_u64().unwrap_or(0);
        }
    }
    let peak = |i: usize| {
        cells
            .iter()
            .filter(|c| c.alloc == i)
            .map(|c| c.max_rss_kib)
            .max()
    };
    let any_missing = allocs.iter().any(|al| al.missing.is_some());
    if a.json {
        let v = json!({
            "harness": {
                "per_loop": h.per_loop, "memset": h.memset, "random": h.random,
                "samples": h.samples, "interval_s": h.interval, "fixed_loops": h.fixed,
                "cpus": cpus,
            },
            "allocators": allocs.iter().enumerate().map(|(i, al)| json!({
                "name": al.name, "preload": al.so, "missing": al.missing,
                "peak_rss_kib": peak(i),
            })).collect::<Vec<_>>(),
            "cells": cells.iter().map(|c| json!({
                "allocator": allocs[c.alloc].name, "threads": c.threads, "size": c.size,
                "loops_per_sec": c.result["loops_per_sec"], "samples": c.result["samples"],
                "loops": c.result["loops"], "max_rss_kib": c.max_rss_kib,
                "libs": c.result["libs"],
            })).collect::<Vec<_>>(),
            "sizes": sizes_total.iter().enumerate().filter(|(_, n)| **n > 0)
                .map(|(b, n)| json!({"from": 1u64 << b, "to": (2u64 << b) - 1, "count": n}))
                .collect::<Vec<_>>(),
            "locks": a.locks.then(|| views.iter().map(locks::View::json).collect::<Vec<_>>()),
        });
        println!("{v}");
    } else {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        let io = |e: std::io::Error| Error::failed(format!("writing: {e}"));
        let how = match h.fixed {
            Some(f) => format!("{f} loops per thread"),
            None => format!("{} sample(s) of {} s", h.samples, h.interval),
        };
        writeln!(
            w,
            "malloc_test: {} allocations per loop, {} sizes{}, {how} per cell; {cpus} CPUs",
            h.per_loop,
            if h.random {
                "random (rand_r, 1..max)"
            } else {
                "fixed"
            },
            if h.memset { ", memset" } else { "" },
        )
        .map_err(io)?;
        let single = cells.len() == 1;
        if single {
            let c = &cells[0];
            for (k, s) in c.result["samples"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                writeln!(
                    w,
                    "sample {}: {} loops/s",
                    k + 1,
                    group(s.as_f64().unwrap_or(0.0))
                )
                .map_err(io)?;
            }
        }
        writeln!(w, "\nloops per second:").map_err(io)?;
        write!(w, "{:>8} {:>8}", "SIZE", "THREADS").map_err(io)?;
        for al in &allocs {
            write!(w, " {:>14}", al.name).map_err(io)?;
        }
        writeln!(w).map_err(io)?;
        for &size in &a.sizes {
            for &t in &a.threads {
                write!(w, "{:>8} {:>8}", size_name(size as u64), t).map_err(io)?;
                for (i, al) in allocs.iter().enumerate() {
                    let cell = cells
                        .iter()
                        .find(|c| c.alloc == i && c.threads == t && c.size == size);
                    let s = match (cell, &al.missing) {
                        (Some(c), _) => group(c.result["loops_per_sec"].as_f64().unwrap_or(0.0)),
                        (None, Some(_)) => "missing".into(),
                        (None, None) => "-".into(),
                    };
                    write!(w, " {s:>14}").map_err(io)?;
                }
                writeln!(w).map_err(io)?;
            }
        }
        write!(w, "{:>17}", "peak RSS (KiB)").map_err(io)?;
        for (i, _) in allocs.iter().enumerate() {
            let s = peak(i).map_or("missing".to_string(), |k| group(k as f64));
            write!(w, " {s:>14}").map_err(io)?;
        }
        writeln!(w).map_err(io)?;
        let total: u64 = sizes_total.iter().sum();
        writeln!(w, "\nallocation sizes requested (all cells):").map_err(io)?;
        for (b, n) in sizes_total.iter().enumerate().filter(|(_, n)| **n > 0) {
            writeln!(
                w,
                "{:>8} - {:<8} {:>14} {:>6.2}%",
                size_name(1 << b),
                size_name((2u64 << b) - 1),
                group(*n as f64),
                *n as f64 * 100.0 / total.max(1) as f64
            )
            .map_err(io)?;
        }
        for al in &allocs {
            if let Some(m) = &al.missing {
                writeln!(w, "{}: missing: {m}", al.name).map_err(io)?;
            }
        }
        if a.locks {
            writeln!(
                w,
                "\ntop lock per allocator (recorded as kstate top-locks):"
            )
            .map_err(io)?;
            for l in views.iter().flat_map(locks::View::text) {
                writeln!(w, "{l}").map_err(io)?;
            }
            // Notes every run shares, once (per-run ones, such as chain counts, are in
            // --json).
            let first = views
                .first()
                .map(|v| v.notes.as_slice())
                .unwrap_or_default();
            for n in first
                .iter()
                .filter(|n| views.iter().all(|v| v.notes.contains(n)))
            {
                writeln!(w, "# {n}").map_err(io)?;
            }
        }
    }
    if any_missing {
        for al in &allocs {
            if let Some(m) = &al.missing {
                eprintln!("kstate: allocator {} missing: {m}", al.name);
            }
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        #[link_name = "rand_r"]
        fn libc_rand_r(seed: *mut libc::c_uint) -> libc::c_int;
    }

    #[test]
    fn rand_r_matches_glibc() {
        for start in [1u32, 2, 12345, u32::MAX] {
            let (mut a, mut b) = (start, start);
            for _ in 0..1000 {
                // SAFETY: b is a valid seed.
                let want = unsafe { libc_rand_r(&mut b) } as u32;
                assert_eq!(rand_r(&mut a), want);
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn buckets_and_names() {
        assert_eq!((bucket(1), bucket(2), bucket(3), bucket(4)), (0, 1, 1, 2));
        assert_eq!(bucket(1024), 10);
        assert_eq!(size_name(4096), "4K");
        assert_eq!(size_name(4095), "4095");
        assert_eq!(group(1234567.4), "1,234,567");
        assert_eq!(group(999.0), "999");
    }
}
