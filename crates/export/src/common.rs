//! What the trace-viewer exports share: reading sched_switch/sched_waking, turning switches
//! into runs per CPU, running the analyzers for their `--log` rows, and laying those rows
//! out on tracks where no two slices overlap.

use std::collections::HashMap;

use crate::error::Error;
use kstate_analyze::analyzer::{Info, LogSink, Mode, Outcome};
use kstate_analyze::analyzers;
use kstate_analyze::fxmap::FxMap;
use kstate_analyze::{Query, Source};
use kstate_format::sections::{self, ids};
use kstate_format::stream::merge::{Event, IdFilter, Merger};
use kstate_format::{Field, FieldRef, Trace};

/// A `char[16]` task name, NUL-padded.
pub type Comm = [u8; 16];

pub fn comm_of(b: &[u8]) -> Comm {
    let mut c = [0u8; 16];
    let n = b.iter().position(|&x| x == 0).unwrap_or(b.len()).min(16);
    c[..n].copy_from_slice(&b[..n]);
    c
}

pub fn comm_str(c: &Comm) -> &str {
    let n = c.iter().position(|&b| b == 0).unwrap_or(16);
    // Kernel comms are bytes; a name cut inside a UTF-8 sequence shows what is valid.
    match std::str::from_utf8(&c[..n]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&c[..e.valid_up_to()]).unwrap_or(""),
    }
}

fn int_field(f: &Field) -> FieldRef {
    FieldRef::from(f)
}

/// The fields of `sched:sched_switch`.
pub struct SwitchFields {
    pub id: u32,
    prev_comm: Field,
    prev_pid: FieldRef,
    prev_prio: FieldRef,
    prev_state: FieldRef,
    next_comm: Field,
    next_pid: FieldRef,
    next_prio: FieldRef,
}

/// One decoded sched_switch.
pub struct Switch {
    pub prev_comm: Comm,
    pub prev_pid: i32,
    pub prev_prio: i32,
    pub prev_state: i64,
    pub next_comm: Comm,
    pub next_pid: i32,
    pub next_prio: i32,
}

impl SwitchFields {
    pub fn bind(trace: &Trace) -> Option<SwitchFields> {
        let ev = trace.events.find("sched:sched_switch")?;
        let f = |n: &str| ev.field(n);
        Some(SwitchFields {
            id: ev.id,
            prev_comm: f("prev_comm")?.clone(),
            prev_pid: int_field(f("prev_pid")?),
            prev_prio: int_field(f("prev_prio")?),
            prev_state: int_field(f("prev_state")?),
            next_comm: f("next_comm")?.clone(),
            next_pid: int_field(f("next_pid")?),
            next_prio: int_field(f("next_prio")?),
        })
    }

    pub fn read(&self, ev: &Event<'_>) -> Switch {
        let (p, e) = (ev.payload, ev.endian);
        let i = |f: FieldRef| f.get_i64(p, e).unwrap_or(0);
        Switch {
            prev_comm: comm_of(self.prev_comm.data(p, e).unwrap_or(&[])),
            prev_pid: i(self.prev_pid) as i32,
            prev_prio: i(self.prev_prio) as i32,
            prev_state: i(self.prev_state),
            next_comm: comm_of(self.next_comm.data(p, e).unwrap_or(&[])),
            next_pid: i(self.next_pid) as i32,
            next_prio: i(self.next_prio) as i32,
        }
    }
}

/// The fields of `sched:sched_waking` (or `sched_wakeup`, same layout).
pub struct WakeFields {
    pub id: u32,
    comm: Field,
    pid: FieldRef,
    prio: FieldRef,
    target_cpu: Option<FieldRef>,
}

pub struct Wake {
    pub comm: Comm,
    pub pid: i32,
    pub prio: i32,
    pub target_cpu: i32,
}

impl WakeFields {
    pub fn bind(trace: &Trace, spec: &str) -> Option<WakeFields> {
        let ev = trace.events.find(spec)?;
        Some(WakeFields {
            id: ev.id,
            comm: ev.field("comm")?.clone(),
            pid: int_field(ev.field("pid")?),
            prio: int_field(ev.field("prio")?),
            target_cpu: ev.field("target_cpu").map(int_field),
        })
    }

    pub fn read(&self, ev: &Event<'_>) -> Wake {
        let (p, e) = (ev.payload, ev.endian);
        let i = |f: FieldRef| f.get_i64(p, e).unwrap_or(0);
        Wake {
            comm: comm_of(self.comm.data(p, e).unwrap_or(&[])),
            pid: i(self.pid) as i32,
            prio: i(self.prio) as i32,
            target_cpu: self.target_cpu.map_or(-1, |f| i(f) as i32),
        }
    }
}

/// A task's time on one CPU, from the sched_switch that put it there to the one that took
/// it off (or the end of the trace).
pub struct Run {
    pub cpu: u32,
    pub start: u64,
    pub end: u64,
    pub tid: i32,
    pub comm: Comm,
    /// The state it left in (`prev_state`); `None` when it still ran at the end.
    pub end_state: Option<i64>,
}

/// What runs on each CPU since its last sched_switch.
#[derive(Default)]
pub struct CpuRuns {
    cur: Vec<Option<(i32, Comm, u64)>>,
}

impl CpuRuns {
    /// A switch on `cpu` at `ts`: the run it ends, unless that was the idle task or the
    /// CPU's first switch (whose start the trace does not hold).
    pub fn switch(&mut self, cpu: u32, ts: u64, sw: &Switch) -> Option<Run> {
        let c = cpu as usize;
        if c >= self.cur.len() {
            self.cur.resize(c + 1, None);
        }
        let ended = self.cur[c].take();
        self.cur[c] = (sw.next_pid != 0).then_some((sw.next_pid, sw.next_comm, ts));
        ended.map(|(tid, comm, start)| Run {
            cpu,
            start,
            end: ts,
            tid,
            comm,
            end_state: Some(sw.prev_state),
        })
    }

    /// Runs still going at `end` (the last event of the trace).
    pub fn finish(&mut self, end: u64) -> Vec<Run> {
        self.cur
            .iter_mut()
            .enumerate()
            .filter_map(|(cpu, c)| {
                c.take().map(|(tid, comm, start)| Run {
                    cpu: cpu as u32,
                    start,
                    end: end.max(start),
                    tid,
                    comm,
                    end_state: None,
                })
            })
            .collect()
    }
}

/// The kernel's task-state letter for `prev_state` (as trace-cmd prints it, for the
/// states every kernel agrees on).
pub fn state_letter(state: i64) -> &'static str {
    let s = state & 0xff;
    if s == 0 {
        return "R";
    }
    match s.trailing_zeros() {
        0 => "S",
        1 => "D",
        2 => "T",
        3 => "t",
        4 => "X",
        5 => "Z",
        6 => "P",
        7 => "I",
        _ => "?",
    }
}

/// The analyzers to run: those named in `names`, or with none named every analyzer (those
/// whose events the trace lacks are then skipped); "none" runs none.
pub fn select(names: &[String]) -> Result<(Vec<&'static Info>, bool), Error> {
    if names.is_empty() {
        return Ok((analyzers::ALL.iter().collect(), false));
    }
    if names.len() == 1 && names[0] == "none" {
        return Ok((Vec::new(), true));
    }
    let mut v = Vec::new();
    for n in names {
        match analyzers::find(n) {
            Some(i) => v.push(i),
            None => {
                let all: Vec<&str> = analyzers::ALL.iter().map(|a| a.name).collect();
                return Err(Error::Unsupported(format!(
                    "no analyzer {n:?}; there are: {}, or none",
                    all.join(", ")
                )));
            }
        }
    }
    Ok((v, true))
}

/// Runs one analyzer with its `--log` rows going to `sink`. `Ok(None)` when the trace
/// lacks its events and it was not asked for by name.
pub fn run_analyzer(
    source: &Source,
    info: &'static Info,
    explicit: bool,
    sink: &mut dyn LogSink,
    damage: &mut Vec<kstate_format::Error>,
) -> Result<Option<Outcome>, Error> {
    match source.run(&Query::of(info).mode(Mode::Log), sink) {
        Ok(o) => {
            for e in &o.errors {
                kstate_format::damage::note(damage, e);
            }
            Ok(Some(o))
        }
        Err(e) if !explicit && e.not_applicable().is_some() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Thread groups as far as the trace tells them (kstate's process table, a raw capture's
/// saved_tgids), and task names (saved comms), for viewers' thread names.
pub fn tasks(trace: &Trace) -> (FxMap<i32, i32>, HashMap<i32, String>) {
    let mut tgids = Source::saved_tgids(trace);
    if let Some(b) = trace.extra(ids::PROCESSES) {
        if let Ok(ps) = sections::decode_processes(b) {
            for p in ps {
                tgids.entry(p.pid).or_insert(p.tgid);
            }
        }
    }
    (tgids, trace.comms.clone())
}

/// Places slices on tracks so that none overlap on a track: per (analyzer, CPU) a list of
/// lanes, each remembering where its latest slice ends. A slice goes to the first lane
/// that is free at its start. Memory is the most slices ever open at once.
#[derive(Default)]
pub struct Lanes {
    lanes: HashMap<(usize, u32), Vec<u64>>,
}

impl Lanes {
    /// The lane for [start, end] of `analyzer` on `cpu`, and whether it is new.
    pub fn place(&mut self, analyzer: usize, cpu: u32, start: u64, end: u64) -> (usize, bool) {
        let l = self.lanes.entry((analyzer, cpu)).or_default();
        for (i, e) in l.iter_mut().enumerate() {
            if *e <= start {
                *e = (*e).max(end);
                return (i, false);
            }
        }
        l.push(end);
        (l.len() - 1, true)
    }
}

/// A track's name: "syscall CPU 3", and for its second and later lanes "syscall CPU 3 #2".
pub fn lane_name(analyzer: &str, cpu: u32, lane: usize) -> String {
    if lane == 0 {
        format!("{analyzer} CPU {cpu}")
    } else {
        format!("{analyzer} CPU {cpu} #{}", lane + 1)
    }
}

/// Calls `f(cpu, ts, text)` for each trace marker (ftrace `print`, `bprint`, `bputs`) in time
/// order, with its message as `kstate dump` prints it (`TextFormatter::write_marker`).
/// Markers whose format is not evaluated are left out; damage met is noted in `damage`.
pub fn for_each_marker(
    trace: &Trace,
    damage: &mut Vec<kstate_format::Error>,
    mut f: impl FnMut(u32, u64, &str) -> Result<(), Error>,
) -> Result<(), Error> {
    let ids = kstate_format::print_fmt::marker_ids(trace);
    if ids.is_empty() {
        return Ok(());
    }
    let mut text = kstate_format::print_fmt::TextFormatter::new(trace, false);
    let mut m = Merger::new(trace, None, IdFilter::only(ids))?;
    let mut msg = Vec::new();
    loop {
        let ev = match m.next() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            // A damaged CPU stream is dropped by the merge; the rest goes on.
            Err(e) => {
                kstate_format::damage::note(damage, &e);
                continue;
            }
        };
        msg.clear();
        if text.write_marker(&mut msg, ev.cpu, ev.id, ev.payload, ev.endian) {
            f(ev.cpu, ev.ts, &String::from_utf8_lossy(&msg))?;
        }
    }
    for e in m.no_format_errors() {
        kstate_format::damage::note(damage, &e);
    }
    Ok(())
}

/// What an export met beside what it wrote: the file's own damage, that of each merge
/// (`merge_errors`), and each analyzer's ([`run_analyzer`]'s outcome). Notes `trace`'s
/// own damage in `damage` to start with.
pub fn declared_damage(trace: &Trace) -> Vec<kstate_format::Error> {
    let mut damage = Vec::new();
    for e in trace.damage() {
        kstate_format::damage::note(&mut damage, e);
    }
    damage
}
