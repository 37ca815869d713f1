//! What a trace holds, read in one streaming pass (`kstate info`): events and time span per
//! CPU, losses, counts per event, and kstate's own sections (how it was recorded, samples,
//! the watch log) decoded. The figures only; `kstate_render::info` prints them.

use std::collections::BTreeMap;

use kstate_format::sections::{self, ids, Recording, RingStats};
use kstate_format::{sections::watch_log, Container, Error, ErrorKind, Trace};

use kstate_format::stream::merge::{IdFilter, Merger};

#[derive(Debug, Default, Clone)]
pub struct CpuInfo {
    pub events: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
}

/// Everything `info` reports, gathered once.
pub struct Description<'t> {
    pub trace: &'t Trace,
    pub cpus: BTreeMap<u32, CpuInfo>,
    /// Per CPU: events counted as lost, and whether some losses are of unknown size.
    pub lost: BTreeMap<u32, (u64, bool)>,
    pub pages: BTreeMap<u32, u64>,
    pub by_event: BTreeMap<String, u64>,
    pub unknown_ids: u64,
    /// A perf.data's samples of events whose samples do not record the CPU.
    pub no_cpu: Option<CpuInfo>,
    /// A perf.data's losses as perf counts them, and whether from its LOST_SAMPLES
    /// records (`Counts::perf_lost`); None for other files, or where its records could not
    /// be counted.
    pub perf_lost: Option<(u64, bool)>,
    pub sections: Sections,
    /// What could not be read; the figures cover the rest.
    pub errors: Vec<Error>,
}

/// kstate's own sections. Outer `Option`: the file has the section; inner: it decoded.
#[derive(Default)]
pub struct Sections {
    pub recording: Option<Option<Recording>>,
    pub processes: Option<Option<usize>>,
    pub sysinfo_snapshots: Option<Option<u64>>,
    pub ring_stats: Option<Option<Vec<RingStats>>>,
    /// CPU samples (`record --sample`): how they were taken and the totals.
    pub samples: Option<Option<SamplesInfo>>,
    /// Set when `kstate recover` made the file: where from and what may be missing.
    pub recovered: Option<String>,
    /// What `kstate watch` did and saw: alarms, escalations, shedding, losses.
    pub watch_log: Option<Option<Vec<watch_log::Entry>>>,
    /// A perf.data's header: how and where it was recorded.
    pub perf: Option<PerfInfo>,
}

/// What a perf.data's header and feature sections say.
pub struct PerfInfo {
    pub pipe: bool,
    pub attr_size: u64,
    pub cmdline: Option<Vec<String>>,
    pub host: Option<String>,
    pub os_release: Option<String>,
    pub arch: Option<String>,
    pub version: Option<String>,
    pub cpu_desc: Option<String>,
    /// (available, online)
    pub nr_cpus: Option<(u32, u32)>,
    pub total_mem_kib: Option<u64>,
    pub features: Vec<&'static str>,
    /// How its tracepoint samples are read (None: it has none).
    pub read: Option<kstate_format::perf::file::PerfRead>,
}

impl PerfInfo {
    fn of(pf: &kstate_format::perf::file::PerfFile) -> PerfInfo {
        use kstate_format::perf::file::feature;
        PerfInfo {
            pipe: pf.pipe,
            attr_size: pf.events[0].attr_bytes.len() as u64,
            cmdline: pf.cmdline(),
            host: pf.string(feature::HOSTNAME),
            os_release: pf.string(feature::OSRELEASE),
            arch: pf.string(feature::ARCH),
            version: pf.string(feature::VERSION),
            cpu_desc: pf.string(feature::CPUDESC),
            nr_cpus: pf.nr_cpus(),
            total_mem_kib: pf.total_mem_kib(),
            features: pf.features.iter().map(|(b, _)| feature::name(*b)).collect(),
            read: pf.read,
        }
    }
}

impl Sections {
    /// Whether the file has any of kstate's sections (a perf.data header is not one).
    pub fn any(&self) -> bool {
        self.recording.is_some()
            || self.processes.is_some()
            || self.sysinfo_snapshots.is_some()
            || self.ring_stats.is_some()
            || self.samples.is_some()
            || self.recovered.is_some()
            || self.watch_log.is_some()
    }
}

/// The SAMPLES section in brief.
pub struct SamplesInfo {
    /// Every sampled event, comma-separated (the rate is the first one's).
    pub event: String,
    pub clock: String,
    pub freq_hz: Option<u64>,
    pub period: Option<u64>,
    pub call_chains: bool,
    pub counts: kstate_format::perf::decode::Counts,
}

impl SamplesInfo {
    fn decode(b: &[u8]) -> Result<SamplesInfo, Error> {
        Self::of(&kstate_format::sections::samples::decode(b)?)
    }

    fn of(s: &dyn kstate_format::perf::decode::RecordSource) -> Result<SamplesInfo, Error> {
        use kstate_format::perf::decode;
        let h = s.events()[0].clone();
        let freq_hz = h.attr.freq();
        Ok(SamplesInfo {
            period: freq_hz.is_none().then_some(h.attr.period_or_freq),
            freq_hz,
            call_chains: h.attr.sample_type & decode::sample::CALLCHAIN != 0,
            // Every sampled event (the rate shown is the first one's).
            event: s
                .events()
                .iter()
                .map(|h| h.event.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            clock: h.clock,
            counts: decode::count_source(s)?,
        })
    }
}

/// Decodes the sections the file has; a damaged one becomes `Some(None)` and an error.
fn read_sections(trace: &Trace, errors: &mut Vec<Error>) -> Sections {
    fn decode<T>(
        trace: &Trace,
        id: u16,
        errors: &mut Vec<Error>,
        f: impl FnOnce(&[u8]) -> Result<T, Error>,
    ) -> Option<Option<T>> {
        let payload = trace.extra(id)?;
        match f(payload) {
            Ok(v) => Some(Some(v)),
            Err(e) => {
                errors.push(kstate_format::damage::in_section(trace, id, e));
                Some(None)
            }
        }
    }
    Sections {
        recording: decode(trace, ids::RECORDING, errors, Recording::decode),
        processes: decode(trace, ids::PROCESSES, errors, |b| {
            sections::decode_processes(b).map(|p| p.len())
        }),
        sysinfo_snapshots: decode(trace, ids::SYSINFO, errors, |b| {
            sections::sysinfo_snapshots(b).try_fold(0u64, |n, s| s.map(|_| n + 1))
        }),
        ring_stats: decode(trace, ids::RING_STATS, errors, sections::decode_ring_stats),
        samples: match &trace.perf {
            // A perf.data's records are its samples.
            Some(pf) if trace.extra(ids::SAMPLES).is_none() => match SamplesInfo::of(pf.as_ref()) {
                Ok(i) => Some(Some(i)),
                Err(e) => {
                    errors.push(e.in_file(&trace.path));
                    Some(None)
                }
            },
            _ => decode(trace, ids::SAMPLES, errors, SamplesInfo::decode),
        },
        perf: trace.perf.as_deref().map(PerfInfo::of),
        recovered: trace
            .extra(ids::RECOVERED)
            .map(|t| String::from_utf8_lossy(t).into_owned()),
        watch_log: decode(trace, ids::WATCH_LOG, errors, watch_log::decode),
    }
}

/// Reads the whole trace once. Damage does not stop it: a damaged CPU stream ends, the
/// others go on, and the error is kept in [`Description::errors`].
pub fn describe(trace: &Trace) -> Result<Description<'_>, Error> {
    let mut cpus: BTreeMap<u32, CpuInfo> = BTreeMap::new();
    let mut counts = vec![0u64; trace.events.id_limit()];
    let mut unknown_ids = 0;
    let mut errors: Vec<Error> = trace.damage().cloned().collect();
    let mut merger = Merger::new(trace, None, IdFilter::all())?;
    loop {
        match merger.next() {
            Ok(Some(ev)) => {
                let c = cpus.entry(ev.cpu).or_default();
                c.events += 1;
                c.first_ts.get_or_insert(ev.ts);
                c.last_ts = Some(ev.ts);
                let id = ev.id;
                match counts.get_mut(id as usize) {
                    Some(n) if trace.events.get(id).is_some() => *n += 1,
                    _ => {
                        unknown_ids += 1;
                        merger.count_no_format(id);
                    }
                }
            }
            Ok(None) => break,
            // A damaged CPU stream ends; the others go on, and the report says what happened.
            Err(e) => {
                if !errors.iter().any(|x| x.same_place(&e)) {
                    errors.push(e);
                }
            }
        }
    }
    let mut lost = BTreeMap::new();
    let mut pages = BTreeMap::new();
    for (cpu, t) in merger.totals() {
        lost.insert(cpu, (t.lost_counted, t.lost_unknown > 0));
        // A perf.data read straight holds no pages to count.
        if !t.direct {
            pages.insert(cpu, t.pages);
        }
    }
    let mut by_event = trace
        .events
        .iter()
        .filter(|e| counts[e.id as usize] > 0)
        .map(|e| (e.name.clone(), counts[e.id as usize]))
        .collect();
    let sections = read_sections(trace, &mut errors);
    let no_cpu = add_perf_samples(trace, &sections, &mut cpus, &mut by_event);
    let perf_lost = match &sections.samples {
        Some(Some(i)) if trace.perf.is_some() && trace.extra(ids::SAMPLES).is_none() => {
            Some(i.counts.perf_lost())
        }
        _ => None,
    };
    // Per CPU, with the place of the first.
    errors.extend(merger.no_format_errors());
    Ok(Description {
        trace,
        cpus,
        lost,
        pages,
        by_event,
        unknown_ids,
        no_cpu,
        perf_lost,
        sections,
        errors,
    })
}

/// A perf.data's samples of events that are not tracepoints (cpu-clock, page-faults, cycles:
/// the usual `perf record`) are its events as much as tracepoint samples are: `perf script`
/// prints a line for each. The merger reads only tracepoint samples, so these are added from
/// the sample pass [`read_sections`] already made. Returns the samples that carry no CPU.
fn add_perf_samples(
    trace: &Trace,
    sections: &Sections,
    cpus: &mut BTreeMap<u32, CpuInfo>,
    by_event: &mut BTreeMap<String, u64>,
) -> Option<CpuInfo> {
    use kstate_format::perf::decode::{event_type, RecordSource};
    let pf = trace.perf.as_deref()?;
    let Some(Some(info)) = &sections.samples else {
        return None;
    };
    let events = pf.events();
    let mut no_cpu: Option<CpuInfo> = None;
    for (&(ev, cpu), span) in &info.counts.spans {
        let Some(h) = events.get(ev) else { continue };
        if h.attr.type_ == event_type::TRACEPOINT || span.samples == 0 {
            continue;
        }
        *by_event.entry(h.event.clone()).or_default() += span.samples;
        let c = match cpu {
            Some(cpu) => cpus.entry(cpu).or_default(),
            None => no_cpu.get_or_insert_with(CpuInfo::default),
        };
        c.events += span.samples;
        c.first_ts = match (c.first_ts, span.first_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        c.last_ts = c.last_ts.max(span.last_time);
    }
    no_cpu
}

impl Description<'_> {
    /// Events read, all CPUs.
    pub fn total(&self) -> u64 {
        self.all_cpus().map(|c| c.events).sum()
    }
    pub fn first_ts(&self) -> Option<u64> {
        self.all_cpus().filter_map(|c| c.first_ts).min()
    }
    pub fn last_ts(&self) -> Option<u64> {
        self.all_cpus().filter_map(|c| c.last_ts).max()
    }
    fn all_cpus(&self) -> impl Iterator<Item = &CpuInfo> {
        self.cpus.values().chain(self.no_cpu.as_ref())
    }
    /// Every CPU with events or a stream of its own, in order.
    pub fn cpu_numbers(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.lost.keys().chain(self.cpus.keys()).copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    /// Whether the file ends early (a recording that says it was cut short is whole).
    pub fn truncated(&self) -> bool {
        let cut = self.trace.cut_short.as_ref();
        self.errors
            .iter()
            .any(|e| e.kind == ErrorKind::Truncated && !cut.is_some_and(|c| c.same_place(e)))
    }
    /// Losses counted on the CPUs' streams (perf.data: its LOST records).
    pub fn lost_total(&self) -> u64 {
        self.lost.values().map(|(n, _)| n).sum()
    }
    /// The file's losses in one number: a perf.data's as perf counts them
    /// ([`Description::perf_lost`]), else those counted on the CPUs' streams.
    pub fn lost_reported(&self) -> u64 {
        self.perf_lost.map_or_else(|| self.lost_total(), |(n, _)| n)
    }
    /// Bytes the file holds for `cpu`'s stream.
    pub fn bytes(&self, cpu: u32) -> u64 {
        self.trace
            .cpu_data
            .iter()
            .filter(|c| c.cpu == cpu)
            .map(|c| c.file_bytes)
            .sum()
    }
    /// The container in words, its version and its compression, where it has them.
    pub fn kind(&self) -> (String, Option<u32>, Option<String>) {
        match &self.trace.container {
            Container::TraceDat {
                version,
                compression,
            } => ("trace.dat".into(), Some(*version), compression.clone()),
            Container::RawDir => ("raw tracefs capture".into(), None, None),
            Container::PerfData => {
                let what = if self.trace.events.iter().next().is_some() {
                    "tracepoint samples"
                } else {
                    "samples"
                };
                let pipe = match &self.trace.perf {
                    Some(pf) if pf.pipe => ", pipe mode",
                    _ => "",
                };
                (format!("perf.data ({what}{pipe})"), None, None)
            }
            Container::Parquet => ("kstate Parquet tables".into(), None, None),
        }
    }
}
