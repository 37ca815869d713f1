//! The perf records a recording holds: kstate's SAMPLES or STACKS section, or a perf.data's
//! own records. [`read_side`] sorts out their side-band records (maps, comms, forks) in one
//! pass; [`read_section`] also keeps the samples, their user chains unwound; [`Comms`]
//! names a thread at a time.

use std::collections::HashMap;

use kstate_format::perf::decode::{self, PerfRecord, RecordSource, SampleRec, Source};
use kstate_format::{sections, Error, ErrorKind, Trace};

use crate::symbolizer::build_maps;
use crate::unwind;

/// Comm of a thread at a time: the COMM records, then the process table at start and
/// the trace's saved cmdlines.
pub struct Comms {
    changes: HashMap<u32, Vec<(u64, String)>>,
    start: HashMap<u32, String>,
}

impl Comms {
    /// The thread names of a recording whose side-band records gave these comm changes
    /// ([`Side::changes`]), with its process table at the start.
    pub fn new(trace: &Trace, changes: HashMap<u32, Vec<(u64, String)>>) -> Comms {
        Comms {
            changes,
            start: start_comms(trace),
        }
    }

    /// The thread names over time of a recording's sampled records (kstate's SAMPLES
    /// section or a perf.data), from one pass over their side-band records; None where it
    /// has no samples.
    pub fn of_samples(trace: &Trace) -> Result<Option<Comms>, Error> {
        let id = sections::ids::SAMPLES;
        let Some(src) = source(trace, id)? else {
            return Ok(None);
        };
        let side = read_side(trace, &*src, id, None)?;
        Ok(Some(Comms {
            changes: side.changes,
            start: start_comms(trace),
        }))
    }

    pub fn get(&self, tid: u32, t: u64) -> Option<&str> {
        if tid == 0 {
            return Some("swapper");
        }
        if let Some(v) = self.changes.get(&tid) {
            let n = v.partition_point(|c| c.0 <= t);
            if n > 0 {
                return Some(&v[n - 1].1);
            }
            // Before its first COMM record: the first one is the best guess.
            if !self.start.contains_key(&tid) {
                return v.first().map(|c| c.1.as_str());
            }
        }
        self.start.get(&tid).map(String::as_str)
    }
}

/// Names of the processes when the recording started: its saved cmdlines, then its
/// process table.
fn start_comms(trace: &Trace) -> HashMap<u32, String> {
    let mut start: HashMap<u32, String> = trace
        .comms
        .iter()
        .map(|(&p, c)| (p as u32, c.clone()))
        .collect();
    if let Some(Ok(ps)) = trace
        .extra(sections::ids::PROCESSES)
        .map(sections::decode_processes)
    {
        for p in ps {
            start.insert(p.pid as u32, p.comm);
        }
    }
    start
}

fn corrupt(trace: &Trace, id: u16, e: Error) -> Error {
    let name = sections::section_name(id).unwrap_or("samples");
    Error::new(e.kind, e.offset, format!("{name} section: {}", e.msg)).in_file(&trace.path)
}

/// The perf records of a recording: kstate's section `id` (SAMPLES or STACKS), or for
/// SAMPLES a perf.data's own records; None where the recording has neither.
pub fn source<'t>(trace: &'t Trace, id: u16) -> Result<Option<Box<dyn RecordSource + 't>>, Error> {
    if let Some(payload) = trace.extra(id) {
        let sec =
            kstate_format::sections::samples::decode(payload).map_err(|e| corrupt(trace, id, e))?;
        return Ok(Some(Box::new(sec)));
    }
    match &trace.perf {
        Some(pf) if id == sections::ids::SAMPLES => Ok(Some(Box::new(pf.as_ref()))),
        _ => Ok(None),
    }
}

/// An error of a walk over a source: a kstate section's offsets are in its payload.
pub fn walk_err(trace: &Trace, id: u16, e: Error) -> Error {
    if e.path.is_some() {
        e
    } else {
        corrupt(trace, id, e)
    }
}

/// A source's records other than samples, sorted out (one pass; samples are only counted).
pub struct Side {
    /// Index of the event whose samples are read, and its header.
    pub event: usize,
    pub header: decode::Header,
    /// Every sampled event's name, in the file's order.
    pub events: Vec<String>,
    /// That event's samples and the earliest of their times.
    pub samples: u64,
    pub first_time: Option<u64>,
    /// Records the kernel lost.
    pub lost: u64,
    /// Side-band records (maps, comms, forks) with their times.
    pub side: Vec<(u64, PerfRecord)>,
    /// Comm changes per thread, in time order (a forked thread starts with its parent's).
    pub changes: HashMap<u32, Vec<(u64, String)>>,
}

/// Reads the side-band records of a source, for the samples of `event` (default: the
/// first sampled).
pub fn read_side(
    trace: &Trace,
    src: &dyn RecordSource,
    id: u16,
    event: Option<&str>,
) -> Result<Side, Error> {
    let headers = src.events();
    let events: Vec<String> = headers.iter().map(|h| h.event.clone()).collect();
    let ev = match event {
        None => 0,
        Some(name) => events.iter().position(|e| e == name).ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                None,
                format!(
                    "no samples of {name} in this recording; it has {}",
                    events.join(", ")
                ),
            )
            .in_file(&trace.path)
        })?,
    };
    let mut side: Vec<(u64, PerfRecord)> = Vec::new();
    let (mut n, mut first_time, mut lost) = (0u64, None::<u64>, 0u64);
    src.visit(&mut |r| {
        if r.kind == decode::record::SAMPLE {
            if r.event == ev {
                n += 1;
                if let Some(t) = r.sample_time(headers) {
                    first_time = Some(first_time.map_or(t, |f| f.min(t)));
                }
            }
            return Ok(());
        }
        let rec = r.parse(headers)?;
        match rec {
            PerfRecord::Lost { lost: k } if r.event == ev => lost = lost.saturating_add(k),
            PerfRecord::Comm { time, .. } | PerfRecord::Fork { time, .. } => side.push((time, rec)),
            PerfRecord::Mmap2(ref m) => {
                let t = if r.source == Source::Maps { 0 } else { m.time };
                side.push((t, rec));
            }
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| walk_err(trace, id, e))?;
    side.sort_by_key(|e| e.0);
    let mut changes: HashMap<u32, Vec<(u64, String)>> = HashMap::new();
    for (t, r) in &side {
        match r {
            PerfRecord::Comm { tid, comm, .. } => {
                changes.entry(*tid).or_default().push((*t, comm.clone()));
            }
            PerfRecord::Fork { tid, ptid, .. } if tid != ptid => {
                let parent = changes
                    .get(ptid)
                    .and_then(|v| v.last())
                    .map(|c| c.1.clone());
                if let Some(c) = parent {
                    changes.entry(*tid).or_default().push((*t, c));
                }
            }
            _ => {}
        }
    }
    Ok(Side {
        event: ev,
        header: headers[ev].clone(),
        events,
        samples: n,
        first_time,
        lost,
        side,
        changes,
    })
}

/// A section in the SAMPLES layout, its records sorted out.
pub struct Section {
    /// The header of the event whose samples these are.
    pub header: decode::Header,
    pub samples: Vec<SampleRec>,
    /// Records the kernel lost.
    pub lost: u64,
    /// Side-band records (maps, comms, forks) with their times.
    pub side: Vec<(u64, PerfRecord)>,
    /// How the samples' user chains were found.
    pub chains: unwind::ChainCounts,
}

/// Reads section `id` (SAMPLES or STACKS) of a recording with the samples of its first
/// event (for the lock views, which keep them by thread); None where the recording has
/// no such section.
pub fn read_section(trace: &Trace, id: u16) -> Result<Option<Section>, Error> {
    let Some(src) = source(trace, id)? else {
        return Ok(None);
    };
    let side = read_side(trace, &*src, id, None)?;
    // The mappings the user stacks are unwound with.
    let maps = build_maps(&mut side.side.clone());
    let mut unwinder = unwind::ChainUnwinder::new(&maps);
    let regs = side.header.attr.sample_regs_user;
    let mut all = Vec::new();
    let headers = src.events();
    src.visit(&mut |r| {
        if r.kind == decode::record::SAMPLE && r.event == side.event {
            if let PerfRecord::Sample(mut s) = r.parse(headers)? {
                unwinder.unwind(&mut s, regs);
                all.push(s);
            }
        }
        Ok(())
    })
    .map_err(|e| walk_err(trace, id, e))?;
    Ok(Some(Section {
        header: side.header,
        samples: all,
        lost: side.lost,
        side: side.side,
        chains: unwinder.counts,
    }))
}
