//! `kstate why`: a thread's critical path ([`crate::critical`]) as people read it: the
//! time per state and per thread, the hops as a tree (who woke whom, and what each spent
//! its share on), the requests `--span` cut with the slowest first and the median, and
//! folded stacks for a flame graph; [`compare`] puts two runs side by side.
//!
//! Front ends ask [`view`] (the CLI, the browser's lane); every number comes from the
//! segments of the walk, so the totals, the tree and the requests always add up to the
//! wall time.

pub mod compare;

use std::collections::BTreeMap;

use crate::critical::{self, Detail, Segment, State, WalkQuery, Walked};
use crate::error::Error;
use crate::filter::fmt_dur;
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
    /// The segments in time order, covering the window.
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
    /// Names of the threads the path and its details name.
    pub names: crate::fxmap::FxMap<i32, String>,
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
                    what(&s.detail),
                    f(*queue_ns),
                    f(*device_ns)
                )
            }
            d => what(d),
        }
    }
}

/// Walks the path of `q.tid` and assembles it.
pub fn view(trace: &Trace, q: &WalkQuery) -> Result<Why, Error> {
    let w = critical::walk(trace, q)?;
    Ok(assemble(&w))
}

/// The views of a walk.
pub fn assemble(w: &Walked) -> Why {
    let path = path_of(w, w.window, &w.segments);
    let mut requests: Vec<Path> = Vec::new();
    if !w.spans.is_empty() {
        // Segments and spans are both in time order: one sweep cuts them.
        let mut first = 0;
        for &(a, b) in &w.spans {
            while first < w.segments.len() && w.segments[first].end <= a {
                first += 1;
            }
            let mut cut = Vec::new();
            for s in w.segments[first..].iter().take_while(|s| s.start < b) {
                let (lo, hi) = (s.start.max(a), s.end.min(b));
                if lo < hi {
                    let mut c = s.clone();
                    (c.start, c.end) = (lo, hi);
                    cut.push(c);
                }
            }
            requests.push(path_of(w, (a, b), &cut));
        }
        requests.sort_by(|x, y| y.wall_ns.cmp(&x.wall_ns).then(x.window.0.cmp(&y.window.0)));
    }
    let median = (!requests.is_empty()).then_some(requests.len() / 2);
    Why {
        path,
        requests,
        median,
        spans_unmatched: w.spans_unmatched,
        trace_start: w.trace_start,
        lost: w.lost,
        events_read: w.events_read,
        notes: w.notes.clone(),
        names: w.comms.clone(),
    }
}

fn path_of(w: &Walked, window: (u64, u64), segments: &[Segment]) -> Path {
    let mut by_state: BTreeMap<State, u64> = BTreeMap::new();
    let mut by_thread: BTreeMap<i32, u64> = BTreeMap::new();
    for s in segments {
        *by_state.entry(s.state).or_default() += s.ns();
        *by_thread.entry(s.tid).or_default() += s.ns();
    }
    let mut by_state: Vec<(State, u64)> = by_state.into_iter().collect();
    by_state.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut by_thread: Vec<ThreadTime> = by_thread
        .into_iter()
        .map(|(tid, ns)| ThreadTime {
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
        segments: segments.to_vec(),
        tree: tree(w, segments),
    }
}

/// What a segment's detail shares with the others of its line in the tree.
fn what(d: &Detail) -> String {
    match d {
        Detail::None => String::new(),
        Detail::Runnable { cpu, .. } => format!("cpu {cpu}"),
        Detail::Disk { dev, dir, .. } => {
            let (major, minor) = crate::analyzers::block::major_minor(*dev);
            format!("{major}:{minor} {dir}")
        }
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
fn tree(w: &Walked, segments: &[Segment]) -> Node {
    // Per hop: (state, what) -> line.
    let mut lines: Vec<BTreeMap<(State, String), StateLine>> = vec![BTreeMap::new(); w.hops.len()];
    let mut holders: Vec<BTreeMap<(State, String), BTreeMap<i32, u64>>> =
        vec![BTreeMap::new(); w.hops.len()];
    for s in segments {
        let Some(l) = lines.get_mut(s.node as usize) else {
            continue;
        };
        let key = (s.state, what(&s.detail));
        let line = l.entry(key.clone()).or_insert_with(|| StateLine {
            state: s.state,
            what: key.1.clone(),
            ns: 0,
            segments: 0,
            holders: Vec::new(),
            queue_ns: None,
            device_ns: None,
        });
        line.ns += s.ns();
        line.segments += 1;
        match &s.detail {
            Detail::Runnable { holders: h, .. } => {
                let m = holders[s.node as usize].entry(key).or_default();
                for &(tid, ns) in h {
                    *m.entry(tid).or_default() += ns;
                }
            }
            Detail::Disk {
                queue_ns,
                device_ns,
                ..
            } => {
                if let Some(q) = queue_ns {
                    *line.queue_ns.get_or_insert(0) += q;
                }
                if let Some(d) = device_ns {
                    *line.device_ns.get_or_insert(0) += d;
                }
            }
            _ => {}
        }
    }
    let mut nodes: Vec<Node> = w
        .hops
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let mut states: Vec<StateLine> = std::mem::take(&mut lines[i]).into_values().collect();
            for s in &mut states {
                if let Some(m) = holders[i].get(&(s.state, s.what.clone())) {
                    let mut v: Vec<(String, u64)> =
                        m.iter().map(|(&t, &ns)| (w.label(t), ns)).collect();
                    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    s.holders = v;
                }
            }
            states.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.state.cmp(&b.state)));
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

    /// The time `tid` spent in `state` on the path.
    pub fn thread_state_ns(&self, tid: i32, state: State) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.tid == tid && s.state == state)
            .map(Segment::ns)
            .sum()
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
