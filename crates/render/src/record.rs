//! `kstate record`'s summary of what it recorded: text for people, JSON for programs.

use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;

use kstate_analyze::filter::fmt_secs;
use kstate_record::Summary;

/// What was recorded, for people (kstate prints it on standard error): per CPU the events,
/// losses, bytes, the rate the buffer filled at and how long it holds at that rate.
pub fn text(s: &Summary) -> String {
    let mut out = String::new();
    let secs = s.duration_ns as f64 / 1e9;
    let _ = writeln!(
        out,
        "kstate: recorded {} s into {} ({}): {} events, {} lost{}",
        fmt_secs(s.duration_ns),
        s.output.display(),
        mib(s.file_bytes as f64),
        s.events(),
        s.lost(),
        s.stopped_by
            .as_ref()
            .map(|w| format!(" ({w})"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "  {:>4} {:>12} {:>10} {:>12} {:>13} {:>13}",
        "cpu", "events", "lost", "bytes", "rate", "buffer holds"
    );
    let buffer = (s.buffer_kib * 1024) as f64;
    for c in &s.cpus {
        let n = &c.count;
        let rate = if secs > 0.0 {
            n.data_bytes as f64 / secs
        } else {
            0.0
        };
        let lost = if n.lost_unknown > 0 {
            format!("{}+?", n.lost)
        } else {
            n.lost.to_string()
        };
        let holds = if rate > 0.0 {
            format!("{:.2} s", buffer / rate)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "  {:>4} {:>12} {:>10} {:>12} {:>13} {:>13}",
            n.cpu,
            n.events,
            lost,
            mib(n.data_bytes as f64),
            format!("{}/s", mib(rate)),
            holds
        );
    }
    let _ = writeln!(
        out,
        "  buffer {} KiB per CPU, clock {}; recorder CPU {:.3} s while recording, {:.3} s in all",
        s.buffer_kib,
        s.clock,
        s.recording_cpu_ns as f64 / 1e9,
        s.recorder_cpu_ns as f64 / 1e9
    );
    if let Some(x) = &s.samples {
        let split = match x.per_event.len() {
            0 | 1 => String::new(),
            _ => format!(
                " ({})",
                x.per_event
                    .iter()
                    .map(|(e, n)| format!("{e} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let _ = writeln!(
            out,
            "  samples: {}{split} of {}, {} lost{}{} ({} of perf records)",
            x.samples,
            x.what,
            x.lost,
            if x.throttled > 0 {
                format!(", throttled {} times", x.throttled)
            } else {
                String::new()
            },
            x.fell_back_from
                .as_ref()
                .map(|e| format!(", instead of {e}"))
                .unwrap_or_default(),
            mib(x.bytes as f64)
        );
    }
    if let Some(x) = &s.stacks {
        let share = match x.lost {
            0 => String::new(),
            n => format!(" ({:.1} %)", n as f64 * 100.0 / (n + x.samples) as f64),
        };
        let _ = writeln!(
            out,
            "  stacks: {} {}, {} lost{share}, {} of perf records",
            x.samples,
            x.what,
            x.lost,
            mib(x.bytes as f64)
        );
    }
    out
}

/// The summary as one JSON object; `workload_exit` is the status as a shell reports it.
pub fn json(s: &Summary, workload_exit: Option<u8>) -> String {
    let secs = s.duration_ns as f64 / 1e9;
    let cpus: Vec<serde_json::Value> = s
        .cpus
        .iter()
        .map(|c| {
            let n = &c.count;
            let rate = if secs > 0.0 { n.data_bytes as f64 / secs } else { 0.0 };
            serde_json::json!({
                "cpu": n.cpu,
                "events": n.events,
                "lost": n.lost,
                "lost_unknown_pages": n.lost_unknown,
                "pages": n.pages,
                "bytes": n.data_bytes,
                "bytes_per_s": rate,
                "buffer_holds_s": if rate > 0.0 { Some((s.buffer_kib * 1024) as f64 / rate) } else { None },
                "overrun": c.stats.as_ref().map(|r| r.overrun),
                "dropped": c.stats.as_ref().map(|r| r.dropped_events),
            })
        })
        .collect();
    serde_json::json!({
        "output": s.output.display().to_string(),
        "file_bytes": s.file_bytes,
        "duration_ns": s.duration_ns,
        "clock": s.clock,
        "buffer_kib_per_cpu": s.buffer_kib,
        "events": s.events(),
        "lost": s.lost(),
        "cpus": cpus,
        "events_enabled": s.events_enabled,
        "missing_events": s.missing_events,
        "stale_instances_removed": s.stale_instances_removed,
        "stopped_by": s.stopped_by,
        "disk_full": s.disk_full,
        "workload_exit": workload_exit,
        "workload_signal": s.workload_status.and_then(|st| st.signal()),
        "recorder_cpu_ns": s.recorder_cpu_ns,
        "recording_cpu_ns": s.recording_cpu_ns,
        "sysinfo_snapshots": s.sysinfo_snapshots,
        "spliced": s.spliced,
        "samples": s.samples.as_ref().map(|x| serde_json::json!({
            "what": x.what,
            "samples": x.samples,
            "per_event": x.per_event.iter().map(|(e, n)| serde_json::json!({"event": e, "samples": n})).collect::<Vec<_>>(),
            "lost": x.lost,
            "throttled": x.throttled,
            "bytes": x.bytes,
            "fell_back_from": x.fell_back_from,
        })),
        "stacks": s.stacks.as_ref().map(|x| serde_json::json!({
            "what": x.what,
            "chains": x.samples,
            "lost": x.lost,
            "bytes": x.bytes,
        })),
    })
    .to_string()
}

/// Bytes in KiB, or MiB from 1 MiB.
fn mib(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}
