//! The overview's lanes for any span from one pass over the recording: the rows each
//! lane's pass gives over the whole file (sched_switch events, run-queue and block levels,
//! system-call durations), kept compactly in the order the passes gave them and replayed
//! into the same binning ([`super::Busy`], [`super::Levels`], [`super::ScatterSink`]) for
//! each span, key and duration filter. So a new span or a syscall key click costs a walk
//! through memory, not a pass over the file (11 M events: 5.5 M calls, about 7 bytes
//! each), and answers exactly what [`super::overview`] reads from the file.
//!
//! Each row keeps its thread and CPU, so the thread (`tid`) and CPU filters are answered
//! too, as the passes apply them to a row. What the summary cannot answer is read from the
//! file as before: process and comm filters (a thread's process and name are learned along
//! the pass), and the scatter of a recording whose syscall pass met lost events or damage (a pass over a window starts its loss and
//! damage accounting at the window, which a pass from the start does not: the pairs it
//! drops may differ).

use kstate_analyze::analyzer::{Kind, LogRow, LogSink};
use kstate_analyze::filter::Filters;
use kstate_analyze::fxmap::FxMap;
use kstate_analyze::{Error, Query, Source};
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::Lost;

use super::{
    first_line, level_query, syscall_lane, Busy, Levels, Overview, ScatterSink, Span, LEVEL_LANES,
    NO_SWITCHES,
};

/// The most bytes one recording's summary may hold: past it the summary is dropped and
/// every overview reads the file (about 75 M system calls).
const BUDGET: usize = 512 << 20;

/// Rows per block: a span skips the blocks of rows that start outside it.
const BLOCK: usize = 4096;

/// The overview of one recording, from one pass per lane.
pub struct Summary {
    /// None: over [`BUDGET`], or the switch pass failed (then every overview reads the
    /// file, and meets the failure there).
    parts: Option<Parts>,
}

struct Parts {
    /// The trace's first event, where the file knows it without reading.
    known_first: Option<u64>,
    /// Every sched_switch (None: the trace has none).
    switches: Option<Column>,
    /// Per [`LEVEL_LANES`]: the level rows, the pass's first event and span; or the first
    /// line of its error.
    levels: Vec<Result<Recorded, String>>,
    /// The system-call durations (None: read each span from the file).
    syscalls: Option<Recorded>,
}

/// The rows one pass gave, and what its outcome said of the trace.
struct Recorded {
    rows: Column,
    trace_start: Option<u64>,
    span: Option<(u64, u64)>,
}

impl Summary {
    /// Reads `source` once per lane.
    pub fn of(source: &Source) -> Summary {
        Summary {
            parts: Parts::read(source).ok().flatten(),
        }
    }

    /// Whether the summary holds anything (false: every overview reads the file).
    pub fn is_kept(&self) -> bool {
        self.parts.is_some()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.parts.as_ref().map_or(0, Parts::bytes)
    }

    /// [`super::overview`] of `span` for `filters`: from the summary where it can answer,
    /// else from `source`.
    pub fn overview(
        &self,
        source: &Source,
        span: Span,
        filters: &Filters,
    ) -> Result<Overview, Error> {
        let answers = filters.pids.is_empty() && filters.comms.is_empty();
        match &self.parts {
            Some(p) if answers => p.replay(source, span, filters),
            _ => super::overview(source, span, filters),
        }
    }
}

impl Parts {
    /// None: over budget.
    fn read(source: &Source) -> Result<Option<Parts>, Error> {
        let mut budget = Budget(BUDGET);
        let trace = source.trace();
        let Some(switches) = read_switches(source, &mut budget)? else {
            return Ok(None);
        };
        let mut levels = Vec::new();
        for name in LEVEL_LANES {
            let mut sink = Recorder::new(Kind::Level, &mut budget);
            let read = source.run(&level_query(name, &Filters::default())?, &mut sink);
            if sink.over {
                return Ok(None);
            }
            let mut rows = sink.rows;
            rows.shrink();
            levels.push(
                read.map(|out| Recorded {
                    rows,
                    trace_start: out.trace_start,
                    span: out.span,
                })
                .map_err(|e| first_line(&e)),
            );
        }
        let mut q = Query::new("syscall")?;
        q.mode = kstate_analyze::Mode::Log;
        let mut sink = Recorder::new(Kind::Dur, &mut budget);
        let read = source.run(&q, &mut sink);
        if sink.over {
            return Ok(None);
        }
        let mut rows = sink.rows;
        rows.shrink();
        // An error (no system calls, or none read) is met again by the span's own pass,
        // in the words of a window (cheap: it fails at the same place).
        let syscalls = match read {
            Ok(out) if !out.any_loss() && out.errors.is_empty() => Some(Recorded {
                rows,
                trace_start: out.trace_start,
                span: out.span,
            }),
            _ => None,
        };
        Ok(Some(Parts {
            known_first: trace.known_first_ts(),
            switches,
            levels,
            syscalls,
        }))
    }

    fn bytes(&self) -> usize {
        let recorded = |r: &Recorded| r.rows.bytes();
        self.switches.as_ref().map_or(0, Column::bytes)
            + self.levels.iter().flatten().map(recorded).sum::<usize>()
            + self.syscalls.as_ref().map_or(0, recorded)
    }

    /// The overview as [`super::overview`] makes it, from the rows kept (filters without
    /// processes or comms).
    fn replay(&self, source: &Source, span: Span, filters: &Filters) -> Result<Overview, Error> {
        let mut o = Overview::new(span);
        let (tids, cpus) = (&filters.tids, &filters.cpus);
        // A row's thread and CPU, as the passes select them.
        let selected = |tid: u64, cpu: u64| {
            (cpus.is_empty() || cpus.contains(&(cpu as u32)))
                && (tids.is_empty() || tids.contains(&(tid as i64 as i32)))
        };
        match &self.switches {
            None => o.missing.push(NO_SWITCHES.into()),
            Some(col) => {
                let n = source.trace().cpu_count.max(1) as usize;
                let mut busy = Busy::new(span, n);
                for [ts, cpu, next, lost, _] in col.rows(None, None) {
                    let next = next as i64 as i32;
                    busy.switch(ts, cpu as u32, lost_of(lost), cpus, || {
                        (next, tids.is_empty() || tids.contains(&next))
                    });
                }
                busy.finish(&mut o, self.known_first);
            }
        }
        for (name, read) in LEVEL_LANES.iter().zip(&self.levels) {
            let mut levels = Levels::new(span);
            let read = read.as_ref().map(|r| {
                r.rows
                    .replay(None, &[], &mut levels, Kind::Level, |_, _, tid, cpu| {
                        selected(tid, cpu)
                    });
                (r.trace_start, r.span)
            });
            o.put_levels(name, read.map_err(|e| e.clone()), levels);
        }
        let Some(r) = &self.syscalls else {
            syscall_lane(source, &mut o, filters)?;
            return Ok(o);
        };
        // What the pass's filters drop: durations outside --min/--max, other threads and
        // CPUs, then other keys.
        let (min, max) = (filters.min.unwrap_or(0), filters.max.unwrap_or(u64::MAX));
        let keys = &filters.keys;
        let mut sc = ScatterSink::new(span);
        let within = Some((span.from, span.to));
        r.rows
            .replay(within, keys, &mut sc, Kind::Dur, |key, v, tid, cpu| {
                v >= min
                    && v <= max
                    && selected(tid, cpu)
                    && (keys.is_empty() || keys.iter().any(|k| k == key))
            });
        o.trace_start = r.trace_start.unwrap_or(o.trace_start);
        o.syscalls = Some(sc.finish());
        Ok(o)
    }
}

/// Bytes the summary may still take.
struct Budget(usize);

impl Budget {
    /// Whether `n` more bytes fit (taking them).
    fn take(&mut self, n: usize) -> bool {
        match self.0.checked_sub(n) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => false,
        }
    }
}

/// Every sched_switch as (time, CPU, next thread, loss before it), in the order
/// [`super::busy_and_lost`] reads them. Outer None: over budget; inner None: no
/// sched_switch in the trace.
fn read_switches(source: &Source, budget: &mut Budget) -> Result<Option<Option<Column>>, Error> {
    let trace = source.trace();
    let mut missing = Vec::new();
    let Some(s) = kstate_analyze::analyzers::sched::switch(trace, &mut missing) else {
        return Ok(Some(None));
    };
    let filter = IdFilter::only([s.id]);
    let mut m = match source.pages() {
        Some(index) => Merger::indexed(trace, filter, index, None)?,
        None => Merger::new(trace, None, filter)?,
    };
    let mut col = Column::default();
    while let Some(ev) = m.next()? {
        let next = s.next_pid.get_i64(ev.payload, ev.endian).unwrap_or(0) as i32;
        let at = col.bytes.len();
        col.push(
            ev.ts,
            [
                ev.cpu as u64,
                next as i64 as u64,
                lost_code(ev.lost_before),
                0,
            ],
        );
        if !budget.take(col.bytes.len() - at) {
            return Ok(None);
        }
    }
    col.shrink();
    if !budget.take(col.blocks.len() * std::mem::size_of::<Block>()) {
        return Ok(None);
    }
    Ok(Some(Some(col)))
}

/// A loss as one number: 0 none, 1 unknown, n + 2 a count of n (saturating).
fn lost_code(l: Lost) -> u64 {
    match l {
        Lost::None => 0,
        Lost::Unknown => 1,
        Lost::Count(n) => n.saturating_add(2),
    }
}

fn lost_of(code: u64) -> Lost {
    match code {
        0 => Lost::None,
        1 => Lost::Unknown,
        n => Lost::Count(n - 2),
    }
}

/// Keeps the rows of one kind a pass gives, with their keys.
struct Recorder<'a> {
    kind: Kind,
    rows: Column,
    budget: &'a mut Budget,
    /// The budget ran out: the pass was stopped.
    over: bool,
}

impl<'a> Recorder<'a> {
    fn new(kind: Kind, budget: &'a mut Budget) -> Recorder<'a> {
        Recorder {
            kind,
            rows: Column::default(),
            budget,
            over: false,
        }
    }
}

impl LogSink for Recorder<'_> {
    fn wants_comm(&self) -> bool {
        false
    }

    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        if r.kind != self.kind {
            return Ok(());
        }
        let at = self.rows.bytes.len() + self.rows.keys.len();
        let key = self.rows.key_id(r.key);
        let tid = r.tid as i64 as u64;
        self.rows
            .push(r.start, [key as u64, r.value, tid, r.cpu as u64]);
        let grown = self.rows.bytes.len() + self.rows.keys.len() - at;
        if !self.budget.take(grown) {
            self.over = true;
            return Err(std::io::Error::other(
                "the overview's summary is over budget",
            ));
        }
        Ok(())
    }
}

/// Rows of a time and four numbers, as varints: the time as the zigzag difference from
/// the previous row's (rows come in pass order, which is not always time order), the
/// numbers as they are. Keys (for log rows) are numbered in order of appearance.
#[derive(Default)]
struct Column {
    bytes: Vec<u8>,
    blocks: Vec<Block>,
    rows: usize,
    prev: u64,
    keys: Vec<String>,
    ids: FxMap<String, u32>,
}

/// Where a block of [`BLOCK`] rows begins, the time before it, its rows' earliest and
/// latest times, and which first numbers (keys) it holds, modulo 64: a key filter skips
/// the blocks without its keys.
#[derive(Clone, Copy)]
struct Block {
    at: usize,
    prev: u64,
    min: u64,
    max: u64,
    keys: u64,
}

impl Column {
    fn key_id(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        let id = self.keys.len() as u32;
        self.keys.push(key.to_string());
        self.ids.insert(key.to_string(), id);
        id
    }

    fn push(&mut self, ts: u64, v: [u64; 4]) {
        if self.rows == self.blocks.len() * BLOCK {
            self.blocks.push(Block {
                at: self.bytes.len(),
                prev: self.prev,
                min: u64::MAX,
                max: 0,
                keys: 0,
            });
        }
        if let Some(b) = self.blocks.last_mut() {
            b.min = b.min.min(ts);
            b.max = b.max.max(ts);
            b.keys |= 1 << (v[0] % 64);
        }
        let d = ts.wrapping_sub(self.prev) as i64;
        put(&mut self.bytes, ((d << 1) ^ (d >> 63)) as u64);
        for x in v {
            put(&mut self.bytes, x);
        }
        self.prev = ts;
        self.rows += 1;
    }

    fn shrink(&mut self) {
        self.bytes.shrink_to_fit();
        self.blocks.shrink_to_fit();
    }

    fn bytes(&self) -> usize {
        self.bytes.len()
            + self.blocks.len() * std::mem::size_of::<Block>()
            + self.keys.iter().map(|k| 2 * k.len() + 64).sum::<usize>()
    }

    /// The rows as [time, a, b, c, d], in pass order; with `within`, only blocks holding
    /// a row in it, and with `keys`, a row whose `a` is one of them (others may come too).
    fn rows(
        &self,
        within: Option<(u64, u64)>,
        keys: Option<&[u32]>,
    ) -> impl Iterator<Item = [u64; 5]> + '_ {
        let mask = keys.map_or(u64::MAX, |k| k.iter().fold(0, |m, id| m | 1 << (id % 64)));
        self.blocks
            .iter()
            .enumerate()
            .filter(move |(_, b)| within.is_none_or(|(from, to)| b.max >= from && b.min <= to))
            .filter(move |(_, b)| b.keys & mask != 0)
            .flat_map(move |(i, b)| {
                let n = BLOCK.min(self.rows - i * BLOCK);
                let (mut at, mut prev) = (b.at, b.prev);
                (0..n).map(move |_| {
                    let z = get(&self.bytes, &mut at);
                    let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
                    prev = prev.wrapping_add(d as u64);
                    let mut row = [prev, 0, 0, 0, 0];
                    for x in &mut row[1..] {
                        *x = get(&self.bytes, &mut at);
                    }
                    row
                })
            })
    }

    /// Hands the log rows (those of blocks meeting `within`, if given) that `keep` (key,
    /// value, thread, CPU) accepts to `sink`, as the pass did; with `keys` (not empty),
    /// only rows of those keys.
    fn replay(
        &self,
        within: Option<(u64, u64)>,
        keys: &[String],
        sink: &mut dyn LogSink,
        kind: Kind,
        mut keep: impl FnMut(&str, u64, u64, u64) -> bool,
    ) {
        let ids: Vec<u32> = keys
            .iter()
            .filter_map(|k| self.ids.get(k).copied())
            .collect();
        let ids = (!keys.is_empty()).then_some(&ids[..]);
        for [start, key, value, tid, cpu] in self.rows(within, ids) {
            let key = self.keys.get(key as usize).map_or("", String::as_str);
            if !keep(key, value, tid, cpu) {
                continue;
            }
            let row = LogRow {
                start,
                key,
                value,
                kind,
                tid: 0,
                pid: None,
                comm: "",
                cpu: 0,
                flag: false,
            };
            // The lanes' sinks do not fail.
            let _ = sink.row(&row);
        }
    }
}

/// Appends `x` as a LEB128 varint.
fn put(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// Reads the varint at `*at`, moving past it (the bytes are this module's own).
fn get(bytes: &[u8], at: &mut usize) -> u64 {
    let mut x = 0u64;
    let mut shift = 0;
    while let Some(&b) = bytes.get(*at) {
        *at += 1;
        x |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The summary answers every span, key and duration filter as a pass over the file
    /// does: a real recording, spans of the whole, a part and an instant's width, bin
    /// counts that do not divide them.
    #[test]
    fn replay_is_the_pass_over_the_file() {
        for name in ["lisa-sched_load/trace.dat", "lisa-rtapp/trace.dat"] {
            let path = kstate_testdata::path(name);
            let mut source = Source::open(&path).unwrap();
            source.index_pages().unwrap();
            let summary = Summary::of(&source);
            assert!(summary.is_kept(), "{name}");
            // The thread switched to most often, for the thread filter.
            let mut runs: HashMap<i32, usize> = HashMap::new();
            let switches = summary.parts.as_ref().unwrap().switches.as_ref().unwrap();
            for [_, _, next, _, _] in switches.rows(None, None) {
                *runs.entry(next as i64 as i32).or_default() += (next != 0) as usize;
            }
            let tid = runs.into_iter().max_by_key(|r| r.1).unwrap().0;
            let (a, b) = source.pages().unwrap().event_span().unwrap();
            let len = b - a;
            let spans = [
                (a, b, 1200),
                (a, b, 7),
                (a + len / 3, a + len / 2, 999),
                (a + len / 2, a + len / 2 + 1000, 13),
                (b - len / 10, b, 333),
            ];
            let filters = [
                Filters::default(),
                Filters {
                    min: Some(10_000),
                    ..Filters::default()
                },
                Filters {
                    cpus: vec![1],
                    ..Filters::default()
                },
                Filters {
                    tids: vec![tid],
                    ..Filters::default()
                },
                Filters {
                    tids: vec![tid],
                    cpus: vec![0, 2],
                    min: Some(1),
                    ..Filters::default()
                },
                // Read from the file (a comm is learned along the pass).
                Filters {
                    comms: vec!["swapper".into()],
                    ..Filters::default()
                },
            ];
            let mut lanes = 0;
            for (from, to, bins) in spans {
                let span = Span::new(from, to, bins).unwrap();
                for f in &filters {
                    let want = super::super::overview(&source, span, f).unwrap();
                    let got = summary.overview(&source, span, f).unwrap();
                    assert_eq!(got, want, "{name} {span:?} {f:?}");
                    lanes += got.busy.len() + got.runq.len();
                }
            }
            assert!(lanes > 0, "{name}: no lanes compared");
        }
    }

    #[test]
    fn columns_give_back_what_they_took() {
        let mut c = Column::default();
        let rows: Vec<[u64; 5]> = (0..10_000u64)
            .map(|i| {
                // Out of time order now and then, and numbers of every size.
                let ts = 1_000_000 + i * 37 - (i % 5) * 50;
                [ts, i % 3, u64::MAX >> (i % 64), i, -(i as i64) as u64]
            })
            .collect();
        for r in &rows {
            c.push(r[0], [r[1], r[2], r[3], r[4]]);
        }
        assert_eq!(c.rows(None, None).collect::<Vec<_>>(), rows);
        let (from, to) = (rows[5000][0], rows[5001][0]);
        let near: Vec<_> = c.rows(Some((from, to)), None).collect();
        assert!(near.len() < rows.len() && near.contains(&rows[5000]));
        // Every block holds keys 0, 1 and 2; none holds 3.
        assert_eq!(c.rows(None, Some(&[2])).count(), rows.len());
        assert_eq!(c.rows(None, Some(&[3])).count(), 0);
        for code in [0, 1, 2, 9, u64::MAX] {
            assert_eq!(lost_code(lost_of(code)), code);
        }
    }
}
