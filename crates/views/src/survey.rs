//! A survey of a recording: every analyzer whose events the file has, each as its
//! statistics, its distribution (LKST's decimal buckets) and its samples followed over the
//! recording's common time axis ([`crate::timeline`]), with the findings ranked
//! ([`crate::findings`]), the recording's facts and memory snapshots, and the events lost
//! per CPU. One survey feeds `kstate run`, `kstate report`, `kstate plot` and the browser
//! UI alike.

use std::collections::{BTreeMap, HashSet};

use kstate_format::sections::{self, Recording, Snapshot};
use kstate_format::{Error, Trace};

use crate::findings::Finding;
use crate::timeline::{Collector, TimeAxis};
use kstate_analyze::analyzer::{Buckets, Mode, Outcome};
use kstate_analyze::{analyzers, Info};
use kstate_analyze::{Query, Source};
use kstate_format::stream::merge::{IdFilter, Merger};

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

/// Every analyzer that applies, run over one file: what `kstate run`, `kstate report` and
/// the browser UI show.
pub struct Survey {
    pub file: String,
    pub axis: TimeAxis,
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
    /// The first and last event of the file (on its host's clock, for a guest's).
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    /// What `kstate watch` did and saw while recording (alarms, escalations, shedding,
    /// losses), from the file's WATCH_LOG section.
    pub watch_log: Vec<kstate_format::sections::watch_log::Entry>,
    /// What was skipped as damaged or cut short, each once, with its file, CPU and
    /// offset: the figures cover the rest. Every front end shows it.
    pub damage: Vec<Error>,
}

/// The statistics pass of one analyzer, rows sorted by total (as `kstate analyze`).
pub fn stat_pass(
    source: &Source,
    info: &'static Info,
    by: Option<&str>,
) -> Result<Outcome, kstate_analyze::Error> {
    source.aggregate(&Query::of(info).keyed(by))
}

/// The common axis: the recording's start and stop where the file says, widened to the
/// events the analyses saw; else from the first to the last event seen by the analyses,
/// or where none applies, of the file (`events`).
pub fn axis_of(
    rec: Option<&Recording>,
    stats: &[&Outcome],
    events: Option<(u64, u64)>,
) -> TimeAxis {
    let first = stats.iter().filter_map(|o| o.trace_start).min();
    let last = stats.iter().filter_map(|o| o.span.map(|s| s.1)).max();
    let (first, last) = match (first, last, events) {
        (None, None, Some((a, b))) => (Some(a), Some(b)),
        (f, l, _) => (f, l),
    };
    match rec {
        Some(r) if r.stop_ts > r.start_ts => TimeAxis {
            t0: r.start_ts.min(first.unwrap_or(u64::MAX)),
            t1: r.stop_ts.max(last.unwrap_or(0)),
        },
        _ => {
            let t0 = first.unwrap_or(0);
            TimeAxis {
                t0,
                t1: last.unwrap_or(t0 + 1).max(t0 + 1),
            }
        }
    }
}

/// The distribution and log passes of an analyzer whose statistics pass is done.
pub fn complete(
    source: &Source,
    info: &'static Info,
    stat: Outcome,
    axis: TimeAxis,
    workload: Option<HashSet<i32>>,
) -> Analysis {
    let by = Some(stat.by);
    let dist = source
        .aggregate(&Query::of(info).keyed(by).mode(Mode::Dist(Buckets::Log10)))
        .unwrap_or_else(|_| stat.clone());
    let mut track = Collector::new(axis, workload, &stat);
    let _ = source.run(&Query::of(info).keyed(by).mode(Mode::Log), &mut track);
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
        .extra(sections::ids::RECORDING)
        .and_then(|b| Recording::decode(b).ok())
}

/// The file's watch log (empty where it has none or it does not decode).
pub fn watch_log(trace: &Trace) -> Vec<kstate_format::sections::watch_log::Entry> {
    trace
        .extra(sections::ids::WATCH_LOG)
        .and_then(|b| kstate_format::sections::watch_log::decode(b).ok())
        .unwrap_or_default()
}

/// The file's memory snapshots.
pub fn snapshots(trace: &Trace) -> Vec<Snapshot> {
    trace
        .extra(sections::ids::SYSINFO)
        .map(|b| {
            sections::sysinfo_snapshots(b)
                .filter_map(Result::ok)
                .collect()
        })
        .unwrap_or_default()
}

/// The traced command's threads, where the file names its pid.
pub fn workload_of(trace: &Trace, rec: Option<&Recording>) -> Option<HashSet<i32>> {
    rec.and_then(|r| r.workload_pid)
        .map(|p| crate::workload::workload_tids(trace, p))
}

/// Every analyzer whose events the source's file has, with the findings ranked (what
/// `kstate report` and `kstate run` show).
pub fn of(source: &Source) -> Survey {
    let s = stats(source);
    let axis = s.axis;
    s.finish(source, axis)
}

/// The first half of a survey: every analyzer's statistics pass and the time axis they
/// give. Several recordings shown on one axis (a host and its guests) each make theirs,
/// then all finish on the axis that holds them all.
pub struct Stats {
    recording: Option<Recording>,
    stats: Vec<(&'static Info, Outcome)>,
    skipped: Vec<Skipped>,
    /// The file's own axis.
    pub axis: TimeAxis,
    events: Events,
    damage: Vec<Error>,
}

/// The statistics passes of every analyzer of [`analyzers::ALL`].
pub fn stats(source: &Source) -> Stats {
    let trace = source.trace();
    let mut damage = Vec::new();
    let recording = section(
        trace,
        sections::ids::RECORDING,
        &mut damage,
        Recording::decode,
    );
    let ev = trace_events(trace, &mut damage);
    let mut stats = Vec::new();
    let mut skipped = Vec::new();
    for info in analyzers::ALL {
        match stat_pass(source, info, None) {
            Ok(o) => {
                for e in &o.errors {
                    kstate_format::damage::note(&mut damage, e);
                }
                stats.push((info, o))
            }
            Err(e) => {
                if let (None, kstate_analyze::Error::Trace(t)) = (e.not_applicable(), &e) {
                    kstate_format::damage::note(&mut damage, t);
                }
                skipped.push(Skipped {
                    info,
                    why: e
                        .not_applicable()
                        .map_or_else(|| e.to_string(), str::to_string),
                })
            }
        }
    }
    // A guest's RECORDING start and stop are on its own clock, not the host's its events
    // were moved to: its axis comes from the events.
    let shifted = trace.time_shift.as_ref().is_some_and(|t| t.is_active());
    let axis = axis_of(
        recording.as_ref().filter(|_| !shifted),
        &stats.iter().map(|(_, o)| o).collect::<Vec<_>>(),
        ev.first.zip(ev.last),
    );
    Stats {
        recording,
        stats,
        skipped,
        axis,
        events: ev,
        damage,
    }
}

/// Kstate's section `id` of `trace`, decoded; a damaged one is noted in `damage` (the
/// survey goes on without it).
fn section<T>(
    trace: &Trace,
    id: u16,
    damage: &mut Vec<Error>,
    decode: impl FnOnce(&[u8]) -> Result<T, Error>,
) -> Option<T> {
    let bytes = trace.extra(id)?;
    match decode(bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            kstate_format::damage::note(damage, &kstate_format::damage::in_section(trace, id, e));
            None
        }
    }
}

impl Stats {
    /// The distribution and log passes on `axis`, and the findings.
    pub fn finish(self, source: &Source, axis: TimeAxis) -> Survey {
        let (trace, file) = (source.trace(), source.label());
        let mut damage = self.damage;
        let snapshots = match trace.extra(sections::ids::SYSINFO) {
            None => Vec::new(),
            Some(b) => {
                let mut v = Vec::new();
                for s in sections::sysinfo_snapshots(b) {
                    match s {
                        Ok(s) => v.push(s),
                        Err(e) => {
                            let e =
                                kstate_format::damage::in_section(trace, sections::ids::SYSINFO, e);
                            kstate_format::damage::note(&mut damage, &e);
                            break;
                        }
                    }
                }
                v
            }
        };
        let watch_log = section(
            trace,
            sections::ids::WATCH_LOG,
            &mut damage,
            kstate_format::sections::watch_log::decode,
        )
        .unwrap_or_default();
        let workload = workload_of(trace, self.recording.as_ref());
        let mut analyses = Vec::new();
        for (info, stat) in self.stats {
            let a = complete(source, info, stat, axis, workload.clone());
            for e in &a.dist.errors {
                kstate_format::damage::note(&mut damage, e);
            }
            analyses.push(a);
        }
        let ev = self.events;
        let mut r = Survey {
            watch_log,
            damage,
            file: file.to_string(),
            axis,
            recording: self.recording,
            analyses,
            skipped: self.skipped,
            snapshots,
            findings: Vec::new(),
            workload,
            lost: ev.lost,
            events: ev.count,
            first_ts: ev.first,
            last_ts: ev.last,
        };
        r.findings = crate::findings::rank(&r);
        r
    }
}

/// The events of a file: how many, the first and last timestamps, the losses per CPU.
#[derive(Default)]
struct Events {
    count: u64,
    first: Option<u64>,
    last: Option<u64>,
    lost: BTreeMap<u32, Option<u64>>,
}

/// Events in the file and events lost per CPU (None: some loss uncounted); what is
/// damaged is noted in `damage` (a damaged CPU stream ends there, the others go on).
fn trace_events(trace: &Trace, damage: &mut Vec<Error>) -> Events {
    for e in trace.damage() {
        kstate_format::damage::note(damage, e);
    }
    let mut ev = Events::default();
    let mut m = match Merger::new(trace, None, IdFilter::all()) {
        Ok(m) => m,
        Err(e) => {
            kstate_format::damage::note(damage, &e);
            return ev;
        }
    };
    loop {
        match m.next() {
            Ok(Some(e)) => {
                ev.count += 1;
                ev.first.get_or_insert(e.ts);
                ev.last = Some(e.ts);
                let id = e.id;
                if trace.events.get(id).is_none() {
                    m.count_no_format(id);
                }
            }
            Ok(None) => break,
            Err(e) => kstate_format::damage::note(damage, &e),
        }
    }
    for e in m.no_format_errors() {
        kstate_format::damage::note(damage, &e);
    }
    ev.lost = m
        .totals()
        .into_iter()
        .map(|(cpu, t)| (cpu, (t.lost_unknown == 0).then_some(t.lost_counted)))
        .collect();
    ev
}
