//! `kstate info`: what a trace holds, read in one streaming pass.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use kstate_analyze::merge::{IdFilter, Merger};
use kstate_format::{Container, Error, ErrorKind, Trace};
use serde_json::json;

use crate::timefmt::fmt_secs;

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat (v6/v7) file or raw tracefs capture directory
    file: PathBuf,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Default, Clone)]
struct CpuInfo {
    events: u64,
    first_ts: Option<u64>,
    last_ts: Option<u64>,
}

/// Everything `info` reports, gathered once and printed as text or JSON.
struct Report<'t> {
    trace: &'t Trace,
    cpus: BTreeMap<u32, CpuInfo>,
    lost: BTreeMap<u32, (u64, bool)>,
    pages: BTreeMap<u32, u64>,
    by_event: BTreeMap<String, u64>,
    unknown_ids: u64,
    errors: Vec<Error>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let trace = super::open(&args.file)?;
    let report = scan(&trace)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).expect("JSON of plain values")
        );
    } else {
        print!("{}", report.text());
    }
    for e in &report.errors {
        eprintln!("kstate: {e}");
    }
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::EXIT_BAD_INPUT)
    })
}

fn scan(trace: &Trace) -> Result<Report<'_>, Error> {
    let mut cpus: BTreeMap<u32, CpuInfo> = BTreeMap::new();
    let mut counts = vec![0u64; trace.events.id_limit()];
    let mut unknown_ids = 0;
    let mut errors: Vec<Error> = trace.truncated.iter().cloned().collect();
    let mut merger = Merger::new(trace, None, IdFilter::all())?;
    loop {
        match merger.next() {
            Ok(Some(ev)) => {
                let c = cpus.entry(ev.cpu).or_default();
                c.events += 1;
                c.first_ts.get_or_insert(ev.ts);
                c.last_ts = Some(ev.ts);
                match counts.get_mut(ev.id as usize) {
                    Some(n) if trace.events.get(ev.id).is_some() => *n += 1,
                    _ => unknown_ids += 1,
                }
            }
            Ok(None) => break,
            // A damaged CPU stream ends; the others go on, and the report says what happened.
            Err(e) => {
                if !errors
                    .iter()
                    .any(|x| x.msg == e.msg && x.offset == e.offset)
                {
                    errors.push(e);
                }
            }
        }
    }
    let mut lost = BTreeMap::new();
    let mut pages = BTreeMap::new();
    for (cpu, t) in merger.totals() {
        lost.insert(cpu, (t.lost_counted, t.lost_unknown > 0));
        pages.insert(cpu, t.pages);
    }
    let by_event = trace
        .events
        .iter()
        .filter(|e| counts[e.id as usize] > 0)
        .map(|e| (e.name.clone(), counts[e.id as usize]))
        .collect();
    if unknown_ids > 0 {
        errors.push(
            Error::new(
                ErrorKind::Corrupt,
                None,
                format!("{unknown_ids} events have an id with no event format"),
            )
            .in_file(&trace.path),
        );
    }
    Ok(Report {
        trace,
        cpus,
        lost,
        pages,
        by_event,
        unknown_ids,
        errors,
    })
}

impl Report<'_> {
    fn total(&self) -> u64 {
        self.cpus.values().map(|c| c.events).sum()
    }
    fn first_ts(&self) -> Option<u64> {
        self.cpus.values().filter_map(|c| c.first_ts).min()
    }
    fn last_ts(&self) -> Option<u64> {
        self.cpus.values().filter_map(|c| c.last_ts).max()
    }
    fn truncated(&self) -> bool {
        self.errors.iter().any(|e| e.kind == ErrorKind::Truncated)
    }
    fn lost_total(&self) -> u64 {
        self.lost.values().map(|(n, _)| n).sum()
    }
    fn bytes(&self, cpu: u32) -> u64 {
        self.trace
            .cpu_data
            .iter()
            .filter(|c| c.cpu == cpu)
            .map(|c| c.file_bytes)
            .sum()
    }
    fn kind(&self) -> (String, Option<u32>, Option<String>) {
        match &self.trace.container {
            Container::TraceDat {
                version,
                compression,
            } => ("trace.dat".into(), Some(*version), compression.clone()),
            Container::RawDir => ("raw tracefs capture".into(), None, None),
        }
    }

    fn json(&self) -> serde_json::Value {
        let t = self.trace;
        let (kind, version, compression) = self.kind();
        let lost: serde_json::Map<String, serde_json::Value> = self
            .lost
            .iter()
            .map(|(cpu, (n, unknown))| {
                (
                    cpu.to_string(),
                    if *unknown { json!(null) } else { json!(n) },
                )
            })
            .collect();
        let per_cpu: Vec<_> = self
            .lost
            .keys()
            .map(|cpu| {
                let c = self.cpus.get(cpu).cloned().unwrap_or_default();
                let (n, unknown) = self.lost[cpu];
                json!({
                    "cpu": cpu, "events": c.events, "first_ts": c.first_ts, "last_ts": c.last_ts,
                    "lost": if unknown { json!(null) } else { json!(n) },
                    "bytes": self.bytes(*cpu), "pages": self.pages.get(cpu),
                })
            })
            .collect();
        json!({
            "file": t.path.display().to_string(),
            "kind": kind, "version": version, "compression": compression,
            "endian": format!("{:?}", t.endian).to_lowercase(), "long_size": t.long_size,
            "page_size": t.layout.page_size, "clock": t.clock, "uname": t.uname,
            "tool_version": t.tool_version,
            "cpus": t.cpu_count, "events": self.total(),
            "event_counts": self.by_event, "event_formats": t.events.iter().count(),
            "first_ts": self.first_ts(), "last_ts": self.last_ts(),
            "lost_events": lost, "lost_total": self.lost_total(),
            "lost_unknown_cpus": self.lost.values().filter(|(_, u)| *u).count(),
            "unknown_event_ids": self.unknown_ids,
            "truncated": self.truncated(),
            "errors": self.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            "per_cpu": per_cpu,
        })
    }

    fn text(&self) -> String {
        use std::fmt::Write;
        let t = self.trace;
        let (kind, version, compression) = self.kind();
        let mut s = String::new();
        let _ = writeln!(s, "file:        {}", t.path.display());
        let mut k = kind;
        if let Some(v) = version {
            let _ = write!(k, " v{v}");
        }
        if let Some(c) = compression.filter(|c| c != "none") {
            let _ = write!(k, ", {c}-compressed");
        }
        let _ = writeln!(s, "kind:        {k}");
        if let Some(u) = &t.uname {
            let _ = writeln!(s, "kernel:      {u}");
        }
        let endian = format!("{:?}", t.endian).to_lowercase();
        let _ = writeln!(
            s,
            "machine:     {endian}-endian, {}-bit long, {}-byte pages",
            t.long_size * 8,
            t.layout.page_size
        );
        let _ = writeln!(
            s,
            "clock:       {}",
            t.clock.as_deref().unwrap_or("unknown")
        );
        let _ = writeln!(s, "cpus:        {}", t.cpu_count);
        match (self.first_ts(), self.last_ts()) {
            (Some(a), Some(b)) => {
                let _ = writeln!(
                    s,
                    "time:        {} .. {} ({:.6} s)",
                    fmt_secs(a),
                    fmt_secs(b),
                    (b - a) as f64 / 1e9
                );
            }
            _ => {
                let _ = writeln!(s, "time:        (no events)");
            }
        }
        let _ = writeln!(s, "events:      {}", self.total());
        let lost_unknown = self.lost.values().any(|(_, u)| *u);
        let _ = writeln!(
            s,
            "lost:        {}{}",
            self.lost_total(),
            if lost_unknown {
                " counted, plus losses of unknown size (see per CPU)"
            } else {
                ""
            }
        );
        if self.truncated() {
            let _ = writeln!(
                s,
                "TRUNCATED:   the file ends early; figures cover what could be read"
            );
        }
        let _ = writeln!(
            s,
            "\nper CPU:\n  {:>4} {:>10} {:>20} {:>20} {:>10} {:>12}",
            "cpu", "events", "first", "last", "lost", "bytes"
        );
        for (cpu, (n, unknown)) in &self.lost {
            let c = self.cpus.get(cpu).cloned().unwrap_or_default();
            let lost = if *unknown {
                format!("{n}+unknown")
            } else {
                n.to_string()
            };
            let _ = writeln!(
                s,
                "  {:>4} {:>10} {:>20} {:>20} {:>10} {:>12}",
                cpu,
                c.events,
                c.first_ts.map(fmt_secs).unwrap_or_else(|| "-".into()),
                c.last_ts.map(fmt_secs).unwrap_or_else(|| "-".into()),
                lost,
                self.bytes(*cpu)
            );
        }
        let _ = writeln!(s, "\nper event:");
        let mut by: Vec<_> = self.by_event.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (name, n) in by {
            let _ = writeln!(s, "  {n:>10}  {name}");
        }
        s
    }
}
