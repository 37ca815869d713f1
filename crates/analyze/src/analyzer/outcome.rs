//! An analyzer's results: rows per key, its own tables, losses and damage met.

use std::collections::BTreeMap;

use kstate_format::Error;

use super::{Counts, Info};
use crate::stats::Agg;

/// A small table an analyzer adds to its report.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// JSON member name, e.g. "runqueue".
    pub name: &'static str,
    pub title: String,
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Int(u64),
    Float(f64),
    Text(String),
}

/// One aggregated key.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: String,
    pub agg: Agg,
}

/// The result of one analysis pass.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub info: Info,
    pub by: &'static str,
    pub rows: Vec<Row>,
    /// First event of the whole trace (relative windows count from it).
    pub trace_start: Option<u64>,
    /// Time analysed: the selected window clipped to the events read.
    pub span: Option<(u64, u64)>,
    /// Events lost per CPU in the selected time; `None` where the kernel did not count.
    pub lost: BTreeMap<u32, Option<u64>>,
    pub counts: Counts,
    pub tables: Vec<Table>,
    /// Facts a reader must know (assumptions, fallbacks).
    pub notes: Vec<String>,
    /// Damaged data met on the way; the figures cover what was read.
    pub errors: Vec<Error>,
}

impl Outcome {
    pub fn any_loss(&self) -> bool {
        self.lost.values().any(|l| *l != Some(0))
    }
    /// Total counted losses, and whether some CPU lost an unknown number.
    pub fn lost_total(&self) -> (u64, bool) {
        let n = self.lost.values().map(|l| l.unwrap_or(0)).sum();
        (n, self.lost.values().any(Option::is_none))
    }
}

/// Columns rows can be sorted by.
pub const SORT_COLUMNS: [&str; 8] = ["key", "count", "total", "avg", "min", "max", "p50", "p99"];

/// Sorts rows by `column` (descending for numbers, ascending for the key; ties by key)
/// and keeps the first `top`.
pub fn sort_rows(
    rows: &mut Vec<Row>,
    column: &str,
    flag_column: Option<&str>,
    top: Option<usize>,
) -> Result<(), String> {
    let num: fn(&Agg) -> u64 = match column {
        "key" => |_| 0,
        "count" => |a| a.count,
        "total" => |a| a.total,
        "avg" => |a| a.avg(),
        "min" => |a| a.min(),
        "max" => |a| a.max,
        "p50" => |a| a.percentile(50.0),
        "p99" => |a| a.percentile(99.0),
        c if Some(c) == flag_column => |a| a.flagged,
        c => {
            let mut cols: Vec<&str> = SORT_COLUMNS.to_vec();
            cols.extend(flag_column);
            return Err(format!(
                "cannot sort by {c:?}: columns are {}",
                cols.join(", ")
            ));
        }
    };
    rows.sort_by(|a, b| {
        num(&b.agg)
            .cmp(&num(&a.agg))
            .then_with(|| a.key.cmp(&b.key))
    });
    if let Some(n) = top {
        rows.truncate(n);
    }
    Ok(())
}
