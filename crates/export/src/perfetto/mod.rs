//! `kstate convert --to perfetto`: Perfetto's protobuf trace format (`perfetto.protos.Trace`,
//! a sequence of `TracePacket`s), hand-encoded.
//!
//! * Scheduling as Perfetto's own Linux recorder writes it: `FtraceEventBundle` packets per
//!   CPU holding `sched_switch` and `sched_waking`/`sched_wakeup` events with their fields,
//!   so the UI builds its native CPU tracks (what ran on each CPU) and thread states.
//! * Trace markers (ftrace `print`, `bprint`, `bputs`): instants on a "Trace markers"
//!   track, named by their message as `kstate dump` prints it.
//! * Thread names and thread groups: a `ProcessTree` packet, from the names the trace's
//!   events and saved comms give and the thread groups kstate's process table or a raw
//!   capture's saved_tgids give; a `SystemInfo` packet with the kernel release.
//! * Analyzer rows (`kstate analyze NAME --log`): a parent track "kstate NAME" and child
//!   tracks "NAME CPU N" (plus lanes "NAME CPU N #2" where rows overlap: slices on a track
//!   must nest), each row a `TrackEvent` slice (SLICE_BEGIN at its start, SLICE_END at
//!   start + duration) named by its key, with tid, pid and comm as debug annotations. Rows
//!   whose value is not a duration are instants carrying the value; levels are counters.
//!
//! Streamed: each CPU's bundle is written once it holds 64 KiB, analyzer packets as rows
//! come. Trace processor sorts packets by time when it loads the file, so analyzer
//! packets may come in completion order.

mod pb;

use std::collections::HashMap;
use std::fmt;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::Error;
use kstate_analyze::analyzer::{Info, Kind, LogRow, LogSink, Unit};
use kstate_analyze::Source;
use kstate_format::output::NewFile;
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::{Lost, Trace};

use crate::common::{self, comm_of, comm_str, Comm, Lanes, SwitchFields, WakeFields};

// TracePacket
const PKT_FTRACE_EVENTS: u32 = 1;
const PKT_PROCESS_TREE: u32 = 2;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_SEQUENCE_FLAGS: u32 = 13;
const PKT_SYSTEM_INFO: u32 = 45;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
// FtraceEventBundle
const BUNDLE_CPU: u32 = 1;
const BUNDLE_EVENT: u32 = 2;
const BUNDLE_LOST_EVENTS: u32 = 3;
// FtraceEvent
const FE_TIMESTAMP: u32 = 1;
const FE_PID: u32 = 2;
const FE_SCHED_SWITCH: u32 = 4;
const FE_SCHED_WAKEUP: u32 = 17;
const FE_SCHED_WAKING: u32 = 20;
// TrackDescriptor
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PARENT_UUID: u32 = 5;
const TD_COUNTER: u32 = 8;
// TrackEvent
const TE_DEBUG_ANNOTATIONS: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_TRACK_UUID: u32 = 11;
const TE_CATEGORIES: u32 = 22;
const TE_NAME: u32 = 23;
const TE_COUNTER_VALUE: u32 = 30;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;
// DebugAnnotation
const DA_UINT: u32 = 3;
const DA_INT: u32 = 4;
const DA_STRING: u32 = 6;
const DA_NAME: u32 = 10;

/// Packets of the scheduling data and metadata.
const SEQ_SCHED: u64 = 1;
/// Packets of the analyzer tracks.
const SEQ_TRACKS: u64 = 2;
/// `SEQ_INCREMENTAL_STATE_CLEARED`.
const SEQ_CLEARED: u64 = 1;
const BUNDLE_BYTES: usize = 64 << 10;

struct Out<W: Write> {
    w: W,
    /// The packet being built.
    pkt: Vec<u8>,
    tracks_started: bool,
    next_uuid: u64,
}

impl<W: Write> Out<W> {
    /// Writes `pkt` as one `Trace.packet` (field 1).
    fn flush_packet(&mut self) -> std::io::Result<()> {
        // Key of field 1, wire type 2 (length-delimited).
        let mut head = vec![0x0a];
        pb::varint(&mut head, self.pkt.len() as u64);
        self.w.write_all(&head)?;
        self.w.write_all(&self.pkt)?;
        self.pkt.clear();
        Ok(())
    }

    /// Starts a packet on the analyzer-track sequence.
    fn track_packet(&mut self) {
        self.pkt.clear();
        pb::uint(&mut self.pkt, PKT_SEQ_ID, SEQ_TRACKS);
        if !self.tracks_started {
            self.tracks_started = true;
            pb::uint(&mut self.pkt, PKT_SEQUENCE_FLAGS, SEQ_CLEARED);
        }
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    fn track(
        &mut self,
        uuid: u64,
        parent: Option<u64>,
        name: &str,
        counter: bool,
    ) -> std::io::Result<()> {
        self.track_packet();
        let m = pb::begin(&mut self.pkt, PKT_TRACK_DESCRIPTOR);
        pb::uint(&mut self.pkt, TD_UUID, uuid);
        if let Some(p) = parent {
            pb::uint(&mut self.pkt, TD_PARENT_UUID, p);
        }
        pb::string(&mut self.pkt, TD_NAME, name);
        if counter {
            let c = pb::begin(&mut self.pkt, TD_COUNTER);
            pb::end(&mut self.pkt, c);
        }
        pb::end(&mut self.pkt, m);
        self.flush_packet()
    }
}

/// What a conversion wrote.
#[derive(Default)]
pub struct Summary {
    pub cpus: usize,
    pub switches: u64,
    pub wakeups: u64,
    pub threads: usize,
    /// Trace markers written as instants on the "Trace markers" track.
    pub markers: u64,
    /// (analyzer, rows, tracks)
    pub analyzers: Vec<(&'static str, u64, usize)>,
    pub skipped: Vec<&'static str>,
    /// What was skipped as damaged: the output holds the rest.
    pub damage: Vec<kstate_format::Error>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sched_switch and {} wakeup events on {} CPUs, {} thread names",
            self.switches, self.wakeups, self.cpus, self.threads
        )?;
        if self.markers > 0 {
            write!(f, ", {} trace markers", self.markers)?;
        }
        for (n, rows, tracks) in &self.analyzers {
            write!(f, "; {n}: {rows} rows on {tracks} tracks")?;
        }
        Ok(())
    }
}

pub fn write(source: &Source, path: &Path, names: &[String]) -> Result<Summary, Error> {
    let trace = source.trace();
    let (selected, explicit) = common::select(names)?;
    let f = NewFile::create(path).map_err(|e| Error::write(path, e))?;
    let mut o = Out {
        w: BufWriter::with_capacity(1 << 16, f),
        pkt: Vec::with_capacity(BUNDLE_BYTES + 4096),
        tracks_started: false,
        next_uuid: 0x6b73_7461_7465_0000,
    };
    let mut sum = Summary {
        damage: common::declared_damage(trace),
        ..Summary::default()
    };
    system_info(trace, &mut o).map_err(Error::Stream)?;
    sched(trace, &mut o, &mut sum)?;
    markers(trace, &mut o, &mut sum)?;
    for info in selected {
        let parent = o.uuid();
        let mut sink = Slices {
            o: &mut o,
            info,
            parent,
            announced: false,
            lanes: Lanes::default(),
            uuids: HashMap::new(),
            counters: HashMap::new(),
            rows: 0,
        };
        match common::run_analyzer(source, info, explicit, &mut sink, &mut sum.damage)? {
            Some(_) => {
                let tracks = sink.uuids.len() + sink.counters.len();
                sum.analyzers.push((info.name, sink.rows, tracks));
            }
            None => sum.skipped.push(info.name),
        }
    }
    o.w.flush().map_err(Error::Stream)?;
    o.w.get_mut().persist().map_err(|e| Error::write(path, e))?;
    Ok(sum)
}

/// Trace markers (ftrace `print`, `bprint`, `bputs`) as instants on one "Trace markers"
/// track, named by their message as `kstate dump` prints it.
fn markers<W: Write>(trace: &Trace, o: &mut Out<W>, sum: &mut Summary) -> Result<(), Error> {
    let mut uuid = None;
    common::for_each_marker(trace, &mut sum.damage, |_, ts, msg| {
        let u = match uuid {
            Some(u) => u,
            None => {
                let u = o.uuid();
                o.track(u, None, "Trace markers", false)
                    .map_err(Error::Stream)?;
                *uuid.insert(u)
            }
        };
        o.track_packet();
        let p = &mut o.pkt;
        pb::uint(p, PKT_TIMESTAMP, ts);
        let t = pb::begin(p, PKT_TRACK_EVENT);
        pb::uint(p, TE_TYPE, TYPE_INSTANT);
        pb::uint(p, TE_TRACK_UUID, u);
        pb::string(p, TE_CATEGORIES, "marker");
        pb::string(p, TE_NAME, msg);
        pb::end(p, t);
        sum.markers += 1;
        o.flush_packet().map_err(Error::Stream)
    })
}

fn system_info<W: Write>(trace: &Trace, o: &mut Out<W>) -> std::io::Result<()> {
    o.pkt.clear();
    pb::uint(&mut o.pkt, PKT_SEQ_ID, SEQ_SCHED);
    let m = pb::begin(&mut o.pkt, PKT_SYSTEM_INFO);
    // "Linux HOST RELEASE [VERSION...] MACHINE", as trace-cmd and kstate store uname.
    if let Some(u) = &trace.uname {
        let w: Vec<&str> = u.split_whitespace().collect();
        if w.len() >= 3 {
            let n = pb::begin(&mut o.pkt, 1);
            pb::string(&mut o.pkt, 1, w[0]);
            if w.len() > 4 {
                pb::string(&mut o.pkt, 2, &w[3..w.len() - 1].join(" "));
            }
            pb::string(&mut o.pkt, 3, w[2]);
            if w.len() > 3 {
                pb::string(&mut o.pkt, 4, w[w.len() - 1]);
            }
            pb::end(&mut o.pkt, n);
        }
    }
    pb::uint(&mut o.pkt, 6, trace.layout.page_size as u64);
    pb::uint(&mut o.pkt, 8, u64::from(trace.cpu_count));
    pb::end(&mut o.pkt, m);
    o.flush_packet()
}

/// One CPU's bundle being filled.
#[derive(Default)]
struct Bundle {
    events: Vec<u8>,
    lost: bool,
}

fn flush_bundle<W: Write>(o: &mut Out<W>, cpu: u32, b: &mut Bundle) -> std::io::Result<()> {
    if b.events.is_empty() {
        return Ok(());
    }
    o.pkt.clear();
    pb::uint(&mut o.pkt, PKT_SEQ_ID, SEQ_SCHED);
    let m = pb::begin(&mut o.pkt, PKT_FTRACE_EVENTS);
    pb::uint(&mut o.pkt, BUNDLE_CPU, u64::from(cpu));
    o.pkt.extend_from_slice(&b.events);
    if b.lost {
        pb::uint(&mut o.pkt, BUNDLE_LOST_EVENTS, 1);
    }
    pb::end(&mut o.pkt, m);
    b.events.clear();
    b.lost = false;
    o.flush_packet()
}

/// Remembers the latest name of each task.
fn note(names: &mut HashMap<i32, Comm>, tid: i32, c: &Comm) {
    if tid != 0 && c[0] != 0 {
        names.insert(tid, *c);
    }
}

fn sched<W: Write>(trace: &Trace, o: &mut Out<W>, sum: &mut Summary) -> Result<(), Error> {
    let sw = SwitchFields::bind(trace);
    let wakes: Vec<(WakeFields, u32)> = [
        ("sched:sched_waking", FE_SCHED_WAKING),
        ("sched:sched_wakeup", FE_SCHED_WAKEUP),
    ]
    .into_iter()
    .filter_map(|(s, f)| WakeFields::bind(trace, s).map(|w| (w, f)))
    .collect();
    let mut ids: Vec<u32> = wakes.iter().map(|(w, _)| w.id).collect();
    ids.extend(sw.as_ref().map(|s| s.id));
    let mut names: HashMap<i32, Comm> = HashMap::new();
    let mut bundles: Vec<Bundle> = Vec::new();
    let mut first_ts = None;
    if !ids.is_empty() {
        let mut m = Merger::new(trace, None, IdFilter::only(ids))?;
        loop {
            let ev = match m.next() {
                Ok(Some(ev)) => ev,
                Ok(None) => break,
                Err(e) => {
                    kstate_format::damage::note(&mut sum.damage, &e);
                    continue;
                }
            };
            first_ts.get_or_insert(ev.ts);
            let c = ev.cpu as usize;
            if c >= bundles.len() {
                bundles.resize_with(c + 1, Bundle::default);
            }
            let b = &mut bundles[c].events;
            let fe = pb::begin(b, BUNDLE_EVENT);
            pb::uint(b, FE_TIMESTAMP, ev.ts);
            pb::uint(b, FE_PID, ev.pid() as u32 as u64);
            if sw.as_ref().is_some_and(|s| s.id == ev.id) {
                let s = sw.as_ref().map(|s| s.read(&ev)).expect("bound");
                let x = pb::begin(b, FE_SCHED_SWITCH);
                pb::string(b, 1, comm_str(&s.prev_comm));
                pb::int(b, 2, i64::from(s.prev_pid));
                pb::int(b, 3, i64::from(s.prev_prio));
                pb::int(b, 4, s.prev_state);
                pb::string(b, 5, comm_str(&s.next_comm));
                pb::int(b, 6, i64::from(s.next_pid));
                pb::int(b, 7, i64::from(s.next_prio));
                pb::end(b, x);
                note(&mut names, s.prev_pid, &s.prev_comm);
                note(&mut names, s.next_pid, &s.next_comm);
                sum.switches += 1;
            } else if let Some((w, field)) = wakes.iter().find(|(w, _)| w.id == ev.id) {
                let k = w.read(&ev);
                let x = pb::begin(b, *field);
                pb::string(b, 1, comm_str(&k.comm));
                pb::int(b, 2, i64::from(k.pid));
                pb::int(b, 3, i64::from(k.prio));
                pb::int(b, 4, 1);
                pb::int(b, 5, i64::from(k.target_cpu));
                pb::end(b, x);
                note(&mut names, k.pid, &k.comm);
                sum.wakeups += 1;
            }
            pb::end(b, fe);
            if ev.lost_before != Lost::None {
                bundles[c].lost = true;
            }
            if bundles[c].events.len() >= BUNDLE_BYTES {
                flush_bundle(o, ev.cpu, &mut bundles[c]).map_err(Error::Stream)?;
            }
        }
    }
    for (cpu, b) in bundles.iter_mut().enumerate() {
        flush_bundle(o, cpu as u32, b).map_err(Error::Stream)?;
    }
    sum.cpus = bundles.len();
    // Thread names and groups.
    let (tgids, saved) = common::tasks(trace);
    for (pid, c) in &saved {
        names.entry(*pid).or_insert_with(|| comm_of(c.as_bytes()));
    }
    names.remove(&0);
    sum.threads = names.len();
    o.pkt.clear();
    pb::uint(&mut o.pkt, PKT_SEQ_ID, SEQ_SCHED);
    pb::uint(&mut o.pkt, PKT_TIMESTAMP, first_ts.unwrap_or(0));
    let m = pb::begin(&mut o.pkt, PKT_PROCESS_TREE);
    let mut groups: Vec<i32> = tgids.values().copied().collect();
    groups.sort_unstable();
    groups.dedup();
    for g in groups {
        let p = pb::begin(&mut o.pkt, 1);
        pb::int(&mut o.pkt, 1, i64::from(g));
        if let Some(c) = names.get(&g) {
            pb::string(&mut o.pkt, 3, comm_str(c));
            pb::uint(&mut o.pkt, 9, 1);
        }
        pb::end(&mut o.pkt, p);
    }
    let mut tids: Vec<(&i32, &Comm)> = names.iter().collect();
    tids.sort_unstable();
    for (tid, c) in tids {
        let t = pb::begin(&mut o.pkt, 2);
        pb::int(&mut o.pkt, 1, i64::from(*tid));
        pb::string(&mut o.pkt, 2, comm_str(c));
        if let Some(g) = tgids.get(tid) {
            pb::int(&mut o.pkt, 3, i64::from(*g));
        }
        pb::end(&mut o.pkt, t);
    }
    pb::end(&mut o.pkt, m);
    o.flush_packet().map_err(Error::Stream)
}

struct Slices<'a, W: Write> {
    o: &'a mut Out<W>,
    info: &'a Info,
    parent: u64,
    announced: bool,
    lanes: Lanes,
    /// (cpu, lane) -> track uuid
    uuids: HashMap<(u32, usize), u64>,
    /// key -> counter track uuid (levels)
    counters: HashMap<String, u64>,
    rows: u64,
}

impl<W: Write> Slices<'_, W> {
    fn annotate_row(&mut self, r: &LogRow<'_>) {
        let p = &mut self.o.pkt;
        let a = pb::begin(p, TE_DEBUG_ANNOTATIONS);
        pb::string(p, DA_NAME, "tid");
        pb::int(p, DA_INT, i64::from(r.tid));
        pb::end(p, a);
        if let Some(pid) = r.pid {
            let a = pb::begin(p, TE_DEBUG_ANNOTATIONS);
            pb::string(p, DA_NAME, "pid");
            pb::int(p, DA_INT, i64::from(pid));
            pb::end(p, a);
        }
        let a = pb::begin(p, TE_DEBUG_ANNOTATIONS);
        pb::string(p, DA_NAME, "comm");
        pb::string(p, DA_STRING, r.comm);
        pb::end(p, a);
        if r.flag {
            if let Some(f) = self.info.flag_column {
                let a = pb::begin(p, TE_DEBUG_ANNOTATIONS);
                pb::string(p, DA_NAME, f);
                pb::uint(p, DA_UINT, 1);
                pb::end(p, a);
            }
        }
    }
}

impl<W: Write> LogSink for Slices<'_, W> {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        if !self.announced {
            self.announced = true;
            let name = format!("kstate {}", self.info.name);
            self.o.track(self.parent, None, &name, false)?;
        }
        self.rows += 1;
        if r.kind == Kind::Level {
            let uuid = match self.counters.get(r.key) {
                Some(u) => *u,
                None => {
                    let u = self.o.uuid();
                    let name = format!("{} {}", self.info.name, r.key);
                    self.o.track(u, Some(self.parent), &name, true)?;
                    self.counters.insert(r.key.to_string(), u);
                    u
                }
            };
            self.o.track_packet();
            let p = &mut self.o.pkt;
            pb::uint(p, PKT_TIMESTAMP, r.start);
            let t = pb::begin(p, PKT_TRACK_EVENT);
            pb::uint(p, TE_TYPE, TYPE_COUNTER);
            pb::uint(p, TE_TRACK_UUID, uuid);
            pb::int(p, TE_COUNTER_VALUE, r.value as i64);
            pb::end(p, t);
            return self.o.flush_packet();
        }
        let span = r.kind == Kind::Dur && self.info.unit == Unit::Ns;
        let end = if span { r.start + r.value } else { r.start };
        let (lane, new) = self.lanes.place(0, r.cpu, r.start, end);
        let uuid = match self.uuids.get(&(r.cpu, lane)) {
            Some(u) => *u,
            None => {
                let u = self.o.uuid();
                self.uuids.insert((r.cpu, lane), u);
                u
            }
        };
        if new {
            let name = common::lane_name(self.info.name, r.cpu, lane);
            self.o.track(uuid, Some(self.parent), &name, false)?;
        }
        self.o.track_packet();
        let p = &mut self.o.pkt;
        pb::uint(p, PKT_TIMESTAMP, r.start);
        let t = pb::begin(p, PKT_TRACK_EVENT);
        pb::uint(
            p,
            TE_TYPE,
            if span { TYPE_SLICE_BEGIN } else { TYPE_INSTANT },
        );
        pb::uint(p, TE_TRACK_UUID, uuid);
        pb::string(p, TE_CATEGORIES, self.info.name);
        pb::string(p, TE_NAME, r.key);
        self.annotate_row(r);
        if !span {
            let p = &mut self.o.pkt;
            let a = pb::begin(p, TE_DEBUG_ANNOTATIONS);
            pb::string(p, DA_NAME, self.info.unit.suffix());
            pb::uint(p, DA_UINT, r.value);
            pb::end(p, a);
        }
        pb::end(&mut self.o.pkt, t);
        self.o.flush_packet()?;
        if span {
            self.o.track_packet();
            let p = &mut self.o.pkt;
            pb::uint(p, PKT_TIMESTAMP, end);
            let t = pb::begin(p, PKT_TRACK_EVENT);
            pb::uint(p, TE_TYPE, TYPE_SLICE_END);
            pb::uint(p, TE_TRACK_UUID, uuid);
            pb::end(p, t);
            self.o.flush_packet()?;
        }
        Ok(())
    }
}
