//! A fleet's recordings reduced to small summaries, and summaries merged exactly.
//!
//! [`summarize`] runs every analyzer that applies to one recording in one streaming pass
//! (one time-ordered merge of the file, each event handed to the analyzers that take it;
//! memory bounded by the keys, not the events) and keeps, per analyzer and key, the statistics and the log-linear
//! histogram ([`kstate_analyze::hist`]), with the recording's facts ([`Meta`]). `kstate summarize`
//! writes that as one Parquet file per recording (kstate-export), so a fleet's summaries
//! are appended, never rewritten.
//!
//! [`Fleet`] merges summaries: counts, totals and histograms add, minima and maxima
//! combine, so a merged quantile is the one of all the recordings' values at once, to the
//! bucket. [`reduce`] reads and merges many summaries on all cores; the file reader is
//! passed in, so this crate knows nothing of Parquet.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kstate_format::sections::Recording;

use crate::survey::{recording, stat_pass};
use kstate_analyze::analyzer::AnyPass;
use kstate_analyze::stats::Agg;
use kstate_analyze::Error;
use kstate_analyze::{Info, Query, Source};
use kstate_format::stream::merge::{IdFilter, Merger};

/// Version of the summary layout (the columns and what the rows mean); a summary of
/// another version is refused, as is one of another bucket scheme ([`kstate_analyze::hist::SCHEME`]).
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

/// Keyings whose keys name one thread or process (`comm-tid`, `comm-pid`, with
/// microstate's state after a space).
const PER_THREAD: [&str; 3] = ["thread", "pid", "tid"];

/// A per-thread key's command: `comm-tid` or `comm-tid STATE` without the id (the last
/// `-DIGITS` of the first part: a comm may hold dashes and digits of its own).
fn comm_of(key: &str) -> String {
    let (task, state) = match key.rsplit_once(' ') {
        Some((t, s)) if s.chars().all(|c| c.is_ascii_uppercase()) && !s.is_empty() => (t, Some(s)),
        _ => (key, None),
    };
    let comm = match task.rsplit_once('-') {
        Some((c, id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => c,
        _ => task,
    };
    match state {
        Some(s) => format!("{comm} {s}"),
        None => comm.to_string(),
    }
}

/// Summarizes a recording with `analyzers` (every one whose events the file has when
/// empty). A damaged recording is an error, not a summary of the part that could be read.
///
/// Keys that name a thread or process (microstate's `comm-tid STATE`, runq's
/// `comm-pid`) are merged per command (`comm STATE`, `comm`; the `by` column says
/// `comm`) unless `per_thread`: thread ids mean nothing from one recording to the next,
/// so a fleet never merges them, and a system-wide recording's summary grows with the
/// threads it saw (4.2 MB for one that ran 1,500 short commands, 81 % of it microstate's
/// per-thread rows) where per command it merges across hosts ("ls SYS" on every host).
pub fn summarize(
    source: &Source,
    analyzers: &[&'static Info],
    per_thread: bool,
) -> Result<Summary, Error> {
    let trace = source.trace();
    if let Some(e) = trace.damage().next() {
        return Err(e.clone().into());
    }
    let explicit = !analyzers.is_empty();
    let all: Vec<&'static Info> = if explicit {
        analyzers.to_vec()
    } else {
        kstate_analyze::analyzers::ALL.iter().collect()
    };
    let mut out = Summary::default();
    let mut outcomes = Vec::new();
    // Analyzers that read events share one merge of the file; the others (none read
    // events today) run their own pass.
    let mut passes: Vec<(&'static Info, Box<dyn AnyPass>)> = Vec::new();
    let mut route: Vec<Vec<usize>> = vec![Vec::new(); trace.events.id_limit()];
    for info in all {
        let started = match info.is_live() {
            true => source.start(&Query::of(info)).map(Some),
            false => stat_pass(source, info, None).map(|o| {
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
            Err(e) if !explicit && e.not_applicable().is_some() => {
                let why = e.not_applicable().unwrap_or_default().to_string();
                out.skipped.push((info.name.to_string(), why));
            }
            Err(e) => return Err(e),
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
        let mut by = o.by;
        let mut rows: BTreeMap<String, Agg> = BTreeMap::new();
        let fold = !per_thread && PER_THREAD.contains(&by);
        if fold {
            by = "comm";
        }
        for row in &o.rows {
            let key = if fold {
                comm_of(&row.key)
            } else {
                row.key.clone()
            };
            rows.entry(key).or_default().merge(&row.agg);
        }
        for (key, agg) in rows {
            out.stats.push(KeyStat {
                analyzer: info.name.to_string(),
                by: by.to_string(),
                unit: info.unit.suffix().to_string(),
                key,
                agg,
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

/// Merged statistics of some recordings for one analyzer and key, while they are merged.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    pub recordings: u64,
    /// Count, total, min, max and flagged; its `hist` stays empty (see `buckets`).
    pub agg: Agg,
    /// The merged histogram's non-empty buckets as (index, count, sum), by index: only
    /// what is there is kept (a dense [`kstate_analyze::hist::LogHist`] spans every bucket
    /// between the extremes).
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
    /// [`kstate_analyze::hist::LogHist::quantile_bucket`]).
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
        let (lo, hi) = kstate_analyze::hist::bucket_range(bucket);
        Quantile {
            bucket,
            lo,
            hi,
            // As `kstate analyze` reports it: the bucket's midpoint within [min, max].
            value: (lo + (hi - lo) / 2).clamp(self.agg.min(), self.agg.max),
        }
    }

    /// What is reported of the merge.
    pub fn figures(&self) -> Figures {
        let a = &self.agg;
        Figures {
            recordings: self.recordings,
            count: a.count,
            total: a.total,
            min: a.min(),
            max: a.max,
            flagged: a.flagged,
            quantiles: QUANTILES.map(|p| self.quantile(p)),
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

/// The quantiles reported, in thousandths: p50, p99, p99.9.
pub const QUANTILES: [u64; 3] = [500, 990, 999];

/// What is reported of a merged key: its statistics and quantiles, without the
/// histogram. A group's histograms are turned into this as soon as the group is merged,
/// so a reduce holds the histograms of the groups being merged and of the whole fleet,
/// never of every group at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    pub recordings: u64,
    pub count: u64,
    pub total: u64,
    pub min: u64,
    pub max: u64,
    pub flagged: u64,
    /// At [`QUANTILES`].
    pub quantiles: [Quantile; 3],
}

impl Figures {
    pub fn avg(&self) -> u64 {
        self.total.checked_div(self.count).unwrap_or(0)
    }
    pub fn p99(&self) -> u64 {
        self.quantiles[1].value
    }
}

/// Per analyzer and key: the whole fleet, and each group.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    pub by: String,
    pub unit: String,
    pub fleet: Figures,
    /// Group names are shared by every key's map.
    pub groups: BTreeMap<Arc<str>, Figures>,
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

/// Some recordings' keys merged, while they are merged: one group's (or part of it), or
/// the whole fleet's.
#[derive(Debug, Clone, Default)]
struct Acc {
    recordings: u64,
    /// (analyzer, key) -> (by, unit, merge).
    keys: BTreeMap<(String, String), (String, String, Merged)>,
}

impl Acc {
    fn add(&mut self, s: &Summary, analyzer: Option<&str>, key: Option<&str>) {
        self.recordings += 1;
        for k in &s.stats {
            if analyzer.is_some_and(|a| a != k.analyzer) || key.is_some_and(|x| x != k.key) {
                continue;
            }
            self.keys
                .entry((k.analyzer.clone(), k.key.clone()))
                .or_insert_with(|| (k.by.clone(), k.unit.clone(), Merged::default()))
                .2
                .add(1, &k.agg);
        }
    }

    fn absorb(&mut self, o: &Acc) {
        self.recordings += o.recordings;
        for (k, (by, unit, m)) in &o.keys {
            self.keys
                .entry(k.clone())
                .or_insert_with(|| (by.clone(), unit.clone(), Merged::default()))
                .2
                .absorb(m);
        }
    }
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

    /// Merges summaries held in memory (each counted, copies too: see [`reduce`]).
    pub fn of(mut self, summaries: &[Summary]) -> Fleet {
        let mut groups: BTreeMap<String, Acc> = BTreeMap::new();
        let mut fleet = Acc::default();
        for s in summaries {
            let g = groups.entry(self.group_by.of(&s.meta)).or_default();
            g.add(s, self.analyzer.as_deref(), self.key.as_deref());
        }
        for (g, acc) in groups {
            fleet.absorb(&acc);
            self.add_group(&Arc::from(g), &acc);
        }
        self.set_fleet(&fleet);
        self
    }

    fn entry(&mut self, k: &(String, String), by: &str, unit: &str) -> &mut Entry {
        self.entries.entry(k.clone()).or_insert_with(|| Entry {
            by: by.to_string(),
            unit: unit.to_string(),
            ..Entry::default()
        })
    }

    /// Takes in a complete group's figures.
    fn add_group(&mut self, group: &Arc<str>, acc: &Acc) {
        if acc.recordings > 0 {
            *self.recordings.entry(group.to_string()).or_default() += acc.recordings;
        }
        for (k, (by, unit, m)) in &acc.keys {
            let f = m.figures();
            self.entry(k, by, unit).groups.insert(group.clone(), f);
        }
    }

    fn set_fleet(&mut self, acc: &Acc) {
        for (k, (by, unit, m)) in &acc.keys {
            self.entry(k, by, unit).fleet = m.figures();
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
            let mut p99s: Vec<u64> = e.groups.values().map(Figures::p99).collect();
            p99s.sort_unstable();
            let median = p99s[(p99s.len() - 1) / 2];
            for (g, m) in &e.groups {
                let p99 = m.p99();
                if p99 as f64 > k * median as f64 {
                    out.push(Outlier {
                        analyzer: analyzer.clone(),
                        key: key.clone(),
                        group: g.to_string(),
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

/// Runs `work(i)` for i in 0..n on all cores, returning the results in index order.
fn par_map<T: Send>(n: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(n.max(1));
    let next = AtomicUsize::new(0);
    let mut parts: Vec<Vec<(usize, T)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break out;
                        }
                        out.push((i, work(i)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reducer thread panicked"))
            .collect()
    });
    let mut all: Vec<(usize, T)> = parts.drain(..).flatten().collect();
    all.sort_by_key(|x| x.0);
    all.into_iter().map(|x| x.1).collect()
}

/// Reads and merges the summaries at `paths` on all cores, a group at a time: `meta`
/// reads a summary's recording facts (to group it), `read` the whole summary (already
/// cut to `template`'s analyzer and key, or cut here). The summaries that could not be
/// read are returned beside the merge.
///
/// Memory: the summaries are first grouped by their facts alone; then each group's
/// summaries are read and merged, and as soon as a group is complete its histograms are
/// reduced to the figures reported ([`Figures`]) and added into the whole fleet's. So
/// the histograms held are those of the groups in progress (about one per core) and
/// the fleet's, not one per group and key. A large group is cut into parts merged on
/// different cores.
///
/// A recording is merged once, however many summaries of it there are (a summary copied
/// into a second directory, a dataset appended to twice): of the summaries with one
/// recording id, the first in path order is merged and the others are returned as
/// [`Duplicate`]s naming it. That is not a failure: nothing of the fleet is missing from
/// the figures.
pub fn reduce<M, R>(paths: &[PathBuf], meta: M, read: R, template: &Fleet) -> Reduced
where
    M: Fn(&Path) -> Result<Meta, String> + Sync,
    R: Fn(&Path) -> Result<Summary, String> + Sync,
{
    let mut out = Reduced {
        fleet: template.clone(),
        failed: Vec::new(),
        duplicates: Vec::new(),
    };
    // Group the readable summaries, one per recording.
    let metas = par_map(paths.len(), |i| meta(&paths[i]));
    let mut first: HashMap<String, usize> = HashMap::new();
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, m) in metas.into_iter().enumerate() {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                out.failed.push((paths[i].clone(), e));
                continue;
            }
        };
        match first.get(&m.recording) {
            Some(&j) => out.duplicates.push(Duplicate {
                path: paths[i].clone(),
                merged: paths[j].clone(),
                recording: m.recording,
            }),
            None => {
                groups.entry(template.group_by.of(&m)).or_default().push(i);
                first.insert(m.recording, i);
            }
        }
    }
    drop(first);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let total: usize = groups.values().map(Vec::len).sum();
    // Parts small enough that one large group keeps every core busy, and taken in
    // group order, so that few groups are in progress at once.
    let part_len = total.div_ceil(threads * 4).max(1);
    let names: Vec<Arc<str>> = groups.keys().map(|g| Arc::from(g.as_str())).collect();
    let mut parts: Vec<(usize, &[usize])> = Vec::new();
    let mut left: Vec<usize> = Vec::new();
    for (g, files) in groups.values().enumerate() {
        let chunks: Vec<&[usize]> = files.chunks(part_len).collect();
        left.push(chunks.len());
        parts.extend(chunks.into_iter().map(|c| (g, c)));
    }
    // Group -> (parts not yet merged, the merge so far).
    let pending: Mutex<HashMap<usize, (usize, Acc)>> = Mutex::new(HashMap::new());
    // The complete groups' figures, and the whole fleet's histograms.
    let sink = Mutex::new((
        std::mem::replace(&mut out.fleet, template.clone()),
        Acc::default(),
    ));
    let (analyzer, key) = (template.analyzer.as_deref(), template.key.as_deref());
    let failed = par_map(parts.len(), |p| {
        let (g, files) = parts[p];
        let mut acc = Acc::default();
        let mut failed = Vec::new();
        for &i in files {
            match read(&paths[i]) {
                Ok(s) => acc.add(&s, analyzer, key),
                Err(e) => failed.push((paths[i].clone(), e)),
            }
        }
        let complete = if left[g] == 1 {
            Some(acc)
        } else {
            let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
            let (n, merged) = pending
                .entry(g)
                .or_insert_with(|| (left[g], Acc::default()));
            merged.absorb(&acc);
            *n -= 1;
            if *n == 0 {
                pending.remove(&g).map(|x| x.1)
            } else {
                None
            }
        };
        if let Some(acc) = complete {
            let mut sink = sink.lock().unwrap_or_else(|e| e.into_inner());
            sink.0.add_group(&names[g], &acc);
            sink.1.absorb(&acc);
        }
        failed
    });
    let (fleet, all) = sink.into_inner().unwrap_or_else(|e| e.into_inner());
    out.fleet = fleet;
    out.fleet.set_fleet(&all);
    out.failed.extend(failed.into_iter().flatten());
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

    #[test]
    fn per_thread_keys_name_their_command() {
        assert_eq!(comm_of("ls-26176 SYS"), "ls SYS");
        assert_eq!(comm_of("kworker/0:1-events-7"), "kworker/0:1-events");
        assert_eq!(comm_of("x-2-55"), "x-2");
        assert_eq!(comm_of("Web Content-1234"), "Web Content");
        assert_eq!(comm_of("Web Content-1234 LAT"), "Web Content LAT");
        assert_eq!(comm_of("write"), "write");
    }

    /// Three hosts with p99 about 100, 120 and 1,000: with k = 3 only the last is an
    /// outlier (median 120); the fleet's figures are those of all the values at once,
    /// merged in memory or read by `reduce` a group at a time (in parts: the group of
    /// "b" spans several), with a copy of one recording counted once.
    #[test]
    fn outliers_and_reduce_in_parts() {
        let a = summary("a", &[10, 20, 100]);
        let b = summary("b", &[10, 120, 120]);
        let c = summary("c", &[5, 1000]);
        let all = Fleet::new(GroupBy::Host, None, None).of(&[a.clone(), b.clone(), c.clone()]);
        let out = all.outliers(3.0);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].group.as_str(), out[0].median_p99), ("c", 120));
        assert!(out[0].p99.abs_diff(1000) <= 4, "{}", out[0].p99);
        let x = &all.entries[&("syscall".into(), "write".into())].fleet;
        assert_eq!((x.recordings, x.count, x.total), (3, 8, 1385));
        assert_eq!((x.min, x.max), (5, 1000));
        // 8 values: the median is the 4th smallest (20).
        assert_eq!(x.quantiles[0].value, 20);

        // Nine more recordings of host b, and a copy of c's.
        let mut files: Vec<(PathBuf, Summary)> = vec![
            ("0-a".into(), a),
            ("1-b".into(), b.clone()),
            ("2-c".into(), c.clone()),
            ("3-c-copy".into(), c),
        ];
        for i in 0..9 {
            let mut more = summary("b", &[7, 9000]);
            more.meta.recording = format!("b-{i}");
            files.push((format!("4-b{i}").into(), more));
        }
        let paths: Vec<PathBuf> = files.iter().map(|f| f.0.clone()).collect();
        let find = |p: &Path| files.iter().find(|f| f.0 == p).unwrap().1.clone();
        let r = reduce(
            &paths,
            |p| Ok(find(p).meta),
            |p| Ok(find(p)),
            &Fleet::new(GroupBy::Host, None, None),
        );
        assert!(r.failed.is_empty());
        assert_eq!(r.duplicates.len(), 1);
        assert_eq!(r.duplicates[0].path, Path::new("3-c-copy"));
        assert_eq!(r.duplicates[0].merged, Path::new("2-c"));
        assert_eq!(r.fleet.recordings["b"], 10);
        let e = &r.fleet.entries[&("syscall".into(), "write".into())];
        // 8 + 18 values; b: 3 + 18, of which 9 are 9000: its p50 is 120's bucket.
        assert_eq!((e.fleet.recordings, e.fleet.count), (12, 26));
        assert_eq!(e.fleet.total, 1385 + 9 * 9007);
        let gb = &e.groups["b"];
        assert_eq!((gb.count, gb.min, gb.max), (21, 7, 9000));
        assert_eq!(gb.quantiles[0].value, 120);
    }
}
