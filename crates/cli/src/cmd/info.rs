//! `kstate info`: what a trace holds, read in one streaming pass.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use kstate_analyze::merge::{IdFilter, Merger};
use kstate_format::extras::{self, ids, Recording, RingStats};
use kstate_format::{watch_log, Container, Error, ErrorKind, Trace};
use serde_json::json;

use crate::timefmt::{fmt_secs, fmt_utc};

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
    sections: Sections,
    errors: Vec<Error>,
}

/// kstate's own sections. Outer `Option`: the file has the section; inner: it decoded.
#[derive(Default)]
struct Sections {
    recording: Option<Option<Recording>>,
    processes: Option<Option<usize>>,
    sysinfo_snapshots: Option<Option<u64>>,
    ring_stats: Option<Option<Vec<RingStats>>>,
    /// CPU samples (`record --sample`): how they were taken and the totals.
    samples: Option<Option<SamplesInfo>>,
    /// Set when `kstate recover` made the file: where from and what may be missing.
    recovered: Option<String>,
    /// What `kstate watch` did and saw: alarms, escalations, shedding, losses.
    watch_log: Option<Option<Vec<watch_log::Entry>>>,
    /// A perf.data's header: how and where it was recorded.
    perf: Option<PerfInfo>,
}

/// What a perf.data's header and feature sections say.
struct PerfInfo {
    pipe: bool,
    attr_size: u64,
    cmdline: Option<Vec<String>>,
    host: Option<String>,
    os_release: Option<String>,
    arch: Option<String>,
    version: Option<String>,
    cpu_desc: Option<String>,
    nr_cpus: Option<(u32, u32)>,
    total_mem_kib: Option<u64>,
    features: Vec<&'static str>,
}

impl PerfInfo {
    fn of(pf: &kstate_format::perf_file::PerfFile) -> PerfInfo {
        use kstate_format::perf_file::feature;
        PerfInfo {
            pipe: pf.pipe,
            attr_size: pf.events[0].attr_bytes.len() as u64,
            cmdline: pf.cmdline(),
            host: pf.string(feature::HOSTNAME),
            os_release: pf.string(feature::OSRELEASE),
            arch: pf.string(feature::ARCH),
            version: pf.string(feature::VERSION),
            cpu_desc: pf.string(feature::CPUDESC),
            nr_cpus: pf.nr_cpus(),
            total_mem_kib: pf.total_mem_kib(),
            features: pf.features.iter().map(|(b, _)| feature::name(*b)).collect(),
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "pipe_mode": self.pipe, "attr_size": self.attr_size, "command": self.cmdline,
            "hostname": self.host, "os_release": self.os_release, "arch": self.arch,
            "perf_version": self.version, "cpu_desc": self.cpu_desc,
            "nr_cpus_available": self.nr_cpus.map(|n| n.0),
            "nr_cpus_online": self.nr_cpus.map(|n| n.1),
            "total_mem_kib": self.total_mem_kib, "features": self.features,
        })
    }

    fn text(&self, s: &mut String) {
        use std::fmt::Write;
        let or = |v: &Option<String>| v.as_deref().map_or("(not recorded)".into(), printable);
        let _ = writeln!(
            s,
            "
perf:"
        );
        let _ = writeln!(
            s,
            "  command:     {}",
            self.cmdline
                .as_deref()
                .map_or("(not recorded)".into(), |c| printable(&shell_words(c)))
        );
        let _ = writeln!(s, "  host:        {}", or(&self.host));
        let _ = writeln!(
            s,
            "  kernel:      {} {}",
            or(&self.os_release),
            self.arch.as_deref().map(printable).unwrap_or_default()
        );
        let _ = writeln!(s, "  perf:        {}", or(&self.version));
        if let Some(c) = &self.cpu_desc {
            let _ = writeln!(s, "  cpu:         {}", printable(c));
        }
        if let Some((avail, online)) = self.nr_cpus {
            let _ = writeln!(s, "  cpus:        {online} online of {avail}");
        }
        if let Some(m) = self.total_mem_kib {
            let _ = writeln!(s, "  memory:      {:.1} GiB", m as f64 / (1 << 20) as f64);
        }
        let _ = writeln!(
            s,
            "  layout:      {}, {}-byte perf_event_attr",
            if self.pipe { "pipe mode" } else { "file" },
            self.attr_size
        );
        let _ = writeln!(s, "  features:    {}", self.features.join(", "));
    }
}

impl Sections {
    fn any(&self) -> bool {
        self.recording.is_some()
            || self.processes.is_some()
            || self.sysinfo_snapshots.is_some()
            || self.ring_stats.is_some()
            || self.samples.is_some()
            || self.recovered.is_some()
            || self.watch_log.is_some()
    }
}

/// The SAMPLES section in brief.
struct SamplesInfo {
    event: String,
    clock: String,
    freq_hz: Option<u64>,
    period: Option<u64>,
    call_chains: bool,
    counts: kstate_format::samples::Counts,
}

impl SamplesInfo {
    fn decode(b: &[u8]) -> Result<SamplesInfo, Error> {
        Self::of(&kstate_format::samples::decode(b)?)
    }

    fn of(s: &dyn kstate_format::samples::RecordSource) -> Result<SamplesInfo, Error> {
        use kstate_format::samples;
        let h = s.events()[0].clone();
        let freq_hz = h.attr.freq();
        Ok(SamplesInfo {
            period: freq_hz.is_none().then_some(h.attr.period_or_freq),
            freq_hz,
            call_chains: h.attr.sample_type & samples::sample::CALLCHAIN != 0,
            // Every sampled event (the rate shown is the first one's).
            event: s
                .events()
                .iter()
                .map(|h| h.event.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            clock: h.clock,
            counts: samples::count_source(s)?,
        })
    }

    fn rate(&self) -> String {
        match (self.freq_hz, self.period) {
            (Some(hz), _) => format!("{} at {hz} Hz", printable(&self.event)),
            (_, Some(p)) => format!("{} every {p} events", printable(&self.event)),
            _ => printable(&self.event),
        }
    }

    fn json(&self) -> serde_json::Value {
        let c = &self.counts;
        json!({
            "event": self.event, "clock": self.clock, "freq_hz": self.freq_hz,
            "period": self.period, "call_chains": self.call_chains,
            "samples": c.samples, "kernel_samples": c.kernel_samples,
            "user_samples": c.samples - c.kernel_samples,
            "lost": c.lost, "throttled": c.throttled, "bytes": c.bytes,
            "per_event": c.per_event.iter().map(|(e, n)| json!({"event": e, "samples": n})).collect::<Vec<_>>(),
            "processes": c.processes, "threads": c.threads,
            "mmaps_at_start": c.start_mmaps, "processes_at_start": c.start_processes,
            "mmaps": c.mmaps, "forks": c.forks, "execs": c.execs,
            "first_time": c.first_time, "last_time": c.last_time,
        })
    }
}

/// Decodes the sections the file has; a damaged one becomes `Some(None)` and an error.
fn read_sections(trace: &Trace, errors: &mut Vec<Error>) -> Sections {
    fn decode<T>(
        trace: &Trace,
        id: u16,
        errors: &mut Vec<Error>,
        f: impl FnOnce(&[u8]) -> Result<T, Error>,
    ) -> Option<Option<T>> {
        let payload = trace.extra(id)?;
        match f(payload) {
            Ok(v) => Some(Some(v)),
            Err(e) => {
                // The offset is into the section's payload, not the file: say so in words.
                let at = e
                    .offset
                    .map(|o| format!(", byte {o} of its {} bytes", payload.len()))
                    .unwrap_or_default();
                let name = extras::section_name(id).unwrap_or("unknown");
                let msg = e
                    .msg
                    .strip_prefix(&format!("{name} section: "))
                    .unwrap_or(&e.msg);
                errors.push(
                    Error::new(
                        e.kind,
                        None,
                        format!("kstate {name} section (option {id:#x}){at}: {msg}"),
                    )
                    .in_file(&trace.path),
                );
                Some(None)
            }
        }
    }
    Sections {
        recording: decode(trace, ids::RECORDING, errors, Recording::decode),
        processes: decode(trace, ids::PROCESSES, errors, |b| {
            extras::decode_processes(b).map(|p| p.len())
        }),
        sysinfo_snapshots: decode(trace, ids::SYSINFO, errors, |b| {
            extras::sysinfo_snapshots(b).try_fold(0u64, |n, s| s.map(|_| n + 1))
        }),
        ring_stats: decode(trace, ids::RING_STATS, errors, extras::decode_ring_stats),
        samples: match &trace.perf {
            // A perf.data's records are its samples.
            Some(pf) if trace.extra(ids::SAMPLES).is_none() => match SamplesInfo::of(pf.as_ref()) {
                Ok(i) => Some(Some(i)),
                Err(e) => {
                    errors.push(e.in_file(&trace.path));
                    Some(None)
                }
            },
            _ => decode(trace, ids::SAMPLES, errors, SamplesInfo::decode),
        },
        perf: trace.perf.as_deref().map(PerfInfo::of),
        recovered: trace
            .extra(ids::RECOVERED)
            .map(|t| String::from_utf8_lossy(t).into_owned()),
        watch_log: decode(trace, ids::WATCH_LOG, errors, watch_log::decode),
    }
}

/// `s` on one line of the text report: control characters as escapes (`\n`, `\x1b`).
fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// argv as a shell would take it back: words with anything but `[A-Za-z0-9_./:=,+@%-]`
/// single-quoted.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"_./:=,+@%-".contains(&c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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
    let mut errors: Vec<Error> = trace.damage().cloned().collect();
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
    let sections = read_sections(trace, &mut errors);
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
        sections,
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
            Container::PerfData => {
                let what = if self.trace.events.iter().next().is_some() {
                    "tracepoint samples"
                } else {
                    "samples"
                };
                let pipe = match &self.trace.perf {
                    Some(pf) if pf.pipe => ", pipe mode",
                    _ => "",
                };
                (format!("perf.data ({what}{pipe})"), None, None)
            }
            Container::Parquet => ("kstate Parquet tables".into(), None, None),
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
        let mut out = json!({
            "file": t.path.display().to_string(),
            "kind": kind, "version": version, "compression": compression,
            "endian": format!("{:?}", t.endian).to_lowercase(), "long_size": t.long_size,
            "page_size": t.layout.page_size, "clock": t.clock, "uname": t.uname,
            "time_shifted": t.time_shift.is_some(),
            "trace_cmd_unreadable": t.trace_cmd_unreadable,
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
        });
        let sec = &self.sections;
        let o = out.as_object_mut().expect("an object");
        let input = t.spool.as_ref().map(|sp| {
            json!({
                "compression": sp.packing.map(|p| p.name()), "pipe": sp.pipe,
                "stored_bytes": sp.stored_bytes, "bytes": sp.bytes,
            })
        });
        o.insert("input".into(), input.unwrap_or(json!(null)));
        if let Some(r) = &sec.recording {
            let v = r.as_ref().map(|r| {
                json!({
                    "tool": r.tool, "command": r.command, "workload": r.workload,
                    "hostname": r.hostname, "clock": r.clock,
                    "wall_offset_ns": r.wall_offset_ns,
                    "start_ts": r.start_ts, "stop_ts": r.stop_ts,
                    "buffer_kib_per_cpu": r.buffer_kib_per_cpu,
                    "events": r.events, "missing_events": r.missing_events,
                    "filters": r.filters, "pids": r.pids,
                    "sysinfo_interval_ms": r.sysinfo_interval_ms,
                    "workload_pid": r.workload_pid,
                })
            });
            o.insert("recording".into(), json!(v));
        }
        if let Some(t) = &sec.recovered {
            o.insert("recovered".into(), json!(t));
        }
        if let Some(n) = &sec.processes {
            o.insert("processes".into(), json!(n));
        }
        if let Some(n) = &sec.sysinfo_snapshots {
            o.insert("sysinfo_snapshots".into(), json!(n));
        }
        if let Some(pi) = &sec.perf {
            o.insert("perf".into(), pi.json());
        }
        if let Some(smp) = &sec.samples {
            let v = smp.as_ref().map(SamplesInfo::json);
            o.insert("samples".into(), json!(v));
        }
        if let Some(rs) = &sec.ring_stats {
            let v = rs.as_ref().map(|rs| {
                rs.iter()
                    .map(|s| {
                        json!({
                            "cpu": s.cpu, "entries": s.entries, "overrun": s.overrun,
                            "commit_overrun": s.commit_overrun, "bytes": s.bytes,
                            "dropped_events": s.dropped_events, "read_events": s.read_events,
                        })
                    })
                    .collect::<Vec<_>>()
            });
            o.insert("ring_stats".into(), json!(v));
        }
        if let Some(log) = &sec.watch_log {
            let v = log.as_ref().map(|l| {
                l.iter()
                    .map(|e| json!({"ts": e.ts, "kind": e.kind, "text": e.text}))
                    .collect::<Vec<_>>()
            });
            o.insert("watch_log".into(), json!(v));
        }
        out
    }

    /// The "recording:" block, from whichever of kstate's sections the file has.
    fn recording_text(&self, s: &mut String) {
        use std::fmt::Write;
        let sec = &self.sections;
        if !sec.any() {
            return;
        }
        const DAMAGED: &str = "(damaged, see the error)";
        let _ = writeln!(s, "\nrecording:");
        if let Some(t) = &sec.recovered {
            let _ = writeln!(s, "  recovered:   {}", printable(t));
        }
        match &sec.recording {
            None => {}
            Some(None) => {
                let _ = writeln!(s, "  {DAMAGED}");
            }
            Some(Some(r)) => {
                let or_none = |v: String| if v.is_empty() { "(none)".into() } else { v };
                let p = |v: &str| printable(v);
                let list = |v: &[String], sep: &str| {
                    or_none(v.iter().map(|x| p(x)).collect::<Vec<_>>().join(sep))
                };
                let _ = writeln!(s, "  tool:        {}", p(&r.tool));
                let _ = writeln!(s, "  command:     {}", p(&shell_words(&r.command)));
                let _ = writeln!(
                    s,
                    "  workload:    {}{}",
                    or_none(p(&shell_words(&r.workload))),
                    r.workload_pid
                        .map(|p| format!(" (pid {p})"))
                        .unwrap_or_default()
                );
                let _ = writeln!(s, "  host:        {}", p(&r.hostname));
                let _ = writeln!(s, "  clock:       {}", p(&r.clock));
                let start = match r.wall_offset_ns {
                    None => "unknown (no wall-clock offset recorded)".to_string(),
                    Some(off) => fmt_utc(off as i128 + r.start_ts as i128)
                        .unwrap_or_else(|| "unknown (out of range)".into()),
                };
                let _ = writeln!(s, "  started:     {start}");
                let dur = match r.stop_ts.checked_sub(r.start_ts) {
                    Some(d) => format!("{:.6} s", d as f64 / 1e9),
                    None => "unknown (stops before it starts)".into(),
                };
                let _ = writeln!(
                    s,
                    "  duration:    {dur} ({} .. {})",
                    fmt_secs(r.start_ts),
                    fmt_secs(r.stop_ts)
                );
                let _ = writeln!(s, "  buffer:      {} KiB per CPU", r.buffer_kib_per_cpu);
                let _ = writeln!(
                    s,
                    "  events:      {} enabled{}{}",
                    r.events.len(),
                    if r.events.is_empty() { "" } else { ": " },
                    list(&r.events, ", ")
                );
                let _ = writeln!(s, "  missing:     {}", list(&r.missing_events, ", "));
                let _ = writeln!(s, "  filters:     {}", list(&r.filters, "; "));
                let pids = if r.pids.is_empty() {
                    "all (system-wide)".to_string()
                } else {
                    r.pids
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = writeln!(s, "  pids:        {pids}");
            }
        }
        let interval = match &sec.recording {
            Some(Some(r)) => Some(r.sysinfo_interval_ms),
            _ => None,
        };
        let sysinfo = match (&sec.sysinfo_snapshots, interval) {
            (Some(Some(n)), Some(ms)) if ms > 0 => Some(format!("{n} snapshots, every {ms} ms")),
            (Some(Some(n)), _) => Some(format!("{n} snapshots")),
            (Some(None), _) => Some(DAMAGED.to_string()),
            (None, Some(0)) => Some("off".to_string()),
            (None, Some(ms)) => Some(format!("every {ms} ms, but the file has no snapshots")),
            (None, None) => None,
        };
        if let Some(line) = sysinfo {
            let _ = writeln!(s, "  sysinfo:     {line}");
        }
        match &sec.samples {
            Some(Some(i)) => {
                let c = &i.counts;
                let _ = writeln!(
                    s,
                    "  samples:     {} of {}{}, clock {}; {} lost, {} throttled (`kstate profile` reads them)",
                    c.samples,
                    i.rate(),
                    if i.call_chains { " with call chains" } else { "" },
                    printable(&i.clock),
                    c.lost,
                    c.throttled
                );
                let _ = writeln!(
                    s,
                    "               {} in the kernel, {} in user space; {} processes, {} threads sampled",
                    c.kernel_samples,
                    c.samples - c.kernel_samples,
                    c.processes,
                    c.threads
                );
                let _ = writeln!(
                    s,
                    "               mappings: {} of {} processes at the start, {} made during the recording; {} forks, {} execs",
                    c.start_mmaps, c.start_processes, c.mmaps, c.forks, c.execs
                );
                if c.per_event.len() > 1 {
                    for (e, n) in &c.per_event {
                        let _ = writeln!(s, "               {n:>10}  {}", printable(e));
                    }
                }
                if let (Some(a), Some(b)) = (c.first_time, c.last_time) {
                    let _ = writeln!(
                        s,
                        "               samples from {} to {} ({:.6} s)",
                        fmt_secs(a),
                        fmt_secs(b),
                        b.saturating_sub(a) as f64 / 1e9
                    );
                }
            }
            Some(None) => {
                let _ = writeln!(s, "  samples:     {DAMAGED}");
            }
            None => {}
        }
        match &sec.processes {
            Some(Some(n)) => {
                let _ = writeln!(s, "  processes:   {n} at start");
            }
            Some(None) => {
                let _ = writeln!(s, "  processes:   {DAMAGED}");
            }
            None => {}
        }
        match &sec.ring_stats {
            None => {}
            Some(None) => {
                let _ = writeln!(s, "  ring buffer: {DAMAGED}");
            }
            Some(Some(rs)) => {
                let _ = writeln!(
                    s,
                    "  ring buffer at stop:\n    {:>4} {:>12} {:>12} {:>14} {:>12} {:>12}",
                    "cpu", "entries", "overrun", "commit_overrun", "dropped", "read"
                );
                for r in rs {
                    let _ = writeln!(
                        s,
                        "    {:>4} {:>12} {:>12} {:>14} {:>12} {:>12}",
                        r.cpu,
                        r.entries,
                        r.overrun,
                        r.commit_overrun,
                        r.dropped_events,
                        r.read_events
                    );
                }
            }
        }
        self.watch_log_text(s);
    }

    /// The WATCH_LOG entries, times from the recording's start where the file says it.
    fn watch_log_text(&self, s: &mut String) {
        use std::fmt::Write;
        const SHOWN: usize = 50;
        let start = match &self.sections.recording {
            Some(Some(r)) => Some(r.start_ts),
            _ => None,
        };
        match &self.sections.watch_log {
            None => {}
            Some(None) => {
                let _ = writeln!(s, "  watch log:   (damaged, see the error)");
            }
            Some(Some(log)) => {
                let _ = writeln!(
                    s,
                    "  watch log:   {} entries{}",
                    log.len(),
                    if start.is_some() {
                        " (s from the start)"
                    } else {
                        " (s on the trace clock)"
                    }
                );
                for e in log.iter().take(SHOWN) {
                    let t = e.ts.saturating_sub(start.unwrap_or(0)) as f64 / 1e9;
                    let _ = writeln!(
                        s,
                        "    {t:>10.3} {:<9} {}",
                        printable(&e.kind),
                        printable(&e.text)
                    );
                }
                if log.len() > SHOWN {
                    let _ = writeln!(s, "    ... {} more (--json lists all)", log.len() - SHOWN);
                }
            }
        }
    }

    fn text(&self) -> String {
        use std::fmt::Write;
        let t = self.trace;
        let (kind, version, compression) = self.kind();
        let mut s = String::new();
        let _ = writeln!(s, "file:        {}", t.path.display());
        if let Some(sp) = &t.spool {
            let from = if sp.pipe { ", read from a pipe" } else { "" };
            let how = match sp.packing {
                Some(p) => format!(
                    "{}-compressed, {} bytes, {} unpacked ({:.1}:1){from}",
                    p.name(),
                    sp.stored_bytes,
                    sp.bytes,
                    sp.bytes as f64 / sp.stored_bytes.max(1) as f64
                ),
                None => format!("{} bytes{from}", sp.bytes),
            };
            let _ = writeln!(s, "stored:      {how}");
        }
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
        if t.clock_map.mult != 0 {
            let _ = writeln!(
                s,
                "             raw counts to ns as (count * {}) >> {} (TSC2NSEC option)",
                t.clock_map.mult, t.clock_map.shift
            );
        }
        if let Some(shift) = &t.time_shift {
            let _ = writeln!(s, "time shift:  {}", shift.describe());
        }
        if let Some(why) = &t.trace_cmd_unreadable {
            let _ = writeln!(s, "trace-cmd:   cannot open this file: {why}");
        }
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
        if let Some(p) = &self.sections.perf {
            p.text(&mut s);
        }
        self.recording_text(&mut s);
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
