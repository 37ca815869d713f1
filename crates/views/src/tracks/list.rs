//! The events of a stretch of time as `kstate dump` prints them: the timeline's event
//! list (a page of events from a point in time on, or the page before it) and the events
//! behind a slice, each with its fields (as `kstate dump --json` gives them). Read over
//! the page index from the point asked for, never from the start of the file.

use std::sync::Arc;

use kstate_format::print_fmt::TextFormatter;
use kstate_format::Trace;

use kstate_analyze::Error;
use kstate_format::stream::merge::{Event, IdFilter};
use kstate_format::stream::page_index::PageIndex;

/// Which events a list shows.
#[derive(Debug, Clone, Default)]
pub struct Only {
    /// Events recorded in, or naming (pid, prev_pid, next_pid fields), these threads.
    pub tids: Vec<i32>,
    pub cpus: Vec<u32>,
    /// Event names (`sched_switch` or `sched:sched_switch`).
    pub events: Vec<String>,
}

/// Where a page of the list starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The events at or after `ts`, passing over the first `skip` of those at `ts`
    /// itself (a page's cursor: its last event's time and how many shared it).
    At { ts: u64, skip: u32 },
    /// The events before `ts`.
    Before(u64),
}

/// One event.
#[derive(Debug, Clone)]
pub struct Listed {
    pub ts: u64,
    pub cpu: u32,
    pub pid: i32,
    pub event: String,
    /// The line `kstate dump` prints for it (without the newline).
    pub line: String,
    /// Its fields, `name` and JSON value, as `kstate dump --json` gives them.
    pub fields: Vec<(String, String)>,
}

/// A page of the list.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub events: Vec<Listed>,
    /// There are more events in the range after the page (for `At`) or before it
    /// (`Before`).
    pub more: bool,
}

/// Thread id fields of an event format, besides common_pid.
const TID_FIELDS: [&str; 4] = ["pid", "prev_pid", "next_pid", "child_pid"];

struct Filter {
    ids: Option<Vec<bool>>,
    /// Per event id, the fields that name threads.
    tid_fields: Vec<Vec<kstate_format::FieldRef>>,
    only: Only,
}

impl Filter {
    fn new(trace: &Trace, only: &Only) -> Filter {
        let n = trace.events.id_limit();
        let ids = (!only.events.is_empty()).then(|| {
            let mut w = vec![false; n];
            for ev in trace.events.iter() {
                let full = format!("{}:{}", ev.system, ev.name);
                if only.events.iter().any(|e| *e == ev.name || *e == full) {
                    w[ev.id as usize] = true;
                }
            }
            w
        });
        let mut tid_fields = vec![Vec::new(); n];
        if !only.tids.is_empty() {
            for ev in trace.events.iter() {
                tid_fields[ev.id as usize] = TID_FIELDS
                    .iter()
                    .filter_map(|f| ev.field(f))
                    .filter(|f| f.size == 4 || f.size == 8)
                    .map(kstate_format::FieldRef::from)
                    .collect();
            }
        }
        Filter {
            ids,
            tid_fields,
            only: only.clone(),
        }
    }

    fn merge_filter(&self) -> IdFilter {
        match &self.ids {
            None => IdFilter::all(),
            Some(w) => IdFilter::only(w.iter().enumerate().filter(|x| *x.1).map(|(i, _)| i as u32)),
        }
    }

    fn keeps(&self, ev: &Event<'_>) -> bool {
        let o = &self.only;
        if !o.cpus.is_empty() && !o.cpus.contains(&ev.cpu) {
            return false;
        }
        if o.tids.is_empty() {
            return true;
        }
        if o.tids.contains(&ev.pid()) {
            return true;
        }
        self.tid_fields
            .get(ev.id as usize)
            .into_iter()
            .flatten()
            .filter_map(|f| f.get_i64(ev.payload, ev.endian))
            .any(|t| o.tids.contains(&(t as i32)))
    }
}

/// A page of at most `limit` events of [from, to] that `only` keeps, from `anchor`.
pub fn page(
    trace: &Trace,
    pages: Option<&Arc<PageIndex>>,
    (from, to): (u64, u64),
    anchor: Anchor,
    only: &Only,
    limit: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Page, Error> {
    let filter = Filter::new(trace, only);
    let limit = limit.clamp(1, 10_000);
    match anchor {
        Anchor::At { ts, skip } => {
            let start = ts.max(from);
            let skip = if ts < from { 0 } else { skip };
            let mut out = Page::default();
            read(
                trace,
                pages,
                &filter,
                start,
                to,
                cancelled,
                |ev, at_start, fmt| {
                    if at_start < skip {
                        return Walk::Next;
                    }
                    if out.events.len() == limit {
                        out.more = true;
                        return Walk::Stop;
                    }
                    out.events.push(listed(ev, fmt, trace));
                    Walk::Next
                },
            )?;
            Ok(out)
        }
        Anchor::Before(ts) => {
            // Read back in growing steps until the page is full or the range's start is
            // reached: the density of the events is not known in advance.
            let end = ts.min(to.saturating_add(1));
            let mut back = 1_000_000u64;
            loop {
                let start = end.saturating_sub(back).max(from);
                let mut got: std::collections::VecDeque<Listed> = Default::default();
                let mut dropped = false;
                read(
                    trace,
                    pages,
                    &filter,
                    start,
                    end.saturating_sub(1),
                    cancelled,
                    |ev, _, fmt| {
                        if ev.ts >= end {
                            return Walk::Stop;
                        }
                        if got.len() == limit {
                            got.pop_front();
                            dropped = true;
                        }
                        got.push_back(listed(ev, fmt, trace));
                        Walk::Next
                    },
                )?;
                if got.len() == limit || start == from {
                    return Ok(Page {
                        events: got.into(),
                        more: dropped || start > from,
                    });
                }
                back = back.saturating_mul(8);
            }
        }
    }
}

enum Walk {
    Next,
    Stop,
}

/// Walks the kept events of [from, to] in time order; `f` also gets how many kept events
/// at `from` came before this one (0 for events after `from`).
fn read(
    trace: &Trace,
    pages: Option<&Arc<PageIndex>>,
    filter: &Filter,
    from: u64,
    to: u64,
    cancelled: &dyn Fn() -> bool,
    mut f: impl FnMut(&Event<'_>, u32, &mut TextFormatter) -> Walk,
) -> Result<(), Error> {
    let mut fmt = TextFormatter::new(trace, false);
    let mut at_start = 0u32;
    super::walk(
        trace,
        pages,
        filter.merge_filter(),
        (from, to),
        cancelled,
        |ev| {
            if !filter.keeps(ev) {
                return true;
            }
            let k = if ev.ts == from { at_start } else { 0 };
            if let Walk::Stop = f(ev, k, &mut fmt) {
                return false;
            }
            if ev.ts == from {
                at_start += 1;
            }
            true
        },
    )
}

fn listed(ev: &Event<'_>, fmt: &mut TextFormatter, trace: &Trace) -> Listed {
    let mut line = Vec::new();
    fmt.write_line(
        &mut line,
        ev.ts,
        ev.cpu,
        ev.id,
        ev.payload,
        ev.endian,
        kstate_format::Lost::None,
    );
    while line.last() == Some(&b'\n') {
        line.pop();
    }
    let (event, fields) = match trace.events.get(ev.id) {
        Some(f) => (
            f.name.clone(),
            f.fields
                .iter()
                .map(|x| {
                    let mut v = Vec::new();
                    x.value(ev.payload, ev.endian).write_json(&mut v);
                    (x.name.clone(), String::from_utf8_lossy(&v).into_owned())
                })
                .collect(),
        ),
        None => (format!("id {}", ev.id), Vec::new()),
    };
    Listed {
        ts: ev.ts,
        cpu: ev.cpu,
        pid: ev.pid(),
        event,
        line: String::from_utf8_lossy(&line).into_owned(),
        fields,
    }
}
