//! What `kstate scale -o DIR` shows per run besides the verdict: the classifier's figures,
//! the sampled profile's top symbols, the kernel and user-space locks waited on, and the
//! block requests, each as a small table gathered from the run's recording.

use std::collections::HashSet;

use kstate_analyze::analyzer::Outcome;
use kstate_analyze::analyzers;
use kstate_analyze::filter::{fmt_dur, Filters};
use kstate_analyze::{Query, Source};
use kstate_format::Trace;
use kstate_render::scale::RunTable;
use kstate_views::profile;

use kstate_views::classify::Figures;

/// Rows per table.
const TOP: usize = 10;

/// The classifier's figures, as shown beside the verdict.
pub fn figures(f: &Figures) -> Vec<(String, String)> {
    let who = if f.scoped {
        "the command's threads"
    } else {
        "every thread"
    };
    vec![
        (
            "CPU busy".into(),
            format!(
                "{:.0} % of {} CPUs ({:.2} CPUs' worth) by {who}",
                f.cpu() * 100.0,
                f.cpus,
                f.cpus_worth()
            ),
        ),
        (
            "CPU demand".into(),
            format!(
                "{:.2} CPUs' worth (running or waiting for a CPU)",
                f.demand()
            ),
        ),
        (
            "lock wait".into(),
            format!(
                "{:.0} % of CPU time (kernel locks {}, futex {})",
                f.lock() * 100.0,
                fmt_dur(f.kernel_lock_ns),
                fmt_dur(f.futex_ns)
            ),
        ),
        (
            "I/O wait".into(),
            format!(
                "{:.0} % of CPU time (D state outside locks)",
                f.io() * 100.0
            ),
        ),
        (
            "disk busy".into(),
            format!(
                "{:.0} % of the time, {:.1} requests in flight on average, {} requests",
                f.disk() * 100.0,
                f.depth(),
                f.requests
            ),
        ),
    ]
}

/// The run's tables: profile (when sampled), kernel locks, user-space locks, block.
pub fn tables(source: &Source, scope: Option<&HashSet<i32>>, sampled: bool) -> Vec<RunTable> {
    let tids: Vec<i32> = scope
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    if sampled {
        out.push(profile_table(source.trace(), &tids));
    }
    out.push(analyzer_table(
        source,
        "lockwait",
        &tids,
        "kernel locks",
        "lock:contention_begin..end of the command's threads, per lock (the lockwait \
         analyzer), most total wait first.",
        "no kernel lock contention by the command",
        |_| true,
    ));
    out.push(analyzer_table(
        source,
        "futex",
        &tids,
        "user-space locks",
        "Time the command's threads spent in futex waits, per futex word (the futex \
         analyzer; kstate top-locks on the kept recording gives the share per thread).",
        "no futex waits by the command",
        |k| k.ends_with(" wait"),
    ));
    out.push(analyzer_table(
        source,
        "biotime",
        &[],
        "block requests",
        "Every block request of the machine, issue to complete, per device and direction \
         (the biotime analyzer): writeback is issued by kernel threads on the command's \
         behalf.",
        "no block requests during the run",
        |_| true,
    ));
    out
}

fn profile_table(trace: &Trace, tids: &[i32]) -> RunTable {
    let mut t = RunTable {
        title: "profile".into(),
        header: ["symbol", "share %", "samples", "image", "kind"]
            .map(String::from)
            .to_vec(),
        ..RunTable::default()
    };
    let opts = profile::Options {
        filters: Filters {
            tids: tids.to_vec(),
            ..Filters::default()
        },
        ..profile::Options::default()
    };
    match profile::profile(trace, &opts) {
        Ok(p) => {
            t.note = format!(
                "{} samples of the command's threads ({} in the file, {} lost), {} at {}; \
                 kernel {:.1} %, user {:.1} %.",
                p.samples,
                p.total_samples,
                p.lost,
                p.event,
                p.freq
                    .map_or_else(|| "its period".into(), |hz| format!("{hz} Hz")),
                share(p.kernel_samples, p.samples),
                share(p.user_samples, p.samples)
            );
            t.rows = p
                .rows
                .iter()
                .take(TOP)
                .map(|r| {
                    vec![
                        r.sym.name.clone(),
                        format!("{:.1}", p.share(r.period)),
                        r.samples.to_string(),
                        r.sym.image.clone(),
                        r.sym.kind.name().to_string(),
                    ]
                })
                .collect();
            t.empty = "no samples of the command".into();
        }
        Err(e) => t.empty = format!("no profile: {}", e.msg),
    }
    t
}

fn share(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

fn analyzer_table(
    source: &Source,
    name: &str,
    tids: &[i32],
    title: &str,
    note: &str,
    empty: &str,
    keep: impl Fn(&str) -> bool,
) -> RunTable {
    let mut t = RunTable {
        title: title.into(),
        note: note.into(),
        header: ["key", "count", "total", "avg", "max"]
            .map(String::from)
            .to_vec(),
        empty: empty.into(),
        ..RunTable::default()
    };
    let Some(info) = analyzers::find(name) else {
        t.empty = format!("no {name} analyzer");
        return t;
    };
    let filters = Filters {
        tids: tids.to_vec(),
        ..Filters::default()
    };
    let o: Outcome = match source.aggregate(&Query::of(info).filters(filters)) {
        Ok(o) => o,
        // The recording enabled the events: none of them in the file means none fired.
        Err(e) if e.not_applicable().is_some() => return t,
        Err(e) => {
            t.empty = format!("{name} failed: {e}");
            return t;
        }
    };
    let rows = o.rows;
    t.header[0] = o.by.to_string();
    t.rows = rows
        .iter()
        .filter(|r| keep(&r.key))
        .take(TOP)
        .map(|r| {
            let a = &r.agg;
            vec![
                r.key.clone(),
                a.count.to_string(),
                fmt_dur(a.total),
                fmt_dur(a.total.checked_div(a.count).unwrap_or(0)),
                fmt_dur(a.max),
            ]
        })
        .collect();
    t
}
