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
//! probed: 'hold: not seen by the probes', and null in --json, never 0); where it has
//! not, the notes say so, and what the file says about kernel lock hold times. The
//! summary itself is kstate_views::locks::top_locks.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::filter::{fmt_dur, parse_window, Filters, WindowSpec};
use kstate_views::locks;
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
        .map_err(|e| Error::Failed(format!("recording: {e}")))?;
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
    let source = super::source(&file)?;
    let filters = Filters {
        window: a.window,
        pids: a.pid.clone(),
        ..Filters::default()
    };
    let mut t = locks::top_locks(&source, &filters)?;
    let span = t.span_ns;
    t.locks.truncate(a.top);
    let shown = match &a.file {
        Some(f) => f.display().to_string(),
        None => a.command.join(" "),
    };
    let o = &t.futex;
    if a.json {
        let v = json!({
            "file": file.display().to_string(),
            "command": (!a.command.is_empty()).then_some(&a.command),
            "span_ns": span,
            "holds_recorded": t.holds_recorded,
            "locks": t.locks.iter().map(|l| json!({
                "lock": l.name, "threads": l.threads.len(), "waits": l.waits,
                "wait_ns": l.wait_ns,
                "pct_of_thread_time": (l.wait_pct(span) * 100.0).round() / 100.0,
                // Absent from the probes' view is not zero: null, and why.
                "holds": l.hold.map(|h| h.0), "hold_ns": l.hold.map(|h| h.1),
                "hold_pct_of_thread_time": l.hold_pct(span).map(|p| (p * 100.0).round() / 100.0),
                "hold_note": (t.holds_recorded && l.hold.is_none()).then_some(locks::HOLD_NOT_SEEN),
                "tids": l.threads.keys().collect::<Vec<_>>(),
                "callers": l.callers.iter().map(|(c, n, ns)| json!({
                    "caller": c, "waits": n, "wait_ns": ns,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "lost_events": o.lost_total().0,
            "broken_by_loss": o.counts.broken_by_loss,
            "notes": t.notes,
        });
        println!("{v}");
    } else if t.locks.is_empty() {
        println!("no futex waits in {shown} ({} analysed)", fmt_dur(span));
        for n in &t.notes {
            println!("# {n}");
        }
    } else {
        // The answer comes first; what qualifies it follows as comments.
        for l in &t.locks {
            let comms: Vec<&str> = {
                let mut c: Vec<&str> = l.threads.values().map(String::as_str).collect();
                c.dedup();
                c
            };
            let from = l
                .callers
                .first()
                .map(|(c, _, _)| format!(" taken from {c}"))
                .unwrap_or_default();
            println!(
                "threads spent {:.1} % of their time waiting on {}{from} ({} thread{} of {}, {} waits, {} waiting in {} analysed)",
                l.wait_pct(span),
                l.name,
                l.threads.len(),
                if l.threads.len() == 1 { "" } else { "s" },
                comms.join(","),
                l.waits,
                fmt_dur(l.wait_ns),
                fmt_dur(span),
            );
            // Held next to waited (plockstat -H with -C).
            match l.hold {
                Some((n, ns)) if n > 0 => println!(
                    "    held {n} times, {} in all, {} on average",
                    fmt_dur(ns),
                    fmt_dur(ns / n)
                ),
                None if t.holds_recorded => println!("    hold: {}", locks::HOLD_NOT_SEEN),
                _ => {}
            }
            if l.callers.len() > 1 {
                for (c, n, ns) in l.callers.iter().take(a.callers) {
                    println!(
                        "    {:5.1} %  {n:>7} waits  {:>10}  from {c}",
                        *ns as f64 * 100.0 / l.wait_ns.max(1) as f64,
                        fmt_dur(*ns),
                    );
                }
            }
        }
        for n in &t.notes {
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
        return Err(Error::Failed(e.to_string()));
    }
    Ok(ExitCode::SUCCESS)
}
