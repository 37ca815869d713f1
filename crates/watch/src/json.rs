//! `kstate watch --json`: one object per interval, and one per alarm firing.
//!
//! ```text
//! {"start_ns", "end_ns", "t": seconds from the start to the interval's end,
//!  "partial": the last interval, cut short where the recording stopped (never empty),
//!  "analyzers": {NAME or NAME/BY: {"by", "unit", "events", "count", "total", "min", "max",
//!                "p50", "p99" (of every key), "rows": [{"key", "count", "total", "min",
//!                "max", "avg", "p50", "p99"}, ...] (the largest totals), "tables": {...},
//!                "pairs_broken_by_loss"}},
//!  "cpus": [{"cpu", "events", "events_per_s", "bytes_per_s", "buffer_lasts_s" (at that
//!            rate; null when idle), "lost" (null: uncounted)}],
//!  "alarms": [firing, ...] (each {"alarm", "value", "threshold", "value_text",
//!            "threshold_text", "key", "start_ns", "end_ns", "t", "suppressed": times
//!            the rule became true again since its last firing, held back by
//!            --alarm-every}),
//!  "log": [{"ts", "kind", "text"}, ...] (the watch log's entries since the last line:
//!          escalations, shedding, losses; see kstate_format::sections::watch_log)}
//! ```

use crate::alarm::Firing;
use kstate_analyze::analyzer::{Cell, Outcome};
use kstate_analyze::live::Interval;
use kstate_analyze::stats::Agg;
use serde_json::{json, Map, Value};

pub fn interval(
    iv: &Interval,
    start: u64,
    top: usize,
    buffer_bytes: u64,
    alarms: &[Firing],
) -> Value {
    let secs = (iv.end - iv.start) as f64 / 1e9;
    let mut analyzers = Map::new();
    for o in &iv.outcomes {
        let name = match iv
            .outcomes
            .iter()
            .position(|p| p.info.name == o.info.name)
            .is_some_and(|first| std::ptr::eq(&iv.outcomes[first], o))
        {
            true => o.info.name.to_string(),
            false => format!("{}/{}", o.info.name, o.by),
        };
        analyzers.insert(name, outcome(o, top));
    }
    let cpus: Vec<Value> = iv
        .cpus
        .iter()
        .map(|c| {
            let bytes_per_s = c.bytes as f64 / secs.max(1e-9);
            json!({
                "cpu": c.cpu,
                "events": c.events,
                "events_per_s": round(c.events as f64 / secs.max(1e-9)),
                "bytes_per_s": round(bytes_per_s),
                "buffer_lasts_s": (bytes_per_s > 0.0).then(|| round(buffer_bytes as f64 / bytes_per_s)),
                "lost": c.lost,
            })
        })
        .collect();
    json!({
        "start_ns": iv.start,
        "end_ns": iv.end,
        "t": round(iv.end.saturating_sub(start) as f64 / 1e9),
        // The last interval, cut short where the recording stopped: its rates divide
        // by its own (shorter) length.
        "partial": iv.partial,
        "analyzers": analyzers,
        "cpus": cpus,
        "alarms": alarms.iter().map(|f| firing(f, start)).collect::<Vec<_>>(),
    })
}

fn outcome(o: &Outcome, top: usize) -> Value {
    let mut all = Agg::default();
    for r in &o.rows {
        all.merge(&r.agg);
    }
    let mut v = stats(&all);
    let rows: Vec<Value> = top_rows(o, top)
        .into_iter()
        .map(|r| {
            let mut s = stats(&r.agg);
            s["key"] = json!(r.key);
            s["avg"] = json!(r.agg.avg());
            s
        })
        .collect();
    let mut tables = Map::new();
    for t in &o.tables {
        let rows: Vec<Value> = t
            .rows
            .iter()
            .map(|row| {
                let m: Map<String, Value> = t
                    .columns
                    .iter()
                    .zip(row)
                    .map(|(c, cell)| {
                        let v = match cell {
                            Cell::Int(i) => json!(i),
                            Cell::Float(f) => json!(f),
                            Cell::Text(s) => json!(s),
                        };
                        (c.to_string(), v)
                    })
                    .collect();
                Value::Object(m)
            })
            .collect();
        tables.insert(t.name.to_string(), Value::Array(rows));
    }
    v["by"] = json!(o.by);
    v["unit"] = json!(o.info.unit.suffix());
    v["events"] = json!(o.counts.events);
    v["pairs_broken_by_loss"] = json!(o.counts.broken_by_loss);
    v["rows"] = Value::Array(rows);
    v["tables"] = Value::Object(tables);
    v
}

/// Rows of `o` sorted by total time, the first `top`.
fn top_rows(o: &Outcome, top: usize) -> Vec<&kstate_analyze::analyzer::Row> {
    let mut rows: Vec<_> = o.rows.iter().collect();
    rows.sort_by(|a, b| {
        b.agg
            .total
            .cmp(&a.agg.total)
            .then_with(|| a.key.cmp(&b.key))
    });
    rows.truncate(top);
    rows
}

fn stats(a: &Agg) -> Value {
    json!({
        "count": a.count,
        "total": a.total,
        "min": a.min(),
        "max": a.max,
        "p50": if a.count > 0 { a.percentile(50.0) } else { 0 },
        "p99": if a.count > 0 { a.percentile(99.0) } else { 0 },
    })
}

pub fn firing(f: &Firing, start: u64) -> Value {
    json!({
        "alarm": f.rule,
        "value": f.value,
        "threshold": f.threshold,
        "value_text": f.value_text,
        "threshold_text": f.threshold_text,
        "key": f.key,
        "start_ns": f.start,
        "end_ns": f.end,
        "t": round(f.end.saturating_sub(start) as f64 / 1e9),
        // Onsets --alarm-every held back since the rule's previous firing.
        "suppressed": f.suppressed,
    })
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
