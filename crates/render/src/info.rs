//! `kstate info`'s report of a [`Description`]: aligned text for people, one JSON object
//! for programs. Text escapes control characters (names and command lines come from anyone
//! on the machine); JSON carries them as they are.

use kstate_analyze::filter::fmt_secs;
use kstate_format::perf::file::PerfRead;
use kstate_views::describe::{Description, PerfInfo, SamplesInfo};
use serde_json::json;

use crate::utc::fmt_utc;

/// The text report.
pub fn text(d: &Description) -> String {
    use std::fmt::Write;
    let t = d.trace;
    let (kind, version, compression) = d.kind();
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
    match (d.first_ts(), d.last_ts()) {
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
    let _ = writeln!(s, "events:      {}", d.total());
    let lost_unknown = d.lost.values().any(|(_, u)| *u);
    let _ = writeln!(
        s,
        "lost:        {}{}",
        lost_text(d),
        if lost_unknown {
            " counted, plus losses of unknown size (see per CPU)"
        } else {
            ""
        }
    );
    if d.truncated() {
        let _ = writeln!(
            s,
            "TRUNCATED:   the file ends early; figures cover what could be read"
        );
    }
    if let Some(p) = &d.sections.perf {
        perf_text(p, &mut s);
    }
    recording_text(d, &mut s);
    let _ = writeln!(
        s,
        "\nper CPU:\n  {:>4} {:>10} {:>20} {:>20} {:>10} {:>12}",
        "cpu", "events", "first", "last", "lost", "bytes"
    );
    for cpu in d.cpu_numbers() {
        let c = d.cpus.get(&cpu).cloned().unwrap_or_default();
        let (n, unknown) = d.lost.get(&cpu).copied().unwrap_or_default();
        let lost = if unknown {
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
            d.bytes(cpu)
        );
    }
    if let Some(c) = &d.no_cpu {
        let _ = writeln!(
            s,
            "  {:>4} {:>10} {:>20} {:>20} {:>10} {:>12}  (samples that do not record their CPU)",
            "-",
            c.events,
            c.first_ts.map(fmt_secs).unwrap_or_else(|| "-".into()),
            c.last_ts.map(fmt_secs).unwrap_or_else(|| "-".into()),
            "-",
            "-"
        );
    }
    let _ = writeln!(s, "\nper event:");
    let mut by: Vec<_> = d.by_event.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (name, n) in by {
        let _ = writeln!(s, "  {n:>10}  {name}");
    }
    s
}

/// The losses in one number, and for a perf.data where perf counted them: perf writes
/// the same losses twice, as LOST records where a CPU's buffer dropped them and as
/// LOST_SAMPLES records per event at the end, and `perf report` counts the latter.
fn lost_text(d: &Description) -> String {
    let records = match &d.sections.samples {
        Some(Some(i)) => i.counts.lost_records,
        _ => d.lost_total(),
    };
    match d.perf_lost {
        Some((n, true)) if n == records => format!(
            "{n} (perf's LOST_SAMPLES records, as `perf report` counts them; its LOST records count the same)"
        ),
        Some((n, true)) => format!(
            "{n} (perf's LOST_SAMPLES records, as `perf report` counts them; its LOST records count {records})"
        ),
        Some((0, false)) | None => d.lost_total().to_string(),
        Some((n, false)) => format!("{n} (perf's LOST records)"),
    }
}

/// The JSON report (members are only ever added).
pub fn json(d: &Description) -> serde_json::Value {
    let t = d.trace;
    let (kind, version, compression) = d.kind();
    let lost: serde_json::Map<String, serde_json::Value> = d
        .lost
        .iter()
        .map(|(cpu, (n, unknown))| {
            (
                cpu.to_string(),
                if *unknown { json!(null) } else { json!(n) },
            )
        })
        .collect();
    let mut per_cpu: Vec<_> = d
        .cpu_numbers()
        .into_iter()
        .map(|cpu| {
            let c = d.cpus.get(&cpu).cloned().unwrap_or_default();
            let (n, unknown) = d.lost.get(&cpu).copied().unwrap_or_default();
            json!({
                "cpu": cpu, "events": c.events, "first_ts": c.first_ts, "last_ts": c.last_ts,
                "lost": if unknown { json!(null) } else { json!(n) },
                "bytes": d.bytes(cpu), "pages": d.pages.get(&cpu),
            })
        })
        .collect();
    // Samples that do not record their CPU: one entry with a null cpu.
    if let Some(c) = &d.no_cpu {
        per_cpu.push(json!({
            "cpu": null, "events": c.events, "first_ts": c.first_ts, "last_ts": c.last_ts,
            "lost": null, "bytes": null, "pages": null,
        }));
    }
    let mut out = json!({
        "file": t.path.display().to_string(),
        "kind": kind, "version": version, "compression": compression,
        "endian": format!("{:?}", t.endian).to_lowercase(), "long_size": t.long_size,
        "page_size": t.layout.page_size, "clock": t.clock, "uname": t.uname,
        "time_shifted": t.time_shift.is_some(),
        "trace_cmd_unreadable": t.trace_cmd_unreadable,
        "tool_version": t.tool_version,
        "cpus": t.cpu_count, "events": d.total(),
        "event_counts": d.by_event, "event_formats": t.events.iter().count(),
        "first_ts": d.first_ts(), "last_ts": d.last_ts(),
        "lost_events": lost, "lost_total": d.lost_reported(),
        "lost_from": match d.perf_lost {
            Some((_, true)) => Some("LOST_SAMPLES"),
            Some((n, false)) if n > 0 => Some("LOST"),
            _ => None,
        },
        "lost_unknown_cpus": d.lost.values().filter(|(_, u)| *u).count(),
        "unknown_event_ids": d.unknown_ids,
        "truncated": d.truncated(),
        "errors": d.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        "damage": crate::damage::json(&d.errors),
        "per_cpu": per_cpu,
    });
    let sec = &d.sections;
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
            let mut v = json!({
                "tool": r.tool, "command": r.command, "workload": r.workload,
                "hostname": r.hostname, "clock": r.clock,
                "wall_offset_ns": r.wall_offset_ns,
                "start_ts": r.start_ts, "stop_ts": r.stop_ts,
                "buffer_kib_per_cpu": r.buffer_kib_per_cpu,
                "events": r.events, "missing_events": r.missing_events,
                "filters": r.filters, "pids": r.pids,
                "sysinfo_interval_ms": r.sysinfo_interval_ms,
                "workload_pid": r.workload_pid,
            });
            // Only a recording cut short has the member, so that others read as before.
            if let (Some(why), Some(o)) = (&r.cut_short, v.as_object_mut()) {
                o.insert("cut_short".into(), json!(why));
            }
            v
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
        o.insert("perf".into(), perf_json(pi));
    }
    if let Some(smp) = &sec.samples {
        let v = smp.as_ref().map(|i| samples_json(i, d.perf_lost));
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
fn recording_text(d: &Description, s: &mut String) {
    use std::fmt::Write;
    let sec = &d.sections;
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
            if let Some(why) = &r.cut_short {
                let _ = writeln!(
                    s,
                    "  CUT SHORT:   {} (nothing after it was recorded)",
                    p(why)
                );
            }
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
                "  samples:     {} of {}{}, clock {}; {}, {} throttled (`kstate profile` reads them)",
                c.samples,
                rate(i),
                if i.call_chains { " with call chains" } else { "" },
                printable(&i.clock),
                match d.perf_lost {
                    Some((n, true)) => format!("{n} lost (LOST_SAMPLES records)"),
                    Some((n, false)) if n > 0 => format!("{n} lost (LOST records)"),
                    Some((n, _)) => format!("{n} lost"),
                    None => format!("{} lost", c.lost),
                },
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
            let _ = writeln!(
                s,
                "  processes:   {n} (at start, and traced tasks found later)"
            );
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
                    r.cpu, r.entries, r.overrun, r.commit_overrun, r.dropped_events, r.read_events
                );
            }
        }
    }
    watch_log_text(d, s);
}

/// The WATCH_LOG entries, times from the recording's start where the file says it.
fn watch_log_text(d: &Description, s: &mut String) {
    use std::fmt::Write;
    const SHOWN: usize = 50;
    let start = match &d.sections.recording {
        Some(Some(r)) => Some(r.start_ts),
        _ => None,
    };
    match &d.sections.watch_log {
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

/// The "perf:" block.
fn perf_text(p: &PerfInfo, s: &mut String) {
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
        p.cmdline
            .as_deref()
            .map_or("(not recorded)".into(), |c| printable(&shell_words(c)))
    );
    let _ = writeln!(s, "  host:        {}", or(&p.host));
    let _ = writeln!(
        s,
        "  kernel:      {} {}",
        or(&p.os_release),
        p.arch.as_deref().map(printable).unwrap_or_default()
    );
    let _ = writeln!(s, "  perf:        {}", or(&p.version));
    if let Some(c) = &p.cpu_desc {
        let _ = writeln!(s, "  cpu:         {}", printable(c));
    }
    if let Some((avail, online)) = p.nr_cpus {
        let _ = writeln!(s, "  cpus:        {online} online of {avail}");
    }
    if let Some(m) = p.total_mem_kib {
        let _ = writeln!(s, "  memory:      {:.1} GiB", m as f64 / (1 << 20) as f64);
    }
    let _ = writeln!(
        s,
        "  layout:      {}, {}-byte perf_event_attr",
        if p.pipe { "pipe mode" } else { "file" },
        p.attr_size
    );
    let _ = writeln!(s, "  features:    {}", p.features.join(", "));
    if let Some(r) = p.read {
        let _ = writeln!(s, "  read:        {}", r.describe());
    }
}

/// A perf.data header's JSON.
fn perf_json(p: &PerfInfo) -> serde_json::Value {
    json!({
        "pipe_mode": p.pipe, "attr_size": p.attr_size, "command": p.cmdline,
        "hostname": p.host, "os_release": p.os_release, "arch": p.arch,
        "perf_version": p.version, "cpu_desc": p.cpu_desc,
        "nr_cpus_available": p.nr_cpus.map(|n| n.0),
        "nr_cpus_online": p.nr_cpus.map(|n| n.1),
        "total_mem_kib": p.total_mem_kib, "features": p.features,
        "read": p.read.map(|r| r.name()),
        "stretches_sorted": p.read.and_then(|r| match r {
            PerfRead::Direct { stretches } | PerfRead::Pages { stretches } => Some(stretches),
            PerfRead::Sorted => None,
        }),
    })
}

/// `cycles at 999 Hz`: what was sampled, how often.
fn rate(i: &SamplesInfo) -> String {
    match (i.freq_hz, i.period) {
        (Some(hz), _) => format!("{} at {hz} Hz", printable(&i.event)),
        (_, Some(p)) => format!("{} every {p} events", printable(&i.event)),
        _ => printable(&i.event),
    }
}

/// The samples' figures; `perf_lost` is a perf.data's count of losses (its LOST and
/// LOST_SAMPLES records count the same ones).
fn samples_json(i: &SamplesInfo, perf_lost: Option<(u64, bool)>) -> serde_json::Value {
    let c = &i.counts;
    json!({
        "event": i.event, "clock": i.clock, "freq_hz": i.freq_hz,
        "period": i.period, "call_chains": i.call_chains,
        "samples": c.samples, "kernel_samples": c.kernel_samples,
        "user_samples": c.samples - c.kernel_samples,
        "lost": perf_lost.map_or(c.lost, |(n, _)| n),
        "lost_records": c.lost_records, "lost_samples": c.lost_samples,
        "throttled": c.throttled, "bytes": c.bytes,
        "per_event": c.per_event.iter().map(|(e, n)| json!({"event": e, "samples": n})).collect::<Vec<_>>(),
        "processes": c.processes, "threads": c.threads,
        "mmaps_at_start": c.start_mmaps, "processes_at_start": c.start_processes,
        "mmaps": c.mmaps, "forks": c.forks, "execs": c.execs,
        "first_time": c.first_time, "last_time": c.last_time,
    })
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
