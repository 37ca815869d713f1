//! `kstate top-locks FILE`: the one-line answer to "are my threads queueing on a user-space
//! lock?" — for each futex word waited on, "threads spent N % of their time waiting on
//! <lock>", from the `futex` analyzer's waits and the trace's span.
//!
//! N = the lock's total wait time (time in futex wait calls on it, which includes the wait
//! for a CPU after the wake-up: microstate splits that into LCK and LAT) / (the number of
//! threads that waited on it x the time analysed): the share of the waiting threads' time, taken as the whole span (their
//! lifetimes are not in futex events; `kstate analyze microstate` has them when sched
//! events were recorded). The lock is `address@process` as the futex analyzer keys it;
//! callers need user call chains, which are not recorded yet.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use kstate_analyze::analyzer::{Config, LogRow, LogSink, Mode};
use kstate_analyze::analyzers;
use kstate_analyze::filter::{fmt_dur, parse_window, Filters, WindowSpec};
use kstate_format::{Error, ErrorKind};
use serde_json::json;

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat recorded with futex events (`kstate record -e futex ...`)
    file: PathBuf,
    /// Only the N most waited-on locks
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pid: Vec<i32>,
    /// Only waits starting in FROM:TO (seconds from the trace start, as `analyze`)
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    window: Option<WindowSpec>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Default)]
struct Lock {
    waits: u64,
    wait_ns: u64,
    threads: BTreeMap<i32, String>,
}

/// Sums the futex analyzer's wait rows per lock.
#[derive(Default)]
struct Sum {
    locks: BTreeMap<String, Lock>,
}

impl LogSink for Sum {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        if let Some(lock) = r.key.strip_suffix(" wait") {
            let l = self.locks.entry(lock.to_string()).or_default();
            l.waits += 1;
            l.wait_ns += r.value;
            l.threads.entry(r.tid).or_insert_with(|| r.comm.to_string());
        }
        Ok(())
    }
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let trace = super::open(&a.file)?;
    let info = analyzers::find("futex").expect("futex analyzer");
    let mut cfg = Config::new(Mode::Log);
    cfg.filters = Filters {
        window: a.window,
        pids: a.pid.clone(),
        ..Filters::default()
    };
    let mut sum = Sum::default();
    let o = (info.run)(&trace, &cfg, &mut sum)?;
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
    if a.json {
        let v = json!({
            "file": a.file.display().to_string(),
            "span_ns": span,
            "locks": locks.iter().map(|(k, l)| json!({
                "lock": k, "threads": l.threads.len(), "waits": l.waits,
                "wait_ns": l.wait_ns, "pct_of_thread_time": (pct(l) * 100.0).round() / 100.0,
                "tids": l.threads.keys().collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "lost_events": o.lost_total().0,
            "broken_by_loss": o.counts.broken_by_loss,
        });
        println!("{v}");
    } else if locks.is_empty() {
        println!(
            "no futex waits in {} ({} analysed)",
            a.file.display(),
            fmt_dur(span)
        );
    } else {
        for (k, l) in &locks {
            let comms: Vec<&str> = {
                let mut c: Vec<&str> = l.threads.values().map(String::as_str).collect();
                c.dedup();
                c
            };
            println!(
                "threads spent {:.1} % of their time waiting on {k} ({} thread{} of {}, {} waits, {} waiting in {} analysed)",
                pct(l),
                l.threads.len(),
                if l.threads.len() == 1 { "" } else { "s" },
                comms.join(","),
                l.waits,
                fmt_dur(l.wait_ns),
                fmt_dur(span),
            );
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
