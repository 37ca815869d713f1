//! `kstate why`: a thread's critical path ([`kstate_analyze::critical`]) as people read it: the
//! time per state and per thread, the hops as a tree (who woke whom, and what each spent
//! its share on), the requests `--span` cut with the slowest first and the median, and
//! folded stacks for a flame graph; [`compare`] puts two runs side by side.
//!
//! The typed API, for every front end (the CLI; the browser's lane):
//!
//! ```no_run
//! # fn f(trace: &kstate_format::Trace) -> Result<(), kstate_analyze::Error> {
//! use kstate_analyze::critical::{WalkQuery, Who};
//! let mut q = WalkQuery::new(Who::Comm("server".into()));
//! q.max_segments = 10_000; // segments kept to draw; 0 keeps none
//! let why = kstate_views::why::view(trace, &q)?;
//! for s in &why.path.segments {
//!     // [s.start, s.end): thread s.tid, reached through hop s.node, in s.state;
//!     // why.detail(s) says what it waited on, why.label(s.tid) names the thread.
//! }
//! # Ok(()) }
//! ```
//!
//! [`view`] takes the thread (`q.who`), the window (`q.window`), the requests
//! (`q.span`) and how many segments to keep (`q.max_segments`, default
//! [`critical::MAX_SEGMENTS`]), and returns a [`Why`]: the whole window's [`Path`]
//! (`by_state`, `by_thread`, the hop tree as [`Node`]s, the kept segments in time
//! order) and each request's, slowest first, with the median's index. The walk hands
//! its segments over as it finds them; each is folded at once into the totals, the tree
//! and the requests it overlaps ([`fold`]), so memory grows with the threads and hops,
//! not with the path's length. Segments beyond `max_segments` are left out, the earliest
//! first, and [`Why::segments`] says how many (the totals and the tree still count
//! them). Every number comes from the segments, so the totals, the tree and the requests
//! add up to their wall time.

pub mod compare;
mod fold;
pub mod lane;

use fold::{Fold, LineKey, Tally};
use kstate_analyze::critical::{self, Detail, Hop, Segment, State, WalkQuery, Walked};
use kstate_analyze::filter::fmt_dur;
use kstate_analyze::Error;
use kstate_format::Trace;

/// A path over one stretch of time: the whole window, or one request.
#[derive(Debug, Clone)]
pub struct Path {
    pub tid: i32,
    pub comm: String,
    /// `[start, end)` in trace-clock ns.
    pub window: (u64, u64),
    pub wall_ns: u64,
    /// Every state with time on the path, most first.
    pub by_state: Vec<(State, u64)>,
    /// The time each thread's own running or waiting put on the path, most first.
    pub by_thread: Vec<ThreadTime>,
    /// The segments kept, in time order: all of them, covering the window, unless
    /// [`Why::segments`] says some were left out (the earliest).
    pub segments: Vec<Segment>,
    /// The hops as a tree: the thread asked about, what it spent its time on, and the
    /// threads that woke it with theirs.
    pub tree: Node,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadTime {
    pub tid: i32,
    pub comm: String,
    pub ns: u64,
}

/// A thread on the path: its own states, and the threads that woke it (each over the
/// waits it ended).
#[derive(Debug, Clone)]
pub struct Node {
    pub tid: i32,
    pub comm: String,
    /// Time on the path under this node (its states and its wakers').
    pub ns: u64,
    pub states: Vec<StateLine>,
    pub wakers: Vec<Node>,
}

/// One state of one thread on the path, its segments summed.
#[derive(Debug, Clone, PartialEq)]
pub struct StateLine {
    pub state: State,
    /// What the segments share: the device, the timer, the vector, the IRQ, the reason.
    pub what: String,
    pub ns: u64,
    pub segments: u64,
    /// Runnable: the tasks that held the CPU (comm-tid, ns), most first. Disk: the
    /// requests' queue and device time where known.
    pub holders: Vec<(String, u64)>,
    pub queue_ns: Option<u64>,
    pub device_ns: Option<u64>,
}

/// The path of a thread, and of its requests.
#[derive(Debug, Clone)]
pub struct Why {
    /// The whole window.
    pub path: Path,
    /// With `--span`: each request's path, slowest first.
    pub requests: Vec<Path>,
    /// The median request (by wall time), an index into `requests`.
    pub median: Option<usize>,
    pub spans_unmatched: u64,
    pub trace_start: u64,
    pub lost: (u64, bool),
    pub events_read: u64,
    pub notes: Vec<String>,
    /// How many segments the walk handed over, and how many `path.segments` keeps.
    pub segments: Kept,
    /// Names of the threads, as the recording last gave them.
    pub names: kstate_analyze::fxmap::FxMap<i32, String>,
    /// The threads on the path ([`Segment::node`] numbers them): who woke whom.
    pub hops: Vec<Hop>,
}

/// The segments of the path: `total` handed over by the walk, `merged` into a neighbour
/// of the same thread, hop, state and detail, `left_out` past `max` (the earliest ones:
/// the kept segments then begin after the window's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub total: u64,
    pub merged: u64,
    pub left_out: u64,
    pub max: usize,
}

impl Why {
    /// `comm-tid`.
    pub fn label(&self, tid: i32) -> String {
        match tid {
            0 => "<idle>-0".into(),
            t => format!("{}-{t}", self.names.get(&t).map_or("<...>", String::as_str)),
        }
    }

    /// A segment's detail, for people: what it waited on and the figures that say so.
    pub fn detail(&self, s: &Segment) -> String {
        match &s.detail {
            Detail::Runnable { cpu, holders } => {
                let h: Vec<String> = holders
                    .iter()
                    .map(|&(t, ns)| format!("{} {}", self.label(t), fmt_dur(ns)))
                    .collect();
                match h.is_empty() {
                    true => format!("cpu {cpu}"),
                    false => format!("cpu {cpu} held by {}", h.join(", ")),
                }
            }
            Detail::Disk {
                sector,
                queue_ns,
                device_ns,
                ..
            } => {
                let at = match *sector {
                    u64::MAX => "flush".to_string(),
                    s => format!("sector {s}"),
                };
                let f = |x: Option<u64>| x.map_or("?".to_string(), fmt_dur);
                format!(
                    "{} {at}: queue {}, device {}",
                    what_detail(&s.detail),
                    f(*queue_ns),
                    f(*device_ns)
                )
            }
            d => what_detail(d),
        }
    }
}

/// Walks the path of the thread `q.who` names and folds it into the views as it goes;
/// keeps `q.max_segments` segments (the latest) for the views that draw them.
pub fn view(trace: &Trace, q: &WalkQuery) -> Result<Why, Error> {
    let mut fold = Fold::new(q.max_segments);
    let w = critical::walk(trace, q, &mut fold)?;
    let (requests, spans_unmatched) = fold.requests();
    let Fold { whole, keep, .. } = fold;
    let mut segments = keep.segs;
    segments.reverse();
    let mut requests: Vec<Path> = requests
        .into_iter()
        .map(|(window, t)| {
            // The kept segments cut to the request (both in time order).
            let first = segments.partition_point(|s| s.end <= window.0);
            let cut = segments[first..]
                .iter()
                .take_while(|s| s.start < window.1)
                .map(|s| {
                    let mut c = s.clone();
                    (c.start, c.end) = (s.start.max(window.0), s.end.min(window.1));
                    c
                })
                .collect();
            path_of(&w, window, &t, cut)
        })
        .collect();
    requests.sort_by(|x, y| y.wall_ns.cmp(&x.wall_ns).then(x.window.0.cmp(&y.window.0)));
    let median = (!requests.is_empty()).then_some(requests.len() / 2);
    let kept = Kept {
        total: keep.total,
        merged: keep.merged,
        left_out: keep.left_out,
        max: keep.max,
    };
    let mut notes = w.notes.clone();
    if kept.left_out > 0 && kept.max > 0 {
        notes.push(format!(
            "segments: the latest {} kept ({} merged into a neighbour of the same thread, state and detail); {} earlier ones left out (--max-segments {})",
            segments.len(),
            kept.merged,
            kept.left_out,
            kept.max
        ));
    }
    let unknown = whole.by_state[State::Unknown as usize];
    if let Some(r) = crate::survey::recording(trace).filter(|r| !r.pids.is_empty()) {
        if unknown > 0 {
            // Events are filtered by the task they happen in: an interrupt, a timer or a
            // kernel thread in another task's context is not in such a recording.
            notes.push(format!(
                "the recording followed only process {} (recorded without -a): waits ended by interrupts, timers or kernel threads in other tasks' context are unknown; record with -a to name them",
                r.pids.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(Why {
        path: path_of(&w, w.window, &whole, segments),
        requests,
        median,
        spans_unmatched,
        trace_start: w.trace_start,
        lost: w.lost,
        events_read: w.events_read,
        notes,
        segments: kept,
        hops: w.hops.clone(),
        names: w.comms,
    })
}

fn path_of(w: &Walked, window: (u64, u64), t: &Tally, segments: Vec<Segment>) -> Path {
    let mut by_state: Vec<(State, u64)> = State::ALL
        .into_iter()
        .zip(t.by_state)
        .filter(|s| s.1 > 0)
        .collect();
    by_state.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut by_thread: Vec<ThreadTime> = t
        .by_thread
        .iter()
        .map(|(&tid, &ns)| ThreadTime {
            tid,
            comm: w.comm(tid),
            ns,
        })
        .collect();
    by_thread.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tid.cmp(&b.tid)));
    Path {
        tid: w.tid,
        comm: w.comm(w.tid),
        window,
        wall_ns: window.1 - window.0,
        by_state,
        by_thread,
        segments,
        tree: tree(w, t),
    }
}

/// What a line's segments share, for people.
fn what(k: &LineKey) -> String {
    match k {
        LineKey::Plain => String::new(),
        LineKey::Cpu(cpu) => format!("cpu {cpu}"),
        LineKey::Disk { dev, dir } => disk(*dev, *dir),
        LineKey::Other(d) => what_detail(d),
    }
}

fn disk(dev: u32, dir: char) -> String {
    let (major, minor) = kstate_analyze::analyzers::block::major_minor(dev);
    format!("{major}:{minor} {dir}")
}

fn what_detail(d: &Detail) -> String {
    match d {
        Detail::None => String::new(),
        Detail::Runnable { cpu, .. } => format!("cpu {cpu}"),
        Detail::Disk { dev, dir, .. } => disk(*dev, *dir),
        Detail::Timer { function } => match function {
            Some(f) => format!("timer {f}"),
            None => "timer".into(),
        },
        Detail::Softirq { vec } => vec.clone(),
        Detail::Irq { irq, name } => format!("irq {irq} {name}"),
        Detail::Net { vec, dev } => match dev {
            Some(d) => format!("{vec} {d}").trim().to_string(),
            None => vec.clone(),
        },
        Detail::Unknown { why } => why.clone(),
    }
}

/// The tree of hops: node 0 is the thread asked about.
fn tree(w: &Walked, t: &Tally) -> Node {
    let mut nodes: Vec<Node> = w
        .hops
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let lines = t.lines.get(&(i as u32)).map_or(&[][..], Vec::as_slice);
            let mut states: Vec<StateLine> = lines
                .iter()
                .map(|l| {
                    let mut holders: Vec<(String, u64)> =
                        l.holders.iter().map(|(&t, &ns)| (w.label(t), ns)).collect();
                    holders.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    StateLine {
                        state: l.state,
                        what: what(&l.key),
                        ns: l.ns,
                        segments: l.segments,
                        holders,
                        queue_ns: l.queue_ns,
                        device_ns: l.device_ns,
                    }
                })
                .collect();
            states.sort_by(|a, b| {
                b.ns.cmp(&a.ns)
                    .then(a.state.cmp(&b.state))
                    .then_with(|| a.what.cmp(&b.what))
            });
            Node {
                tid: h.tid,
                comm: w.comm(h.tid),
                ns: states.iter().map(|s| s.ns).sum(),
                states,
                wakers: Vec::new(),
            }
        })
        .collect();
    // Children after parents (hops are numbered as met): fold from the last.
    for i in (1..w.hops.len()).rev() {
        let Some(p) = w.hops[i].parent else { continue };
        let child = std::mem::replace(
            &mut nodes[i],
            Node {
                tid: 0,
                comm: String::new(),
                ns: 0,
                states: Vec::new(),
                wakers: Vec::new(),
            },
        );
        if child.ns > 0 {
            let parent = &mut nodes[p as usize];
            parent.ns += child.ns;
            parent.wakers.push(child);
        }
    }
    let mut root = nodes.swap_remove(0);
    sort_tree(&mut root);
    root
}

fn sort_tree(n: &mut Node) {
    n.wakers
        .sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tid.cmp(&b.tid)));
    for c in &mut n.wakers {
        sort_tree(c);
    }
}

impl Path {
    /// The time in `state`.
    pub fn state_ns(&self, state: State) -> u64 {
        self.by_state
            .iter()
            .find(|s| s.0 == state)
            .map_or(0, |s| s.1)
    }

    /// The time `tid`'s own states put on the path.
    pub fn thread_ns(&self, tid: i32) -> u64 {
        self.by_thread
            .iter()
            .find(|t| t.tid == tid)
            .map_or(0, |t| t.ns)
    }

    /// The time `tid` spent in `state` on the path (on every hop it is on).
    pub fn thread_state_ns(&self, tid: i32, state: State) -> u64 {
        fn sum(n: &Node, tid: i32, state: State) -> u64 {
            let own: u64 = match n.tid == tid {
                true => n
                    .states
                    .iter()
                    .filter(|s| s.state == state)
                    .map(|s| s.ns)
                    .sum(),
                false => 0,
            };
            own + n.wakers.iter().map(|w| sum(w, tid, state)).sum::<u64>()
        }
        sum(&self.tree, tid, state)
    }

    /// Folded stacks (`comm-tid;waker-tid;state what`, ns), root first, for a flame
    /// graph of the path.
    pub fn folded(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        fold(&self.tree, String::new(), &mut out);
        out
    }

    /// Lines of the tree, depth first: (depth, text, ns). Hops read `<- woken by
    /// comm-tid`, states `state what`.
    pub fn lines(&self) -> Vec<(usize, TreeLine<'_>)> {
        let mut out = Vec::new();
        lines(&self.tree, 0, &mut out);
        out
    }
}

/// One line of the text tree.
#[derive(Debug, Clone, Copy)]
pub enum TreeLine<'a> {
    Thread(&'a Node),
    State(&'a Node, &'a StateLine),
}

fn lines<'a>(n: &'a Node, depth: usize, out: &mut Vec<(usize, TreeLine<'a>)>) {
    out.push((depth, TreeLine::Thread(n)));
    // States and wakers interleaved by time, most first.
    let mut items: Vec<(u64, Option<&StateLine>, Option<&Node>)> = n
        .states
        .iter()
        .map(|s| (s.ns, Some(s), None))
        .chain(n.wakers.iter().map(|w| (w.ns, None, Some(w))))
        .collect();
    items.sort_by_key(|b| std::cmp::Reverse(b.0));
    for (_, s, w) in items {
        match (s, w) {
            (Some(s), _) => out.push((depth + 1, TreeLine::State(n, s))),
            (_, Some(w)) => lines(w, depth + 1, out),
            _ => {}
        }
    }
}

fn fold(n: &Node, prefix: String, out: &mut Vec<(String, u64)>) {
    let me = format!("{prefix}{}-{}", n.comm, n.tid);
    for s in &n.states {
        let leaf = match s.what.is_empty() {
            true => s.state.name().to_string(),
            false => format!("{} {}", s.state.name(), s.what),
        };
        // Folded stacks split at ';'.
        out.push((format!("{me};{}", leaf.replace(';', ",")), s.ns));
    }
    for w in &n.wakers {
        fold(w, format!("{me};"), out);
    }
}

/// `12.3ms (45.6 %)`.
pub fn share(ns: u64, wall: u64) -> String {
    format!("{} ({:.1} %)", fmt_dur(ns), pct(ns, wall))
}

pub fn pct(ns: u64, wall: u64) -> f64 {
    match wall {
        0 => 0.0,
        w => ns as f64 * 100.0 / w as f64,
    }
}
