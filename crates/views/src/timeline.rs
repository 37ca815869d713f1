//! Following an analyzer's samples over one time axis shared by every analysis of a
//! recording: per key and per time bin the largest and smallest sample, the time the
//! key's intervals were in progress, its slow samples, and levels (queue lengths) with the
//! time held at each. Findings ([`crate::findings`]) and the report's charts read them.
//!
//! Time axis: seconds from the start of the recording (the RECORDING section's start, else
//! the first event) to its stop (else the last event any analyzer saw), cut into [`BINS`]
//! equal bins.

use std::collections::{BTreeMap, HashMap, HashSet};

use kstate_analyze::analyzer::{Kind, LogRow, LogSink, Outcome};

/// Time bins of the shared axis.
pub const BINS: usize = 1000;

/// Keys followed over time per analyzer, besides the workload's: the largest by total.
const TRACKED_TOP: usize = 24;
/// At most this many keys followed per analyzer in all.
const TRACKED_MAX: usize = 160;

/// The common time axis.
#[derive(Debug, Clone, Copy)]
pub struct TimeAxis {
    /// Trace-clock ns of x = 0.
    pub t0: u64,
    pub t1: u64,
}

impl TimeAxis {
    pub fn secs(&self, ts: u64) -> f64 {
        (ts as f64 - self.t0 as f64) / 1e9
    }
    pub fn wall_ns(&self) -> u64 {
        self.t1.saturating_sub(self.t0).max(1)
    }
    pub fn bin_ns(&self) -> f64 {
        self.wall_ns() as f64 / BINS as f64
    }
    pub fn bin(&self, ts: u64) -> usize {
        let b = (ts.saturating_sub(self.t0) as f64 / self.bin_ns()) as usize;
        b.min(BINS - 1)
    }
    /// x of the centre of bin `i`, seconds.
    pub fn bin_secs(&self, i: usize) -> f64 {
        (i as f64 + 0.5) * self.bin_ns() / 1e9
    }
}

/// Adds the interval [a, b] to per-bin coverage.
fn cover(v: &mut [f32], ax: &TimeAxis, a: u64, b: u64) {
    let a = a.max(ax.t0);
    let b = b.min(ax.t1);
    if b < a {
        return;
    }
    let w = ax.bin_ns();
    let (ia, ib) = (ax.bin(a), ax.bin(b));
    for (i, c) in v.iter_mut().enumerate().take(ib + 1).skip(ia) {
        let lo = (ax.t0 as f64 + i as f64 * w).max(a as f64);
        let hi = (ax.t0 as f64 + (i + 1) as f64 * w).min(b as f64);
        if hi > lo {
            *c += (hi - lo) as f32;
        } else if a == b {
            *c += 1.0;
        }
    }
}

pub(crate) fn covered(v: &[f32], ax: &TimeAxis) -> f64 {
    let w = ax.bin_ns() as f32;
    v.iter().map(|c| c.min(w) as f64).sum()
}

/// Samples above a threshold: how many, and when.
#[derive(Debug, Clone)]
pub struct Slow {
    pub count: u64,
    pub max: u64,
    pub first: u64,
    pub last_end: u64,
    pub(crate) cover: Vec<f32>,
}

impl Slow {
    fn new() -> Slow {
        Slow {
            count: 0,
            max: 0,
            first: u64::MAX,
            last_end: 0,
            cover: vec![0.0; BINS],
        }
    }
    fn add(&mut self, ax: &TimeAxis, start: u64, v: u64) {
        self.count += 1;
        self.max = self.max.max(v);
        self.first = self.first.min(start);
        self.last_end = self.last_end.max(start.saturating_add(v));
        cover(&mut self.cover, ax, start, start.saturating_add(v));
    }
}

/// One key followed over time.
#[derive(Debug, Clone)]
pub struct KeyTrack {
    pub key: String,
    /// A level (queue length) rather than durations.
    pub level: bool,
    /// Per bin: largest and smallest value starting in it (levels: largest held in it);
    /// `u64::MAX` in `min` for an empty bin.
    pub max: Vec<u64>,
    pub min: Vec<u64>,
    pub(crate) cover_all: Vec<f32>,
    pub(crate) cover_wl: Vec<f32>,
    pub count_wl: u64,
    pub total_wl: u64,
    pub max_wl: u64,
    pub(crate) slow_threshold: u64,
    pub(crate) slow_all: Option<Slow>,
    pub(crate) slow_wl: Option<Slow>,
    /// Levels: ns spent at each level, the last change, the peak.
    pub(crate) level_time: BTreeMap<u64, u64>,
    pub(crate) last_level: Option<(u64, u64)>,
    pub peak: u64,
}

impl KeyTrack {
    fn new(key: &str, level: bool, slow_threshold: u64) -> KeyTrack {
        KeyTrack {
            key: key.to_string(),
            level,
            max: vec![0; BINS],
            min: vec![u64::MAX; BINS],
            cover_all: if level { Vec::new() } else { vec![0.0; BINS] },
            cover_wl: Vec::new(),
            count_wl: 0,
            total_wl: 0,
            max_wl: 0,
            slow_threshold,
            slow_all: None,
            slow_wl: None,
            level_time: BTreeMap::new(),
            last_level: None,
            peak: 0,
        }
    }

    fn level_until(&mut self, ax: &TimeAxis, ts: u64) {
        if let Some((lt, l)) = self.last_level {
            if ts > lt {
                // Saturating: a damaged time near the end of time would overflow a sum.
                let t = self.level_time.entry(l).or_insert(0);
                *t = t.saturating_add(ts - lt);
                let (a, b) = (ax.bin(lt.max(ax.t0)), ax.bin(ts.min(ax.t1)));
                for m in &mut self.max[a..=b] {
                    *m = (*m).max(l);
                }
                for m in &mut self.min[a..=b] {
                    *m = (*m).min(l);
                }
            }
        }
    }
}

/// A [`LogSink`] that follows an analyzer's samples over the common axis.
pub struct Collector {
    ax: TimeAxis,
    workload: Option<HashSet<i32>>,
    /// Keys to follow from the start (the largest by total) and their slow thresholds.
    wanted: HashMap<String, u64>,
    pub keys: Vec<KeyTrack>,
    index: HashMap<String, usize>,
    /// Samples of the workload's threads this analyzer saw.
    pub workload_samples: u64,
}

impl Collector {
    /// `stat`: the analyzer's per-key outcome, rows sorted by total.
    pub fn new(ax: TimeAxis, workload: Option<HashSet<i32>>, stat: &Outcome) -> Collector {
        let wanted = stat
            .rows
            .iter()
            .map(|r| (r.key.clone(), slow_threshold(r.agg.percentile(50.0))))
            .collect();
        let mut c = Collector {
            ax,
            workload,
            wanted,
            keys: Vec::new(),
            index: HashMap::new(),
            workload_samples: 0,
        };
        for r in stat.rows.iter().take(TRACKED_TOP) {
            c.slot(&r.key, false);
        }
        c
    }

    fn slot(&mut self, key: &str, level: bool) -> Option<usize> {
        if let Some(i) = self.index.get(key) {
            return Some(*i);
        }
        if self.keys.len() >= TRACKED_MAX {
            return None;
        }
        let thr = self.wanted.get(key).copied().unwrap_or(u64::MAX);
        self.keys.push(KeyTrack::new(key, level, thr));
        self.index.insert(key.to_string(), self.keys.len() - 1);
        Some(self.keys.len() - 1)
    }

    /// The key followed as `key`, if it is.
    pub fn get(&self, key: &str) -> Option<&KeyTrack> {
        self.index.get(key).map(|i| &self.keys[*i])
    }

    /// Ends open levels at the end of the axis.
    pub fn finish(&mut self) {
        let t1 = self.ax.t1;
        for k in &mut self.keys {
            if k.level {
                k.level_until(&self.ax, t1);
                k.last_level = None;
            }
        }
    }

    /// Whether the command's threads were seen (then findings count only theirs).
    pub fn restricted(&self) -> bool {
        self.workload.is_some() && self.workload_samples > 0
    }
}

/// Samples this much above a key's median, and at least 1 ms, are slow.
fn slow_threshold(p50: u64) -> u64 {
    p50.saturating_mul(10).max(1_000_000)
}

impl LogSink for Collector {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        let ax = self.ax;
        match r.kind {
            // Informational points (a fork's child pid) are neither levels nor durations.
            Kind::Mark => {}
            Kind::Level => {
                let Some(i) = self.slot(r.key, true) else {
                    return Ok(());
                };
                let k = &mut self.keys[i];
                // A key first seen in the stat pass (blkqueue's arrivals are keyed like its
                // queue levels) is a level in the log pass.
                k.level = true;
                k.level_until(&ax, r.start);
                if k.last_level.is_none_or_older(r.start) {
                    k.last_level = Some((r.start, r.value));
                }
                k.peak = k.peak.max(r.value);
            }
            Kind::Dur => {
                let in_wl = self.workload.as_ref().is_some_and(|w| w.contains(&r.tid));
                if in_wl {
                    self.workload_samples += 1;
                }
                let i = match self.index.get(r.key) {
                    Some(i) => *i,
                    None if in_wl => match self.slot(r.key, false) {
                        Some(i) => i,
                        None => return Ok(()),
                    },
                    None => return Ok(()),
                };
                let k = &mut self.keys[i];
                let end = r.start.saturating_add(r.value);
                let b = ax.bin(r.start);
                k.max[b] = k.max[b].max(r.value);
                k.min[b] = k.min[b].min(r.value);
                cover(&mut k.cover_all, &ax, r.start, end);
                let slow = r.value >= k.slow_threshold;
                if slow {
                    k.slow_all
                        .get_or_insert_with(Slow::new)
                        .add(&ax, r.start, r.value);
                }
                if in_wl {
                    if k.cover_wl.is_empty() {
                        k.cover_wl = vec![0.0; BINS];
                    }
                    cover(&mut k.cover_wl, &ax, r.start, end);
                    k.count_wl += 1;
                    k.total_wl = k.total_wl.saturating_add(r.value);
                    k.max_wl = k.max_wl.max(r.value);
                    if slow {
                        k.slow_wl
                            .get_or_insert_with(Slow::new)
                            .add(&ax, r.start, r.value);
                    }
                }
            }
        }
        Ok(())
    }
}

trait OlderThan {
    fn is_none_or_older(&self, ts: u64) -> bool;
}

impl OlderThan for Option<(u64, u64)> {
    fn is_none_or_older(&self, ts: u64) -> bool {
        self.is_none_or(|(t, _)| t <= ts)
    }
}
