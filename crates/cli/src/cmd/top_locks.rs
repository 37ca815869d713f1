//! `kstate top-locks FILE` or `kstate top-locks -- CMD ARGS`: the one-line answer to "are
//! my threads queueing on a user-space lock?" — for each futex word waited on, "threads
//! spent N % of their time waiting on <lock> taken from <caller>", from the `futex`
//! analyzer's waits and the trace's span.
//!
//! With a command, it is first recorded with the futex preset, task_newtask (thread
//! groups) and `--stacks` (the user call chain at every futex() call, and the mappings
//! that name the lock); a FILE is read as it is, with callers where it has the chains.
//!
//! N = the lock's total wait time (time in futex wait calls on it, which includes the wait
//! for a CPU after the wake-up: microstate splits that into LCK and LAT) / (the number of
//! threads that waited on it x the time analysed): the share of the waiting threads' time,
//! taken as the whole span (their lifetimes are not in futex events; `kstate analyze
//! microstate` has them when sched events were recorded). The lock is named as the futex
//! analyzer names it (a data symbol, `file+0xoffset`, or the address) with its process;
//! the caller shown is the one whose waits on it took longest, the others follow. Where
//! the recording has `--holds` (a command is recorded with it), how often and how long
//! each lock was held follows (pthread mutexes; glibc's internal locks, malloc's, are not
//! probed); where it has not, the header says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kstate_analyze::analyzer::{Config, LogRow, LogSink, Mode};
use kstate_analyze::analyzers;
use kstate_analyze::filter::{fmt_dur, parse_window, Filters, WindowSpec};
use kstate_format::{Error, ErrorKind};
use serde_json::json;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  kstate top-locks -- ./server --threads 32\n  kstate record -e futex,task:task_newtask --stacks -o t.dat -- ./server\n  kstate top-locks t.dat\n\nCallers come from user call chains unwound through the files' DWARF CFI from a copy of\nthe user stack (--stack-bytes of `kstate record`), so glibc's malloc and Rust's std keep\ntheir callers; a chain that shows only lock machinery gives [unknown caller]."
)]
pub struct Args {
    /// trace.dat recorded with futex events (`kstate record -e futex ...`, with --stacks
    /// for callers); not with a command
    #[arg(required_unless_present = "command", conflicts_with = "command")]
    file: Option<PathBuf>,
    /// Only the N most waited-on locks
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
    /// Callers shown per lock
    #[arg(long, value_name = "N", default_value_t = 3)]
    callers: usize,
    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pid: Vec<i32>,
    /// Only waits starting in FROM:TO (seconds from the trace start, as `analyze`)
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    window: Option<WindowSpec>,
    /// With a command: keep the recording in this file (default: a temporary file,
    /// removed afterwards)
    #[arg(short, long, value_name = "FILE", requires = "command")]
    output: Option<PathBuf>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
    /// The command to record (after `--`)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Default)]
struct Lock {
    waits: u64,
    wait_ns: u64,
    threads: BTreeMap<i32, String>,
    /// Caller -> (waits, wait time).
    callers: BTreeMap<String, (u64, u64)>,
}

/// Sums the futex analyzer's wait rows per lock and caller.
#[derive(Default)]
struct Sum {
    locks: BTreeMap<String, Lock>,
}

impl LogSink for Sum {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        // `LOCK wait` (by lock) or `LOCK wait from CALLER` (by caller).
        let (lock, caller) = match r.key.split_once(" wait from ") {
            Some((l, c)) => (l, Some(c)),
            None => match r.key.strip_suffix(" wait") {
                Some(l) => (l, None),
                None => return Ok(()),
            },
        };
        let l = self.locks.entry(lock.to_string()).or_default();
        l.waits += 1;
        l.wait_ns += r.value;
        l.threads.entry(r.tid).or_insert_with(|| r.comm.to_string());
        if let Some(c) = caller {
            let e = l.callers.entry(c.to_string()).or_default();
            e.0 += 1;
            e.1 += r.value;
        }
        Ok(())
    }
}

/// Sums the lockhold analyzer's holds per lock (`LOCK@PID`): count and time.
#[derive(Default)]
struct Holds {
    locks: BTreeMap<String, (u64, u64)>,
}

impl LogSink for Holds {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        let e = self.locks.entry(r.key.to_string()).or_default();
        e.0 += 1;
        e.1 += r.value;
        Ok(())
    }
}

/// Hold times per lock where the recording has `--holds`' probes; None where not.
fn holds(trace: &kstate_format::Trace, filters: &Filters) -> Result<Option<Holds>, Error> {
    if trace.events.find(analyzers::lockhold::LOCK).is_none() {
        return Ok(None);
    }
    let info = analyzers::find("lockhold").expect("lockhold analyzer");
    let mut cfg = Config::new(Mode::Log);
    cfg.filters = filters.clone();
    let mut h = Holds::default();
    (info.run)(trace, &cfg, &mut h)?;
    Ok(Some(h))
}

/// Records `command` with what the answer needs into `out`.
fn record(command: &[String], out: &Path) -> Result<(), Error> {
    let mut opts = kstate_record::Options::new(out.to_path_buf());
    opts.events = vec!["futex".into(), "task:task_newtask".into()];
    opts.command = command.to_vec();
    opts.stacks = true;
    opts.holds = true;
    opts.sysinfo_interval_ms = 0;
    opts.argv = std::env::args().collect();
    let mut notify = |m: &str| eprintln!("kstate: {m}");
    let s = kstate_record::record(&opts, &mut notify)
        .map_err(|e| Error::new(ErrorKind::Io, None, format!("recording: {e}")))?;
    if let Some(st) = s.workload_status.filter(|st| !st.success()) {
        eprintln!("kstate: the command exited with {st}");
    }
    if s.lost() > 0 {
        eprintln!("kstate: WARNING: {} events lost while recording", s.lost());
    }
    if let Some(x) = s.stacks.as_ref().filter(|x| x.lost > 0) {
        eprintln!(
            "kstate: WARNING: {} call chains lost while recording",
            x.lost
        );
    }
    Ok(())
}

/// Removes the temporary recording when the command is done with it.
struct Scratch(Option<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let (file, _scratch) = match &a.file {
        Some(f) => (f.clone(), Scratch(None)),
        None => {
            let (path, scratch) = match &a.output {
                Some(o) => (o.clone(), Scratch(None)),
                None => {
                    let p = std::env::temp_dir()
                        .join(format!("kstate-top-locks-{}.dat", std::process::id()));
                    (p.clone(), Scratch(Some(p)))
                }
            };
            record(&a.command, &path)?;
            (path, scratch)
        }
    };
    let trace = super::open(&file)?;
    let info = analyzers::find("futex").expect("futex analyzer");
    let filters = Filters {
        window: a.window,
        pids: a.pid.clone(),
        ..Filters::default()
    };
    let mut sum = Sum::default();
    // By caller where the recording has the call chains, else by lock alone.
    let mut cfg = Config::new(Mode::Log);
    cfg.filters = filters.clone();
    cfg.by = Some("caller".into());
    let o = match (info.run)(&trace, &cfg, &mut sum) {
        Ok(o) => o,
        Err(e) if e.kind == ErrorKind::Unsupported || e.msg.contains("--stacks") => {
            sum = Sum::default();
            let mut cfg = Config::new(Mode::Log);
            cfg.filters = filters.clone();
            (info.run)(&trace, &cfg, &mut sum)?
        }
        Err(e) => return Err(e),
    };
    let held = holds(&trace, &filters)?;
    let hold_of = |k: &str| {
        held.as_ref()
            .map(|h| h.locks.get(k).copied().unwrap_or((0, 0)))
    };
    let mut notes = o.notes.clone();
    if held.is_none() {
        notes.push("hold times: not recorded (kstate record --holds)".into());
    }
    let span = o.span.map_or(0, |(lo, hi)| hi - lo);
    let mut locks: Vec<(String, Lock)> = sum.locks.into_iter().collect();
    locks.sort_by(|x, y| y.1.wait_ns.cmp(&x.1.wait_ns).then(x.0.cmp(&y.0)));
    locks.truncate(a.top);
    let pct = |l: &Lock| {
        let d = l.threads.len() as f64 * span as f64;
        if d > 0.0 {
            l.wait_ns as f64 * 100.0 / d
        } else {
            0.0
        }
    };
    // Callers of a lock, longest waits first.
    fn callers(l: &Lock) -> Vec<(&String, &(u64, u64))> {
        let mut v: Vec<(&String, &(u64, u64))> = l.callers.iter().collect();
        v.sort_by(|x, y| y.1 .1.cmp(&x.1 .1).then(x.0.cmp(y.0)));
        v
    }
    let shown = match &a.file {
        Some(f) => f.display().to_string(),
        None => a.command.join(" "),
    };
    if a.json {
        let v = json!({
            "file": file.display().to_string(),
            "command": (!a.command.is_empty()).then_some(&a.command),
            "span_ns": span,
            "locks": locks.iter().map(|(k, l)| json!({
                "lock": k, "threads": l.threads.len(), "waits": l.waits,
                "wait_ns": l.wait_ns, "pct_of_thread_time": (pct(l) * 100.0).round() / 100.0,
                "holds": hold_of(k).map(|h| h.0), "hold_ns": hold_of(k).map(|h| h.1),
                "tids": l.threads.keys().collect::<Vec<_>>(),
                "callers": callers(l).iter().map(|(c, (n, ns))| json!({
                    "caller": c, "waits": n, "wait_ns": ns,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "lost_events": o.lost_total().0,
            "broken_by_loss": o.counts.broken_by_loss,
            "notes": notes,
        });
        println!("{v}");
    } else if locks.is_empty() {
        println!("no futex waits in {shown} ({} analysed)", fmt_dur(span));
    } else {
        // The answer comes first; what qualifies it follows as comments.
        for (k, l) in &locks {
            let comms: Vec<&str> = {
                let mut c: Vec<&str> = l.threads.values().map(String::as_str).collect();
                c.dedup();
                c
            };
            let cs = callers(l);
            let from = cs
                .first()
                .map(|(c, _)| format!(" taken from {c}"))
                .unwrap_or_default();
            println!(
                "threads spent {:.1} % of their time waiting on {k}{from} ({} thread{} of {}, {} waits, {} waiting in {} analysed)",
                pct(l),
                l.threads.len(),
                if l.threads.len() == 1 { "" } else { "s" },
                comms.join(","),
                l.waits,
                fmt_dur(l.wait_ns),
                fmt_dur(span),
            );
            // Held next to waited (plockstat -H with -C).
            if let Some((n, ns)) = hold_of(k).filter(|h| h.0 > 0) {
                println!(
                    "    held {n} times, {} in all, {} on average",
                    fmt_dur(ns),
                    fmt_dur(ns / n)
                );
            }
            if cs.len() > 1 {
                for (c, (n, ns)) in cs.iter().take(a.callers) {
                    println!(
                        "    {:5.1} %  {n:>7} waits  {:>10}  from {c}",
                        *ns as f64 * 100.0 / l.wait_ns.max(1) as f64,
                        fmt_dur(*ns),
                    );
                }
            }
        }
        for n in &notes {
            println!("# {n}");
        }
    }
    if o.any_loss() {
        eprintln!(
            "kstate: WARNING: events were lost; {} waits spanning a loss were dropped",
            o.counts.broken_by_loss
        );
    }
    if let Some(e) = o.errors.first() {
        return Err(Error::new(ErrorKind::Io, None, e.to_string()));
    }
    Ok(ExitCode::SUCCESS)
}
