//! `kstate bench malloc --locks`: seed 002's plockstat view. Per allocator, the harness
//! runs once more under the recorder, as `kstate top-locks -- CMD` records (futex
//! events, new threads, `--stacks` for the callers, `--holds` for pthread mutex hold
//! times), and kstate_views::locks::top_locks summarises it: the most waited-on lock,
//! the share of the waiting threads' time spent waiting on it and holding it, and its
//! top callers.
//!
//! glibc's malloc locks its arenas with its internal lll_lock, not a pthread mutex, so
//! the hold probes never see main_arena: its hold is reported as not seen, never as 0.
//! The harness child writes its result to a file (`malloc-pass --result`), since its
//! standard output is the terminal's while it is recorded.

use std::path::{Path, PathBuf};

use crate::Error;
use kstate_analyze::filter::Filters;
use kstate_analyze::Source;
use kstate_views::locks::{self, Lock};
use serde_json::{json, Value};

/// Callers shown per lock.
const CALLERS: usize = 3;

/// One allocator's lock view.
pub struct View {
    pub allocator: String,
    pub threads: usize,
    pub size: usize,
    /// The most waited-on lock the workers waited on; None when they waited on none.
    pub top: Option<Lock>,
    pub span_ns: u64,
    pub holds_recorded: bool,
    pub notes: Vec<String>,
    /// What the harness child printed (its libs are checked by the caller).
    pub result: Value,
}

/// Removes the scratch files on every way out.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn err(msg: String) -> Error {
    Error::failed(msg)
}

/// Records `pass` (the harness child's arguments after the executable) under
/// `preload` (None: the C library's malloc) and summarises its locks.
pub fn view(
    allocator: &str,
    preload: Option<&str>,
    threads: usize,
    size: usize,
    pass: &[String],
) -> Result<View, Error> {
    let exe = std::env::current_exe().map_err(|e| err(format!("kstate's own path: {e}")))?;
    let tag = format!("{}-{allocator}", std::process::id()).replace('/', "_");
    let dir = std::env::temp_dir();
    let dat = dir.join(format!("kstate-bench-malloc-locks-{tag}.dat"));
    let res = dir.join(format!("kstate-bench-malloc-locks-{tag}.json"));
    let _scratch = Scratch(vec![dat.clone(), res.clone()]);
    // env(1) sets the preload for the harness alone (the recorder takes no environment);
    // it execs the harness, so the process recorded is the harness's.
    let mut command = vec!["env".to_string()];
    match preload {
        Some(so) => command.push(format!("LD_PRELOAD={so}")),
        None => command.extend(["-u".into(), "LD_PRELOAD".into()]),
    }
    command.push(exe.display().to_string());
    command.extend(pass.iter().cloned());
    command.extend(["--result".into(), res.display().to_string()]);
    record(&command, &dat)?;
    let text = std::fs::read_to_string(&res).map_err(|e| {
        err(format!(
            "the recorded harness under {allocator} left no result in {}: {e}",
            res.display()
        ))
    })?;
    let result: Value = serde_json::from_str(text.trim())
        .map_err(|e| err(format!("{}: not the harness's JSON: {e}", res.display())))?;
    let source = Source::open(&dat)?;
    let t = locks::top_locks(&source, &Filters::default())?;
    if let Some(e) = t.futex.errors.first() {
        return Err(err(format!("{}: {e}", dat.display())));
    }
    let mut notes = t.notes;
    if t.futex.any_loss() {
        notes.push(format!(
            "events were lost; {} waits spanning a loss were dropped",
            t.futex.counts.broken_by_loss
        ));
    }
    Ok(View {
        allocator: allocator.to_string(),
        threads,
        size,
        top: t.locks.into_iter().find(|l| !main_thread_only(l)),
        span_ns: t.span_ns,
        holds_recorded: t.holds_recorded,
        notes,
        result,
    })
}

/// Whether only the harness's main thread waited on `l`: it samples and then joins the
/// workers, so its futex waits (a worker's exit, under allocators without contention)
/// are not the allocator's.
fn main_thread_only(l: &Lock) -> bool {
    let pid = l
        .name
        .rsplit_once('@')
        .and_then(|(_, p)| p.parse::<i32>().ok());
    pid.is_some() && l.threads.keys().all(|&tid| Some(tid) == pid)
}

/// Records `command` as `kstate top-locks -- CMD` does into `out`.
fn record(command: &[String], out: &Path) -> Result<(), Error> {
    let mut opts = kstate_record::Options::new(out.to_path_buf());
    opts.events = vec!["futex".into(), "task:task_newtask".into()];
    opts.command = command.to_vec();
    opts.stacks = true;
    opts.holds = true;
    opts.sysinfo_interval_ms = 0;
    opts.argv = std::env::args().collect();
    // The recorder's progress would interleave with the table; failures are errors.
    let mut quiet = |_: &str| {};
    let s = kstate_record::record(&opts, &mut quiet)
        .map_err(|e| err(format!("recording the harness: {e}")))?;
    if let Some(st) = s.workload_status.filter(|st| !st.success()) {
        return Err(err(format!("the recorded harness exited with {st}")));
    }
    Ok(())
}

fn pct(p: f64) -> f64 {
    (p * 100.0).round() / 100.0
}

impl View {
    pub fn json(&self) -> Value {
        let span = self.span_ns;
        json!({
            "allocator": self.allocator, "threads": self.threads, "size": self.size,
            "span_ns": span, "holds_recorded": self.holds_recorded,
            "top_lock": self.top.as_ref().map(|l| json!({
                "lock": l.name, "threads": l.threads.len(), "waits": l.waits,
                "wait_ns": l.wait_ns, "wait_pct_of_thread_time": pct(l.wait_pct(span)),
                "holds": l.hold.map(|h| h.0), "hold_ns": l.hold.map(|h| h.1),
                "hold_pct_of_thread_time": l.hold_pct(span).map(pct),
                "hold_note": (self.holds_recorded && l.hold.is_none()).then_some(locks::HOLD_NOT_SEEN),
                "callers": l.callers.iter().take(CALLERS).map(|(c, n, ns)| json!({
                    "caller": c, "waits": n, "wait_ns": ns,
                })).collect::<Vec<_>>(),
            })),
            // Under the recorder: the probes cost (uprobes on every pthread mutex call).
            "loops_per_sec_recorded": self.result["loops_per_sec"],
            "notes": self.notes,
        })
    }

    /// The view as text lines (no trailing newline).
    pub fn text(&self) -> Vec<String> {
        let head = format!(
            "{} ({} threads, size {})",
            self.allocator, self.threads, self.size
        );
        let Some(l) = &self.top else {
            return vec![format!("{head}: no harness thread waited on a lock")];
        };
        let hold = match (l.hold_pct(self.span_ns), self.holds_recorded) {
            (Some(p), _) => format!("hold {p:.1} %"),
            (None, true) => "hold: not seen by the probes".into(),
            (None, false) => "hold: not recorded".into(),
        };
        let mut v = vec![format!(
            "{head}: top lock {}: wait {:.1} % of thread time, {hold}",
            l.name,
            l.wait_pct(self.span_ns)
        )];
        if l.callers.is_empty() {
            v.push("    callers: none unwound".into());
        }
        for (c, n, ns) in l.callers.iter().take(CALLERS) {
            v.push(format!(
                "    {:5.1} %  {n:>7} waits  from {c}",
                *ns as f64 * 100.0 / l.wait_ns.max(1) as f64
            ));
        }
        v
    }
}
