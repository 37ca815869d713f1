//! A fleet's recordings reduced to small summaries, and summaries merged exactly.
//!
//! [`summarize`] runs every analyzer that applies to one recording in one streaming pass
//! (one time-ordered merge of the file, each event handed to the analyzers that take it;
//! memory bounded by the keys, not the events) and keeps, per analyzer and key, the statistics and the log-linear
//! histogram ([`crate::hist`]), with the recording's facts ([`Meta`]). `kstate summarize`
//! writes that as one Parquet file per recording (kstate-export), so a fleet's summaries
//! are appended, never rewritten.
//!
//! [`Fleet`] merges summaries: counts, totals and histograms add, minima and maxima
//! combine, so a merged quantile is the one of all the recordings' values at once, to the
//! bucket. [`reduce`] reads and merges many summaries on all cores; the file reader is
//! passed in, so this crate knows nothing of Parquet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kstate_format::extras::Recording;
use kstate_format::ErrorKind;

use crate::analyzer::{AnyPass, Config, Mode};
use crate::error::Error;
use crate::merge::{IdFilter, Merger};
use crate::stats::Agg;
use crate::survey::{recording, stat_pass};
use crate::{Info, Source};

/// Version of the summary layout (the columns and what the rows mean); a summary of
/// another version is refused, as is one of another bucket scheme ([`crate::hist::SCHEME`]).
pub const SUMMARY_VERSION: u32 = 1;

/// What a summary says about the recording it was made from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    /// The recording's identity in the fleet: host, start and file name, hashed.
    pub recording: String,
    /// The path summarized, as given.
    pub file: String,
    pub host: String,
    /// Kernel release (`uname -r`), where the file says.
    pub kernel: Option<String>,
    /// The traced command's argv joined by spaces; empty for a system-wide recording;
    /// `None` where the file does not say (not recorded by kstate).
    pub command: Option<String>,
    pub cpus: u32,
    /// Wall-clock start, ns since the Unix epoch, where the file says.
    pub start_wall_ns: Option<i64>,
    pub duration_ns: u64,
    pub events: u64,
    /// Events lost per CPU (`None`: the kernel did not count).
    pub lost: BTreeMap<u32, Option<u64>>,
    /// The kstate that wrote the summary.
    pub tool: String,
}

/// One analyzer's statistics for one key.
#[derive(Debug, Clone)]
pub struct KeyStat {
    pub analyzer: String,
    /// The keying (e.g. "syscall", "task").
    pub by: String,
    /// The value's unit suffix (ns, bytes, ...).
    pub unit: String,
    pub key: String,
    pub agg: Agg,
}

/// One recording's summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub meta: Meta,
    pub stats: Vec<KeyStat>,
    /// Analyzers that did not apply, and why.
    pub skipped: Vec<(String, String)>,
}

/// Summarizes a recording with `analyzers` (every one whose events the file has when
/// empty). A damaged recording is an error, not a summary of the part that could be read.
pub fn summarize(source: &Source, analyzers: &[&'static Info]) -> Result<Summary, Error> {
    let trace = source.trace();
    if let Some(e) = trace.damage().next() {
        return Err(e.clone().into());
    }
    let explicit = !analyzers.is_empty();
    let all: Vec<&'static Info> = if explicit {
        analyzers.to_vec()
    } else {
        crate::analyzers::ALL.iter().collect()
    };
    let mut out = Summary::default();
    let mut outcomes = Vec::new();
    // Analyzers that read events share one merge of the file; the others (none read
    // events today) run their own pass.
    let mut passes: Vec<(&'static Info, Box<dyn AnyPass>)> = Vec::new();
    let mut route: Vec<Vec<usize>> = vec![Vec::new(); trace.events.id_limit()];
    for info in all {
        let mut cfg = Config::new(Mode::Stat);
        cfg.tgids = source.tgids().clone();
        let started = match info.live {
            Some(live) => live(trace, &cfg).map(Some),
            None => stat_pass(trace, info, None, source.tgids()).map(|o| {
                outcomes.push((info, o));
                None
            }),
        };
        match started {
            Ok(Some((pass, ids))) => {
                for id in ids {
                    if let Some(r) = route.get_mut(id as usize) {
                        r.push(passes.len());
                    }
                }
                passes.push((info, pass));
            }
            Ok(None) => {}
            Err(e) if e.kind == ErrorKind::Unsupported && !explicit => {
                out.skipped.push((info.name.to_string(), e.msg));
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut merger = Merger::new(trace, None, IdFilter::all())?;
    let (mut events, mut first, mut last) = (0u64, None, 0);
    while let Some(ev) = merger.next()? {
        events += 1;
        first.get_or_insert(ev.ts);
        last = ev.ts;
        let mut damaged = None;
        if let Some(r) = route.get(ev.id as usize) {
            for &i in r {
                if let Some(msg) = passes[i].1.event(&ev)? {
                    damaged = Some(msg);
                }
            }
        }
        // A summary of part of a recording would pass for the whole: refused.
        if let Some(msg) = damaged {
            return Err(merger.record_error(&msg).into());
        }
    }
    let lost = merger
        .totals()
        .into_iter()
        .map(|(cpu, t)| (cpu, (t.lost_unknown == 0).then_some(t.lost_counted)))
        .collect();
    for (info, pass) in passes {
        let o = pass.finish(trace)?;
        if o.counts.events == 0 && o.errors.is_empty() && !explicit {
            out.skipped
                .push((info.name.to_string(), format!("no {} events", info.needs)));
            continue;
        }
        outcomes.push((info, o));
    }
    for (info, o) in &mut outcomes {
        if let Some(e) = o.errors.first() {
            return Err(e.clone().into());
        }
        o.rows.sort_by(|a, b| a.key.cmp(&b.key));
        for row in &o.rows {
            out.stats.push(KeyStat {
                analyzer: info.name.to_string(),
                by: o.by.to_string(),
                unit: info.unit.suffix().to_string(),
                key: row.key.clone(),
                agg: row.agg.clone(),
            });
        }
    }
    let rec = recording(trace);
    // The recording's span where the file says, widened to the events (as survey's axis).
    let (t0, t1) = match (&rec, first) {
        (Some(r), f) if r.stop_ts > r.start_ts => {
            (r.start_ts.min(f.unwrap_or(u64::MAX)), r.stop_ts.max(last))
        }
        (_, Some(f)) => (f, last),
        _ => (0, 0),
    };
    out.meta = meta(source, rec.as_ref(), t1 - t0, events, lost);
    Ok(out)
}

fn meta(
    source: &Source,
    rec: Option<&Recording>,
    duration_ns: u64,
    events: u64,
    lost: BTreeMap<u32, Option<u64>>,
) -> Meta {
    let trace = source.trace();
    // "sysname nodename release version machine", as trace-cmd stores it.
    let uname: Vec<&str> = trace.uname.as_deref().unwrap_or("").split(' ').collect();
    let host = rec
        .map(|r| r.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| uname.get(1).map(|s| s.to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let start_wall_ns = rec.and_then(|r| r.wall_offset_ns.map(|o| o + r.start_ts as i64));
    let file = source.label().to_string();
    let name = Path::new(&file)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = format!(
        "{host}\0{start_wall_ns:?}\0{name}\0{events}\0{duration_ns}\0{:?}",
        rec.map(|r| r.start_ts)
    );
    Meta {
        recording: format!("{name}-{:016x}", fnv1a(id.as_bytes())),
        file,
        host,
        kernel: uname
            .get(2)
            .filter(|s| !s.is_empty())
            .map(|s| s.to_string()),
        command: rec.map(|r| r.workload.join(" ")),
        cpus: trace.cpu_count,
        start_wall_ns,
        duration_ns,
        events,
        lost,
        tool: format!("kstate {}", env!("CARGO_PKG_VERSION")),
    }
}

/// FNV-1a, 64 bits: a stable name for a recording whoever summarizes it.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100000001b3)
    })
}

/// What recordings are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Host,
    Kernel,
    Command,
    Recording,
}

impl GroupBy {
    pub const NAMES: [&'static str; 4] = ["host", "kernel", "command", "recording"];

    pub fn parse(s: &str) -> Option<GroupBy> {
        Some(match s {
            "host" => GroupBy::Host,
            "kernel" => GroupBy::Kernel,
            "command" => GroupBy::Command,
            "recording" => GroupBy::Recording,
            _ => return None,
        })
    }

    fn of(self, m: &Meta) -> String {
        match self {
            GroupBy::Host => m.host.clone(),
            GroupBy::Kernel => m.kernel.clone().unwrap_or_else(|| "(unknown)".into()),
            GroupBy::Command => match &m.command {
                None => "(unknown)".into(),
                Some(c) if c.is_empty() => "(system-wide)".into(),
                Some(c) => c.clone(),
            },
            GroupBy::Recording => m.recording.clone(),
        }
    }
}

/// Merged statistics of some recordings for one analyzer and key.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    pub recordings: u64,
    /// Count, total, min, max and flagged; its `hist` stays empty (see `buckets`).
    pub agg: Agg,
    /// The merged histogram's non-empty buckets as (index, count, sum), by index: a
    /// fleet holds one per group and key, so only what is there is kept (a dense
    /// [`crate::hist::LogHist`] spans every bucket between the extremes).
    buckets: Vec<(u32, u64, u64)>,
}

impl Merged {
    fn add(&mut self, recordings: u64, a: &Agg) {
        self.recordings += recordings;
        self.add_scalars(a);
        self.add_buckets(a.hist.indexed());
    }

    /// Adds another merge of the same key.
    fn absorb(&mut self, o: &Merged) {
        self.recordings += o.recordings;
        self.add_scalars(&o.agg);
        self.add_buckets(o.buckets.iter().copied());
    }

    fn add_scalars(&mut self, a: &Agg) {
        if a.count == 0 {
            return;
        }
        let m = &mut self.agg;
        m.count += a.count;
        m.total = m.total.saturating_add(a.total);
        m.min = m.min.min(a.min);
        m.max = m.max.max(a.max);
        m.flagged += a.flagged;
    }

    /// Merges buckets given in increasing index order.
    fn add_buckets(&mut self, other: impl Iterator<Item = (u32, u64, u64)>) {
        let mine = std::mem::take(&mut self.buckets);
        let mut a = mine.into_iter().peekable();
        let mut b = other.peekable();
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    let (x, y) = (a.next().unwrap(), b.next().unwrap());
                    (x.0, x.1 + y.1, x.2.saturating_add(y.2))
                }
                (Some(x), Some(y)) if x.0 < y.0 => a.next().unwrap(),
                (_, Some(_)) => b.next().unwrap(),
                (Some(_), None) => a.next().unwrap(),
                (None, None) => break,
            };
            self.buckets.push(next);
        }
    }

    /// The merged histogram's non-empty buckets as (index, count, sum of values).
    pub fn buckets(&self) -> &[(u32, u64, u64)] {
        &self.buckets
    }

    /// The nearest-rank quantile `permille`/1000, to the bucket: the first bucket whose
    /// running count c satisfies c * 1000 >= permille * n (as
    /// [`crate::hist::LogHist::quantile_bucket`]).
    pub fn quantile(&self, permille: u64) -> Quantile {
        let n: u128 = self.buckets.iter().map(|b| b.1 as u128).sum();
        let need = permille as u128 * n;
        let mut seen = 0u128;
        let Some(&(bucket, _, _)) = self.buckets.iter().find(|b| {
            seen += b.1 as u128;
            seen * 1000 >= need
        }) else {
            return Quantile::default();
        };
        let (lo, hi) = crate::hist::bucket_range(bucket);
        Quantile {
            bucket,
            lo,
            hi,
            // As `kstate analyze` reports it: the bucket's midpoint within [min, max].
            value: (lo + (hi - lo) / 2).clamp(self.agg.min(), self.agg.max),
        }
    }
}

/// A quantile to the bucket: the bucket's index and bounds, and the value reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quantile {
    pub bucket: u32,
    pub lo: u64,
    pub hi: u64,
    pub value: u64,
}

/// Per analyzer and key: the whole fleet, and each group.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    pub by: String,
    pub unit: String,
    pub fleet: Merged,
    pub groups: BTreeMap<String, Merged>,
}

/// Merged summaries.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub group_by: GroupBy,
    /// Only this analyzer, and only this key, when set.
    pub analyzer: Option<String>,
    pub key: Option<String>,
    /// (analyzer, key) -> merged statistics.
    pub entries: BTreeMap<(String, String), Entry>,
    /// Recordings merged, per group.
    pub recordings: BTreeMap<String, u64>,
}

/// A group whose p99 is more than k times the median of the groups' p99s.
#[derive(Debug, Clone)]
pub struct Outlier {
    pub analyzer: String,
    pub key: String,
    pub group: String,
    pub p99: u64,
    /// The median of the groups' p99s (the lower middle one for an even count).
    pub median_p99: u64,
}

impl Fleet {
    pub fn new(group_by: GroupBy, analyzer: Option<String>, key: Option<String>) -> Fleet {
        Fleet {
            group_by,
            analyzer,
            key,
            entries: BTreeMap::new(),
            recordings: BTreeMap::new(),
        }
    }

    /// Adds one recording's summary.
    pub fn add(&mut self, s: &Summary) {
        let group = self.group_by.of(&s.meta);
        *self.recordings.entry(group.clone()).or_default() += 1;
        for k in &s.stats {
            if self.analyzer.as_ref().is_some_and(|a| *a != k.analyzer)
                || self.key.as_ref().is_some_and(|x| *x != k.key)
            {
                continue;
            }
            let e = self
                .entries
                .entry((k.analyzer.clone(), k.key.clone()))
                .or_insert_with(|| Entry {
                    by: k.by.clone(),
                    unit: k.unit.clone(),
                    ..Entry::default()
                });
            e.fleet.add(1, &k.agg);
            e.groups.entry(group.clone()).or_default().add(1, &k.agg);
        }
    }

    /// Adds another fleet's merged statistics (same grouping and selection).
    pub fn merge(&mut self, other: Fleet) {
        for (g, n) in other.recordings {
            *self.recordings.entry(g).or_default() += n;
        }
        for (k, o) in other.entries {
            let e = self.entries.entry(k).or_insert_with(|| Entry {
                by: o.by.clone(),
                unit: o.unit.clone(),
                ..Entry::default()
            });
            e.fleet.absorb(&o.fleet);
            for (g, m) in o.groups {
                e.groups.entry(g).or_default().absorb(&m);
            }
        }
    }

    /// Groups whose p99 exceeds `k` times the median of the groups' p99s, per analyzer
    /// and key (only where there are at least two groups).
    pub fn outliers(&self, k: f64) -> Vec<Outlier> {
        let mut out = Vec::new();
        for ((analyzer, key), e) in &self.entries {
            if e.groups.len() < 2 {
                continue;
            }
            let mut p99s: Vec<u64> = e.groups.values().map(|m| m.quantile(990).value).collect();
            p99s.sort_unstable();
            let median = p99s[(p99s.len() - 1) / 2];
            for (g, m) in &e.groups {
                let p99 = m.quantile(990).value;
                if p99 as f64 > k * median as f64 {
                    out.push(Outlier {
                        analyzer: analyzer.clone(),
                        key: key.clone(),
                        group: g.clone(),
                        p99,
                        median_p99: median,
                    });
                }
            }
        }
        out
    }
}

/// A summary that could not be read: its path and why.
pub type Failure = (PathBuf, String);

/// A summary of a recording already merged from another file: left out, so that the
/// recording counts once.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duplicate {
    pub path: PathBuf,
    /// The file whose summary of the recording was merged.
    pub merged: PathBuf,
    pub recording: String,
}

impl std::fmt::Display for Duplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the same recording ({}) as {}; counted once",
            self.path.display(),
            self.recording,
            self.merged.display()
        )
    }
}

/// What [`reduce`] made of a directory of summaries.
#[derive(Debug, Clone)]
pub struct Reduced {
    pub fleet: Fleet,
    /// Summaries that could not be read (the figures leave them out), in path order.
    pub failed: Vec<Failure>,
    /// Summaries of recordings merged from another file, in path order.
    pub duplicates: Vec<Duplicate>,
}

/// Reads `paths` with `read` on all cores and merges them; the summaries that could not
/// be read are returned beside the merge.
///
/// A recording is merged once, however many summaries of it there are (a summary copied
/// into a second directory, a dataset appended to twice): a summary whose recording id
/// was already merged is left out and returned as a [`Duplicate`], naming both files.
/// That is not a failure: nothing of the fleet is missing from the figures. Which of the
/// two is merged depends on which thread reads first; they hold the same recording (the
/// id hashes its host, start, file name, events and duration), so the figures do not.
pub fn reduce<F>(paths: &[PathBuf], read: F, template: &Fleet) -> Reduced
where
    F: Fn(&Path) -> Result<Summary, String> + Sync,
{
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(paths.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Recording id -> the path whose summary of it was merged.
    let merged_ids = std::sync::Mutex::new(std::collections::HashMap::<String, usize>::new());
    type Part = (Fleet, Vec<Failure>, Vec<Duplicate>);
    let parts: Vec<Part> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut f = template.clone();
                    let (mut failed, mut dups) = (Vec::new(), Vec::new());
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(p) = paths.get(i) else { break };
                        let sum = match read(p) {
                            Ok(sum) => sum,
                            Err(e) => {
                                failed.push((p.clone(), e));
                                continue;
                            }
                        };
                        let first = *merged_ids
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(sum.meta.recording.clone())
                            .or_insert(i);
                        if first == i {
                            f.add(&sum);
                        } else {
                            dups.push(Duplicate {
                                path: p.clone(),
                                merged: paths[first].clone(),
                                recording: sum.meta.recording,
                            });
                        }
                    }
                    (f, failed, dups)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reducer thread panicked"))
            .collect()
    });
    let mut out = Reduced {
        fleet: template.clone(),
        failed: Vec::new(),
        duplicates: Vec::new(),
    };
    for (f, e, d) in parts {
        out.fleet.merge(f);
        out.failed.extend(e);
        out.duplicates.extend(d);
    }
    out.failed.sort();
    out.duplicates.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(host: &str, values: &[u64]) -> Summary {
        let mut agg = Agg::default();
        for &v in values {
            agg.add(v, false, false);
        }
        Summary {
            meta: Meta {
                recording: format!("{host}-rec"),
                host: host.into(),
                ..Meta::default()
            },
            stats: vec![KeyStat {
                analyzer: "syscall".into(),
                by: "name".into(),
                unit: "ns".into(),
                key: "write".into(),
                agg,
            }],
            skipped: Vec::new(),
        }
    }

    /// Three hosts with p99 about 100, 120 and 1,000: with k = 3 only the last is an
    /// outlier (median 120); merging in two halves gives the merge of all.
    #[test]
    fn outliers_and_merge_in_parts() {
        let a = summary("a", &[10, 20, 100]);
        let b = summary("b", &[10, 120, 120]);
        let c = summary("c", &[5, 1000]);
        let mut all = Fleet::new(GroupBy::Host, None, None);
        for s in [&a, &b, &c] {
            all.add(s);
        }
        let out = all.outliers(3.0);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].group.as_str(), out[0].median_p99), ("c", 120));
        assert!(out[0].p99.abs_diff(1000) <= 4, "{}", out[0].p99);
        let mut left = Fleet::new(GroupBy::Host, None, None);
        left.add(&a);
        let mut right = Fleet::new(GroupBy::Host, None, None);
        right.add(&b);
        right.add(&c);
        left.merge(right);
        let (x, y) = (
            &left.entries[&("syscall".into(), "write".into())].fleet,
            &all.entries[&("syscall".into(), "write".into())].fleet,
        );
        assert_eq!((x.recordings, x.agg.count, x.agg.total), (3, 8, 1385));
        assert_eq!((x.agg.min(), x.agg.max), (5, 1000));
        for q in [500, 990, 999] {
            assert_eq!(x.quantile(q), y.quantile(q));
        }
        // 8 values: the median is the 4th smallest (20).
        assert_eq!(x.quantile(500).value, 20);
    }
}
