//! `kstate bench watch`: `kstate watch` left running under a steady system-call storm.
//!
//! First, each way of keeping pages (no -o, `--keep` in memory, `--keep --keep-on-disk`,
//! `-o`) runs for `--mode-seconds` under the same storm, and the bytes the watch wrote
//! to storage (`/proc/PID/io` write_bytes) per second from its second second on are
//! compared. Then the soak: one
//! watch with the flight recorder in memory, an alarm firing every interval (saves
//! limited by --max-saves), metrics served and scraped, for `--minutes`; each minute its
//! RSS, the memory its pages take (memory files), the disk it uses (its directory and
//! saves), its CPU, the bytes it wrote, the events it analysed and lost, and the alarm
//! latency (from an interval's end, on CLOCK_MONOTONIC = the trace clock, to the firing's
//! JSON line reaching this process). A watch that leaks shows a column that grows.
//!
//! The storm is a child doing `--rate` getppid() calls a second in 10 ms slices, each
//! slice ending in a sleep: steady, and every interval has a sleep past 5 ms for the
//! alarm rule.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Error;
use serde_json::{json, Value};

#[derive(clap::Args)]
#[command(
    after_help = "Run as root. The soak takes --minutes (default 60) plus four \
    --mode-seconds runs before it; figures from a shared machine are noisy, but a column that \
    grows minute after minute is a leak whatever the noise."
)]
pub struct Args {
    /// Minutes of the soak (0: only the comparison of the modes)
    #[arg(long, default_value_t = 60, value_parser = kstate_args::int::<u64>(0..=10_000))]
    minutes: u64,
    /// getppid() calls a second in the storm
    #[arg(long, default_value_t = 100_000, value_parser = kstate_args::int::<u64>(100..=10_000_000))]
    rate: u64,
    /// Seconds each mode runs in the bytes-written comparison (0: no comparison)
    #[arg(long, default_value_t = 60, value_parser = kstate_args::int::<u64>(0..=3600))]
    mode_seconds: u64,
    /// Where the watches' directories, recordings and saves go (removed afterwards)
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Port on 127.0.0.1 for the soak's --metrics (scraped each minute)
    #[arg(long, default_value_t = 9464)]
    metrics_port: u16,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct StormArgs {
    /// getppid() calls a second
    rate: u64,
    /// For how long
    seconds: u64,
}

fn err(msg: impl Into<String>) -> Error {
    Error::failed(msg)
}

/// The storm: `rate` getppid() calls a second in 10 ms slices, each ending in a sleep to
/// the slice's end.
pub fn storm(a: StormArgs) -> Result<ExitCode, Error> {
    let slice = Duration::from_millis(10);
    let per = (a.rate / 100).max(1);
    let start = Instant::now();
    let mut next = start;
    while start.elapsed() < Duration::from_secs(a.seconds) {
        for _ in 0..per {
            // SAFETY: getppid has no preconditions.
            std::hint::black_box(unsafe { libc::getppid() });
        }
        next += slice;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// CLOCK_MONOTONIC in ns (the trace clock `mono`).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A field of /proc/PID/status in KiB (`VmRSS:`).
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// write_bytes of /proc/PID/io: bytes the process caused to be written to storage.
fn write_bytes(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
}

/// User and system CPU seconds of process `pid` (all its threads).
fn cpu_s(pid: u32) -> Option<f64> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &st[st.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Bytes the process's memory files (its pages kept in memory) take.
fn memfd_bytes(pid: u32) -> u64 {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let mut seen = std::collections::BTreeSet::new();
    rd.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("memfd:"))
        })
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .filter(|m| seen.insert(std::os::unix::fs::MetadataExt::ino(m)))
        .map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)
        .sum()
}

/// What the watch's JSON lines said, as they came.
#[derive(Default)]
struct Seen {
    lines: u64,
    events: u64,
    lost: u64,
    /// Alarm latencies (s) since the last minute's row.
    latencies: Vec<f64>,
    alarms: u64,
}

/// A running watch: the process, what its lines said, the thread reading them, and its
/// standard error as read so far (drained as it comes: a full pipe would stop the watch).
struct Running {
    child: std::process::Child,
    seen: Arc<Mutex<Seen>>,
    reader: std::thread::JoinHandle<()>,
    errors: std::thread::JoinHandle<String>,
}

/// Starts `kstate watch --json ARGS -- storm` with TMPDIR in `dir`; threads read its
/// lines into `Seen` and its standard error.
fn start_watch(
    exe: &Path,
    dir: &Path,
    args: &[String],
    rate: u64,
    seconds: u64,
) -> Result<Running, Error> {
    let mut child = Command::new(exe)
        .arg("watch")
        .arg("--json")
        .args(["-e", "syscall"])
        .args(args)
        .arg("--")
        .arg(exe)
        .args([
            "bench",
            "watch-storm",
            &rate.to_string(),
            &seconds.to_string(),
        ])
        .env("TMPDIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| err(format!("starting kstate watch: {e}")))?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let out = child.stdout.take().ok_or_else(|| err("no stdout"))?;
    let mut stderr = child.stderr.take().ok_or_else(|| err("no stderr"))?;
    let errors = std::thread::spawn(move || {
        let mut e = String::new();
        let _ = stderr.read_to_string(&mut e);
        e
    });
    let s = Arc::clone(&seen);
    let reader = std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let now = mono_ns();
            let Ok(v) = serde_json::from_str::<Value>(&l) else {
                continue;
            };
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.lines += 1;
            for c in v["cpus"].as_array().into_iter().flatten() {
                s.events += c["events"].as_u64().unwrap_or(0);
                s.lost += c["lost"].as_u64().unwrap_or(0);
            }
            for a in v["alarms"].as_array().into_iter().flatten() {
                s.alarms += 1;
                if let Some(end) = a["end_ns"].as_u64() {
                    s.latencies.push(now.saturating_sub(end) as f64 / 1e9);
                }
            }
        }
    });
    Ok(Running {
        child,
        seen,
        reader,
        errors,
    })
}

/// One mode for `seconds`: bytes written to storage per second while it ran, and what
/// it left on disk at the end (its directory, its saves, its -o file).
fn mode(exe: &Path, dir: &Path, name: &str, rate: u64, seconds: u64) -> Result<Value, Error> {
    let work = dir.join(format!("mode-{name}"));
    std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    let save_dir = work.join("saves");
    std::fs::create_dir_all(&save_dir).map_err(|e| Error::io(&save_dir, e))?;
    let keep: Vec<String> = ["--keep", "30s", "--save-dir"]
        .iter()
        .map(|s| s.to_string())
        .chain([save_dir.display().to_string()])
        .collect();
    let out_file = work.join("w.dat");
    let args: Vec<String> = match name {
        "plain" => Vec::new(),
        "keep-memory" => keep,
        "keep-disk" => keep.into_iter().chain(["--keep-on-disk".into()]).collect(),
        "file" => vec!["-o".into(), out_file.display().to_string()],
        _ => return Err(err(format!("no mode {name}"))),
    };
    let Running {
        mut child,
        seen,
        reader,
        errors,
    } = start_watch(exe, &work, &args, rate, seconds)?;
    let pid = child.id();
    let t = Instant::now();
    // Counted from the second second: the start writes the capture's metadata once (a
    // copy of /proc/kallsyms), which is no rate.
    let mut first: Option<(u64, f64)> = None;
    let (mut wrote, mut at, mut peak_disk, mut peak_mem) = (0u64, 0.0f64, 0u64, 0u64);
    while child.try_wait().ok().flatten().is_none() {
        if let Some(w) = write_bytes(pid) {
            let now = t.elapsed().as_secs_f64();
            match first {
                None if now >= 2.0 => first = Some((w, now)),
                None => {}
                Some((w0, t0)) => (wrote, at) = (w - w0, now - t0),
            }
        }
        peak_disk = peak_disk.max(kstate_record::system::disk_use(&work));
        peak_mem = peak_mem.max(memfd_bytes(pid));
        std::thread::sleep(Duration::from_millis(500));
    }
    let st = child.wait().map_err(|e| err(e.to_string()))?;
    let errors = errors.join().unwrap_or_default();
    let _ = reader.join();
    if !st.success() {
        return Err(err(format!("watch ({name}) failed: {st}\n{errors}")));
    }
    let file_bytes = std::fs::metadata(&out_file).map_or(0, |m| m.len());
    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    let row = json!({
        "mode": name,
        "args": args.join(" "),
        "seconds": at,
        "write_bytes": wrote,
        "write_bytes_per_s": if at > 0.0 { wrote as f64 / at } else { 0.0 },
        "peak_disk_bytes": peak_disk,
        "peak_memory_file_bytes": peak_mem,
        "file_bytes": file_bytes,
        "events": s.events,
        "lost": s.lost,
    });
    let _ = std::fs::remove_dir_all(&work);
    Ok(row)
}

/// One scrape of the soak's metrics: the bytes of the answer, or why none.
fn scrape(port: u16) -> Result<usize, String> {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    write!(c, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    c.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    match answer.starts_with("HTTP/1.1 200") {
        true => Ok(answer.len()),
        false => Err(answer.lines().next().unwrap_or("").to_string()),
    }
}

fn percentile(v: &mut [f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(i.clamp(1, v.len()) - 1).copied()
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let base = a.dir.canonicalize().map_err(|e| Error::io(&a.dir, e))?;
    let dir = base.join(format!(".kstate-bench-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut modes = Vec::new();
    if a.mode_seconds > 0 {
        for name in ["plain", "keep-memory", "keep-disk", "file"] {
            eprintln!("kstate bench watch: {name} for {} s", a.mode_seconds);
            let row = mode(&exe, &dir, name, a.rate, a.mode_seconds)?;
            eprintln!("kstate bench watch: {row}");
            modes.push(row);
        }
    }
    let mut minutes = Vec::new();
    if a.minutes > 0 {
        let save_dir = dir.join("soak-saves");
        std::fs::create_dir_all(&save_dir).map_err(|e| Error::io(&save_dir, e))?;
        let args: Vec<String> = [
            "--keep",
            "30s",
            "--max-saves",
            "3",
            "--alarm",
            "syscall.max{name=clock_nanosleep} > 5ms",
            "--alarm-every",
            "1s",
            "--metrics",
            &format!("127.0.0.1:{}", a.metrics_port),
            "--save-dir",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([save_dir.display().to_string()])
        .collect();
        eprintln!(
            "kstate bench watch: soak for {} min: {}",
            a.minutes,
            args.join(" ")
        );
        // The storm outlasts the soak by a little; the watch is stopped at the end.
        let Running {
            mut child,
            seen,
            reader,
            errors,
        } = start_watch(&exe, &dir, &args, a.rate, a.minutes * 60 + 30)?;
        let pid = child.id();
        let start = Instant::now();
        let mut last = (
            cpu_s(pid).unwrap_or(0.0),
            write_bytes(pid).unwrap_or(0),
            0u64,
            0u64,
        );
        for m in 1..=a.minutes {
            let due = start + Duration::from_secs(60 * m);
            while Instant::now() < due {
                if child.try_wait().ok().flatten().is_some() {
                    let e = errors.join().unwrap_or_default();
                    return Err(err(format!("the soak's watch ended at minute {m}:\n{e}")));
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            let cpu = cpu_s(pid).unwrap_or(0.0);
            let wrote = write_bytes(pid).unwrap_or(0);
            let (events, lost, mut lat, alarms) = {
                let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
                let l = std::mem::take(&mut s.latencies);
                (s.events, s.lost, l, s.alarms)
            };
            let row = json!({
                "minute": m,
                "rss_kib": status_kib(pid, "VmRSS:"),
                "memory_file_kib": memfd_bytes(pid) >> 10,
                "disk_kib": kstate_record::system::disk_use(&dir) >> 10,
                "cpu_percent": (cpu - last.0) / 60.0 * 100.0,
                "write_bytes_per_s": (wrote.saturating_sub(last.1)) as f64 / 60.0,
                "events_per_s": (events - last.2) as f64 / 60.0,
                "lost": lost - last.3,
                "alarms": alarms,
                "alarm_latency_ms_p50": percentile(&mut lat, 50.0).map(|v| v * 1e3),
                "alarm_latency_ms_max": percentile(&mut lat, 100.0).map(|v| v * 1e3),
                "scrape_bytes": scrape(a.metrics_port).ok(),
            });
            last = (cpu, wrote, events, lost);
            eprintln!("kstate bench watch: {row}");
            minutes.push(row);
        }
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let _ = child.wait();
        let _ = errors.join();
        let _ = reader.join();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let result = json!({"rate": a.rate, "modes": modes, "minutes": minutes});
    if a.json {
        println!("{result}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "bytes written to storage per mode, {} getppid/s for {} s each:",
        a.rate, a.mode_seconds
    );
    println!(
        "{:<12} {:>14} {:>14} {:>14} {:>12}",
        "mode", "write B/s", "peak disk KiB", "peak mem KiB", "-o file MiB"
    );
    for m in &modes {
        println!(
            "{:<12} {:>14.0} {:>14} {:>14} {:>12}",
            m["mode"].as_str().unwrap_or(""),
            m["write_bytes_per_s"].as_f64().unwrap_or(0.0),
            m["peak_disk_bytes"].as_u64().unwrap_or(0) >> 10,
            m["peak_memory_file_bytes"].as_u64().unwrap_or(0) >> 10,
            m["file_bytes"].as_u64().unwrap_or(0) >> 20
        );
    }
    if !minutes.is_empty() {
        println!("\nsoak, per minute:");
        println!(
            "{:>4} {:>9} {:>10} {:>9} {:>6} {:>11} {:>10} {:>6} {:>9} {:>9}",
            "min",
            "RSS KiB",
            "memfd KiB",
            "disk KiB",
            "CPU %",
            "write B/s",
            "events/s",
            "lost",
            "lat p50",
            "lat max"
        );
        for m in &minutes {
            let ms = |k: &str| m[k].as_f64().map_or("-".into(), |v| format!("{v:.1}ms"));
            println!(
                "{:>4} {:>9} {:>10} {:>9} {:>6.1} {:>11.0} {:>10.0} {:>6} {:>9} {:>9}",
                m["minute"],
                m["rss_kib"],
                m["memory_file_kib"],
                m["disk_kib"],
                m["cpu_percent"].as_f64().unwrap_or(0.0),
                m["write_bytes_per_s"].as_f64().unwrap_or(0.0),
                m["events_per_s"].as_f64().unwrap_or(0.0),
                m["lost"],
                ms("alarm_latency_ms_p50"),
                ms("alarm_latency_ms_max")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
