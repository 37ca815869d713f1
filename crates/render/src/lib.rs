//! Rendering of analyses: aligned text for people, CSV and JSON for programs; SVG (and,
//! with the `png` feature, PNG) charts (`svg`, `png`), and the self-contained HTML report
//! (`charts` draws what a [`kstate_views::survey::Survey`] holds, `html` lays it out,
//! `rundir` writes a run's directory). Nothing here runs an analyzer.
//!
//! JSON and CSV are complete (every row, every column, integer nanoseconds) and stable:
//! members are only ever added. Text rounds durations for reading (`12.345us`).
//!
//! JSON shapes (one object per run; `--log` streams its rows inside the object):
//! - `--stat`: `{"analyzer", "by", "mode": "stat", "file", "window": [from_ns, to_ns] | null,
//!   "filters": {...}, "lost_events": {"<cpu>": n | null}, "pairs": {...},
//!   "rows": [{"key", "count", "total_ns", "avg_ns", "min_ns", "max_ns", "p50_ns",
//!   "p99_ns"[, FLAG_COLUMN]}], TABLE_NAME: [{column: value}], "notes", "errors",
//!   "damage"}` ("errors" in words, "damage" the same problems as objects: [`damage`])
//! - `--dist`: the same header, `"buckets": "log2" | "log10"`, and rows
//!   `{"key", "count", "buckets": [{"lo_ns", "hi_ns" | null, "count"}]}` (non-empty range;
//!   a bucket holds lo_ns <= v <= hi_ns for log2, lo_ns < v <= hi_ns for log10).
//! - Value columns are named for the analyzer's unit (`Info::unit`): `total_ns` for
//!   durations, `total_bytes`, `total_pages`, ... for others; `--log` rows carry `dur_ns`
//!   or the unit's name.
//! - `--log`: `{"analyzer", "by", "mode": "log", "file", "filters", "rows": [{"ts", "key",
//!   "dur_ns" | "level", "tid", "pid", "comm", "cpu"[, FLAG_COLUMN]}], "window",
//!   "lost_events", "pairs", "notes", "errors", "damage"}`; rows in completion order, or with
//!   `--sort` the first N rows in that order ([`sorted::SortedLog`]).

pub mod charts;
pub mod colour;
pub mod compare;
pub mod damage;
pub mod error;
pub mod flame;
pub mod fleet;
pub mod html;
pub mod info;
pub mod machines;
#[cfg(feature = "png")]
pub mod png;
pub mod profile;
pub mod record;
pub mod rundir;
pub mod scale;
pub mod svg;
pub mod utc;
pub mod why;
#[cfg(test)]
mod writer_tests;

use std::io::{self, Write};

use kstate_analyze::analyzer::{Buckets, Cell, Kind, LogRow, LogSink, Outcome, Row, Table, Unit};
use kstate_analyze::filter::fmt_secs;
use kstate_analyze::hist::{Decades, DECADES};
use kstate_analyze::Info;
use kstate_format::value::write_json_str;

pub mod sorted;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Csv,
    Json,
}

/// What the report header says besides the outcome.
#[derive(Debug, Clone)]
pub struct Meta {
    pub file: String,
    pub filters: Vec<(String, String)>,
}

fn json_str(s: &str) -> String {
    let mut v = Vec::new();
    write_json_str(s, &mut v);
    String::from_utf8(v).expect("JSON text is UTF-8")
}

/// One CSV cell. Keys come from process and thread names, which anyone on the machine
/// chooses: a cell starting with `= + - @` (or a tab or CR) would be evaluated as a formula
/// by spreadsheets, so it gets a leading `'`, which makes them show it as text (OWASP's
/// advice for CSV injection).
pub(crate) fn csv_field(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("\"'{}\"", s.replace('"', "\"\""))
    } else if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn json_header(info: &Info, by: &str, mode: &str, meta: &Meta) -> String {
    let filters: Vec<String> = meta
        .filters
        .iter()
        .map(|(k, v)| format!("{}:{}", json_str(k), json_str(v)))
        .collect();
    format!(
        "{{\"analyzer\":{},\"by\":{},\"mode\":{},\"file\":{},\"filters\":{{{}}}",
        json_str(info.name),
        json_str(by),
        json_str(mode),
        json_str(&meta.file),
        filters.join(",")
    )
}

/// Members every report ends with: window, losses, pair counts, tables, notes, errors.
fn json_trailer(o: &Outcome) -> String {
    let mut s = String::new();
    match o.span {
        Some((a, b)) => s.push_str(&format!(",\"window\":[{a},{b}]")),
        None => s.push_str(",\"window\":null"),
    }
    let lost: Vec<String> = o
        .lost
        .iter()
        .map(|(cpu, n)| match n {
            Some(n) => format!("\"{cpu}\":{n}"),
            None => format!("\"{cpu}\":null"),
        })
        .collect();
    s.push_str(&format!(",\"lost_events\":{{{}}}", lost.join(",")));
    let c = &o.counts;
    s.push_str(&format!(
        ",\"pairs\":{{\"selected\":{},\"filtered_out\":{},\"broken_by_loss\":{},\"unmatched\":{},\"open_at_end\":{},\"inferred_switch_ins\":{}}},\"events_read\":{}",
        c.selected, c.filtered, c.broken_by_loss, c.unmatched, c.open_at_end, c.inferred, c.events
    ));
    for t in &o.tables {
        s.push_str(&format!(",{}:[", json_str(t.name)));
        for (i, r) in t.rows.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let cells: Vec<String> = t
                .columns
                .iter()
                .zip(r)
                .map(|(c, v)| format!("{}:{}", json_str(c), json_cell(v)))
                .collect();
            s.push_str(&format!("{{{}}}", cells.join(",")));
        }
        s.push(']');
    }
    let notes: Vec<String> = o.notes.iter().map(|n| json_str(n)).collect();
    let errors: Vec<String> = o.errors.iter().map(|e| json_str(&e.to_string())).collect();
    s.push_str(&format!(
        ",\"notes\":[{}],\"errors\":[{}],\"damage\":{}}}",
        notes.join(","),
        errors.join(","),
        damage::json(&o.errors)
    ));
    s
}

fn json_cell(c: &Cell) -> String {
    match c {
        Cell::Int(n) => n.to_string(),
        Cell::Float(f) if f.is_finite() => format!("{f}"),
        Cell::Float(_) => "null".into(),
        Cell::Text(t) => json_str(t),
    }
}

fn text_cell(c: &Cell) -> String {
    match c {
        Cell::Int(n) => n.to_string(),
        Cell::Float(f) => format!("{f:.3}"),
        Cell::Text(t) => t.clone(),
    }
}

/// The text header: file, time, filters, losses (loudly), pair accounting.
fn text_header(o: &Outcome, meta: &Meta, mode: &str, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "analyzer: {} --{mode} (key: {}; value: {})",
        o.info.name, o.by, o.info.value
    )?;
    writeln!(w, "file:     {}", meta.file)?;
    text_time_and_losses(o, meta, w)
}

fn text_time_and_losses(o: &Outcome, meta: &Meta, w: &mut dyn Write) -> io::Result<()> {
    match o.span {
        Some((a, b)) => {
            let rel = o
                .trace_start
                .map(|t| {
                    format!(
                        " (+{} .. +{} from trace start)",
                        fmt_secs(a.saturating_sub(t)),
                        fmt_secs(b.saturating_sub(t))
                    )
                })
                .unwrap_or_default();
            writeln!(
                w,
                "time:     {} .. {}{rel}, {:.6} s",
                fmt_secs(a),
                fmt_secs(b),
                (b - a) as f64 / 1e9
            )?
        }
        None => writeln!(w, "time:     (no events selected)")?,
    }
    if !meta.filters.is_empty() {
        let f: Vec<String> = meta
            .filters
            .iter()
            .map(|(k, v)| format!("--{k} {v}"))
            .collect();
        writeln!(w, "filters:  {}", f.join(" "))?;
    }
    if o.any_loss() {
        let (n, unknown) = o.lost_total();
        let per: Vec<String> = o
            .lost
            .iter()
            .filter(|(_, l)| **l != Some(0))
            .map(|(c, l)| match l {
                Some(n) => format!("cpu{c}: {n}"),
                None => format!("cpu{c}: unknown"),
            })
            .collect();
        writeln!(
            w,
            "LOST:     *** {}{} events lost in this time ({}); {} pairs spanning a loss were dropped ***",
            n,
            if unknown { "+ (some uncounted)" } else { "" },
            per.join(", "),
            o.counts.broken_by_loss
        )?;
    } else {
        writeln!(w, "lost:     none")?;
    }
    let c = &o.counts;
    writeln!(
        w,
        "pairs:    {} selected; {} filtered out, {} broken by loss, {} unmatched, {} open at end",
        c.selected, c.filtered, c.broken_by_loss, c.unmatched, c.open_at_end
    )?;
    for n in &o.notes {
        writeln!(w, "note:     {n}")?;
    }
    for e in &o.errors {
        writeln!(w, "ERROR:    {e} (figures cover what could be read)")?;
    }
    Ok(())
}

fn stat_values(r: &Row) -> [u64; 7] {
    let a = &r.agg;
    [
        a.count,
        a.total,
        a.avg(),
        a.min(),
        a.max,
        a.percentile(50.0),
        a.percentile(99.0),
    ]
}

/// `--stat`: one row per key (rows already sorted and cut by the caller).
pub fn stat(o: &Outcome, meta: &Meta, fmt: Format, w: &mut dyn Write) -> io::Result<()> {
    let flag = o.info.flag_column;
    match fmt {
        Format::Json => {
            write!(w, "{}", json_header(&o.info, o.by, "stat", meta))?;
            write!(w, ",\"rows\":[")?;
            for (i, r) in o.rows.iter().enumerate() {
                let v = stat_values(r);
                if i > 0 {
                    write!(w, ",")?;
                }
                let u = o.info.unit.suffix();
                write!(
                    w,
                    "{{\"key\":{},\"count\":{},\"total_{u}\":{},\"avg_{u}\":{},\"min_{u}\":{},\"max_{u}\":{},\"p50_{u}\":{},\"p99_{u}\":{}",
                    json_str(&r.key), v[0], v[1], v[2], v[3], v[4], v[5], v[6]
                )?;
                if let Some(f) = flag {
                    write!(w, ",{}:{}", json_str(f), r.agg.flagged)?;
                }
                write!(w, "}}")?;
            }
            write!(w, "]")?;
            writeln!(w, "{}", json_trailer(o))
        }
        Format::Csv => {
            let u = o.info.unit.suffix();
            write!(
                w,
                "key,count,total_{u},avg_{u},min_{u},max_{u},p50_{u},p99_{u}"
            )?;
            if let Some(f) = flag {
                write!(w, ",{f}")?;
            }
            writeln!(w)?;
            for r in &o.rows {
                let v = stat_values(r);
                write!(w, "{}", csv_field(&r.key))?;
                for x in v {
                    write!(w, ",{x}")?;
                }
                if flag.is_some() {
                    write!(w, ",{}", r.agg.flagged)?;
                }
                writeln!(w)?;
            }
            Ok(())
        }
        Format::Text => {
            text_header(o, meta, "stat", w)?;
            writeln!(w)?;
            let kw = o
                .rows
                .iter()
                .map(|r| r.key.chars().count())
                .max()
                .unwrap_or(3)
                .max(3);
            write!(
                w,
                "{:<kw$} {:>10} {:>14} {:>12} {:>12} {:>12} {:>12} {:>12}",
                "KEY", "COUNT", "TOTAL", "AVG", "MIN", "MAX", "P50", "P99"
            )?;
            if let Some(f) = flag {
                write!(w, " {:>8}", f.to_uppercase())?;
            }
            writeln!(w)?;
            let unit = o.info.unit;
            for r in &o.rows {
                let v = stat_values(r);
                write!(
                    w,
                    "{:<kw$} {:>10} {:>14} {:>12} {:>12} {:>12} {:>12} {:>12}",
                    r.key,
                    v[0],
                    unit.fmt(v[1]),
                    unit.fmt(v[2]),
                    unit.fmt(v[3]),
                    unit.fmt(v[4]),
                    unit.fmt(v[5]),
                    unit.fmt(v[6])
                )?;
                if flag.is_some() {
                    write!(w, " {:>8}", r.agg.flagged)?;
                }
                writeln!(w)?;
            }
            if o.rows.is_empty() {
                writeln!(w, "(no pairs)")?;
            }
            for t in &o.tables {
                text_table(t, w)?;
            }
            Ok(())
        }
    }
}

fn text_table(t: &Table, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "\n{}:", t.title)?;
    let cells: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| r.iter().map(text_cell).collect())
        .collect();
    let widths: Vec<usize> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r.get(i).map_or(0, String::len))
                .max()
                .unwrap_or(0)
                .max(c.len())
        })
        .collect();
    for (i, c) in t.columns.iter().enumerate() {
        write!(w, "  {:>width$}", c.to_uppercase(), width = widths[i])?;
    }
    writeln!(w)?;
    for r in &cells {
        for (i, c) in r.iter().enumerate() {
            write!(w, "  {:>width$}", c, width = widths[i])?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// One bucket: inclusive/exclusive bounds as documented at the top, and its count.
struct Bucket {
    lo: u64,
    hi: Option<u64>,
    count: u64,
    label: String,
}

fn dist_buckets(r: &Row, buckets: Buckets, unit: Unit) -> Vec<Bucket> {
    match buckets {
        Buckets::Log2 => {
            let l = r.agg.hist.log2();
            let (Some(first), Some(last)) = (l.first(), l.last()) else {
                return Vec::new();
            };
            (first.0..=last.0)
                .map(|k| {
                    let count = l.iter().find(|x| x.0 == k).map_or(0, |x| x.1);
                    let (lo, hi) = if k < 0 {
                        (0, 0)
                    } else {
                        (
                            1u64 << k,
                            ((1u128 << (k + 1)) - 1).min(u64::MAX as u128) as u64,
                        )
                    };
                    Bucket {
                        lo,
                        hi: Some(hi),
                        count,
                        label: format!("{} .. {}", unit.fmt(lo), unit.fmt(hi)),
                    }
                })
                .collect()
        }
        Buckets::Log10 => {
            let c = &r.agg.decades.counts;
            let Some(first) = c.iter().position(|&n| n > 0) else {
                return Vec::new();
            };
            let last = c.iter().rposition(|&n| n > 0).unwrap_or(first);
            (first..=last)
                .map(|i| {
                    let (lo, hi) = Decades::range(i);
                    let label = decade_label(i, unit);
                    Bucket {
                        lo: lo.unwrap_or(0),
                        hi,
                        count: c[i],
                        label,
                    }
                })
                .collect()
        }
    }
}

/// The label of decimal bucket `i` (`<= 0.1us`, `1us - 10us`, `> 10s`).
pub fn decade_label(i: usize, unit: Unit) -> String {
    match Decades::range(i) {
        (None, Some(h)) => format!("<= {}", decade(h, unit)),
        (Some(l), Some(h)) => format!("{} - {}", decade(l, unit), decade(h, unit)),
        (Some(l), None) => format!("> {}", decade(l, unit)),
        (None, None) => String::new(),
    }
}

/// 100 -> `0.1us`, 1000 -> `1us`, 10^8 -> `100ms` (other units: the number).
fn decade(ns: u64, unit: Unit) -> String {
    if unit != Unit::Ns {
        return ns.to_string();
    }
    match ns {
        100 => "0.1us".into(),
        n if n < 1_000_000 => format!("{}us", n / 1_000),
        n if n < 1_000_000_000 => format!("{}ms", n / 1_000_000),
        n => format!("{}s", n / 1_000_000_000),
    }
}

const _: () = assert!(DECADES == 10);

/// `--dist`: a histogram per key, as ASCII bars with counts and percentages.
pub fn dist(
    o: &Outcome,
    meta: &Meta,
    buckets: Buckets,
    fmt: Format,
    w: &mut dyn Write,
) -> io::Result<()> {
    let bname = match buckets {
        Buckets::Log2 => "log2",
        Buckets::Log10 => "log10",
    };
    match fmt {
        Format::Json => {
            write!(w, "{}", json_header(&o.info, o.by, "dist", meta))?;
            write!(w, ",\"buckets\":\"{bname}\",\"rows\":[")?;
            for (i, r) in o.rows.iter().enumerate() {
                if i > 0 {
                    write!(w, ",")?;
                }
                write!(
                    w,
                    "{{\"key\":{},\"count\":{},\"buckets\":[",
                    json_str(&r.key),
                    r.agg.count
                )?;
                for (j, b) in dist_buckets(r, buckets, o.info.unit).iter().enumerate() {
                    if j > 0 {
                        write!(w, ",")?;
                    }
                    let hi = b.hi.map_or("null".to_string(), |h| h.to_string());
                    let u = o.info.unit.suffix();
                    write!(
                        w,
                        "{{\"lo_{u}\":{},\"hi_{u}\":{hi},\"count\":{}}}",
                        b.lo, b.count
                    )?;
                }
                write!(w, "]}}")?;
            }
            write!(w, "]")?;
            writeln!(w, "{}", json_trailer(o))
        }
        Format::Csv => {
            let u = o.info.unit.suffix();
            writeln!(w, "key,lo_{u},hi_{u},count")?;
            for r in &o.rows {
                for b in dist_buckets(r, buckets, o.info.unit) {
                    writeln!(
                        w,
                        "{},{},{},{}",
                        csv_field(&r.key),
                        b.lo,
                        b.hi.map_or(String::new(), |h| h.to_string()),
                        b.count
                    )?;
                }
            }
            Ok(())
        }
        Format::Text => {
            text_header(o, meta, "dist", w)?;
            for r in &o.rows {
                let bs = dist_buckets(r, buckets, o.info.unit);
                let max = bs.iter().map(|b| b.count).max().unwrap_or(0).max(1);
                let lw = bs.iter().map(|b| b.label.len()).max().unwrap_or(0).max(5);
                writeln!(
                    w,
                    "\n{} = {}  (count {}, avg {}, max {})",
                    o.by,
                    r.key,
                    r.agg.count,
                    o.info.unit.fmt(r.agg.avg()),
                    o.info.unit.fmt(r.agg.max)
                )?;
                writeln!(
                    w,
                    "  {:>lw$} : {:>9} {:>7}  distribution",
                    "range", "count", "%"
                )?;
                for b in &bs {
                    let bar = (b.count * 40).div_ceil(max) as usize;
                    let pct = b.count as f64 * 100.0 / r.agg.count.max(1) as f64;
                    writeln!(
                        w,
                        "  {:>lw$} : {:>9} {:>6.2}% |{:<40}|",
                        b.label,
                        b.count,
                        pct,
                        "*".repeat(bar)
                    )?;
                }
            }
            if o.rows.is_empty() {
                writeln!(w, "\n(no pairs)")?;
            }
            Ok(())
        }
    }
}

/// `--log`: rows streamed as pairs complete, then a footer (text) or the closing
/// members (JSON) once the pass is over.
pub struct LogWriter<W: Write> {
    w: W,
    fmt: Format,
    flag: Option<&'static str>,
    unit: Unit,
    rows: u64,
    /// Set when the reader went away (closed pipe): not an error for the user.
    pub broken_pipe: bool,
}

impl<W: Write> LogWriter<W> {
    pub fn start(w: W, fmt: Format, info: &Info, by: &str, meta: &Meta) -> io::Result<Self> {
        Self::start_ordered(w, fmt, info, by, meta, "in completion order")
    }

    /// Like [`LogWriter::start`], for rows in another `order` ("in completion order",
    /// "sorted by ..."; text headers say it).
    pub fn start_ordered(
        mut w: W,
        fmt: Format,
        info: &Info,
        by: &str,
        meta: &Meta,
        order: &str,
    ) -> io::Result<Self> {
        let flag = info.flag_column;
        match fmt {
            Format::Json => write!(w, "{},\"rows\":[", json_header(info, by, "log", meta))?,
            Format::Csv => {
                write!(w, "ts_ns,key,value,unit,tid,pid,comm,cpu")?;
                if let Some(f) = flag {
                    write!(w, ",{f}")?;
                }
                writeln!(w)?;
            }
            Format::Text => {
                writeln!(
                    w,
                    "analyzer: {} --log (key: {by}; value: {}; rows {order})",
                    info.name, info.value
                )?;
                writeln!(w, "file:     {}", meta.file)?;
                writeln!(w)?;
                write!(
                    w,
                    "{:>20} {:<24} {:>14} {:>8} {:>8} {:<16} {:>4}",
                    "START", "KEY", "VALUE", "TID", "PID", "COMM", "CPU"
                )?;
                if let Some(f) = flag {
                    write!(w, " {}", f.to_uppercase())?;
                }
                writeln!(w)?;
            }
        }
        Ok(LogWriter {
            w,
            fmt,
            flag,
            unit: info.unit,
            rows: 0,
            broken_pipe: false,
        })
    }

    /// Ends the output with what is known only after the pass.
    pub fn finish(mut self, o: &Outcome, meta: &Meta) -> io::Result<()> {
        match self.fmt {
            Format::Json => writeln!(self.w, "]{}", json_trailer(o))?,
            Format::Csv => {}
            Format::Text => {
                writeln!(self.w, "\n{} rows", self.rows)?;
                text_time_and_losses(o, meta, &mut self.w)?;
            }
        }
        self.w.flush()
    }
}

impl<W: Write> LogSink for LogWriter<W> {
    fn row(&mut self, r: &LogRow<'_>) -> io::Result<()> {
        let res = self.write_row(r);
        if let Err(e) = &res {
            if e.kind() == io::ErrorKind::BrokenPipe {
                self.broken_pipe = true;
            }
        }
        res
    }
}

impl<W: Write> LogWriter<W> {
    fn write_row(&mut self, r: &LogRow<'_>) -> io::Result<()> {
        let flag = r.flag as u8;
        match self.fmt {
            Format::Json => {
                if self.rows > 0 {
                    write!(self.w, ",")?;
                }
                let value = match r.kind {
                    Kind::Dur if self.unit == Unit::Ns => format!("\"dur_ns\":{}", r.value),
                    Kind::Dur => format!("\"{}\":{}", self.unit.suffix(), r.value),
                    Kind::Level => format!("\"level\":{}", r.value),
                    Kind::Mark => format!("\"value\":{}", r.value),
                };
                let pid = r.pid.map_or("null".to_string(), |p| p.to_string());
                write!(
                    self.w,
                    "\n{{\"ts\":{},\"key\":{},{value},\"tid\":{},\"pid\":{pid},\"comm\":{},\"cpu\":{}",
                    r.start,
                    json_str(r.key),
                    r.tid,
                    json_str(r.comm),
                    r.cpu
                )?;
                if let Some(f) = self.flag {
                    write!(self.w, ",{}:{}", json_str(f), r.flag)?;
                }
                write!(self.w, "}}")?;
            }
            Format::Csv => {
                let unit = match r.kind {
                    Kind::Dur => self.unit.suffix(),
                    Kind::Level => "level",
                    Kind::Mark => "value",
                };
                write!(
                    self.w,
                    "{},{},{},{unit},{},{},{},{}",
                    r.start,
                    csv_field(r.key),
                    r.value,
                    r.tid,
                    r.pid.map_or(String::new(), |p| p.to_string()),
                    csv_field(r.comm),
                    r.cpu
                )?;
                if self.flag.is_some() {
                    write!(self.w, ",{flag}")?;
                }
                writeln!(self.w)?;
            }
            Format::Text => {
                let value = match r.kind {
                    Kind::Dur => self.unit.fmt(r.value),
                    Kind::Level => format!("len={}", r.value),
                    Kind::Mark => format!("={}", r.value),
                };
                write!(
                    self.w,
                    "{:>20} {:<24} {:>14} {:>8} {:>8} {:<16} {:>4}",
                    fmt_secs(r.start),
                    r.key,
                    value,
                    r.tid,
                    r.pid.map_or("-".to_string(), |p| p.to_string()),
                    r.comm,
                    r.cpu
                )?;
                if self.flag.is_some() {
                    write!(self.w, " {}", if r.flag { "yes" } else { "" })?;
                }
                writeln!(self.w)?;
            }
        }
        self.rows += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("read"), "read");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        // Names that spreadsheets would evaluate as formulas stay text.
        assert_eq!(csv_field("=2+5+cmd-7148 USR"), "\"'=2+5+cmd-7148 USR\"");
        for s in ["+1", "-1+2", "@SUM(A1)", "\tx", "=a\"b"] {
            let c = csv_field(s);
            assert!(c.starts_with("\"'"), "{s:?} -> {c:?}");
        }
        assert_eq!(csv_field("a=b"), "a=b");
    }

    #[test]
    fn decade_labels() {
        assert_eq!(decade(100, Unit::Ns), "0.1us");
        assert_eq!(decade(1_000, Unit::Ns), "1us");
        assert_eq!(decade(100_000, Unit::Ns), "100us");
        assert_eq!(decade(1_000_000, Unit::Ns), "1ms");
        assert_eq!(decade(100_000_000, Unit::Ns), "100ms");
        assert_eq!(decade(10_000_000_000, Unit::Ns), "10s");
    }
}
