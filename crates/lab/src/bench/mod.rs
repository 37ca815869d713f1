//! `kstate bench`: speed and memory figures, each measured next to a peer tool in the same
//! run on the same file, and reported as ratios — absolute numbers from a shared VM mean
//! little on their own.

pub mod chat;
pub mod colour;
pub mod io;
pub mod malloc;
pub mod overhead;
pub mod perfdata;
pub mod record;
pub mod sample;
pub mod stacks;
pub mod ui;
pub mod watch;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::Error;
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::value::FieldRef;
use kstate_format::Trace;

/// How many runs a benchmark takes.
pub const RUNS: std::ops::RangeInclusive<u64> = 1..=1000;
/// CPUs a workload can be pinned to (the size of a cpu_set_t).
pub const CPU: std::ops::RangeInclusive<u64> = 0..=1023;

#[derive(clap::Subcommand)]
pub enum Bench {
    /// Read speed: events decoded per second (common fields plus two fields of every event)
    /// on one thread and on every core, next to `trace-cmd report` (`perf script` for a
    /// perf.data) on the same file; peak memory of both.
    Read {
        /// trace.dat, capture directory or perf.data (use a large one: 10 million events
        /// or more)
        file: PathBuf,
        /// Passes of each tool; the fastest is reported
        #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<u32>(RUNS))]
        runs: u32,
        /// Skip the trace-cmd (perf script) comparison
        #[arg(long)]
        no_peer: bool,
        /// Print the result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Recording cost: a null-system-call loop untraced, with the events enabled but
    /// unread, under `kstate record` and under `perf record`, side by side
    Record(record::Args),
    /// Allocator scalability: the malloc_test harness (threads allocating and freeing in
    /// loops), loops per second per allocator (LD_PRELOAD) x threads x size, peak RSS
    Malloc(malloc::Args),
    /// Tracer overhead (the seed's LKST table): null syscall, stat, open/close, pipe and
    /// unix-socket round trips, fork+exit and context switch, ns per operation untraced,
    /// with the recorder attached recording nothing, `perf`, `perf` without lock events
    /// and `all`, with ratios to the untraced run and LKST's 2004 ratios
    Overhead(overhead::Args),
    /// The seeds' I/O study: iozone's initial write in 11 patterns (1-4 streams as
    /// processes, threads or separate commands) at each CPU count, throughput and CPU
    /// accounting, and with --classify the run's verdict (CPU-busy / I/O-bound / lock)
    Io(io::Args),
    /// One malloc_test measurement in this process (used by `bench malloc`)
    #[command(hide = true)]
    MallocPass(malloc::PassArgs),
    /// Analysis speed: `kstate analyze syscall --stat` (system-call time per call name,
    /// with percentiles) next to `trace-cmd report` piped into an awk script that pairs
    /// sys_enter/sys_exit per thread and sums per call number; wall time and peak RSS of
    /// both, same file, same run
    Analyze {
        /// trace.dat or capture directory with raw_syscalls events (e.g. from
        /// scripts/make-bench-trace), or sched events for runq and offcpu; a perf.data
        /// (syscall) is compared with `perf trace -s` and `perf script`
        file: PathBuf,
        /// The analyzer to time (syscall, runq, offcpu, ...); the trace-cmd|awk peer
        /// pairs system calls, for the others the peer is `trace-cmd report` alone
        #[arg(long, default_value = "syscall")]
        analyzer: String,
        /// Thread counts to time kstate at (`analyze --threads`), comma-separated;
        /// default: 1 and every core
        #[arg(long, value_delimiter = ',')]
        threads: Vec<usize>,
        /// Passes of kstate; the fastest is reported (the peer runs once: it is slow)
        #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<u32>(RUNS))]
        runs: u32,
        /// Skip the trace-cmd comparison
        #[arg(long)]
        no_peer: bool,
        /// Also time `perf script` on this perf.data, a perf recording of the same
        /// workload, and compare the rates (events per second): what a perf user would
        /// run to read every event of the same work
        #[arg(long, value_name = "PERF_DATA")]
        perf_script: Option<PathBuf>,
        /// Print the result as JSON
        #[arg(long)]
        json: bool,
    },
    /// One timed read pass in this process (used by `bench read` so each pass's memory is
    /// measured alone)
    #[command(hide = true)]
    ReadPass {
        file: PathBuf,
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// The seeds' chat benchmark (scheduler stress): rooms of users exchanging 100-byte
    /// messages over loopback TCP through a relay server, 4 threads per user; messages
    /// delivered per second, CPU user/sys
    Chat(chat::Args),
    /// Sampling overhead: a CPU loop and a system-call loop of fixed work, untraced, under
    /// `kstate record`, and under `kstate record --sample` at the default rate; run time,
    /// ratio to untraced, samples taken and the recorder's CPU
    Sample(sample::Args),
    /// What callers and hold times cost: `kstate profile`'s samples per second with and
    /// without stack copies (the cost of copying and unwinding a stack), and a mutex-heavy
    /// program's slowdown under `record --stacks` and `--stacks --holds`
    Stacks(stacks::Args),
    /// Seed 001's cache-colouring study: workers walking page-strided structures,
    /// uncoloured and with c colours; ns per visit, speed-up, the model's threshold
    /// c >= p / (s / stride) from the host's cache geometry, and simulated misses
    Colour(colour::Args),
    /// Browser UI responsiveness: `kstate ui`'s answer time per interaction (open, a new
    /// window, the same again, a key filter, a zoom) asked over HTTP as the page asks,
    /// next to the equivalent `kstate analyze` commands and `trace-cmd report | awk`;
    /// `--baseline` times another kstate binary in the same run
    Ui(ui::Args),
    /// One fixed-work run in this process (used by `bench sample`)
    #[command(hide = true)]
    SamplePass(sample::PassArgs),
    /// `kstate watch` for hours: bytes written per second by each way of keeping pages
    /// under the same system-call storm, then a soak (flight recorder, alarms, metrics)
    /// with RSS, memory, disk, CPU and alarm latency each minute
    Watch(watch::Args),
    /// The steady storm of `bench watch` (RATE getppid calls a second for SECONDS)
    #[command(hide = true)]
    WatchStorm(watch::StormArgs),
}

pub fn run(b: Bench) -> Result<ExitCode, Error> {
    match b {
        Bench::ReadPass { file, threads } => {
            let (events, checksum, secs) = read_pass(&file, threads)?;
            println!("{events} {checksum} {secs}");
            Ok(ExitCode::SUCCESS)
        }
        Bench::Record(a) => record::run(a),
        Bench::Malloc(a) => malloc::run(a),
        Bench::Overhead(a) => overhead::run(a),
        Bench::Io(a) => io::run(a),
        Bench::Chat(a) => chat::run(a),
        Bench::Colour(a) => colour::run(a),
        Bench::Sample(a) => sample::run(a),
        Bench::Stacks(a) => stacks::run(a),
        Bench::Ui(a) => ui::run(a),
        Bench::SamplePass(a) => sample::pass(a),
        Bench::Watch(a) => watch::run(a),
        Bench::WatchStorm(a) => watch::storm(a),
        Bench::MallocPass(a) => malloc::pass(a),
        Bench::Read {
            file,
            runs,
            no_peer,
            json,
        } => bench_read(&file, runs.max(1), no_peer, json),
        Bench::Analyze {
            file,
            analyzer,
            threads,
            runs,
            no_peer,
            perf_script,
            json,
        } => bench_analyze(
            &file,
            &analyzer,
            threads,
            runs.max(1),
            no_peer,
            perf_script.as_deref(),
            json,
        ),
    }
}

/// The pass every analyzer makes, at its cheapest: merge all CPUs, read pid, flags and
/// preempt count and the first two fields of each event. On several threads: a
/// perf.data's CPUs decoded each on its own thread, a trace.dat's time slices read side
/// by side (the sum does not care about order; the slices must meet, or one pass runs).
fn read_pass(file: &Path, threads: usize) -> Result<(u64, u64, f64), Error> {
    let trace = Trace::open(file)?;
    let refs: Vec<[Option<FieldRef>; 2]> = (0..trace.events.id_limit() as u32)
        .map(|id| {
            let f = trace.events.get(id).map(|e| &e.fields[..]).unwrap_or(&[]);
            [f.first().map(FieldRef::from), f.get(1).map(FieldRef::from)]
        })
        .collect();
    let read = |ev: &kstate_format::stream::merge::Event<'_>| {
        let common = ev.pid() as u64
            ^ ev.payload.get(2).copied().unwrap_or(0) as u64
            ^ ev.payload.get(3).copied().unwrap_or(0) as u64;
        let mut sum = common ^ ev.ts;
        if let Some(r) = refs.get(ev.id as usize) {
            for f in r.iter().flatten() {
                sum = sum.wrapping_add(f.get_u64(ev.payload, ev.endian).unwrap_or(0));
            }
        }
        sum
    };
    let start = Instant::now();
    let sliced = match threads > 1 {
        true => read_slices(&trace, threads, &read),
        false => None,
    };
    let (n, sum) = match sliced {
        Some(r) => r,
        None => {
            let mut m = Merger::threaded(&trace, None, IdFilter::all(), threads)?;
            let (mut n, mut sum) = (0u64, 0u64);
            while let Some(ev) = m.next()? {
                n += 1;
                sum = sum.wrapping_add(read(&ev));
            }
            (n, sum)
        }
    };
    if let Some(e) = trace.truncated {
        return Err(e.into());
    }
    Ok((n, sum, start.elapsed().as_secs_f64()))
}

/// [`read_pass`] over a trace.dat's time slices on `threads` threads; `None` where the
/// file cannot be cut or its slices do not meet.
fn read_slices(
    trace: &Trace,
    threads: usize,
    read: &(dyn Fn(&kstate_format::stream::merge::Event<'_>) -> u64 + Sync),
) -> Option<(u64, u64)> {
    use kstate_analyze::slices::{ordered, Seams, ShortSlices};
    let bytes: u64 = trace.cpu_data.iter().map(|c| c.file_bytes).sum();
    let slices = ShortSlices::plan(trace, (bytes / (threads as u64 * 4)).max(1) as usize)?;
    // A slice's events, their sum, and where it began and ended; `None` if it could not
    // be walked.
    let walk = |k: usize| -> Option<(u64, u64, Seams)> {
        let mut w = slices.walk(trace, IdFilter::all(), k).ok()?;
        let (mut n, mut sum) = (0u64, 0u64);
        while let Some(ev) = w.next().ok()? {
            n += 1;
            sum = sum.wrapping_add(read(&ev));
        }
        Some((n, sum, w.seams().ok()?))
    };
    let (mut n, mut sum) = (0u64, 0u64);
    let mut before: Option<Seams> = None;
    let mut whole = true;
    ordered(
        slices.len(),
        threads,
        slices.len(),
        || (),
        |_, k| walk(k),
        |_, r| {
            match r {
                Some((k, s, seams)) if before.as_ref().is_none_or(|b| b.meet(&seams)) => {
                    (n, sum) = (n + k, sum.wrapping_add(s));
                    before = Some(seams);
                }
                _ => whole = false,
            }
            whole
        },
    );
    whole.then_some((n, sum))
}

struct Measured {
    secs: f64,
    /// User plus system CPU time of the child.
    cpu_secs: f64,
    max_rss_kib: i64,
    stdout: String,
}

/// Runs a command with stdout captured (or discarded) and returns its wall time and the
/// peak RSS the kernel accounted to it alone.
fn measure(cmd: &mut Command, keep_stdout: bool) -> Result<Measured, Error> {
    // The child's stdout goes to a file with no name: a fixed name in a shared $TMPDIR
    // would be opened through whatever link another user planted there (issue 24).
    let tmp = std::env::temp_dir();
    let mut captured = match keep_stdout {
        true => Some(kstate_format::output::unnamed(&tmp).map_err(|e| Error::io(&tmp, e))?),
        false => None,
    };
    let out = match &captured {
        Some(f) => Stdio::from(f.try_clone().map_err(|e| Error::io(&tmp, e))?),
        None => Stdio::null(),
    };
    let start = Instant::now();
    let child = cmd
        .stdout(out)
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::failed(format!("cannot run {:?}: {e}", cmd.get_program())))?;
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let secs = start.elapsed().as_secs_f64();
    if r < 0 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(Error::failed(format!(
            "{:?} failed (status {status})",
            cmd.get_program()
        )));
    }
    let mut stdout = String::new();
    if let Some(f) = captured.as_mut() {
        use std::io::{Read, Seek};
        // The child wrote through its own copy of the descriptor; read from the start.
        let _ = f.rewind().and_then(|_| f.read_to_string(&mut stdout));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Measured {
        secs,
        cpu_secs: tv(ru.ru_utime) + tv(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss,
        stdout,
    })
}

fn bench_read(file: &Path, runs: u32, no_peer: bool, json: bool) -> Result<ExitCode, Error> {
    // The peers a user of the file has: trace-cmd for a trace.dat (its raw decode, and its
    // text), perf script for a perf.data (one tool for both).
    let perf = perfdata::is_perf_data(file);
    if !no_peer {
        match perf {
            true => require("perf", "linux-perf")?,
            false => require("trace-cmd", "trace-cmd")?,
        }
    }
    let exe = std::env::current_exe().map_err(|e| Error::failed(e.to_string()))?;
    let cores = kstate_analyze::slices::all_cores();
    // The read pass on one thread and on every core: (seconds, CPU seconds, events, RSS).
    let pass = |threads: usize| -> Result<(Measured, u64), Error> {
        let mut best: Option<(Measured, u64)> = None;
        for _ in 0..runs {
            let m = measure(
                Command::new(&exe)
                    .args(["bench", "read-pass", "--threads", &threads.to_string()])
                    .arg(file),
                true,
            )?;
            let events: u64 = m
                .stdout
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            // Whole-process wall time, as for the peer: opening the file counts too.
            if best.as_ref().is_none_or(|b| m.secs < b.0.secs) {
                best = Some((m, events));
            }
        }
        Ok(best.expect("runs >= 1"))
    };
    let (k1, events) = pass(1)?;
    let (kn, _) = pass(cores)?;
    let fastest = |cmd: &mut dyn FnMut() -> Command| -> Result<Measured, Error> {
        let mut best: Option<Measured> = None;
        for _ in 0..runs {
            let m = measure(&mut cmd(), false)?;
            if best.as_ref().is_none_or(|b| m.secs < b.secs) {
                best = Some(m);
            }
        }
        Ok(best.expect("runs >= 1"))
    };
    let (peer_name, text_name, key) = match perf {
        true => ("perf script", "perf script", "perf_script"),
        false => ("trace-cmd report -t -R", "trace-cmd report", "trace_cmd"),
    };
    let peer_cmd = |text: bool| {
        move || {
            let mut c = match perf {
                true => {
                    let mut c = Command::new("perf");
                    c.args(["script", "-i"]);
                    c
                }
                false => {
                    let mut c = Command::new("trace-cmd");
                    c.arg("report");
                    if !text {
                        c.args(["-t", "-R"]);
                    }
                    c.arg("-i");
                    c
                }
            };
            c.arg(file).stderr(Stdio::null());
            c
        }
    };
    let peer = match no_peer {
        true => None,
        false => Some(fastest(&mut peer_cmd(false))?),
    };
    // Text: `kstate dump` (trace-cmd's report text) against the peer's text, both into
    // /dev/null; on every core (the default) and on one.
    let k_text = fastest(&mut || {
        let mut c = Command::new(&exe);
        c.arg("dump").arg(file);
        c
    })?;
    let k_text1 = fastest(&mut || {
        let mut c = Command::new(&exe);
        c.args(["dump", "--threads", "1"]).arg(file);
        c
    })?;
    let p_text = match (no_peer, perf) {
        (true, _) => None,
        // perf script is the one text and decode peer: timed once above.
        (false, true) => peer.as_ref().map(|p| Measured {
            stdout: String::new(),
            ..*p
        }),
        (false, false) => Some(fastest(&mut peer_cmd(true))?),
    };
    let host_cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let rate = |m: &Measured| events as f64 / m.secs;
    if json {
        let peer_json = |p: &Measured| {
            serde_json::json!({
                "seconds": p.secs, "cpu_seconds": p.cpu_secs, "events_per_sec": rate(p),
                "max_rss_kib": p.max_rss_kib})
        };
        let mut v = serde_json::json!({
            "file": file.display().to_string(), "events": events, "cpu": host_cpu,
            "peer": peer_name,
            "kstate": {"seconds": k1.secs, "cpu_seconds": k1.cpu_secs, "events_per_sec": rate(&k1),
                "max_rss_kib": k1.max_rss_kib},
            "kstate_all_cores": {"threads": cores, "seconds": kn.secs, "cpu_seconds": kn.cpu_secs,
                "events_per_sec": rate(&kn), "max_rss_kib": kn.max_rss_kib},
            "speedup": peer.as_ref().map(|p| p.secs / k1.secs),
            "speedup_all_cores": peer.as_ref().map(|p| p.secs / kn.secs),
            "text": {
                "kstate": {"seconds": k_text.secs, "cpu_seconds": k_text.cpu_secs, "threads": cores},
                "kstate_one_thread": {"seconds": k_text1.secs, "cpu_seconds": k_text1.cpu_secs},
                "peer": text_name,
                "speedup": p_text.as_ref().map(|p| p.secs / k_text.secs),
                "speedup_one_thread": p_text.as_ref().map(|p| p.secs / k_text1.secs),
                "cpu_speedup": p_text.as_ref().map(|p| p.cpu_secs / k_text.cpu_secs),
            },
        });
        v[key] = peer.as_ref().map_or(serde_json::Value::Null, peer_json);
        v["text"][key] = p_text.as_ref().map_or(serde_json::Value::Null, peer_json);
        println!(
            "{}",
            serde_json::to_string_pretty(&v).expect("plain values")
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("file:    {}  ({events} events)", file.display());
    println!("machine: {host_cpu}, {cores} cores, best of {runs} runs\n");
    println!(
        "{:<34} {:>7} {:>9} {:>9} {:>14} {:>9}",
        "reader", "threads", "seconds", "CPU s", "events/s", "peak RSS"
    );
    let row = |name: &str, threads: usize, m: &Measured| {
        println!(
            "{:<34} {:>7} {:>9.3} {:>9.3} {:>14.0} {:>5} MiB",
            name,
            threads,
            m.secs,
            m.cpu_secs,
            rate(m),
            m.max_rss_kib / 1024
        );
    };
    row("kstate (common + 2 fields)", 1, &k1);
    row("kstate (common + 2 fields)", cores, &kn);
    if let Some(p) = &peer {
        row(peer_name, 1, p);
        println!(
            "\nkstate is {:.1}x {peer_name}'s rate on one thread, {:.1}x on {cores}",
            p.secs / k1.secs,
            p.secs / kn.secs
        );
    }
    println!(
        "\n{:<34} {:>7} {:>9} {:>9}",
        "text (report) into /dev/null", "threads", "seconds", "CPU s"
    );
    let text_row = |name: &str, threads: usize, m: &Measured| {
        println!(
            "{:<34} {:>7} {:>9.3} {:>9.3}",
            name, threads, m.secs, m.cpu_secs
        );
    };
    text_row("kstate dump", cores, &k_text);
    text_row("kstate dump", 1, &k_text1);
    if let Some(p) = &p_text {
        text_row(text_name, 1, p);
        println!(
            "\nkstate dump is {:.1}x {text_name}'s speed on {cores} threads, {:.1}x on one \
             ({:.1}x in CPU time)",
            p.secs / k_text.secs,
            p.secs / k_text1.secs,
            p.cpu_secs / k_text.cpu_secs
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The peer of `bench analyze`: pairs raw sys_enter/sys_exit per thread from
/// `trace-cmd report -t -R` and prints `NR COUNT TOTAL_NS` per call number.
const AWK_SYSCALL: &str = r#"
{
    for (i = 1; i <= NF; i++) if ($i ~ /^\[[0-9]+\]$/) break;
    if (i > NF) next;
    tid = $(i - 1); sub(/.*-/, "", tid);
    ts = $(i + 1); sub(/:$/, "", ts); split(ts, p, "."); ns = p[1] * 1000000000 + p[2];
    ev = $(i + 2); id = $(i + 3); sub(/^id=/, "", id);
    if (ev == "sys_enter:") { start[tid] = ns; nr[tid] = id }
    else if (ev == "sys_exit:" && (tid in start) && nr[tid] == id) {
        cnt[id]++; tot[id] += ns - start[tid]; delete start[tid]
    }
}
END { for (k in cnt) printf "%s %d %.0f\n", k, cnt[k], tot[k] }
"#;

fn bench_analyze(
    file: &Path,
    analyzer: &str,
    mut threads: Vec<usize>,
    runs: u32,
    no_peer: bool,
    perf_script: Option<&Path>,
    json: bool,
) -> Result<ExitCode, Error> {
    // Checked before any run: a wrong file is named at once, not after the timings.
    if let Some(p) = perf_script {
        if perfdata::is_perf_data(file) {
            return Err(Error::failed(format!(
                "--perf-script compares a trace.dat with a perf recording; {} is a perf.data already (its bench times perf script on it)",
                file.display()
            )));
        }
        perfdata::check_perf_data(p)?;
        require("perf", "linux-perf")?;
    }
    // A perf.data's peers are perf's own tools (one thread: the peers have one).
    if analyzer == "syscall" && perfdata::is_perf_data(file) {
        return perfdata::analyze(file, runs, no_peer, json);
    }
    if !no_peer {
        require("trace-cmd", "trace-cmd")?;
    }
    let exe = std::env::current_exe().map_err(|e| Error::failed(e.to_string()))?;
    if threads.is_empty() {
        let all = std::thread::available_parallelism().map_or(1, |n| n.get());
        threads = vec![1, all];
        threads.dedup();
    }
    // Per thread count: the fastest of the runs, and its JSON (the same for every count:
    // checked, since a faster wrong answer is no answer).
    let mut rows: Vec<(usize, Measured)> = Vec::new();
    let mut first_json: Option<String> = None;
    for &t in &threads {
        let mut best: Option<Measured> = None;
        for _ in 0..runs {
            let m = measure(
                Command::new(&exe)
                    .args([
                        "analyze",
                        analyzer,
                        "--stat",
                        "--format",
                        "json",
                        "--threads",
                    ])
                    .arg(t.to_string())
                    .arg(file),
                true,
            )?;
            if best.as_ref().is_none_or(|b| m.secs < b.secs) {
                best = Some(m);
            }
        }
        let m = best.expect("runs >= 1");
        match &first_json {
            None => first_json = Some(m.stdout.clone()),
            Some(j) if *j != m.stdout => {
                return Err(Error::failed(format!(
                "kstate analyze {analyzer} --threads {t} printed other results than --threads {}",
                threads[0]
            )))
            }
            Some(_) => {}
        }
        rows.push((t, m));
    }
    let v: serde_json::Value = serde_json::from_str(first_json.as_deref().unwrap_or(""))
        .map_err(|e| Error::failed(format!("kstate analyze printed invalid JSON: {e}")))?;
    let events = v["events_read"].as_u64().unwrap_or(0);
    let pairs = v["pairs"]["selected"].as_u64().unwrap_or(0);
    let syscall = analyzer == "syscall";
    let peer = if no_peer {
        None
    } else {
        let quoted = file.display().to_string().replace('\'', "'\\''");
        let script = match syscall {
            true => format!("trace-cmd report -t -R -i '{quoted}' | awk '{AWK_SYSCALL}'"),
            false => format!("trace-cmd report -t -R -i '{quoted}' > /dev/null"),
        };
        let m = measure(&mut pipeline(&script), true)?;
        let peer_pairs: Option<u64> = syscall.then(|| {
            m.stdout
                .lines()
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        });
        Some((m, peer_pairs))
    };
    let peer_name = match syscall {
        true => "trace-cmd report -t -R | awk",
        false => "trace-cmd report -t -R (no analysis)",
    };
    let script = perf_script.map(perfdata::script_rate).transpose()?;
    let one = rows.first().map_or(1.0, |(_, m)| m.secs);
    if json {
        let out = serde_json::json!({
            "file": file.display().to_string(), "analyzer": analyzer, "events": events,
            "pairs": pairs,
            "kstate": rows.iter().map(|(t, m)| serde_json::json!({
                "threads": t, "seconds": m.secs, "cpu_seconds": m.cpu_secs,
                "events_per_sec": events as f64 / m.secs, "max_rss_kib": m.max_rss_kib,
                "speedup_vs_first": one / m.secs})).collect::<Vec<_>>(),
            "peer": peer.as_ref().map(|(p, n)| serde_json::json!({
                "command": peer_name, "seconds": p.secs, "cpu_seconds": p.cpu_secs,
                "events_per_sec": events as f64 / p.secs,
                "max_rss_kib": p.max_rss_kib, "pairs": n})),
            "perf_script": script.as_ref().map(|(events, m)| serde_json::json!({
                "file": perf_script.map(|p| p.display().to_string()), "events": events,
                "seconds": m.secs, "cpu_seconds": m.cpu_secs,
                "events_per_sec": *events as f64 / m.secs, "max_rss_kib": m.max_rss_kib})),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("plain values")
        );
    } else {
        println!(
            "file:    {}  ({events} events, {pairs} pairs selected)",
            file.display()
        );
        println!(
            "task:    kstate analyze {analyzer} --stat: count, total, min, max, p50, p99 per key"
        );
        println!(
            "runs:    kstate best of {runs} per thread count; the peer runs once (it is slow)\n"
        );
        println!(
            "{:<40} {:>7} {:>9} {:>9} {:>14} {:>8} {:>10}",
            "analyzer", "threads", "seconds", "CPU s", "events/s", "x 1st", "peak RSS"
        );
        for (t, m) in &rows {
            println!(
                "{:<40} {:>7} {:>9.3} {:>9.3} {:>14.0} {:>8.2} {:>6} MiB",
                format!("kstate analyze {analyzer}"),
                t,
                m.secs,
                m.cpu_secs,
                events as f64 / m.secs,
                one / m.secs,
                m.max_rss_kib / 1024
            );
        }
        if let Some((p, n)) = &peer {
            println!(
                "{:<40} {:>7} {:>9.3} {:>9.3} {:>14.0} {:>8} {:>6} MiB",
                peer_name,
                "-",
                p.secs,
                p.cpu_secs,
                events as f64 / p.secs,
                "",
                p.max_rss_kib / 1024
            );
            let best = rows.iter().map(|(_, m)| m.secs).fold(f64::MAX, f64::min);
            print!(
                "\nkstate (fastest row) is {:.1}x the peer's rate",
                p.secs / best
            );
            match n {
                Some(n) => println!("; pairs: kstate {pairs}, awk {n}"),
                None => println!(),
            }
        }
        if let (Some((n, m)), Some(f)) = (&script, perf_script) {
            let rate = *n as f64 / m.secs;
            let best = rows
                .iter()
                .map(|(_, m)| events as f64 / m.secs)
                .fold(0.0, f64::max);
            println!(
                "\nperf script on {}: {n} events in {:.3} s ({rate:.0} events/s, {} MiB peak)",
                f.display(),
                m.secs,
                m.max_rss_kib / 1024
            );
            println!(
                "kstate (fastest row) reads {:.1}x as many events per second as perf script",
                best / rate
            );
        }
        // Seconds of CPU per second of wall time in the one-thread run: below 1 the
        // machine did not give this run a whole core (other work), and thread speed-ups
        // are understated.
        if let Some((1, m)) = rows.first() {
            println!(
                "machine: the 1-thread run got {:.2} CPUs ({:.3} s CPU in {:.3} s)",
                m.cpu_secs / m.secs,
                m.cpu_secs,
                m.secs
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A peer's shell pipeline, run by bash with `pipefail`. Under `sh` a pipeline's status is
/// its last command's, so a `trace-cmd` that failed before `| awk` was timed as a fast,
/// successful run of an empty trace.
pub(super) fn pipeline(script: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg("-c").arg(format!("set -o pipefail; {script}"));
    c
}

/// Fails plainly, before any timing, when a peer tool is not on the PATH.
pub(super) fn require(tool: &str, package: &str) -> Result<(), Error> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    match std::env::split_paths(&path).any(|d| d.join(tool).is_file()) {
        true => Ok(()),
        false => Err(Error::failed(format!(
            "{tool} is not installed (the peer this benchmark compares with): apt-get install {package}, or pass --no-peer"
        ))),
    }
}

/// Runs `cmd` to completion and returns its stdout; a failure names the program, its
/// exit status and its stderr. Shared by the benchmarks that run kstate, perf and
/// workloads as child processes.
pub(super) fn run_cmd(cmd: &mut Command) -> Result<String, Error> {
    let out = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::failed(format!("cannot run {:?}: {e}", cmd.get_program())))?;
    if !out.status.success() {
        return Err(Error::failed(format!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
