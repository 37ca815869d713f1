//! The timeline's questions: which tracks a recording has, what to draw of some of their
//! rows over a stretch of time, what a slice is (and the events behind it), and the event
//! list. Every answer comes from [`kstate_views::tracks`]; only the JSON is this crate's.
//!
//! Endpoints (GET, below the token; times are seconds from the file's first event):
//! - `api/tracks?f=FILE`: `{quantum_ns, from, to, missing, tracks: [{id, kind, name, comm,
//!   tid, tgid, rows: [{row, name}], slices, busy_ns, first, last}]}`.
//! - `api/timeline?f=FILE&from=S&to=S&w=COLS&rows=ID.ROW,...`: per row, its drawables as
//!   flat arrays `[c0, c1, kind, label, arg, fill, ...]` (columns [c0, c1), `label` an
//!   index into `labels`, `fill` 1..255 the share of the columns covered), at most one
//!   per column; `kinds` names the kinds.
//! - `api/slice?f=FILE&row=ID.ROW&t=S&tol=S`: the slice at (or nearest within `tol` of)
//!   t: its times, what it is, its facts, the analyzers' rows it belongs to, the thread
//!   or CPU that woke it, and the events at its start and end as `kstate dump` prints them.
//! - `api/events?f=FILE&from=S&to=S&at=NS&skip=N|before=NS&limit=N&tid=..&cpu=..&event=..`:
//!   a page of the event list (`at`/`before`: absolute trace-clock ns, the cursor).
//! - `api/wakeups?f=FILE&tid=T&from=S&to=S`: who woke thread T in the range (for arrows).

use std::fmt::Write;
use std::sync::Arc;

use kstate_analyze::filter::parse_dur_or_secs;
use kstate_views::tracks::list::{self, Anchor, Only};
use kstate_views::tracks::{Kind, RowKey, Slice, TrackKey, Tracks, NONE, ROW_STATE};

use crate::api::{js, App};
use crate::params::Params;
use crate::supersede::Ticket;

/// Rows one timeline request may ask for.
const MAX_ROWS: usize = 400;

impl App {
    /// The tracks of file `f`, built once (the first asker waits; [`App::warm_up`] starts it
    /// when the server starts).
    pub(crate) fn tracks_of(&self, f: usize) -> Result<Arc<Tracks>, String> {
        let f = self.file_at(f)?;
        self.tracks.get_or(
            &format!("{f}"),
            |_| 0,
            || {
                let source = self.files[f].source().ok_or("no source")?;
                Tracks::build(source, &|| false)
                    .map(Arc::new)
                    .map_err(|e| format!("{}: {e}", self.files[f].label))
            },
        )
    }

    pub(crate) fn tracks_json(&self, p: &Params) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let t = self.tracks_of(f)?;
        let start = self.files[f].range.0;
        let rel = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
        let mut s = format!(
            "{{\"quantum_ns\":{},\"events\":{},\"missing\":[{}],\"tracks\":[",
            t.quantum(),
            t.events,
            t.missing
                .iter()
                .map(|m| js(m))
                .collect::<Vec<_>>()
                .join(",")
        );
        for (i, tr) in t.tracks().iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let (kind, name, tid) = match tr.key {
                TrackKey::Cpu(c) => ("cpu", format!("CPU {c}"), None),
                TrackKey::Thread(tid) => ("thread", format!("{}-{tid}", tr.comm), Some(tid)),
                TrackKey::Device(d) => ("device", device_name(&t, d), None),
            };
            let names = tr.key.row_names();
            let rows: Vec<String> = tr
                .rows
                .iter()
                .map(|r| {
                    format!(
                        "{{\"row\":{r},\"name\":{}}}",
                        js(names.get(*r as usize).copied().unwrap_or("?"))
                    )
                })
                .collect();
            let _ = write!(
                s,
                "{{\"id\":{},\"kind\":\"{kind}\",\"name\":{},\"comm\":{},\"tid\":{},\"tgid\":{},\"rows\":[{}],\"slices\":{},\"busy_ns\":{},\"first\":{:.9},\"last\":{:.9}}}",
                js(&tr.key.id()),
                js(&name),
                js(&tr.comm),
                tid.map_or("null".into(), |t| t.to_string()),
                tr.tgid.map_or("null".into(), |t| t.to_string()),
                rows.join(","),
                tr.slices,
                tr.busy_ns,
                rel(tr.first),
                rel(tr.last)
            );
        }
        s.push_str("]}");
        Ok(s.into_bytes())
    }

    pub(crate) fn timeline(&self, p: &Params, ticket: &Ticket) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let (from, to) = self.span_params(f, p)?;
        let cols: usize = p.number("w", "a number of columns", None)?;
        let rows = row_list(p.get("rows").unwrap_or(""))?;
        let t = self.tracks_of(f)?;
        let source = self.files[f].source().ok_or("no source")?;
        let views = t
            .view(source, from, to, cols, &rows, &|| ticket.cancelled())
            .map_err(|e| e.to_string())?;
        let mut labels: Vec<String> = Vec::new();
        let mut index: std::collections::HashMap<(Kind, u32), usize> = Default::default();
        let mut s = String::with_capacity(1 << 16);
        let start = self.files[f].range.0;
        let _ = write!(
            s,
            "{{\"from\":{:.9},\"to\":{:.9},\"cols\":{},\"exact\":{},\"rows\":[",
            (from - start) as f64 / 1e9,
            (to - start) as f64 / 1e9,
            cols.clamp(1, 8192),
            ((to - from) as f64 / cols.max(1) as f64) < t.quantum() as f64
        );
        for (i, v) in views.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(
                s,
                "{{\"id\":{},\"row\":{},\"d\":[",
                js(&v.key.0.id()),
                v.key.1
            );
            for (j, d) in v.draws.iter().enumerate() {
                let l = *index.entry((d.kind, d.label)).or_insert_with(|| {
                    labels.push(t.label_text(d.kind, d.label));
                    labels.len() - 1
                });
                let _ = write!(
                    s,
                    "{}{},{},{},{},{},{}",
                    if j > 0 { "," } else { "" },
                    d.c0,
                    d.c1,
                    d.kind as u8,
                    l,
                    d.arg,
                    d.fill
                );
            }
            s.push_str("]}");
        }
        s.push_str("],\"labels\":[");
        s.push_str(&labels.iter().map(|l| js(l)).collect::<Vec<_>>().join(","));
        s.push_str("],\"kinds\":{");
        let kinds: Vec<String> = Kind::NAMES
            .iter()
            .map(|(k, n)| format!("\"{}\":{}", *k as u8, js(n)))
            .collect();
        s.push_str(&kinds.join(","));
        s.push_str("}}");
        Ok(s.into_bytes())
    }

    pub(crate) fn slice_at(&self, p: &Params, ticket: &Ticket) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let row = row_key(p.need("row")?)?;
        let t_ns = self.time_param(f, p, "t")?;
        let tol = match p.get("tol") {
            None | Some("") => 0,
            Some(x) => parse_dur_or_secs(x).map_err(|e| format!("tol: {e}"))?,
        };
        let tracks = self.tracks_of(f)?;
        let source = self.files[f].source().ok_or("no source")?;
        let cancel = || ticket.cancelled();
        let found = tracks
            .slices(
                source,
                row,
                t_ns.saturating_sub(tol),
                t_ns.saturating_add(tol),
                4096,
                &cancel,
            )
            .map_err(|e| e.to_string())?;
        // The slice holding t, else the nearest one.
        let dist = |s: &Slice| {
            if s.start <= t_ns && t_ns <= s.end {
                0
            } else {
                s.start.abs_diff(t_ns).min(s.end.abs_diff(t_ns))
            }
        };
        let Some(s) = found.iter().min_by_key(|s| (dist(s), s.dur())).copied() else {
            return Ok(b"{\"slice\":null}".to_vec());
        };
        let start = self.files[f].range.0;
        let rel = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
        let d = tracks.describe(row, &s);
        let facts: Vec<String> = d
            .facts
            .iter()
            .map(|(k, v)| format!("[{},{}]", js(k), js(v)))
            .collect();
        let rows: Vec<String> = d
            .rows
            .iter()
            .map(|(a, k)| format!("{{\"analyzer\":{},\"key\":{}}}", js(a), js(k)))
            .collect();
        let from = d.from.map_or("null".into(), |(k, t)| {
            format!("{{\"id\":{},\"t\":{:.9}}}", js(&k.id()), rel(t))
        });
        // The events that began and ended it, as kstate dump prints them.
        let only = match row.0 {
            TrackKey::Thread(tid) => Only {
                tids: vec![tid],
                ..Only::default()
            },
            TrackKey::Cpu(c) => Only {
                cpus: vec![c],
                ..Only::default()
            },
            TrackKey::Device(_) => Only {
                events: vec![
                    "block_rq_insert".into(),
                    "block_rq_issue".into(),
                    "block_rq_complete".into(),
                ],
                ..Only::default()
            },
        };
        let trace = source.trace();
        let range = self.files[f].range;
        let at_start = list::page(
            trace,
            source.pages(),
            range,
            Anchor::At {
                ts: s.start,
                skip: 0,
            },
            &only,
            3,
            &cancel,
        )
        .map_err(|e| e.to_string())?;
        let at_end = list::page(
            trace,
            source.pages(),
            range,
            Anchor::Before(s.end.saturating_add(1)),
            &only,
            3,
            &cancel,
        )
        .map_err(|e| e.to_string())?;
        let mut events = at_start.events;
        for e in at_end.events {
            if !events.iter().any(|x| x.ts == e.ts && x.line == e.line) {
                events.push(e);
            }
        }
        let label = match s.kind {
            Kind::Runnable | Kind::Preempted if s.label == NONE => "null".into(),
            _ => s.label.to_string(),
        };
        Ok(format!(
            "{{\"slice\":{{\"id\":{},\"row\":{},\"start\":{:.9},\"end\":{:.9},\"start_ns\":{},\"end_ns\":{},\"dur_ns\":{},\"kind\":{},\"label\":{label},\"arg\":{},\"what\":{},\"facts\":[{}],\"rows\":[{}],\"from\":{from}}},\"events\":{}}}",
            js(&row.0.id()),
            row.1,
            rel(s.start),
            rel(s.end),
            s.start,
            s.end,
            s.dur(),
            js(s.kind.name()),
            s.arg,
            js(&d.what),
            facts.join(","),
            rows.join(","),
            events_json(&events, start)
        )
        .into_bytes())
    }

    pub(crate) fn events(&self, p: &Params, ticket: &Ticket) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let (from, to) = self.span_params(f, p)?;
        let ns = |n: &str| -> Result<Option<u64>, String> {
            match p.get(n) {
                None | Some("") => Ok(None),
                Some(_) => p.number(n, "a time in ns", None).map(Some),
            }
        };
        let anchor = match (ns("at")?, ns("before")?) {
            (_, Some(b)) => Anchor::Before(b),
            (Some(a), None) => Anchor::At {
                ts: a,
                skip: p.number("skip", "a number of events", Some(0))?,
            },
            (None, None) => Anchor::At { ts: from, skip: 0 },
        };
        let limit: usize = p.number("limit", "a number of events", Some(100))?;
        let filters = p.filters()?;
        let only = Only {
            tids: filters.tids.clone(),
            cpus: filters.cpus.clone(),
            events: p
                .get("event")
                .map(|e| {
                    e.split(',')
                        .map(str::trim)
                        .filter(|x| !x.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
        };
        let source = self.files[f].source().ok_or("no source")?;
        let page = list::page(
            source.trace(),
            source.pages(),
            (from, to),
            anchor,
            &only,
            limit,
            &|| ticket.cancelled(),
        )
        .map_err(|e| e.to_string())?;
        let start = self.files[f].range.0;
        Ok(format!(
            "{{\"more\":{},\"events\":{}}}",
            page.more,
            events_json(&page.events, start)
        )
        .into_bytes())
    }

    pub(crate) fn wakeups(&self, p: &Params, ticket: &Ticket) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let (from, to) = self.span_params(f, p)?;
        let tid: i32 = p.number("tid", "a thread id", None)?;
        let tracks = self.tracks_of(f)?;
        let source = self.files[f].source().ok_or("no source")?;
        let row = (TrackKey::Thread(tid), ROW_STATE);
        let slices = tracks
            .slices(source, row, from, to, 2000, &|| ticket.cancelled())
            .map_err(|e| e.to_string())?;
        let start = self.files[f].range.0;
        let rel = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
        let list: Vec<String> = slices
            .iter()
            .filter(|s| s.kind == Kind::Runnable && s.start >= from)
            .filter_map(|s| {
                let d = tracks.describe(row, s);
                let (k, t) = d.from?;
                Some(format!(
                    "{{\"from\":{},\"t\":{:.9},\"run\":{:.9},\"waker\":{}}}",
                    js(&k.id()),
                    rel(t),
                    rel(s.end),
                    js(&d
                        .facts
                        .iter()
                        .find(|x| x.0 == "waker")
                        .map_or(String::new(), |x| x.1.clone()))
                ))
            })
            .take(500)
            .collect();
        Ok(format!("{{\"tid\":{tid},\"wakeups\":[{}]}}", list.join(",")).into_bytes())
    }
}

fn device_name(t: &Tracks, dev: u32) -> String {
    // The device's name is in its slices' description; a request's is enough.
    let s = Slice {
        start: 0,
        end: 0,
        kind: Kind::Device,
        label: 0,
        arg: 0,
    };
    let d = t.describe((TrackKey::Device(dev), 0), &s);
    d.facts
        .iter()
        .find(|x| x.0 == "device")
        .map_or_else(|| format!("dev {dev}"), |x| x.1.clone())
}

fn events_json(events: &[list::Listed], start: u64) -> String {
    let v: Vec<String> = events
        .iter()
        .map(|e| {
            let fields: Vec<String> = e
                .fields
                .iter()
                .map(|(k, v)| format!("[{},{}]", js(k), v))
                .collect();
            format!(
                "{{\"ts\":{},\"t\":{:.9},\"cpu\":{},\"pid\":{},\"event\":{},\"line\":{},\"fields\":[{}]}}",
                e.ts,
                e.ts.saturating_sub(start) as f64 / 1e9,
                e.cpu,
                e.pid,
                js(&e.event),
                js(&e.line),
                fields.join(",")
            )
        })
        .collect();
    format!("[{}]", v.join(","))
}

/// `tid:12.0` (track id, row).
fn row_key(s: &str) -> Result<RowKey, String> {
    let (id, row) = s.rsplit_once('.').unwrap_or((s, "0"));
    let key = TrackKey::parse(id)
        .ok_or_else(|| format!("{s:?} is not a track row (tid:N.R, cpu:N.R or dev:N.R)"))?;
    let row: u8 = row
        .parse()
        .map_err(|_| format!("{s:?}: the row is not a number"))?;
    if row as usize >= key.row_names().len() {
        return Err(format!("{s:?}: a {} track has no row {row}", id));
    }
    Ok((key, row))
}

fn row_list(s: &str) -> Result<Vec<RowKey>, String> {
    let v: Vec<RowKey> = s
        .split(',')
        .filter(|x| !x.is_empty())
        .map(row_key)
        .collect::<Result<_, _>>()?;
    if v.len() > MAX_ROWS {
        return Err(format!("rows: {} asked, at most {MAX_ROWS}", v.len()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_keys() {
        assert_eq!(row_key("tid:12.1").unwrap(), (TrackKey::Thread(12), 1));
        assert_eq!(row_key("cpu:3").unwrap(), (TrackKey::Cpu(3), 0));
        assert!(row_key("tid:12.7").unwrap_err().contains("no row 7"));
        assert!(row_key("proc:1.0").is_err());
        assert_eq!(row_list("").unwrap(), []);
    }
}
