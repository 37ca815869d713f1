//! Everything `kstate run`, `kstate report` and `kstate plot` share: running every
//! applicable analyzer over a file, following each one's samples over time on a common
//! axis, the findings and their ranking, and the charts built from them.
//!
//! Time axis: seconds from the start of the recording (the RECORDING section's start, else
//! the first event) to its stop (else the last event any analyzer saw). Every time-series
//! chart of a report uses this one range, cut into [`BINS`] equal bins.
//!
//! Findings and their ranking (also in `kstate run --help`): each finding names a set of
//! intervals (samples: a system call, a wait, a block request) or the time a level (a queue
//! length) stayed high. Its *share* is the part of the recording's wall time during which
//! at least one of those intervals was in progress (or the level was high), measured on
//! the [`BINS`] time bins: a bin contributes min(bin width, time its intervals cover in
//! it). When the recording names the traced command, an analyzer that saw any of the
//! command's threads (its process and every thread or child it forked) counts only theirs:
//! a finding explains the command's time, not idle daemons'. Findings are sorted by share,
//! largest first. The rules, generic over every analyzer's rows:
//! - top keys: for each analyzer whose values are times (except `proc`, whose intervals
//!   are lifetimes: a process being alive explains nothing), its three keys with the
//!   largest total: share = time any of the key's intervals was in progress;
//! - clusters (the three largest per analyzer): a key's slow samples (>= 10 x its median and >= 1 ms) when there are at
//!   least two and they all fall inside at most half the recording: "N calls >= X, all
//!   between A s and B s"; share = time those slow ones were in progress;
//! - saturation: a level (run-queue length, requests in flight) whose maximum is at least
//!   2: share = time it stayed >= max(2, L), L the level it held for the median of the
//!   time it was not empty (a short burst to a high peak does not set the bar).

use std::collections::{BTreeMap, HashMap, HashSet};

use kstate_analyze::analyzer::{
    sort_rows, Buckets, Config, Kind, LogRow, LogSink, Mode, NoLog, Unit,
};
use kstate_analyze::fxmap::FxMap;
use kstate_analyze::hist::DECADES;
use kstate_analyze::merge::{IdFilter, Merger};
use kstate_analyze::{analyzers, Info, Outcome};
use kstate_format::extras::{self, Recording, Snapshot};
use kstate_format::{ErrorKind, Trace};

use crate::svg::{Axis, DistChart, Scale, Series, StatChart, Style, TimeChart, ValueKind};

/// Time bins of the shared axis.
pub const BINS: usize = 1000;

/// Keys followed over time per analyzer, besides the workload's: the largest by total.
const TRACKED_TOP: usize = 24;
/// Cluster findings kept per analyzer (the largest shares).
const CLUSTERS_PER_ANALYZER: usize = 3;
/// At most this many keys followed per analyzer in all.
const TRACKED_MAX: usize = 160;

/// The common time axis.
#[derive(Debug, Clone, Copy)]
pub struct Axis0 {
    /// Trace-clock ns of x = 0.
    pub t0: u64,
    pub t1: u64,
}

impl Axis0 {
    pub fn secs(&self, ts: u64) -> f64 {
        (ts as f64 - self.t0 as f64) / 1e9
    }
    pub fn wall_ns(&self) -> u64 {
        self.t1.saturating_sub(self.t0).max(1)
    }
    fn bin_ns(&self) -> f64 {
        self.wall_ns() as f64 / BINS as f64
    }
    fn bin(&self, ts: u64) -> usize {
        let b = (ts.saturating_sub(self.t0) as f64 / self.bin_ns()) as usize;
        b.min(BINS - 1)
    }
    /// x of the centre of bin `i`, seconds.
    fn bin_secs(&self, i: usize) -> f64 {
        (i as f64 + 0.5) * self.bin_ns() / 1e9
    }
}

/// Adds the interval [a, b] to per-bin coverage.
fn cover(v: &mut [f32], ax: &Axis0, a: u64, b: u64) {
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

fn covered(v: &[f32], ax: &Axis0) -> f64 {
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
    cover: Vec<f32>,
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
    fn add(&mut self, ax: &Axis0, start: u64, v: u64) {
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
    cover_all: Vec<f32>,
    cover_wl: Vec<f32>,
    pub count_wl: u64,
    pub total_wl: u64,
    pub max_wl: u64,
    slow_threshold: u64,
    slow_all: Option<Slow>,
    slow_wl: Option<Slow>,
    /// Levels: ns spent at each level, the last change, the peak.
    level_time: BTreeMap<u64, u64>,
    last_level: Option<(u64, u64)>,
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

    fn level_until(&mut self, ax: &Axis0, ts: u64) {
        if let Some((lt, l)) = self.last_level {
            if ts > lt {
                *self.level_time.entry(l).or_insert(0) += ts - lt;
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
    ax: Axis0,
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
    pub fn new(ax: Axis0, workload: Option<HashSet<i32>>, stat: &Outcome) -> Collector {
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

    fn restricted(&self) -> bool {
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

/// One analyzer's results over a file.
pub struct Analysis {
    pub info: &'static Info,
    /// Per key, sorted by total (what `kstate analyze NAME --format csv` prints).
    pub stat: Outcome,
    /// `--dist --buckets log10`, sorted by total.
    pub dist: Outcome,
    pub track: Collector,
}

/// An analyzer left out, and why.
pub struct Skipped {
    pub info: &'static Info,
    pub why: String,
}

/// A statement about the recording, with the share of wall time it explains.
#[derive(Debug, Clone)]
pub struct Finding {
    pub analyzer: &'static str,
    pub key: String,
    pub text: String,
    /// 0..=1 of the recording's wall time.
    pub share: f64,
    /// Seconds on the common axis, for windows worth shading.
    pub window: Option<(f64, f64)>,
    /// Per bin, how much of it the finding's intervals cover (top-key findings): lets the
    /// same waits seen by several analyzers count once.
    pub cover: Option<Vec<f32>>,
}

/// Everything a report shows.
pub struct Report {
    pub file: String,
    pub axis: Axis0,
    pub recording: Option<Recording>,
    pub analyses: Vec<Analysis>,
    pub skipped: Vec<Skipped>,
    pub snapshots: Vec<Snapshot>,
    pub findings: Vec<Finding>,
    /// Thread ids of the traced command (its process, threads and children), if known.
    pub workload: Option<HashSet<i32>>,
    /// Events lost per CPU over the whole recording (None: uncounted).
    pub lost: BTreeMap<u32, Option<u64>>,
    pub events: u64,
}

pub use kstate_analyze::workload::workload_tids;

/// The statistics pass of one analyzer, rows sorted by total (as `kstate analyze`).
pub fn stat_pass(
    trace: &Trace,
    info: &'static Info,
    by: Option<&str>,
    tgids: &FxMap<i32, i32>,
) -> Result<Outcome, kstate_format::Error> {
    let mut cfg = Config::new(Mode::Stat);
    cfg.by = by.map(str::to_string);
    cfg.tgids = tgids.clone();
    let mut o = (info.run)(trace, &cfg, &mut NoLog)?;
    let _ = sort_rows(&mut o.rows, "total", info.flag_column, None);
    Ok(o)
}

/// The common axis: the recording's start and stop where the file says, widened to the
/// events the analyses saw; else from the first to the last event seen.
pub fn axis_of(rec: Option<&Recording>, stats: &[&Outcome]) -> Axis0 {
    let first = stats.iter().filter_map(|o| o.trace_start).min();
    let last = stats.iter().filter_map(|o| o.span.map(|s| s.1)).max();
    match rec {
        Some(r) if r.stop_ts > r.start_ts => Axis0 {
            t0: r.start_ts.min(first.unwrap_or(u64::MAX)),
            t1: r.stop_ts.max(last.unwrap_or(0)),
        },
        _ => {
            let t0 = first.unwrap_or(0);
            Axis0 {
                t0,
                t1: last.unwrap_or(t0 + 1).max(t0 + 1),
            }
        }
    }
}

/// The distribution and log passes of an analyzer whose statistics pass is done.
pub fn complete(
    trace: &Trace,
    info: &'static Info,
    stat: Outcome,
    tgids: &FxMap<i32, i32>,
    axis: Axis0,
    workload: Option<HashSet<i32>>,
) -> Analysis {
    let by = Some(stat.by.to_string());
    let mut cfg = Config::new(Mode::Dist(Buckets::Log10));
    cfg.by = by.clone();
    cfg.tgids = tgids.clone();
    let dist = match (info.run)(trace, &cfg, &mut NoLog) {
        Ok(mut o) => {
            let _ = sort_rows(&mut o.rows, "total", info.flag_column, None);
            o
        }
        Err(_) => stat.clone(),
    };
    let mut track = Collector::new(axis, workload, &stat);
    let mut cfg = Config::new(Mode::Log);
    cfg.by = by;
    cfg.tgids = tgids.clone();
    let _ = (info.run)(trace, &cfg, &mut track);
    track.finish();
    Analysis {
        info,
        stat,
        dist,
        track,
    }
}

/// The file's RECORDING section, if it has one.
pub fn recording(trace: &Trace) -> Option<Recording> {
    trace
        .extra(extras::ids::RECORDING)
        .and_then(|b| Recording::decode(b).ok())
}

/// The file's memory snapshots.
pub fn snapshots(trace: &Trace) -> Vec<Snapshot> {
    trace
        .extra(extras::ids::SYSINFO)
        .map(|b| {
            extras::sysinfo_snapshots(b)
                .filter_map(Result::ok)
                .collect()
        })
        .unwrap_or_default()
}

/// The traced command's threads, where the file names its pid.
pub fn workload_of(trace: &Trace, rec: Option<&Recording>) -> Option<HashSet<i32>> {
    rec.and_then(|r| r.workload_pid)
        .map(|p| workload_tids(trace, p))
}

/// Runs every analyzer of [`analyzers::ALL`] whose events the file has.
pub fn build(trace: &Trace, file: &str, tgids: &FxMap<i32, i32>) -> Report {
    let recording = recording(trace);
    let snapshots = snapshots(trace);
    let workload = workload_of(trace, recording.as_ref());
    let mut stats = Vec::new();
    let mut skipped = Vec::new();
    for info in analyzers::ALL {
        match stat_pass(trace, info, None, tgids) {
            Ok(o) => stats.push((info, o)),
            Err(e) => skipped.push(Skipped {
                info,
                why: if e.kind == ErrorKind::Unsupported {
                    e.msg.clone()
                } else {
                    e.to_string()
                },
            }),
        }
    }
    let axis = axis_of(
        recording.as_ref(),
        &stats.iter().map(|(_, o)| o).collect::<Vec<_>>(),
    );
    let mut analyses = Vec::new();
    for (info, stat) in stats {
        analyses.push(complete(trace, info, stat, tgids, axis, workload.clone()));
    }
    let (events, lost) = trace_events(trace);
    let mut r = Report {
        file: file.to_string(),
        axis,
        recording,
        analyses,
        skipped,
        snapshots,
        findings: Vec::new(),
        workload,
        lost,
        events,
    };
    r.findings = findings(&r);
    r
}

/// Events in the file and events lost per CPU (None: some loss uncounted).
fn trace_events(trace: &Trace) -> (u64, BTreeMap<u32, Option<u64>>) {
    let Ok(mut m) = Merger::new(trace, None, IdFilter::all()) else {
        return (0, BTreeMap::new());
    };
    let mut n = 0;
    while let Ok(Some(_)) = m.next() {
        n += 1;
    }
    let lost = m
        .totals()
        .into_iter()
        .map(|(cpu, t)| (cpu, (t.lost_unknown == 0).then_some(t.lost_counted)))
        .collect();
    (n, lost)
}

fn pct(x: f64) -> String {
    if x >= 0.095 {
        format!("{:.0}%", x * 100.0)
    } else if x >= 0.001 {
        format!("{:.1}%", x * 100.0)
    } else {
        format!("{:.2}%", x * 100.0)
    }
}

/// Secs on the axis for text: `12.3 s`.
fn at(ax: &Axis0, ts: u64) -> String {
    let s = ax.secs(ts);
    if ax.wall_ns() >= 10_000_000_000 {
        format!("{s:.1} s")
    } else {
        format!("{s:.3} s")
    }
}

/// The findings, ranked (see the module documentation).
pub fn findings(r: &Report) -> Vec<Finding> {
    let ax = r.axis;
    let wall = ax.wall_ns() as f64;
    let mut out = Vec::new();
    for a in &r.analyses {
        let info = a.info;
        let unit = info.unit;
        let restricted = a.track.restricted();
        let who = if restricted {
            " (the command's threads)"
        } else {
            ""
        };
        // Lifetimes are not time spent on anything.
        if unit == Unit::Ns && info.name != "proc" {
            // The three largest totals: of the command's threads where restricted.
            let mut top: Vec<(&KeyTrack, u64, u64, u64, &Vec<f32>)> = if restricted {
                a.track
                    .keys
                    .iter()
                    .filter(|k| !k.level && k.count_wl > 0)
                    .map(|k| (k, k.count_wl, k.total_wl, k.max_wl, &k.cover_wl))
                    .collect()
            } else {
                a.stat
                    .rows
                    .iter()
                    .filter_map(|row| {
                        let k = &a.track.keys[*a.track.index.get(&row.key)?];
                        Some((k, row.agg.count, row.agg.total, row.agg.max, &k.cover_all))
                    })
                    .collect()
            };
            top.sort_by(|x, y| y.2.cmp(&x.2).then_with(|| x.0.key.cmp(&y.0.key)));
            for (k, count, total, max, cov) in top.into_iter().take(3) {
                let row = k;
                let share = covered(cov, &ax) / wall;
                out.push(Finding {
                    analyzer: info.name,
                    key: row.key.clone(),
                    text: format!(
                        "{} {}={}{who}: {} {}, {} in all, longest {}; one in progress {} of the time",
                        info.name,
                        a.stat.by,
                        row.key,
                        count,
                        if count == 1 { "sample" } else { "samples" },
                        unit.fmt(total),
                        unit.fmt(max),
                        pct(share)
                    ),
                    share,
                    window: None,
                    cover: Some(cov.clone()),
                });
            }
            let mut clusters = Vec::new();
            for k in &a.track.keys {
                let slow = if restricted {
                    k.slow_wl.as_ref()
                } else {
                    k.slow_all.as_ref()
                };
                let Some(s) = slow else { continue };
                let span = s.last_end.saturating_sub(s.first);
                if s.count < 2 || span as f64 > wall * 0.5 {
                    continue;
                }
                let share = covered(&s.cover, &ax) / wall;
                clusters.push(Finding {
                    analyzer: info.name,
                    key: k.key.clone(),
                    text: format!(
                        "{} {}{who}: {} samples >= {} (longest {}), all between {} and {}",
                        info.name,
                        k.key,
                        s.count,
                        unit.fmt(k.slow_threshold),
                        unit.fmt(s.max),
                        at(&ax, s.first),
                        at(&ax, s.last_end)
                    ),
                    share,
                    window: Some((ax.secs(s.first), ax.secs(s.last_end))),
                    cover: None,
                });
            }
            clusters.sort_by(|a, b| b.share.total_cmp(&a.share));
            out.extend(clusters.into_iter().take(CLUSTERS_PER_ANALYZER));
        }
        for k in a.track.keys.iter().filter(|k| k.level && k.peak >= 2) {
            // The level it usually held while not empty (time-weighted median): a short
            // burst to a high peak does not hide a queue that stayed full.
            let busy: u64 = k.level_time.range(1..).map(|(_, t)| *t).sum();
            let mut acc = 0u64;
            let median = k
                .level_time
                .range(1..)
                .find(|(_, t)| {
                    acc += **t;
                    acc * 2 >= busy
                })
                .map_or(0, |(l, _)| *l);
            let thr = 2.max(median);
            let t: u64 = k.level_time.range(thr..).map(|(_, t)| *t).sum();
            if t == 0 {
                continue;
            }
            let share = t as f64 / wall;
            let bins: Vec<usize> = (0..BINS).filter(|i| k.max[*i] >= thr).collect();
            let window = match (bins.first(), bins.last()) {
                (Some(a), Some(b)) => Some((
                    *a as f64 * ax.bin_ns() / 1e9,
                    (*b + 1) as f64 * ax.bin_ns() / 1e9,
                )),
                _ => None,
            };
            let when = window
                .map(|(a, b)| {
                    if ax.wall_ns() >= 10_000_000_000 {
                        format!(", between {a:.1} s and {b:.1} s")
                    } else {
                        format!(", between {a:.3} s and {b:.3} s")
                    }
                })
                .unwrap_or_default();
            out.push(Finding {
                analyzer: info.name,
                key: k.key.clone(),
                text: format!(
                    "{} {}: {} >= {} (peak {}) for {:.3} s, {} of the time{when}",
                    info.name,
                    k.key,
                    if info.name == "runq" {
                        "run-queue length"
                    } else {
                        "level"
                    },
                    thr,
                    k.peak,
                    t as f64 / 1e9,
                    pct(share)
                ),
                share,
                window,
                cover: None,
            });
        }
    }
    out.sort_by(|a, b| {
        b.share
            .partial_cmp(&a.share)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.text.cmp(&b.text))
    });
    merge_same_time(out)
}

/// The same waits often show up in several analyzers (a thread blocked in a futex call is
/// the syscall analyzer's `futex`, offcpu's `S` and microstate's `LCK`): a finding whose
/// intervals cover nearly the same bins as a higher-ranked finding of another analyzer
/// (the covered amounts differ by at most 10 %) is folded into it, named at its end.
fn merge_same_time(found: Vec<Finding>) -> Vec<Finding> {
    let mut kept: Vec<Finding> = Vec::new();
    let mut also: Vec<Vec<String>> = Vec::new();
    'next: for f in found {
        if let Some(c) = &f.cover {
            for (i, k) in kept.iter().enumerate() {
                let Some(kc) = &k.cover else { continue };
                if k.analyzer == f.analyzer {
                    continue;
                }
                let (mut diff, mut base) = (0f64, 0f64);
                for (a, b) in c.iter().zip(kc) {
                    diff += (a - b).abs() as f64;
                    base += a.max(*b) as f64;
                }
                if base > 0.0 && diff <= 0.10 * base {
                    also[i].push(format!("{} {}", f.analyzer, f.key));
                    continue 'next;
                }
            }
        }
        kept.push(f);
        also.push(Vec::new());
    }
    for (k, a) in kept.iter_mut().zip(also) {
        if !a.is_empty() {
            k.text
                .push_str(&format!(" (the same time as: {})", a.join(", ")));
        }
    }
    kept
}

// ---------------------------------------------------------------------------------------
// Charts.

fn value_kind(unit: Unit) -> ValueKind {
    match unit {
        Unit::Ns => ValueKind::Ns,
        Unit::Bytes => ValueKind::Bytes,
        Unit::Count(_) => ValueKind::Plain,
    }
}

fn value_axis(info: &Info, lo: u64, hi: u64) -> Axis {
    let unit = match info.unit {
        Unit::Ns => String::new(),
        Unit::Bytes => String::new(),
        Unit::Count(w) => format!(" ({w})"),
    };
    Axis {
        label: format!("{} {}{unit}", info.name, info.value),
        kind: value_kind(info.unit),
        scale: if lo > 0 && hi / lo.max(1) >= 100 {
            Scale::Log
        } else {
            Scale::Linear
        },
    }
}

/// Point series (per bin: the largest and smallest sample starting in it) of the keys
/// chosen: `keys` if given, else the `top` largest by total.
fn dur_series(a: &Analysis, ax: &Axis0, keys: &[String], top: usize) -> (Vec<Series>, u64, u64) {
    let chosen: Vec<&KeyTrack> = if keys.is_empty() {
        a.stat
            .rows
            .iter()
            .filter_map(|r| a.track.index.get(&r.key).map(|i| &a.track.keys[*i]))
            .filter(|k| !k.level)
            .take(top)
            .collect()
    } else {
        keys.iter()
            .filter_map(|k| a.track.index.get(k).map(|i| &a.track.keys[*i]))
            .collect()
    };
    let (mut lo, mut hi) = (u64::MAX, 0);
    let series = chosen
        .iter()
        .map(|k| {
            let mut pts = Vec::new();
            for i in 0..BINS {
                if k.min[i] == u64::MAX {
                    continue;
                }
                lo = lo.min(k.min[i].max(1));
                hi = hi.max(k.max[i]);
                pts.push((ax.bin_secs(i), k.max[i] as f64));
                if k.min[i] != k.max[i] {
                    pts.push((ax.bin_secs(i), k.min[i].max(1) as f64));
                }
            }
            Series {
                name: k.key.clone(),
                style: Style::Points,
                points: pts,
            }
        })
        .collect();
    (series, lo, hi)
}

/// Step series of an analyzer's levels (per bin: the highest level held in it).
fn level_series(a: &Analysis, ax: &Axis0, top: usize) -> Vec<Series> {
    let mut ks: Vec<&KeyTrack> = a.track.keys.iter().filter(|k| k.level).collect();
    ks.sort_by(|x, y| y.peak.cmp(&x.peak).then_with(|| x.key.cmp(&y.key)));
    ks.into_iter()
        .take(top)
        .map(|k| Series {
            name: k.key.clone(),
            style: Style::Step,
            points: (0..BINS)
                .filter(|i| k.min[*i] != u64::MAX)
                .map(|i| (i as f64 * ax.bin_ns() / 1e9, k.max[i] as f64))
                .collect(),
        })
        .collect()
}

/// Does this analyzer emit levels?
pub fn has_levels(a: &Analysis) -> bool {
    a.track.keys.iter().any(|k| k.level)
}

/// Windows of the report's top findings, to shade on every time chart.
pub fn bands(r: &Report, n: usize) -> Vec<(f64, f64, String)> {
    r.findings
        .iter()
        .filter_map(|f| f.window.map(|(a, b)| (a, b, f.text.clone())))
        .take(n)
        .collect()
}

/// `--log` chart: samples over time (and a second analyzer on the right axis).
pub fn log_chart(
    a: &Analysis,
    with: Option<&Analysis>,
    ax: &Axis0,
    keys: &[String],
    top: usize,
    bands: Vec<(f64, f64, String)>,
) -> TimeChart {
    // `keys` choose the left analyzer's keys; the right one shows its largest.
    let side = |a: &Analysis, keys: &[String]| -> (Axis, Vec<Series>) {
        let (series, lo, hi) = dur_series(a, ax, keys, top);
        if series.iter().all(|s| s.points.is_empty()) && has_levels(a) {
            let lv = level_series(a, ax, top);
            return (
                Axis {
                    label: format!("{} level", a.info.name),
                    kind: ValueKind::Plain,
                    scale: Scale::Linear,
                },
                lv,
            );
        }
        (value_axis(a.info, lo, hi), series)
    };
    let (left, left_series) = side(a, keys);
    let right = with.map(|b| side(b, &[]));
    let title = match with {
        Some(b) => format!(
            "{} {} and {} {} over time",
            a.info.name, a.info.value, b.info.name, b.info.value
        ),
        None => format!(
            "{} {} over time (by {}; per {:.3} ms bin: longest and shortest)",
            a.info.name,
            a.info.value,
            a.stat.by,
            ax.bin_ns() / 1e6
        ),
    };
    TimeChart {
        title,
        x: (0.0, ax.wall_ns() as f64 / 1e9),
        left,
        left_series,
        right,
        bands,
    }
}

/// Levels over time (run-queue length, requests in flight).
pub fn level_chart(
    a: &Analysis,
    ax: &Axis0,
    top: usize,
    bands: Vec<(f64, f64, String)>,
) -> TimeChart {
    TimeChart {
        title: format!("{} levels over time (highest per bin)", a.info.name),
        x: (0.0, ax.wall_ns() as f64 / 1e9),
        left: Axis {
            label: "level".into(),
            kind: ValueKind::Plain,
            scale: Scale::Linear,
        },
        left_series: level_series(a, ax, top),
        right: None,
        bands,
    }
}

/// LKST's stat chart of the `top` keys by total.
pub fn stat_chart(a: &Analysis, top: usize) -> StatChart {
    let rows: Vec<(String, u64, u64, u64, u64)> = a
        .stat
        .rows
        .iter()
        .take(top)
        .map(|r| {
            (
                r.key.clone(),
                r.agg.count,
                r.agg.avg(),
                r.agg.max,
                r.agg.min(),
            )
        })
        .collect();
    let lo = rows
        .iter()
        .map(|r| r.4)
        .filter(|v| *v > 0)
        .min()
        .unwrap_or(1);
    let hi = rows.iter().map(|r| r.3).max().unwrap_or(1);
    let mut value = value_axis(a.info, lo, hi);
    value.label = format!("{} avg / max / min", a.info.value);
    StatChart {
        title: format!(
            "{}: count, avg, max, min per {} (top {} by total)",
            a.info.name,
            a.stat.by,
            rows.len()
        ),
        value,
        rows,
    }
}

/// Decade label, as `kstate analyze --dist --buckets log10` prints it.
fn decade_label(i: usize, unit: Unit) -> String {
    crate::decade_label(i, unit)
}

/// Histogram of the `top` keys in LKST's decimal buckets.
pub fn dist_chart(a: &Analysis, top: usize) -> DistChart {
    let rows: Vec<_> = a.dist.rows.iter().take(top).collect();
    let mut first = DECADES;
    let mut last = 0;
    for r in &rows {
        let c = &r.agg.decades.counts;
        if let Some(f) = c.iter().position(|&n| n > 0) {
            first = first.min(f);
        }
        if let Some(l) = c.iter().rposition(|&n| n > 0) {
            last = last.max(l);
        }
    }
    if first > last {
        first = 0;
        last = 0;
    }
    DistChart {
        title: format!(
            "{} {} distribution (top {} {} by total)",
            a.info.name,
            a.info.value,
            rows.len(),
            a.stat.by
        ),
        x_label: format!("{} (decimal buckets)", a.info.value),
        buckets: (first..=last)
            .map(|i| decade_label(i, a.info.unit))
            .collect(),
        keys: rows
            .iter()
            .map(|r| (r.key.clone(), r.agg.decades.counts[first..=last].to_vec()))
            .collect(),
    }
}

/// Memory use over time from the file's /proc/meminfo snapshots (LKST's sysinfo plot).
pub fn memory_chart(snaps: &[Snapshot], ax: &Axis0, bands: Vec<(f64, f64, String)>) -> TimeChart {
    let get = |s: &Snapshot, n: &str| s.get(&format!("meminfo.{n}"));
    let mut series: Vec<Series> = Vec::new();
    let mut add = |name: &str, f: &dyn Fn(&Snapshot) -> Option<u64>| {
        let pts: Vec<(f64, f64)> = snaps
            .iter()
            .filter_map(|s| f(s).map(|v| (ax.secs(s.ts), v as f64)))
            .collect();
        if !pts.is_empty() {
            series.push(Series {
                name: name.into(),
                style: Style::Line,
                points: pts,
            });
        }
    };
    add("used (MemTotal - MemAvailable)", &|s| {
        Some(get(s, "MemTotal")?.saturating_sub(get(s, "MemAvailable")?))
    });
    add("free (MemFree)", &|s| get(s, "MemFree"));
    add("page cache (Cached)", &|s| get(s, "Cached"));
    add("anonymous (AnonPages)", &|s| get(s, "AnonPages"));
    add("dirty + writeback", &|s| {
        Some(get(s, "Dirty")? + get(s, "Writeback").unwrap_or(0))
    });
    TimeChart {
        title: format!(
            "memory use over time (/proc/meminfo, {} snapshots)",
            snaps.len()
        ),
        x: (0.0, ax.wall_ns() as f64 / 1e9),
        left: Axis {
            label: "memory".into(),
            kind: ValueKind::Bytes,
            scale: Scale::Linear,
        },
        left_series: series,
        right: None,
        bands,
    }
}
