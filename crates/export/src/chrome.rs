//! `kstate convert --to chrome-json`: the Chrome trace-event JSON format, which the Perfetto
//! UI, chrome://tracing and Speedscope open.
//!
//! * Process "CPUs": one thread track per CPU ("CPU 3"), with an "X" (complete) event per
//!   task run on it, from the sched_switch that put the task there to the one that took it
//!   off (or the end of the trace); idle is left blank.
//! * Process "kstate ANALYZER" per analyzer: "X" events for its `--log` rows (name: the key;
//!   args: tid, pid, comm), on tracks "ANALYZER CPU N" by the row's CPU, with extra lanes
//!   "ANALYZER CPU N #2" where rows overlap (a track must nest). Rows whose value is not a
//!   duration are instant events with the value in args; levels are counters.
//!
//! * Trace markers (ftrace `print`, `bprint`, `bputs`) are instant events on their CPU's
//!   track, named by their message as `kstate dump` prints it.
//!
//! Times are microseconds with three decimals (the trace's nanoseconds, exactly). Written
//! as it is read: memory does not grow with the trace.

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::Error;
use kstate_analyze::analyzer::{Info, Kind, LogRow, LogSink, Unit};
use kstate_analyze::Source;
use kstate_format::output::NewFile;
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::value::write_json_str;
use kstate_format::Trace;

use crate::common::{self, comm_str, CpuRuns, Lanes, Run, SwitchFields};

/// Synthetic process and thread ids, above any kernel pid (pid_max <= 2^22).
const CPU_PID: u64 = 2_000_000_000;
const ANALYZER_PID: u64 = 2_000_000_100;
const LANE_TID: u64 = 2_001_000_000;

struct Json<W: Write> {
    w: W,
    first: bool,
    buf: Vec<u8>,
}

impl<W: Write> Json<W> {
    fn begin(&mut self) -> &mut Vec<u8> {
        self.buf.clear();
        if !self.first {
            self.buf.extend_from_slice(b",\n");
        }
        self.first = false;
        &mut self.buf
    }
    fn end(&mut self) -> std::io::Result<()> {
        self.w.write_all(&self.buf)
    }
    fn name_meta(
        &mut self,
        what: &str,
        pid: u64,
        tid: Option<u64>,
        name: &str,
    ) -> std::io::Result<()> {
        let b = self.begin();
        let _ = write!(b, "{{\"ph\":\"M\",\"name\":\"{what}\",\"pid\":{pid}");
        if let Some(t) = tid {
            let _ = write!(b, ",\"tid\":{t}");
        }
        b.extend_from_slice(b",\"args\":{\"name\":");
        write_json_str(name, b);
        b.extend_from_slice(b"}}");
        self.end()
    }
}

fn us(b: &mut Vec<u8>, ns: u64) {
    let _ = write!(b, "{}.{:03}", ns / 1000, ns % 1000);
}

/// What a conversion wrote, for the summary line and tests.
#[derive(Default)]
pub struct Summary {
    pub runs: u64,
    pub cpus: u32,
    /// Trace markers written as instant events.
    pub markers: u64,
    /// (analyzer, slices, tracks)
    pub analyzers: Vec<(&'static str, u64, usize)>,
    pub skipped: Vec<&'static str>,
    /// What was skipped as damaged: the output holds the rest.
    pub damage: Vec<kstate_format::Error>,
}

pub fn write(source: &Source, out: &Path, names: &[String]) -> Result<Summary, Error> {
    let trace = source.trace();
    let (selected, explicit) = common::select(names)?;
    let f = NewFile::create(out).map_err(|e| Error::write(out, e))?;
    let mut j = Json {
        w: BufWriter::with_capacity(1 << 16, f),
        first: true,
        buf: Vec::with_capacity(256),
    };
    j.w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
        .map_err(Error::Stream)?;
    let mut sum = Summary {
        damage: common::declared_damage(trace),
        ..Summary::default()
    };
    sched(trace, &mut j, &mut sum)?;
    markers(trace, &mut j, &mut sum)?;
    let mut next_tid = LANE_TID;
    for (a, info) in selected.iter().enumerate() {
        let pid = ANALYZER_PID + a as u64;
        let mut sink = Slices {
            j: &mut j,
            info,
            pid,
            lanes: Lanes::default(),
            next_tid: &mut next_tid,
            tids: Default::default(),
            named: false,
            counters: Default::default(),
            rows: 0,
        };
        match common::run_analyzer(source, info, explicit, &mut sink, &mut sum.damage)? {
            Some(_) => {
                let tracks = sink.tids.len() + sink.counters.len();
                sum.analyzers.push((info.name, sink.rows, tracks));
            }
            None => sum.skipped.push(info.name),
        }
    }
    j.w.write_all(b"\n]}\n").map_err(Error::Stream)?;
    j.w.flush().map_err(Error::Stream)?;
    j.w.get_mut().persist().map_err(|e| Error::write(out, e))?;
    Ok(sum)
}

/// The CPU tracks: one X event per task run.
fn sched<W: Write>(trace: &Trace, j: &mut Json<W>, sum: &mut Summary) -> Result<(), Error> {
    let Some(sw) = SwitchFields::bind(trace) else {
        return Ok(());
    };
    j.name_meta("process_name", CPU_PID, None, "CPUs")
        .map_err(Error::Stream)?;
    let mut named: Vec<bool> = Vec::new();
    let mut runs = CpuRuns::default();
    let mut m = Merger::new(trace, None, IdFilter::only([sw.id]))?;
    let mut last = 0;
    let mut emit = |j: &mut Json<W>, r: Run, sum: &mut Summary| -> std::io::Result<()> {
        let c = r.cpu as usize;
        if c >= named.len() {
            named.resize(c + 1, false);
        }
        if !named[c] {
            named[c] = true;
            sum.cpus += 1;
            j.name_meta(
                "thread_name",
                CPU_PID,
                Some(CPU_PID + c as u64),
                &format!("CPU {c}"),
            )?;
        }
        sum.runs += 1;
        let b = j.begin();
        b.extend_from_slice(b"{\"ph\":\"X\",\"cat\":\"sched\",\"name\":");
        write_json_str(comm_str(&r.comm), b);
        let _ = write!(
            b,
            ",\"pid\":{CPU_PID},\"tid\":{},\"ts\":",
            CPU_PID + c as u64
        );
        us(b, r.start);
        b.extend_from_slice(b",\"dur\":");
        us(b, r.end - r.start);
        let _ = write!(b, ",\"args\":{{\"tid\":{},\"comm\":", r.tid);
        write_json_str(comm_str(&r.comm), b);
        if let Some(s) = r.end_state {
            let _ = write!(b, ",\"end_state\":\"{}\"", common::state_letter(s));
        }
        b.extend_from_slice(b"}}");
        j.end()
    };
    loop {
        let ev = match m.next() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            // A damaged CPU stream is dropped by the merge; the rest goes on.
            Err(e) => {
                kstate_format::damage::note(&mut sum.damage, &e);
                continue;
            }
        };
        last = ev.ts;
        let s = sw.read(&ev);
        if let Some(r) = runs.switch(ev.cpu, ev.ts, &s) {
            emit(j, r, sum).map_err(Error::Stream)?;
        }
    }
    for r in runs.finish(last) {
        emit(j, r, sum).map_err(Error::Stream)?;
    }
    Ok(())
}

/// Trace markers as instant events on their CPU's track, named by their message.
fn markers<W: Write>(trace: &Trace, j: &mut Json<W>, sum: &mut Summary) -> Result<(), Error> {
    common::for_each_marker(trace, &mut sum.damage, |cpu, ts, msg| {
        sum.markers += 1;
        let b = j.begin();
        b.extend_from_slice(b"{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"marker\",\"name\":");
        write_json_str(msg, b);
        let _ = write!(
            b,
            ",\"pid\":{CPU_PID},\"tid\":{},\"ts\":",
            CPU_PID + cpu as u64
        );
        us(b, ts);
        b.push(b'}');
        j.end().map_err(Error::Stream)
    })
}

struct Slices<'a, W: Write> {
    j: &'a mut Json<W>,
    info: &'a Info,
    pid: u64,
    lanes: Lanes,
    next_tid: &'a mut u64,
    /// (cpu, lane) -> synthetic tid
    tids: std::collections::HashMap<(u32, usize), u64>,
    named: bool,
    /// Keys of counter tracks (levels).
    counters: std::collections::HashSet<String>,
    rows: u64,
}

impl<W: Write> LogSink for Slices<'_, W> {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        if !self.named {
            self.named = true;
            self.j.name_meta(
                "process_name",
                self.pid,
                None,
                &format!("kstate {}", self.info.name),
            )?;
        }
        self.rows += 1;
        let span = r.kind == Kind::Dur && self.info.unit == Unit::Ns;
        if r.kind == Kind::Level {
            if !self.counters.contains(r.key) {
                self.counters.insert(r.key.to_string());
            }
            let b = self.j.begin();
            b.extend_from_slice(b"{\"ph\":\"C\",\"name\":");
            write_json_str(r.key, b);
            let _ = write!(b, ",\"pid\":{},\"ts\":", self.pid);
            us(b, r.start);
            let _ = write!(b, ",\"args\":{{\"value\":{}}}}}", r.value);
            return self.j.end();
        }
        let end = if span { r.start + r.value } else { r.start };
        let (lane, new) = self.lanes.place(0, r.cpu, r.start, end);
        let tid = match self.tids.get(&(r.cpu, lane)) {
            Some(t) => *t,
            None => {
                let t = *self.next_tid;
                *self.next_tid += 1;
                self.tids.insert((r.cpu, lane), t);
                t
            }
        };
        if new {
            let name = common::lane_name(self.info.name, r.cpu, lane);
            self.j
                .name_meta("thread_name", self.pid, Some(tid), &name)?;
        }
        let b = self.j.begin();
        if span {
            b.extend_from_slice(b"{\"ph\":\"X\",\"name\":");
        } else {
            b.extend_from_slice(b"{\"ph\":\"i\",\"s\":\"t\",\"name\":");
        }
        write_json_str(r.key, b);
        b.extend_from_slice(b",\"cat\":");
        write_json_str(self.info.name, b);
        let _ = write!(b, ",\"pid\":{},\"tid\":{tid},\"ts\":", self.pid);
        us(b, r.start);
        if span {
            b.extend_from_slice(b",\"dur\":");
            us(b, r.value);
        }
        let _ = write!(b, ",\"args\":{{\"tid\":{}", r.tid);
        if let Some(p) = r.pid {
            let _ = write!(b, ",\"pid\":{p}");
        }
        b.extend_from_slice(b",\"comm\":");
        write_json_str(r.comm, b);
        if !span {
            let _ = write!(b, ",\"{}\":{}", self.info.unit.suffix(), r.value);
        }
        if r.flag {
            if let Some(f) = self.info.flag_column {
                let _ = write!(b, ",\"{f}\":true");
            }
        }
        b.extend_from_slice(b"}}");
        self.j.end()
    }
}
