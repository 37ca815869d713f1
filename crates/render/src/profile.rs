//! `kstate profile`'s report: where the samples fell per symbol, who calls a symbol or what
//! it calls, the samples per instruction; as `perf report --stdio`-like text or JSON.

use std::fmt::Write as _;

use kstate_analyze::filter::{fmt_secs, Filters};
use kstate_views::profile::annotate::Annotation;
use kstate_views::profile::{CallView, DiffRow, Profile};

/// `cycles at 999 Hz`: what was sampled, how often.
pub fn rate(p: &Profile) -> String {
    match (p.freq, p.period) {
        (Some(hz), _) => format!("{} at {hz} Hz", p.event),
        (_, Some(per)) => format!("{} every {per} events", p.event),
        _ => p.event.clone(),
    }
}

/// The report by symbol (with --callers/--callees, that view instead), `top` rows (0: all).
pub fn text(p: &Profile, f: &Filters, top: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}, clock {}", rate(p), p.clock);
    let _ = writeln!(
        s,
        "# {} samples selected (of {} in the file), {} lost; kernel {:.1}%, user {:.1}%",
        p.samples,
        p.total_samples,
        p.lost,
        pct(p, p.kernel_samples, p.samples),
        pct(p, p.user_samples, p.samples)
    );
    let _ = writeln!(s, "# user chains: {}", p.chains.describe());
    if let (Some(a), Some(b)) = (p.first_ts, p.last_ts) {
        let _ = writeln!(
            s,
            "# time: {} .. {} (+{} .. +{} from trace start)",
            fmt_secs(a),
            fmt_secs(b),
            fmt_secs(a.saturating_sub(p.trace_start)),
            fmt_secs(b.saturating_sub(p.trace_start))
        );
    }
    for (k, v) in f.describe() {
        let _ = writeln!(s, "# {k}: {v}");
    }
    if !p.details.is_empty() {
        return s;
    }
    if let Some(v) = &p.callers {
        view_text(&mut s, p, v, "callers", "Caller");
        return s;
    }
    if let Some(v) = &p.callees {
        view_text(&mut s, p, v, "callees", "Callee");
        return s;
    }
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# {:>8} {:>11} {:>8}  {:<8} {:<24} Symbol",
        "Overhead", "Cumulative", "Samples", "Kind", "Image"
    );
    let mut cum = 0.0;
    let n = if top == 0 { p.rows.len() } else { top };
    for r in p.rows.iter().take(n) {
        let share = p.share(r.period);
        cum += share;
        let mark = if r.sym.kind.is_kernel() { "[k]" } else { "[.]" };
        let _ = writeln!(
            s,
            "  {:>7.2}% {:>10.2}% {:>8}  {:<8} {:<24} {mark} {}",
            share,
            cum,
            r.samples,
            r.sym.kind.name(),
            r.sym.image,
            r.sym.name
        );
    }
    if p.rows.len() > n {
        let _ = writeln!(
            s,
            "# ({} more symbols; --top 0 shows all)",
            p.rows.len() - n
        );
    }
    s
}

/// The callers or callees of one symbol.
fn view_text(s: &mut String, p: &Profile, v: &CallView, what: &str, col: &str) {
    let _ = writeln!(
        s,
        "# {what} of {}: {} samples with it on the stack ({:.2}% of the selected), {} with it running",
        v.symbol,
        v.samples,
        pct(p, v.samples, p.samples),
        v.self_samples
    );
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# {:>7} {:>7}  {:<8} {:<24} {col}",
        "Samples", "%", "Kind", "Image"
    );
    for (sym, n) in &v.rows {
        let _ = writeln!(
            s,
            "  {:>7} {:>6.2}%  {:<8} {:<24} {}",
            n,
            pct(p, *n, v.samples),
            if sym.image.is_empty() {
                "-"
            } else {
                sym.kind.name()
            },
            if sym.image.is_empty() {
                "-"
            } else {
                &sym.image
            },
            sym.name
        );
    }
}

/// The samples per instruction of one symbol (--details).
pub fn details_text(p: &Profile, a: &Annotation) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# {} in {} ({}{}): {} samples, {:.2}% of the selected",
        a.sym.name,
        a.sym.image,
        a.sym.kind.name(),
        a.sym
            .path
            .as_deref()
            .map(|x| format!(" {x}"))
            .unwrap_or_default(),
        a.samples,
        pct(p, a.samples, p.samples)
    );
    if let (Some(start), Some(size)) = (a.start, a.size) {
        let src = a.source.as_deref().map(|s| format!(", code read from {s}"));
        let _ = writeln!(s, "# {start:#x}, {size} bytes{}", src.unwrap_or_default());
    }
    if let Some(why) = &a.no_text {
        let _ = writeln!(s, "# no instruction text: {why}");
    }
    if a.unplaced > 0 {
        let _ = writeln!(
            s,
            "# {} samples at addresses outside the file's segments",
            a.unplaced
        );
    }
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# {:>18} {:>8} {:>8} {:>7}  Instruction",
        "Address", "Offset", "Samples", "%"
    );
    for l in &a.lines {
        let _ = writeln!(
            s,
            "  {:>18} {:>8} {:>8} {:>6.2}%  {}",
            format!("{:#x}", l.addr),
            l.offset.map_or("?".into(), |o| format!("+{o:#x}")),
            l.samples,
            pct(p, l.samples, a.samples),
            l.text.as_deref().unwrap_or("-")
        );
    }
    s
}

/// --details in JSON: one object per symbol.
pub fn details_json(p: &Profile, a: &Annotation) -> serde_json::Value {
    serde_json::json!({
        "symbol": a.sym.name,
        "image": a.sym.image,
        "path": a.sym.path,
        "kind": a.sym.kind.name(),
        "samples": a.samples,
        "percent": pct(p, a.samples, p.samples),
        "unplaced_samples": a.unplaced,
        "start": a.start,
        "size": a.size,
        "code_source": a.source,
        "no_text": a.no_text,
        "instructions": a.lines.iter().map(|l| serde_json::json!({
            "address": l.addr,
            "offset": l.offset,
            "samples": l.samples,
            "percent": pct(p, l.samples, a.samples),
            "bytes": l.bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "text": l.text,
        })).collect::<Vec<_>>(),
    })
}

fn view_json(p: &Profile, v: &CallView) -> serde_json::Value {
    serde_json::json!({
        "symbol": v.symbol,
        "samples": v.samples,
        "self_samples": v.self_samples,
        "rows": v.rows.iter().map(|(s, n)| serde_json::json!({
            "symbol": s.name,
            "image": s.image,
            "kind": s.kind.name(),
            "samples": n,
            "percent": pct(p, *n, v.samples),
        })).collect::<Vec<_>>(),
    })
}

/// The whole profile in JSON.
pub fn json(p: &Profile, f: &Filters) -> serde_json::Value {
    let mut cum = 0.0;
    let rows: Vec<serde_json::Value> = p
        .rows
        .iter()
        .map(|r| {
            let share = p.share(r.period);
            cum += share;
            serde_json::json!({
                "symbol": r.sym.name,
                "image": r.sym.image,
                "path": r.sym.path,
                "kind": r.sym.kind.name(),
                "samples": r.samples,
                "period": r.period,
                "percent": share,
                "cumulative_percent": cum,
            })
        })
        .collect();
    let filters: serde_json::Map<String, serde_json::Value> = f
        .describe()
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    serde_json::json!({
        "event": p.event,
        "freq_hz": p.freq,
        "period": p.period,
        "clock": p.clock,
        "samples_in_file": p.total_samples,
        "lost": p.lost,
        "samples": p.samples,
        "total_period": p.total_period,
        "kernel_samples": p.kernel_samples,
        "user_samples": p.user_samples,
        "trace_start": p.trace_start,
        "first_ts": p.first_ts,
        "last_ts": p.last_ts,
        "filters": filters,
        "symbols": rows,
        "callers": p.callers.as_ref().map(|v| view_json(p, v)),
        "callees": p.callees.as_ref().map(|v| view_json(p, v)),
        "warnings": p.warnings,
        "user_chains": {"cfi": p.chains.cfi, "frame_pointers": p.chains.fp, "cut": p.chains.cut, "cut_at_copy_end": p.chains.copy_end},
    })
}

/// `kstate profile --compare-events A,B`: the text header above the comparison table and
/// the members its JSON adds (file, events, filters).
pub fn comparison_header(
    file: &str,
    pa: &Profile,
    pb: &Profile,
    f: &Filters,
) -> (Vec<String>, serde_json::Value) {
    let mut header = vec![format!("{}: sampled events, clock {}", file, pa.clock)];
    for p in [&pa, &pb] {
        header.push(format!(
            "{}: {} samples selected (of {} in the file), {} lost",
            rate(p),
            p.samples,
            p.total_samples,
            p.lost
        ));
    }
    for (k, v) in f.describe() {
        header.push(format!("{k}: {v}"));
    }
    let events: Vec<serde_json::Value> = [&pa, &pb]
        .iter()
        .map(|p| {
            serde_json::json!({
                "event": p.event, "freq_hz": p.freq, "period": p.period, "samples": p.samples,
                "samples_in_file": p.total_samples, "lost": p.lost,
            })
        })
        .collect();
    let filters: serde_json::Map<String, serde_json::Value> = f
        .describe()
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    let extra = serde_json::json!({
        "file": file,
        "simulated": false,
        "events": events,
        "filters": filters,
    });
    (header, extra)
}

/// `kstate diff` in JSON: both recordings in brief, then every symbol's change.
pub fn diff_json(
    before: &str,
    a: &Profile,
    after: &str,
    b: &Profile,
    rows: &[DiffRow],
) -> serde_json::Value {
    let j: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "symbol": r.name,
                "image": r.image,
                "kind": r.kind.name(),
                "before_samples": r.before_samples,
                "after_samples": r.after_samples,
                "before_percent": r.before_percent,
                "after_percent": r.after_percent,
                "delta_percent": r.after_percent - r.before_percent,
            })
        })
        .collect();
    serde_json::json!({
        "before": {"file": before, "event": a.event,
                   "samples": a.samples, "lost": a.lost, "total_period": a.total_period},
        "after": {"file": after, "event": b.event,
                  "samples": b.samples, "lost": b.lost, "total_period": b.total_period},
        "symbols": j,
    })
}

/// `kstate diff` as text: the `top` largest changes in share (0: all).
pub fn diff_text(
    before: &str,
    a: &Profile,
    after: &str,
    b: &Profile,
    rows: &[DiffRow],
    top: usize,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# before: {}: {} samples of {}, {} lost",
        before,
        a.samples,
        rate(a),
        a.lost
    );
    let _ = writeln!(
        s,
        "# after:  {}: {} samples of {}, {} lost ({:+.1}% samples)",
        after,
        b.samples,
        rate(b),
        b.lost,
        if a.samples > 0 {
            (b.samples as f64 - a.samples as f64) * 100.0 / a.samples as f64
        } else {
            0.0
        }
    );
    if a.event != b.event {
        let _ = writeln!(
            s,
            "# warning: different events ({} vs {})",
            a.event, b.event
        );
    }
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# {:>8} {:>8} {:>8} {:>9} {:>9}  {:<24} Symbol",
        "Before", "After", "Delta", "Samples", "Samples", "Image"
    );
    let n = if top == 0 { rows.len() } else { top };
    for r in rows.iter().take(n) {
        let _ = writeln!(
            s,
            "  {:>7.2}% {:>7.2}% {:>+7.2}% {:>9} {:>9}  {:<24} {}",
            r.before_percent,
            r.after_percent,
            r.after_percent - r.before_percent,
            r.before_samples,
            r.after_samples,
            r.image,
            r.name
        );
    }
    if rows.len() > n {
        let _ = writeln!(s, "# ({} more symbols; --top 0 shows all)", rows.len() - n);
    }
    s
}

/// `n` as a percentage of `of` (0 when `of` is 0).
fn pct(_: &Profile, n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}
