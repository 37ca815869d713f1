//! `--log --sort COLUMN --top N`: the first N log rows in COLUMN's order. Sorting a log
//! means holding rows back until the pass is over; only the best N are kept (a bounded
//! heap), so memory stays bounded by N, never by the trace.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use kstate_analyze::analyzer::{Kind, LogRow, LogSink};

use crate::LogWriter;

/// Columns a log can be sorted by: `value` (largest first) and `start` (earliest first).
pub const LOG_SORT_COLUMNS: [&str; 2] = ["value", "start"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOrder {
    /// Largest value first; ties by start, then key.
    Value,
    /// Earliest start first; ties by key.
    Start,
}

impl LogOrder {
    pub fn parse(column: &str) -> Result<LogOrder, String> {
        match column {
            "value" | "dur" | "duration" => Ok(LogOrder::Value),
            "start" | "ts" => Ok(LogOrder::Start),
            c => Err(format!(
                "cannot sort a log by {c:?}: columns are {}",
                LOG_SORT_COLUMNS.join(", ")
            )),
        }
    }
    /// How text headers describe the order.
    pub fn describe(self, top: usize) -> String {
        match self {
            LogOrder::Value => format!("sorted by value, largest first, top {top}"),
            LogOrder::Start => format!("sorted by start, earliest first, top {top}"),
        }
    }
}

#[derive(Debug, Clone)]
struct Owned {
    start: u64,
    key: String,
    value: u64,
    kind: Kind,
    tid: i32,
    pid: Option<i32>,
    comm: String,
    cpu: u32,
    flag: bool,
    /// Arrival order: ties keep the order rows came in.
    seq: u64,
}

/// A row with the order it is sorted in; `Less` = comes first in the output.
struct Ranked {
    order: LogOrder,
    row: Owned,
}

impl Ranked {
    fn cmp_rows(&self, other: &Ranked) -> Ordering {
        let (a, b) = (&self.row, &other.row);
        let first = match self.order {
            LogOrder::Value => b.value.cmp(&a.value).then(a.start.cmp(&b.start)),
            LogOrder::Start => a.start.cmp(&b.start),
        };
        first
            .then_with(|| a.key.cmp(&b.key))
            .then(a.seq.cmp(&b.seq))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_rows(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    /// The heap's top is the row that would come last: the first to drop.
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_rows(other)
    }
}

/// Keeps the first `top` rows in `order`; [`SortedLog::drain_into`] writes them.
pub struct SortedLog {
    order: LogOrder,
    top: usize,
    heap: BinaryHeap<Ranked>,
    seq: u64,
}

impl SortedLog {
    pub fn new(order: LogOrder, top: usize) -> SortedLog {
        SortedLog {
            order,
            top,
            heap: BinaryHeap::with_capacity(top.min(1 << 16) + 1),
            seq: 0,
        }
    }

    /// Writes the kept rows, in order, to `w`.
    pub fn drain_into<W: Write>(self, w: &mut LogWriter<W>) -> io::Result<()> {
        for r in self.heap.into_sorted_vec() {
            let o = &r.row;
            w.row(&LogRow {
                start: o.start,
                key: &o.key,
                value: o.value,
                kind: o.kind,
                tid: o.tid,
                pid: o.pid,
                comm: &o.comm,
                cpu: o.cpu,
                flag: o.flag,
            })?;
        }
        Ok(())
    }
}

impl LogSink for SortedLog {
    fn row(&mut self, r: &LogRow<'_>) -> io::Result<()> {
        if self.top == 0 {
            return Ok(());
        }
        self.seq += 1;
        let ranked = Ranked {
            order: self.order,
            row: Owned {
                start: r.start,
                key: r.key.to_string(),
                value: r.value,
                kind: r.kind,
                tid: r.tid,
                pid: r.pid,
                comm: r.comm.to_string(),
                cpu: r.cpu,
                flag: r.flag,
                seq: self.seq,
            },
        };
        if self.heap.len() < self.top {
            self.heap.push(ranked);
        } else if self.heap.peek().is_some_and(|last| ranked < *last) {
            self.heap.pop();
            self.heap.push(ranked);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(s: &mut SortedLog, start: u64, value: u64) {
        s.row(&LogRow {
            start,
            key: "k",
            value,
            kind: Kind::Dur,
            tid: 1,
            pid: None,
            comm: "c",
            cpu: 0,
            flag: false,
        })
        .unwrap();
    }

    fn kept(s: SortedLog) -> Vec<(u64, u64)> {
        s.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| (r.row.start, r.row.value))
            .collect()
    }

    #[test]
    fn keeps_the_largest_values() {
        let mut s = SortedLog::new(LogOrder::Value, 3);
        for (i, v) in [5, 1, 9, 7, 3, 9, 2].into_iter().enumerate() {
            row(&mut s, i as u64, v);
        }
        assert_eq!(s.heap.len(), 3);
        assert_eq!(kept(s), vec![(2, 9), (5, 9), (3, 7)]);
    }

    #[test]
    fn keeps_the_earliest_starts() {
        let mut s = SortedLog::new(LogOrder::Start, 2);
        for (t, v) in [(30, 1), (10, 2), (40, 3), (20, 4)] {
            row(&mut s, t, v);
        }
        assert_eq!(kept(s), vec![(10, 2), (20, 4)]);
    }

    #[test]
    fn unknown_columns_are_named() {
        assert!(LogOrder::parse("max").unwrap_err().contains("value, start"));
    }
}
