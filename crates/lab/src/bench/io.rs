//! `kstate bench io`: the seeds' OS-layer I/O study (seed 000 §3.1, table 3.1-1): iozone's
//! initial write (`-i 0`) in 11 patterns — the total size split over 1-4 streams, written by
//! child processes, by threads (`-T`), or by several concurrent commands — run at each CPU
//! count (the workload pinned with sched_setaffinity, no reboots), with the throughput, the
//! CPU accounting of those CPUs from /proc/stat and, with `--classify`, the verdict of
//! `kstate classify` on a recording of the run.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::Error;
use serde_json::{json, Value};

/// Table 3.1-1: (streams per command, threads, commands).
pub const PATTERNS: [(u32, bool, u32); 11] = [
    (1, false, 1),
    (1, true, 1),
    (2, false, 1),
    (2, true, 1),
    (1, false, 2),
    (3, false, 1),
    (3, true, 1),
    (1, false, 3),
    (4, false, 1),
    (4, true, 1),
    (1, false, 4),
];

#[derive(clap::Args)]
#[command(
    after_help = "Patterns (seed 000 table 3.1-1; SIZE split evenly over the streams):\n  \
    1  1 stream                      2  1 stream, thread (-T)\n  \
    3  2 processes                   4  2 threads\n  \
    5  2 commands of 1 stream        6  3 processes\n  \
    7  3 threads                     8  3 commands\n  \
    9  4 processes                  10  4 threads\n  \
    11 4 commands\n\n\
    Each stream writes its own file in RECORD-sized write() calls (iozone's initial write,\n\
    4 KiB records) and, unless --no-fsync, fsyncs it before its clock stops (iozone -e), so\n\
    the figure is what reached the disk. Before each run: the files are removed, sync, and\n\
    the page cache dropped (echo 3 > /proc/sys/vm/drop_caches) in place of the seed's reboot.\n\
    CPU columns are /proc/stat of the CPUs the run was pinned to, as % of their time.\n\
    Run as root."
)]
pub struct Args {
    /// Patterns to run (comma-separated, 1-11) [default: all]
    #[arg(long, value_delimiter = ',', value_parser = kstate_args::int::<u32>(1..=11))]
    pattern: Vec<u32>,
    /// Total bytes written per run (K, M, G suffixes)
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    size: u64,
    /// Bytes per write() call
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    record: u64,
    /// CPU counts to run at (the workload pinned to CPUs 0..N-1) [default: all CPUs]
    #[arg(long, value_delimiter = ',', value_parser = kstate_args::int::<usize>(1..=1024))]
    cpus: Vec<usize>,
    /// Where the files go (removed afterwards)
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Leave out the fsync at the end of each stream
    #[arg(long)]
    no_fsync: bool,
    /// Record each run (kstate record -e perf,syscall -a) and classify it
    #[arg(long)]
    classify: bool,
    /// With --classify: keep the recordings in DIR as pattern-P-cpuN.dat
    #[arg(long, value_name = "DIR", requires = "classify")]
    keep: Option<PathBuf>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// The largest size `parse_size` takes (1 TiB).
const MAX_SIZE: u64 = 1 << 40;

pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("'{s}' is not a size"))?;
    match n.checked_mul(mul) {
        Some(b) if (1..=MAX_SIZE).contains(&b) => Ok(b),
        _ => Err(format!("'{s}': a size from 1 byte to 1T")),
    }
}

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

/// Per-CPU jiffies from /proc/stat: user+nice, system+irq+softirq, idle, iowait.
pub fn cpu_times(ncpu: usize) -> [u64; 4] {
    let j = kstate_record::cpu_time::read(Some(ncpu)).unwrap_or_default();
    [j.user, j.system, j.idle, j.iowait]
}

fn drop_caches() {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
}

struct RunResult {
    pattern: u32,
    cpus: usize,
    bytes: u64,
    wall: f64,
    /// Sum over streams of each stream's own rate (iozone's "children see").
    children_see: f64,
    cpu_pct: [f64; 4],
    verdict: Option<(String, String)>,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let patterns: Vec<u32> = if a.pattern.is_empty() {
        (1..=11).collect()
    } else {
        a.pattern.clone()
    };
    if let Some(p) = patterns.iter().find(|p| !(1..=11).contains(*p)) {
        return Err(err(format!("--pattern {p}: patterns are 1 to 11")));
    }
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpus: Vec<usize> = if a.cpus.is_empty() {
        vec![online]
    } else {
        a.cpus.clone()
    };
    if let Some(c) = cpus.iter().find(|c| **c == 0 || **c > online) {
        return Err(err(format!("--cpus {c}: this machine has {online} CPUs")));
    }
    let dir = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    if let Some(k) = &a.keep {
        std::fs::create_dir_all(k).map_err(|e| Error::io(k, e))?;
    }
    let mut results = Vec::new();
    for &p in &patterns {
        for &n in &cpus {
            eprintln!("kstate bench io: pattern {p} on {n} CPU(s)");
            results.push(one_run(&exe, &a, &dir, p, n)?);
        }
    }
    let mib = |b: f64| b / (1u64 << 20) as f64;
    if a.json {
        let rows: Vec<Value> = results
            .iter()
            .map(|r| {
                let (s, t, c) = PATTERNS[r.pattern as usize - 1];
                json!({
                    "pattern": r.pattern, "streams": s * c, "threads": t, "commands": c,
                    "cpus": r.cpus, "bytes": r.bytes, "seconds": r.wall,
                    "mib_per_s": mib(r.bytes as f64) / r.wall,
                    "children_see_mib_per_s": mib(r.children_see),
                    "cpu_pct": {"user": r.cpu_pct[0], "system": r.cpu_pct[1],
                                "idle": r.cpu_pct[2], "iowait": r.cpu_pct[3]},
                    "verdict": r.verdict.as_ref().map(|v| &v.0),
                    "evidence": r.verdict.as_ref().map(|v| &v.1),
                })
            })
            .collect();
        println!(
            "{}",
            json!({"size": a.size, "record": a.record, "fsync": !a.no_fsync, "runs": rows})
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "initial write of {} MiB per run in {} B records{}; throughput in MiB/s",
        a.size >> 20,
        a.record,
        if a.no_fsync { "" } else { ", fsync at the end" }
    );
    println!(
        "{:>3} {:<22} {:>4} {:>8} {:>9} {:>12} {:>5} {:>5} {:>5} {:>6}  verdict",
        "pat",
        "streams",
        "cpus",
        "seconds",
        "MiB/s",
        "children see",
        "usr%",
        "sys%",
        "idle%",
        "iowt%"
    );
    for r in &results {
        let (s, t, c) = PATTERNS[r.pattern as usize - 1];
        let what = if c > 1 {
            format!("{c} commands x 1")
        } else {
            format!("{s} {}", if t { "threads" } else { "processes" })
        };
        println!(
            "{:>3} {:<22} {:>4} {:>8.2} {:>9.1} {:>12.1} {:>5.1} {:>5.1} {:>5.1} {:>6.1}  {}",
            r.pattern,
            what,
            r.cpus,
            r.wall,
            mib(r.bytes as f64) / r.wall,
            mib(r.children_see),
            r.cpu_pct[0],
            r.cpu_pct[1],
            r.cpu_pct[2],
            r.cpu_pct[3],
            r.verdict.as_ref().map_or("-", |v| v.0.as_str())
        );
        if let Some((_, ev)) = &r.verdict {
            println!("      {ev}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn one_run(exe: &Path, a: &Args, dir: &Path, p: u32, ncpu: usize) -> Result<RunResult, Error> {
    let (streams, threads, commands) = PATTERNS[p as usize - 1];
    let total_streams = (streams * commands) as u64;
    let per = (a.size / total_streams).div_ceil(a.record) * a.record;
    let prefix = dir.join(format!(".kstate-io-{}", std::process::id()));
    let mut wl: Vec<String> = vec![
        exe.display().to_string(),
        "workload".into(),
        "iowrite".into(),
        "--streams".into(),
        streams.to_string(),
        "--commands".into(),
        commands.to_string(),
        "--size".into(),
        per.to_string(),
        "--record".into(),
        a.record.to_string(),
        "--cpus".into(),
        ncpu.to_string(),
    ];
    if threads {
        wl.push("--threads".into());
    }
    if !a.no_fsync {
        wl.push("--fsync".into());
    }
    wl.push(prefix.display().to_string());
    let remove = || {
        if let Ok(rd) = std::fs::read_dir(dir) {
            let stem = prefix.file_name().unwrap().to_string_lossy().into_owned();
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&stem) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    };
    remove();
    drop_caches();
    let rec = a.classify.then(|| match &a.keep {
        Some(k) => k.join(format!("pattern-{p}-cpu{ncpu}.dat")),
        None => dir.join(format!(".kstate-iorec-{}.dat", std::process::id())),
    });
    let mut cmd = match &rec {
        None => {
            let mut c = Command::new(&wl[0]);
            c.args(&wl[1..]);
            c
        }
        Some(f) => {
            let mut c = Command::new(exe);
            c.args(["record", "--json", "-e", "perf,syscall", "-a", "-o"])
                .arg(f)
                .arg("--")
                .args(&wl);
            c
        }
    };
    let before = cpu_times(ncpu);
    let t = Instant::now();
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| err(format!("cannot run the workload: {e}")))?;
    let wall = t.elapsed().as_secs_f64();
    let after = cpu_times(ncpu);
    remove();
    if !out.status.success() {
        return Err(err(format!(
            "pattern {p}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut bytes = 0;
    let mut children_see = 0.0;
    let mut workload_wall = 0.0f64;
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        if let (Some(b), Some(s)) = (v["stream_bytes"].as_u64(), v["seconds"].as_f64()) {
            bytes += b;
            children_see += b as f64 / s.max(1e-9);
        } else if let Some(s) = v["workload_seconds"].as_f64() {
            workload_wall = workload_wall.max(s);
        }
    }
    let d: Vec<f64> = (0..4)
        .map(|i| after[i].saturating_sub(before[i]) as f64)
        .collect();
    let sum: f64 = d.iter().sum::<f64>().max(1.0);
    let verdict = match &rec {
        Some(f) => {
            let trace = kstate_format::Trace::open(f)?;
            let scope = kstate_views::workload::workload_scope(&trace);
            let fig = kstate_views::classify::figures(&trace, scope.as_ref())?;
            let (k, e) = kstate_views::classify::verdict(&fig);
            if a.keep.is_none() {
                let _ = std::fs::remove_file(f);
            }
            Some((k.to_string(), e))
        }
        None => None,
    };
    Ok(RunResult {
        pattern: p,
        cpus: ncpu,
        bytes,
        wall: if workload_wall > 0.0 {
            workload_wall
        } else {
            wall
        },
        children_see,
        cpu_pct: [
            d[0] / sum * 100.0,
            d[1] / sum * 100.0,
            d[2] / sum * 100.0,
            d[3] / sum * 100.0,
        ],
        verdict,
    })
}

/// `kstate workload iowrite`: COMMANDS copies of itself (each one command), each writing
/// STREAMS files PREFIX.C.S of SIZE bytes in RECORD-byte writes, by forked processes or
/// threads; one JSON line per stream `{"stream_bytes","seconds"}` and, from the top,
/// `{"workload_seconds"}`.
#[derive(clap::Args)]
pub struct IoWriteArgs {
    #[arg(long, default_value_t = 1)]
    streams: u32,
    #[arg(long, default_value_t = 1)]
    commands: u32,
    /// Streams are threads, not processes
    #[arg(long)]
    threads: bool,
    /// Bytes per stream
    #[arg(long)]
    size: u64,
    #[arg(long, default_value_t = 4096)]
    record: u64,
    /// fsync each file before its clock stops
    #[arg(long)]
    fsync: bool,
    /// Pin to CPUs 0..N-1 first
    #[arg(long)]
    cpus: Option<usize>,
    prefix: PathBuf,
}

pub fn iowrite(a: &IoWriteArgs) -> Result<(), Error> {
    let IoWriteArgs {
        streams,
        commands,
        threads,
        size,
        record,
        fsync,
        cpus,
        ref prefix,
    } = *a;
    if let Some(n) = cpus {
        // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it. Children and
        // threads inherit the mask.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for c in 0..n {
                libc::CPU_SET(c, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    let t = Instant::now();
    if commands > 1 {
        let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
        let mut kids = Vec::new();
        for c in 0..commands {
            let mut p = prefix.as_os_str().to_owned();
            p.push(format!(".c{c}"));
            let mut cmd = Command::new(&exe);
            cmd.args(["workload", "iowrite", "--streams"])
                .arg(streams.to_string())
                .args(["--size", &size.to_string(), "--record", &record.to_string()]);
            if threads {
                cmd.arg("--threads");
            }
            if fsync {
                cmd.arg("--fsync");
            }
            cmd.arg(&p);
            kids.push(
                cmd.spawn()
                    .map_err(|e| err(format!("cannot start a command: {e}")))?,
            );
        }
        for mut k in kids {
            let st = k.wait().map_err(|e| err(e.to_string()))?;
            if !st.success() {
                return Err(err(format!("a writer command failed: {st}")));
            }
        }
    } else {
        let path = |s: u32| {
            let mut p = prefix.as_os_str().to_owned();
            p.push(format!(".s{s}"));
            PathBuf::from(p)
        };
        if threads {
            let hs: Vec<_> = (0..streams)
                .map(|s| {
                    let p = path(s);
                    std::thread::spawn(move || write_stream(&p, size, record, fsync))
                })
                .collect();
            for h in hs {
                h.join().map_err(|_| err("writer thread panicked"))??;
            }
        } else {
            let mut pids = Vec::new();
            for s in 0..streams {
                let p = path(s);
                // SAFETY: the child writes its file with plain system calls and _exits.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    let code = match write_stream(&p, size, record, fsync) {
                        Ok(()) => 0,
                        Err(e) => {
                            // The parent only sees the exit status; the reason is told here.
                            raw_eprint(&format!("kstate: {e}\n"));
                            1
                        }
                    };
                    // SAFETY: ends the child without running the parent's destructors.
                    unsafe { libc::_exit(code) };
                }
                if pid < 0 {
                    return Err(err(format!("fork: {}", std::io::Error::last_os_error())));
                }
                pids.push(pid);
            }
            for pid in pids {
                let mut st = 0;
                // SAFETY: waits for a child forked above.
                unsafe { libc::waitpid(pid, &mut st, 0) };
                let how = if libc::WIFSIGNALED(st) {
                    format!("killed by signal {}", libc::WTERMSIG(st))
                } else {
                    format!("exit status {}", libc::WEXITSTATUS(st))
                };
                if !libc::WIFEXITED(st) || libc::WEXITSTATUS(st) != 0 {
                    return Err(err(format!("writer process {pid} failed ({how})")));
                }
            }
        }
    }
    let line = format!(
        "{{\"workload_seconds\":{:.6}}}\n",
        t.elapsed().as_secs_f64()
    );
    raw_print(&line);
    Ok(())
}

/// One line to stdout with a single write (safe in a forked child, atomic in a pipe).
fn raw_print(s: &str) {
    raw_write(1, s)
}

/// [`raw_print`] to stderr.
fn raw_eprint(s: &str) {
    raw_write(2, s)
}

fn raw_write(fd: i32, s: &str) {
    // SAFETY: writes a valid buffer to an fd the process holds.
    unsafe { libc::write(fd, s.as_ptr().cast(), s.len()) };
}

fn write_stream(path: &Path, size: u64, record: u64, fsync: bool) -> Result<(), Error> {
    use std::io::Write;
    let t = Instant::now();
    let mut f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let buf = vec![0x5au8; record as usize];
    let mut left = size;
    while left > 0 {
        let n = left.min(record) as usize;
        f.write_all(&buf[..n]).map_err(|e| Error::io(path, e))?;
        left -= n as u64;
    }
    if fsync {
        f.sync_all().map_err(|e| Error::io(path, e))?;
    }
    drop(f);
    raw_print(&format!(
        "{{\"stream_bytes\":{size},\"seconds\":{:.6}}}\n",
        t.elapsed().as_secs_f64()
    ));
    Ok(())
}
