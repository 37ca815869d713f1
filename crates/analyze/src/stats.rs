//! Per-key aggregation: count, total, min, max, a flag count (e.g. failed system calls)
//! and the distribution (see `hist`).

use crate::hist::{Decades, LogHist};

#[derive(Debug, Clone)]
pub struct Agg {
    pub count: u64,
    pub total: u64,
    pub min: u64,
    pub max: u64,
    /// Values the analyzer flagged (its `flag_column`, e.g. errors).
    pub flagged: u64,
    pub hist: LogHist,
    /// Filled only when decimal buckets were asked for.
    pub decades: Decades,
}

impl Default for Agg {
    fn default() -> Agg {
        Agg {
            count: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
            flagged: 0,
            hist: LogHist::default(),
            decades: Decades::default(),
        }
    }
}

impl Agg {
    #[inline(always)]
    pub fn add(&mut self, v: u64, flag: bool, decades: bool) {
        self.count += 1;
        self.total = self.total.saturating_add(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.flagged += flag as u64;
        self.hist.record(v);
        if decades {
            self.decades.record(v);
        }
    }
    /// Adds the samples `other` aggregated (its distribution too).
    pub fn merge(&mut self, other: &Agg) {
        if other.count == 0 {
            return;
        }
        self.count += other.count;
        self.total = self.total.saturating_add(other.total);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.flagged += other.flagged;
        self.hist.merge(&other.hist);
        for (a, b) in self.decades.counts.iter_mut().zip(other.decades.counts) {
            *a += b;
        }
    }
    /// Mean, rounded down to a whole nanosecond.
    pub fn avg(&self) -> u64 {
        self.total.checked_div(self.count).unwrap_or(0)
    }
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }
    /// Nearest-rank percentile within `hist::PERCENTILE_REL_ERROR`.
    pub fn percentile(&self, p: f64) -> u64 {
        self.hist.percentile(p, self.min(), self.max)
    }
}
