//! `kstate bench overhead`: the seed's tracer-overhead table (LKST 2004, seed 003 §3.4).
//! lmbench-style micro-benchmarks run in a child process (`kstate workload micro`) under
//! five configurations — no tracer, the recorder attached with only an event that never
//! fires, the `perf` preset, the `perf` preset without lock events, and `all` — and the
//! table gives ns per operation and the ratio to the untraced run, next to LKST's ratios.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use super::run_cmd;
use crate::Error;
use serde_json::{json, Value};

#[derive(clap::Args)]
#[command(after_help = "Configurations (columns):\n  \
    none         no tracer\n  \
    norec        kstate record attached (instance, per-CPU readers, sysinfo sampler) with\n               \
                 only oom:mark_victim enabled, an event that does not fire\n  \
    perf         kstate record -e perf\n  \
    perf-nolock  the perf preset less lock:contention_begin/end\n  \
    all          kstate record -e all (every preset, system calls included)\n\n\
    Each traced run records only the workload process (kstate record -- CMD). Ratios are\n\
    to the `none` column; the LKST line gives the seed's 2004 ratios (lmbench on a 2.8 GHz\n\
    Xeon, kernel 2.4) for the same micro-benchmark where it had one. Run as root.\n\n\
    chat: `kstate workload chat` with 2 rooms x 5 users (20 threads) in the benchmark\n\
    process, messages per user = count / 40; one operation is one message delivered (LKST:\n\
    its chat benchmark's messages/s, as time per message).\n\
    fs: in a fresh directory under --dir, files created (O_CREAT|O_EXCL), written with\n\
    10 KiB, closed, 1000 at a time, then unlinked; one operation is one file's create,\n\
    write, close and unlink, no fsync (LKST: lmbench's 10K file create + delete).")]
pub struct Args {
    /// Scale the default operation counts (0.01 for a quick check, 10 for steadier figures)
    #[arg(long, default_value_t = 1.0, value_parser = kstate_args::float(0.0001..=1000.0))]
    iters: f64,
    /// Runs of each configuration, interleaved; the median is reported
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<usize>(crate::bench::RUNS))]
    runs: usize,
    /// Only these benchmarks (comma-separated: null,stat,openclose,pipe,unix,fork,ctxsw,
    /// chat,fs)
    #[arg(long, value_delimiter = ',')]
    bench: Vec<String>,
    /// Where recordings and the fs benchmark's files go while measuring (removed
    /// afterwards)
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Keep the last run's recording of each configuration as DIR/CONFIG.dat
    #[arg(long, hide = true, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// The micro-benchmarks: name, what one operation is, default operation count.
pub const BENCHES: &[(&str, &str, u64)] = &[
    ("null", "getppid()", 1_000_000),
    ("stat", "stat(\"/dev/null\")", 300_000),
    ("openclose", "open+close /dev/null", 200_000),
    ("pipe", "pipe round trip, 2 threads", 20_000),
    ("unix", "AF_UNIX stream round trip", 20_000),
    ("fork", "fork+_exit+waitpid", 2_000),
    ("ctxsw", "switch, 2 threads 1 CPU", 20_000),
    ("chat", "chat message delivered", 40_000),
    ("fs", "create+write 10K+unlink", 5_000),
];

/// The chat row's setting: messages per user follow from the operation count.
const CHAT_ROOMS: usize = 2;
const CHAT_USERS: usize = 5;
/// The fs row: bytes written into each file, and files created before they are removed.
const FS_FILE_BYTES: usize = 10 << 10;
const FS_BATCH: u64 = 1000;

/// LKST 2004 (seed 003 tables 3.4-5..3.4-7, lmbench, microseconds): pure, norec, IPA
/// (the performance set), nolock, all. (3.14 is LKST's context switch under ALL, not pi.)
/// chat: table 3.4-3's messages/s as microseconds per message. fs: table 3.4-8's lmbench
/// 10K file create plus 10K file delete.
#[allow(clippy::approx_constant)]
const LKST: &[(&str, [f64; 5])] = &[
    ("null", [0.46, 0.46, 0.67, 0.67, 0.67]),
    ("stat", [3.65, 4.03, 6.79, 4.19, 7.33]),
    ("openclose", [4.98, 5.48, 9.17, 5.82, 10.23]),
    ("pipe", [7.87, 8.02, 14.00, 10.30, 13.88]),
    ("unix", [14.95, 15.15, 23.05, 18.33, 27.53]),
    ("fork", [265.00, 264.25, 331.50, 273.00, 333.75]),
    ("ctxsw", [1.78, 1.99, 3.19, 2.47, 3.14]),
    (
        "chat",
        [
            1e6 / 391509.17,
            1e6 / 338881.83,
            1e6 / 210165.50,
            1e6 / 286245.00,
            1e6 / 175315.50,
        ],
    ),
    (
        "fs",
        [
            100.68 + 44.55,
            106.13 + 48.53,
            155.75 + 75.15,
            108.60 + 49.10,
            167.75 + 83.10,
        ],
    ),
];

pub const CONFIGS: &[&str] = &["none", "norec", "perf", "perf-nolock", "all"];

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

/// The `-e` list of a configuration (None: untraced).
fn config_events(name: &str) -> Option<String> {
    match name {
        "none" => None,
        "norec" => Some("oom:mark_victim".into()),
        "perf" => Some("perf".into()),
        "perf-nolock" => Some(
            kstate_record::events::preset_events("perf")
                .unwrap_or_default()
                .into_iter()
                .filter(|e| !e.starts_with("lock:"))
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => Some("all".into()),
    }
}

#[derive(Default, Clone)]
struct Cell {
    ns: Vec<f64>,
    ops: u64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let benches: Vec<&(&str, &str, u64)> = BENCHES
        .iter()
        .filter(|b| a.bench.is_empty() || a.bench.iter().any(|n| n == b.0))
        .collect();
    if benches.is_empty() {
        return Err(err(format!("--bench {:?}: no such benchmark", a.bench)));
    }
    if !(a.iters > 0.0 && a.iters.is_finite()) {
        return Err(err("--iters must be positive"));
    }
    let dir = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    if let Some(k) = &a.keep {
        std::fs::create_dir_all(k).map_err(|e| Error::io(k, e))?;
    }
    let names: Vec<&str> = benches.iter().map(|b| b.0).collect();
    let mut workload: Vec<String> = vec![
        exe.display().to_string(),
        "workload".into(),
        "micro".into(),
        "--scale".into(),
        a.iters.to_string(),
        "--bench".into(),
        names.join(","),
    ];
    workload.push("--json".into());
    // cells[bench][config]
    let mut cells = vec![vec![Cell::default(); CONFIGS.len()]; benches.len()];
    let mut events = vec![Vec::new(); CONFIGS.len()];
    let mut lost = vec![0u64; CONFIGS.len()];
    let runs = a.runs.max(1);
    let t0 = Instant::now();
    for run in 0..runs {
        eprintln!("kstate bench overhead: run {}/{runs}", run + 1);
        for (ci, cname) in CONFIGS.iter().enumerate() {
            let out = match config_events(cname) {
                None => run_cmd(
                    Command::new(&workload[0])
                        .args(&workload[1..])
                        .env("TMPDIR", &dir),
                )?,
                Some(ev) => {
                    let file = match &a.keep {
                        Some(k) if run + 1 == runs => k.join(format!("{cname}.dat")),
                        _ => dir.join(format!(".kstate-overhead-{}.dat", std::process::id())),
                    };
                    let r = run_cmd(
                        Command::new(&exe)
                            .env("TMPDIR", &dir)
                            .args(["record", "--json", "-e", &ev, "-o"])
                            .arg(&file)
                            .arg("--")
                            .args(&workload),
                    );
                    if a.keep.is_none() || run + 1 != runs {
                        let _ = std::fs::remove_file(&file);
                    }
                    r?
                }
            };
            for l in out.lines().filter(|l| l.starts_with('{')) {
                let v: Value = serde_json::from_str(l)
                    .map_err(|e| err(format!("bad output line {l}: {e}")))?;
                if let Some(b) = v["bench"].as_str() {
                    let bi = names
                        .iter()
                        .position(|n| *n == b)
                        .ok_or_else(|| err(format!("unknown bench {b}")))?;
                    let c = &mut cells[bi][ci];
                    c.ns.push(v["ns_per_op"].as_f64().unwrap_or(0.0));
                    c.ops = v["ops"].as_u64().unwrap_or(0);
                } else if let Some(e) = v["events"].as_u64() {
                    events[ci].push(e as f64);
                    lost[ci] = lost[ci].max(v["lost"].as_u64().unwrap_or(0));
                }
            }
        }
    }
    let ns: Vec<Vec<f64>> = cells
        .iter()
        .map(|r| r.iter().map(|c| median(c.ns.clone())).collect())
        .collect();
    let lkst = |b: &str| LKST.iter().find(|l| l.0 == b).map(|l| l.1);
    if a.json {
        let rows: Vec<Value> = benches
            .iter()
            .enumerate()
            .map(|(bi, b)| {
                let base = ns[bi][0];
                json!({
                    "bench": b.0, "op": b.1, "ops": cells[bi][0].ops,
                    "ops_per_config": cells[bi].iter().map(|c| c.ops).collect::<Vec<_>>(),
                    "ns_per_op": CONFIGS.iter().enumerate()
                        .map(|(ci, c)| (c.to_string(), json!(ns[bi][ci]))).collect::<serde_json::Map<_, _>>(),
                    "ratio": CONFIGS.iter().enumerate()
                        .map(|(ci, c)| (c.to_string(), json!(ns[bi][ci] / base))).collect::<serde_json::Map<_, _>>(),
                    "lkst_2004_ratio": lkst(b.0).map(|v| v.iter().map(|x| x / v[0]).collect::<Vec<_>>()),
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "configs": CONFIGS, "iters": a.iters, "runs": runs,
                "events": CONFIGS.iter().enumerate()
                    .map(|(ci, c)| (c.to_string(), json!(median(events[ci].clone()))))
                    .collect::<serde_json::Map<_, _>>(),
                "lost_max": CONFIGS.iter().enumerate()
                    .map(|(ci, c)| (c.to_string(), json!(lost[ci])))
                    .collect::<serde_json::Map<_, _>>(),
                "keep": a.keep.as_ref().map(|k| k.display().to_string()),
                "rows": rows,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "ns per operation (ratio to no tracer), median of {runs} runs, --iters {}; {:.0} s in all",
        a.iters,
        t0.elapsed().as_secs_f64()
    );
    print!("{:<11}", "bench");
    for c in CONFIGS {
        print!(" {c:>17}");
    }
    println!();
    for (bi, b) in benches.iter().enumerate() {
        let base = ns[bi][0];
        print!("{:<11}", b.0);
        for v in &ns[bi] {
            print!(" {:>17}", format!("{v:.0} ({:.2}x)", v / base));
        }
        println!();
        if let Some(l) = lkst(b.0) {
            print!("{:<11}", "  LKST 2004");
            for x in l {
                print!(" {:>17}", format!("{:.0} ({:.2}x)", x * 1000.0, x / l[0]));
            }
            println!();
        }
    }
    print!("{:<11}", "events");
    for e in &events {
        print!(
            " {:>17}",
            if e.is_empty() {
                "-".into()
            } else {
                format!("{:.0}", median(e.clone()))
            }
        );
    }
    println!();
    print!("{:<11}", "lost (max)");
    for (ci, l) in lost.iter().enumerate() {
        print!(" {:>17}", if ci == 0 { "-".into() } else { l.to_string() });
    }
    println!();
    println!(
        "\nLKST columns: pure, norec, IPA (its performance set), nolock, ALL (seed 003, lmbench, kernel 2.4, 2004)"
    );
    Ok(ExitCode::SUCCESS)
}

/// `kstate workload micro`: runs the micro-benchmarks in this process, one JSON line each
/// (`{"bench","ops","ns_per_op"}`) or a text line.
pub fn micro(scale: f64, only: &[String], json: bool) -> Result<(), Error> {
    for (name, _, base) in BENCHES {
        if !only.is_empty() && !only.iter().any(|n| n == name) {
            continue;
        }
        let mut n = ((*base as f64 * scale).round() as u64).max(1);
        let ns = match *name {
            "null" => time(n, || {
                // SAFETY: getppid has no preconditions.
                std::hint::black_box(unsafe { libc::getppid() });
            }),
            "stat" => {
                let p = c"/dev/null";
                // SAFETY: st is plain data that stat fills.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                time(n, || {
                    // SAFETY: a valid path and a writable stat buffer.
                    unsafe { libc::stat(p.as_ptr(), &mut st) };
                })
            }
            "openclose" => {
                let p = c"/dev/null";
                time(n, || {
                    // SAFETY: a valid path; the descriptor is closed at once.
                    unsafe {
                        let fd = libc::open(p.as_ptr(), libc::O_RDONLY);
                        if fd >= 0 {
                            libc::close(fd);
                        }
                    }
                })
            }
            "pipe" => round_trip(n, false, None)?,
            "unix" => round_trip(n, true, None)?,
            "ctxsw" => {
                let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
                // Two switches per round trip, both threads on the last CPU.
                round_trip(n, false, Some(cpus - 1))? / 2.0
            }
            "fork" => time(n, || {
                // SAFETY: the child calls only _exit; the parent waits for it.
                unsafe {
                    let pid = libc::fork();
                    if pid == 0 {
                        libc::_exit(0);
                    }
                    if pid > 0 {
                        let mut st = 0;
                        libc::waitpid(pid, &mut st, 0);
                    }
                }
            }),
            "chat" => {
                let per_msg = (CHAT_ROOMS * CHAT_USERS * (CHAT_USERS - 1)) as u64;
                let r = super::chat::chat(CHAT_ROOMS, CHAT_USERS, n.div_ceil(per_msg))?;
                n = r.delivered;
                r.elapsed_s * 1e9 / n as f64
            }
            "fs" => small_files(n)?,
            _ => unreachable!(),
        };
        if json {
            println!(r#"{{"bench":"{name}","ops":{n},"ns_per_op":{ns:.2}}}"#);
        } else {
            println!("{name:<10} {n:>9} ops {ns:>10.1} ns/op");
        }
    }
    Ok(())
}

/// lmbench's file create/delete with 10 KiB files, in a fresh directory under the
/// temporary directory: files created and written [`FS_BATCH`] at a time, then unlinked;
/// ns per file (create + write + close + unlink).
fn small_files(n: u64) -> Result<f64, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir().join(format!("kstate-fs-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let data = vec![0x6bu8; FS_FILE_BYTES];
    let mut result = Ok(());
    let t = Instant::now();
    let mut done = 0;
    'all: while done < n {
        let batch = FS_BATCH.min(n - done);
        let paths: Vec<_> = (0..batch).map(|i| dir.join(i.to_string())).collect();
        for p in &paths {
            let w = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(p)
                .and_then(|mut f| std::io::Write::write_all(&mut f, &data));
            if let Err(e) = w {
                result = Err(Error::io(p, e));
                break 'all;
            }
        }
        for p in &paths {
            if let Err(e) = std::fs::remove_file(p) {
                result = Err(Error::io(p, e));
                break 'all;
            }
        }
        done += batch;
    }
    let ns = t.elapsed().as_nanos() as f64 / n as f64;
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| ns)
}

fn time(n: u64, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One byte there and back `n` times between this thread and an echo thread, over two
/// pipes or an AF_UNIX stream socket pair; ns per round trip. With `cpu`, both threads
/// are pinned to it (every hand-over is a context switch).
fn round_trip(n: u64, unix: bool, cpu: Option<usize>) -> Result<f64, Error> {
    let mk = || -> Result<[i32; 2], Error> {
        let mut fds = [0i32; 2];
        // SAFETY: fds has room for two descriptors.
        let r = unsafe {
            if unix {
                libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr())
            } else {
                libc::pipe(fds.as_mut_ptr())
            }
        };
        if r != 0 {
            return Err(err(format!(
                "pipe/socketpair: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(fds)
    };
    let (main_w, main_r, echo_r, echo_w, fds) = if unix {
        let s = mk()?;
        (s[0], s[0], s[1], s[1], vec![s[0], s[1]])
    } else {
        let (a, b) = (mk()?, mk()?);
        (a[1], b[0], a[0], b[1], vec![a[0], a[1], b[0], b[1]])
    };
    // SAFETY: cpu_set_t is plain data that sched_getaffinity fills.
    let mut saved: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: saved is valid and writable.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut saved) };
    let echo = std::thread::spawn(move || {
        if let Some(c) = cpu {
            pin(c);
        }
        let mut b = [0u8; 1];
        for _ in 0..n {
            // SAFETY: one byte into/out of a valid buffer on open descriptors.
            unsafe {
                if libc::read(echo_r, b.as_mut_ptr().cast(), 1) != 1 {
                    return;
                }
                libc::write(echo_w, b.as_ptr().cast(), 1);
            }
        }
    });
    if let Some(c) = cpu {
        pin(c);
    }
    let mut b = [7u8; 1];
    let ns = time(n, || {
        // SAFETY: as above.
        unsafe {
            libc::write(main_w, b.as_ptr().cast(), 1);
            libc::read(main_r, b.as_mut_ptr().cast(), 1);
        }
    });
    let _ = echo.join();
    for fd in fds {
        // SAFETY: descriptors created above, closed once.
        unsafe { libc::close(fd) };
    }
    if cpu.is_some() {
        // Undo the pin for the benchmarks that follow.
        // SAFETY: saved holds the mask read above.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &saved) };
    }
    Ok(ns)
}
