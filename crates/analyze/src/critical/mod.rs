//! The critical path of one thread's time: for every nanosecond of its wall time in a
//! window, what it was doing or waiting on, across the threads that woke it, the
//! interrupts that did, and the devices those served (`kstate why`).
//!
//! The path is defined backward, as in Giraldeau and Dagenais's execution graph: from the
//! end of the window, the thread's own states (running, runnable) are its own; a stretch
//! it was blocked belongs to whoever ended it: the thread that woke it (whose own path
//! over that stretch is followed, recursively), or the interrupt that did (a block
//! request's completion: the disk; a timer's expiry: a sleep; a softirq vector; an IRQ
//! by name). Where the events that would tell are not in the recording the stretch is
//! `unknown`, with the events named.
//!
//! This module is the engine's half: one backward walk over the events
//! ([`walk::Walker`]), fed from the end of the window to its start in chunks of pages
//! read forward and handed over in reverse ([`chunks`]). It hands the path's segments
//! over as it finds them, latest first, to a [`Sink`]; `kstate_views::why` folds them into the
//! views (totals, tree, requests, two runs side by side) and keeps segments only when
//! asked.
//!
//! Memory: the walk holds one chunk of decoded events (some 16 pages), one entry per
//! thread on the chain being followed (a thread is on it at most once), the hops met,
//! the interrupt contexts and block requests still to be named, and the segments that
//! wait on those (at most [`walk::HOLD_MAX`]). It reads each event of the window once
//! (the pages at chunk boundaries twice), plus what it reads before the window to name
//! an interrupt or a request whose wake-up falls in it (at most one second's worth).

pub mod chunks;
pub mod events;
pub mod select;
pub mod walk;

use crate::error::Error;
use crate::filter::WindowSpec;
use crate::fxmap::FxMap;
use kstate_format::Trace;

/// What the thread on the path was doing, or waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// On a CPU.
    Running,
    /// Ready, waiting for a CPU (the tasks that held it are in the detail).
    Runnable,
    /// Blocked until a timer expired.
    Sleep,
    /// Blocked until a block request completed.
    Disk,
    /// Blocked until a hard interrupt's handler woke it.
    Irq,
    /// Blocked until a softirq woke it (other than network receive and timers).
    Softirq,
    /// Blocked until network processing (NET_RX/NET_TX softirq, a received packet) woke it.
    Net,
    /// The recording does not tell (the detail says which events are missing).
    Unknown,
}

impl State {
    pub const ALL: [State; 8] = [
        State::Running,
        State::Runnable,
        State::Sleep,
        State::Disk,
        State::Irq,
        State::Softirq,
        State::Net,
        State::Unknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Runnable => "runnable",
            State::Sleep => "sleep",
            State::Disk => "disk",
            State::Irq => "irq",
            State::Softirq => "softirq",
            State::Net => "net",
            State::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// What a segment adds to its state.
#[derive(Debug, Clone, PartialEq)]
pub enum Detail {
    None,
    /// Waiting for CPU `cpu` (the one it then ran on), held meanwhile by these tasks (ns
    /// each, most first).
    Runnable {
        cpu: u32,
        holders: Vec<(i32, u64)>,
    },
    /// The block request whose completion woke it: device (`major << 20 | minor`),
    /// direction letter, first sector (`u64::MAX` for a flush), time queued (insert to
    /// issue) and on the device (issue to completion) where those events were found.
    Disk {
        dev: u32,
        dir: char,
        sector: u64,
        queue_ns: Option<u64>,
        device_ns: Option<u64>,
    },
    /// A timer's expiry woke it: the timer's function where the recording names it.
    Timer {
        function: Option<String>,
    },
    /// A softirq vector's handler woke it.
    Softirq {
        vec: String,
    },
    /// A hard interrupt's handler woke it.
    Irq {
        irq: i64,
        name: String,
    },
    /// Network processing woke it: the vector, and the device where an event named it.
    Net {
        vec: String,
        dev: Option<String>,
    },
    /// Why the recording cannot tell.
    Unknown {
        why: String,
    },
}

/// One stretch of the path: `[start, end)` of `tid`'s time in `state`, reached through
/// hop `node` (see [`Hop`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
    pub tid: i32,
    pub node: u32,
    pub state: State,
    pub detail: Detail,
}

impl Segment {
    pub fn ns(&self) -> u64 {
        self.end - self.start
    }
}

/// A thread on the path: node 0 is the thread asked about; every other node is a thread
/// that woke the thread of `parent` (its path over that wait is this node's segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    pub parent: Option<u32>,
    pub tid: i32,
}

/// Requests of the thread: pairs of events that cut its time ([`SpanSpec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanSpec {
    /// A system call's entry to its exit (`syscall:NAME`).
    Syscall(String),
    /// `trace_marker` lines starting with `begin` to lines starting with `end`.
    Marker { begin: String, end: String },
    /// Any two events (`SYSTEM:BEGIN,SYSTEM:END`): a uprobe and its return probe, a USDT
    /// pair.
    Events { begin: String, end: String },
}

impl SpanSpec {
    /// `syscall:NAME`, `marker:BEGIN,END` or `SYSTEM:EVENT,SYSTEM:EVENT`.
    pub fn parse(s: &str) -> Result<SpanSpec, String> {
        if let Some(name) = s.strip_prefix("syscall:") {
            if name.is_empty() || name.contains(',') {
                return Err(format!(
                    "--span {s:?}: expected syscall:NAME, e.g. syscall:fsync"
                ));
            }
            return Ok(SpanSpec::Syscall(name.to_string()));
        }
        let pair = |rest: &str| -> Option<(String, String)> {
            let (a, b) = rest.split_once(',')?;
            (!a.is_empty() && !b.is_empty()).then(|| (a.to_string(), b.to_string()))
        };
        if let Some(rest) = s.strip_prefix("marker:") {
            return pair(rest)
                .map(|(begin, end)| SpanSpec::Marker { begin, end })
                .ok_or_else(|| {
                    format!("--span {s:?}: expected marker:BEGIN,END (the lines' first words)")
                });
        }
        match pair(s) {
            Some((begin, end)) => Ok(SpanSpec::Events { begin, end }),
            None => Err(format!(
                "--span {s:?}: expected syscall:NAME, marker:BEGIN,END or SYSTEM:BEGIN,SYSTEM:END"
            )),
        }
    }
}

/// The thread a path is asked of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    Tid(i32),
    /// The one thread of this process switched in the window.
    Pid(i32),
    /// The one thread of this command switched in the window.
    Comm(String),
}

/// One walk asked for.
#[derive(Debug, Clone)]
pub struct WalkQuery {
    pub who: Who,
    /// `None`: the whole recording.
    pub window: Option<WindowSpec>,
    pub span: Option<SpanSpec>,
    /// Thread id -> process, where the recording's capture saved them.
    pub tgids: FxMap<i32, i32>,
    /// Segments the view keeps (`kstate_views::why::view`), the latest first; 0 keeps none
    /// (the totals, the tree and the requests do not need them).
    pub max_segments: usize,
}

/// Segments `kstate why --format json` keeps by default.
pub const MAX_SEGMENTS: usize = 100_000;

impl WalkQuery {
    pub fn new(who: Who) -> WalkQuery {
        WalkQuery {
            who,
            window: None,
            span: None,
            tgids: FxMap::default(),
            max_segments: MAX_SEGMENTS,
        }
    }
}

/// What the walk found besides the segments it handed over.
#[derive(Debug, Clone)]
pub struct Walked {
    pub tid: i32,
    /// The window walked (trace-clock ns), clipped to the recording and to the thread's
    /// life in it.
    pub window: (u64, u64),
    /// The first event of the recording (relative times count from it).
    pub trace_start: u64,
    pub hops: Vec<Hop>,
    /// Names of the threads, as the recording last named them.
    pub comms: FxMap<i32, String>,
    /// Events the kernel lost inside the window, and whether some CPU lost an unknown
    /// number.
    pub lost: (u64, bool),
    /// Events read (decoded) by the walk.
    pub events_read: u64,
    /// Facts a reader must know.
    pub notes: Vec<String>,
}

impl Walked {
    pub fn comm(&self, tid: i32) -> String {
        match tid {
            0 => "<idle>".into(),
            t => self
                .comms
                .get(&t)
                .cloned()
                .unwrap_or_else(|| "<...>".into()),
        }
    }

    /// `comm-tid`, as trace-cmd prints tasks.
    pub fn label(&self, tid: i32) -> String {
        format!("{}-{}", self.comm(tid), tid)
    }

    pub fn wall_ns(&self) -> u64 {
        self.window.1 - self.window.0
    }
}

/// Where the walk hands the path over, as it goes: segments latest first (each ends
/// where the one before began; together they cover the window), and the thread's
/// `--span` marks in the window. Every mark at or after a segment's start is handed over
/// before that segment (a mark at exactly a segment's start may come on either side).
pub trait Sink {
    fn segment(&mut self, s: Segment);
    /// A request of the thread began (`begin`) or ended at `ts`.
    fn mark(&mut self, ts: u64, begin: bool);
}

/// Walks the critical path of the thread `q.who` names over `q.window` in `trace`,
/// handing its segments to `sink`.
pub fn walk(trace: &Trace, q: &WalkQuery, sink: &mut dyn Sink) -> Result<Walked, Error> {
    walk::run(trace, q, sink)
}
