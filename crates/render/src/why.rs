//! `kstate why`: the path as a text tree (one line per hop and per state, time and share
//! of the wall time), as JSON, and two runs side by side.
//!
//! JSON (one object): `{"file", "tid", "comm", "window": [from_ns, to_ns],
//! "trace_start_ns", "wall_ns", "by_state": [{"state", "ns"}], "by_thread": [{"tid",
//! "comm", "ns"}], "segments": [{"start_ns", "end_ns", "tid", "comm", "state",
//! "detail"}], "tree": NODE, "requests": [PATH] | null, "median_request": index | null,
//! "spans_unmatched", "lost_events", "lost_unknown", "events_read", "segments_total",
//! "segments_merged", "segments_left_out", "max_segments", "notes"}` where
//! NODE is `{"tid", "comm", "ns", "states": [{"state", "what", "ns", "segments",
//! "holders": [{"task", "ns"}], "queue_ns", "device_ns"}], "wakers": [NODE]}` and a
//! request's PATH has the path's members from "tid" to "tree".

use std::io::{self, Write};

use kstate_analyze::filter::{fmt_dur, fmt_secs};
use kstate_views::why::compare::{Comparison, Row};
use kstate_views::why::{pct, Node, Path, TreeLine, Why};
use serde_json::{json, Value};

fn node_json(n: &Node) -> Value {
    json!({
        "tid": n.tid, "comm": n.comm, "ns": n.ns,
        "states": n.states.iter().map(|s| json!({
            "state": s.state.name(), "what": s.what, "ns": s.ns, "segments": s.segments,
            "holders": s.holders.iter().map(|(t, ns)| json!({"task": t, "ns": ns})).collect::<Vec<_>>(),
            "queue_ns": s.queue_ns, "device_ns": s.device_ns,
        })).collect::<Vec<_>>(),
        "wakers": n.wakers.iter().map(node_json).collect::<Vec<_>>(),
    })
}

fn path_json(why: &Why, p: &Path) -> Value {
    json!({
        "tid": p.tid, "comm": p.comm,
        "window": [p.window.0, p.window.1],
        "wall_ns": p.wall_ns,
        "by_state": p.by_state.iter().map(|(s, ns)| json!({"state": s.name(), "ns": ns})).collect::<Vec<_>>(),
        "by_thread": p.by_thread.iter().map(|t| json!({"tid": t.tid, "comm": t.comm, "ns": t.ns})).collect::<Vec<_>>(),
        "segments": p.segments.iter().map(|s| json!({
            "start_ns": s.start, "end_ns": s.end, "tid": s.tid,
            "comm": why.names.get(&s.tid).cloned().unwrap_or_else(|| "<...>".into()),
            "state": s.state.name(), "detail": why.detail(s),
        })).collect::<Vec<_>>(),
        "tree": node_json(&p.tree),
    })
}

/// The whole answer as one JSON object.
pub fn json(why: &Why, file: &str) -> Value {
    let mut v = path_json(why, &why.path);
    let o = v.as_object_mut().expect("an object");
    o.insert("file".into(), file.into());
    o.insert("trace_start_ns".into(), why.trace_start.into());
    o.insert(
        "requests".into(),
        match why.requests.is_empty() {
            true => Value::Null,
            false => why.requests.iter().map(|p| path_json(why, p)).collect(),
        },
    );
    o.insert("median_request".into(), json!(why.median));
    o.insert("spans_unmatched".into(), why.spans_unmatched.into());
    o.insert("lost_events".into(), why.lost.0.into());
    o.insert("lost_unknown".into(), why.lost.1.into());
    o.insert("events_read".into(), why.events_read.into());
    o.insert("segments_total".into(), why.segments.total.into());
    o.insert("segments_merged".into(), why.segments.merged.into());
    o.insert("segments_left_out".into(), why.segments.left_out.into());
    o.insert("max_segments".into(), why.segments.max.into());
    o.insert("notes".into(), json!(why.notes));
    v
}

fn line_text(p: &Path, depth: usize, l: &TreeLine<'_>) -> String {
    let pad = "  ".repeat(depth);
    let wall = p.wall_ns;
    match l {
        TreeLine::Thread(n) if depth == 0 => {
            format!("{pad}{}-{}  {}  100.0 %", n.comm, n.tid, fmt_dur(n.ns))
        }
        TreeLine::Thread(n) => format!(
            "{pad}<- woken by {}-{}  {}  {:.1} %",
            n.comm,
            n.tid,
            fmt_dur(n.ns),
            pct(n.ns, wall)
        ),
        TreeLine::State(_, s) => {
            let mut extra = String::new();
            if !s.holders.is_empty() {
                let h: Vec<String> = s
                    .holders
                    .iter()
                    .take(3)
                    .map(|(t, ns)| format!("{t} {}", fmt_dur(*ns)))
                    .collect();
                extra = format!("; held by {}", h.join(", "));
            }
            if s.queue_ns.is_some() || s.device_ns.is_some() {
                let f = |x: Option<u64>| x.map_or("?".to_string(), fmt_dur);
                extra = format!(
                    "; {} requests: queue {}, device {}",
                    s.segments,
                    f(s.queue_ns),
                    f(s.device_ns)
                );
            }
            let what = match s.what.is_empty() {
                true => String::new(),
                false => format!(" ({}{extra})", s.what),
            };
            format!(
                "{pad}{:<9} {:>11}  {:5.1} %{what}",
                s.state.name(),
                fmt_dur(s.ns),
                pct(s.ns, wall)
            )
        }
    }
}

fn path_text(why: &Why, p: &Path, out: &mut dyn Write) -> io::Result<()> {
    let rel = |t: u64| fmt_secs(t.saturating_sub(why.trace_start));
    writeln!(
        out,
        "{}-{}: {} of wall time from {} to {} (s from the recording's start)",
        p.comm,
        p.tid,
        fmt_dur(p.wall_ns),
        rel(p.window.0),
        rel(p.window.1)
    )?;
    for (depth, l) in p.lines() {
        writeln!(out, "  {}", line_text(p, depth, &l))?;
    }
    let states: Vec<String> = p
        .by_state
        .iter()
        .map(|(s, ns)| format!("{} {} {:.1} %", s.name(), fmt_dur(*ns), pct(*ns, p.wall_ns)))
        .collect();
    writeln!(out, "  by state:  {}", states.join(", "))?;
    let threads: Vec<String> = p
        .by_thread
        .iter()
        .take(8)
        .map(|t| {
            format!(
                "{}-{} {} {:.1} %",
                t.comm,
                t.tid,
                fmt_dur(t.ns),
                pct(t.ns, p.wall_ns)
            )
        })
        .collect();
    writeln!(out, "  by thread: {}", threads.join(", "))
}

/// The text answer: the path's tree, then (with requests) the slowest requests and the
/// median one, then what qualifies the figures.
pub fn text(why: &Why, top: usize, out: &mut dyn Write) -> io::Result<()> {
    path_text(why, &why.path, out)?;
    if !why.requests.is_empty() {
        let n = why.requests.len();
        let med = why.median.and_then(|m| why.requests.get(m));
        writeln!(
            out,
            "\n{n} request{}; median {}, slowest {}",
            if n == 1 { "" } else { "s" },
            med.map_or("-".into(), |m| fmt_dur(m.wall_ns)),
            fmt_dur(why.requests[0].wall_ns)
        )?;
        for (i, r) in why.requests.iter().take(top).enumerate() {
            writeln!(out, "\nrequest {} of {n} (slowest first):", i + 1)?;
            path_text(why, r, out)?;
        }
        match (why.median, med) {
            // Already printed among the slowest: named, not repeated.
            (Some(i), Some(_)) if i < top => writeln!(
                out,
                "\nthe median request is request {} of {n} above",
                i + 1
            )?,
            (_, Some(m)) => {
                writeln!(out, "\nthe median request:")?;
                path_text(why, m, out)?;
            }
            _ => {}
        }
    }
    if why.spans_unmatched > 0 {
        writeln!(out, "# {} span begins had no end", why.spans_unmatched)?;
    }
    if why.lost.0 > 0 || why.lost.1 {
        writeln!(
            out,
            "# {}{} events lost in the window",
            why.lost.0,
            if why.lost.1 { "+" } else { "" }
        )?;
    }
    for n in &why.notes {
        writeln!(out, "# {n}")?;
    }
    Ok(())
}

fn row_json(r: &Row) -> Value {
    json!({"key": r.key, "a_ns": r.a_ns, "b_ns": r.b_ns, "ratio": r.ratio()})
}

/// Two runs side by side as JSON.
pub fn comparison_json(c: &Comparison) -> Value {
    json!({
        "a": {"file": c.a.label, "tid": c.a.tid, "comm": c.a.comm, "requests": c.a.requests, "wall_ns": c.a.wall_ns},
        "b": {"file": c.b.label, "tid": c.b.tid, "comm": c.b.comm, "requests": c.b.requests, "wall_ns": c.b.wall_ns},
        "min_share": c.rules.min_share,
        "by_state": c.states.iter().map(row_json).collect::<Vec<_>>(),
        "by_thread": c.threads.iter().map(row_json).collect::<Vec<_>>(),
        "lines": c.lines.iter().map(row_json).collect::<Vec<_>>(),
        "changes": c.changes.iter().map(|x| json!({"key": x.key, "a_ns": x.a_ns, "b_ns": x.b_ns, "ratio": x.ratio})).collect::<Vec<_>>(),
        "grew": c.grew().map(|x| json!({"key": x.key, "a_ns": x.a_ns, "b_ns": x.b_ns, "ratio": x.ratio})),
    })
}

fn rows_text(title: &str, rows: &[Row], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\n{title}")?;
    writeln!(out, "  {:>11} {:>11} {:>7}  key", "A", "B", "B/A")?;
    let f = |x: Option<u64>| x.map_or("-".to_string(), fmt_dur);
    for r in rows {
        let ratio = r.ratio().map_or("-".to_string(), |x| format!("{x:.2}x"));
        writeln!(
            out,
            "  {:>11} {:>11} {ratio:>7}  {}",
            f(r.a_ns),
            f(r.b_ns),
            r.key
        )?;
    }
    Ok(())
}

/// Two runs side by side as text: what grew first, then the tables.
pub fn comparison_text(c: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    let side = |s: &kstate_views::why::compare::Side| {
        let what = match s.requests {
            0 => "the window".to_string(),
            n => format!("the mean of {n} requests"),
        };
        format!(
            "{} {}-{}: {} ({what})",
            s.label,
            s.comm,
            s.tid,
            fmt_dur(s.wall_ns)
        )
    };
    writeln!(out, "A: {}", side(&c.a))?;
    writeln!(out, "B: {}", side(&c.b))?;
    match c.grew() {
        Some(g) => writeln!(
            out,
            "what grew: {}: {} -> {} ({:.2}x, +{})",
            g.key,
            fmt_dur(g.a_ns),
            fmt_dur(g.b_ns),
            g.ratio,
            fmt_dur(g.b_ns - g.a_ns)
        )?,
        None => writeln!(out, "what grew: nothing ranked grew")?,
    }
    writeln!(
        out,
        "\nwhat changed most (|log2 B/A|, lines with >= {:.0} % of a run's wall time):",
        c.rules.min_share * 100.0
    )?;
    for x in c.changes.iter().take(10) {
        writeln!(
            out,
            "  {:>7.2}x  {:>11} -> {:>11}  {}",
            x.ratio,
            fmt_dur(x.a_ns),
            fmt_dur(x.b_ns),
            x.key
        )?;
    }
    rows_text("by state", &c.states, out)?;
    rows_text("by thread", &c.threads, out)?;
    rows_text("the hop tree's lines", &c.lines, out)
}
