//! The path as a lane to draw (the timeline of `kstate ui`): its segments in time order,
//! each with its depth in the chain of hops (0: the thread asked about, 1: a thread that
//! woke it, 2: one that woke that one...), and the wake-ups where the path passes from a
//! waker back to the thread it woke: the hops, drawn as arrows.
//!
//! A lane asked at a resolution (`px_ns`, the time one pixel column spans) is bounded
//! whatever the path's length: segments shorter than a column are merged with their
//! neighbours into runs of at most a column each (the state and thread with the most
//! time in the run name it), longer ones are kept as the walk gave them; at most one
//! wake-up per column is kept. So a lane holds at most some three drawables and one arrow
//! per column. At resolution 0 it is the segments of `kstate why --format json` as they
//! are.

use super::Why;
use kstate_analyze::critical::{Segment, State};
use kstate_analyze::filter::fmt_dur;

/// One drawable of the lane: a segment of the path, or a run of segments shorter than a
/// pixel column merged (`merged` of them, the state and thread with the most time).
#[derive(Debug, Clone, PartialEq)]
pub struct LaneSegment {
    pub start: u64,
    pub end: u64,
    pub tid: i32,
    /// The hop's depth in the chain (0: the thread asked about).
    pub depth: u32,
    pub state: State,
    /// What it waited on, as `kstate why` says it ([`Why::detail`]); for a run, its
    /// states' times.
    pub detail: String,
    /// 1 for a segment as the walk gave it, the number merged for a run.
    pub merged: u32,
}

/// A hop of the path: at `at`, thread `from` (whose running or waiting was on the path
/// until then) woke thread `to`, which the path follows from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    pub at: u64,
    pub from: i32,
    pub from_depth: u32,
    pub to: i32,
    pub to_depth: u32,
}

/// What to draw of a path.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    /// In time order, end to end: they cover the kept segments without a gap (the
    /// earliest may be left out: [`Why::segments`]).
    pub segments: Vec<LaneSegment>,
    /// In time order, at most one per column at a resolution (the first in it).
    pub wakes: Vec<Wake>,
    /// The deepest hop on the lane (0: only the thread asked about), for its height.
    pub depth: u32,
    /// What the resolution cut: segments merged into runs, wake-ups left out.
    pub cut: Cut,
}

/// What a resolution left out of the drawables (nothing at resolution 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cut {
    /// Segments merged into runs of at most a column.
    pub merged: u64,
    /// Wake-ups past the first of their column.
    pub wakes: u64,
}

/// The lane of `why`'s whole path at resolution `px_ns` (0: every kept segment).
pub fn lane(why: &Why, px_ns: u64) -> Lane {
    let depth = depths(why);
    let segs = &why.path.segments;
    let mut lane = Lane::default();
    let mut last_col = None;
    for (a, b) in segs.iter().zip(segs.iter().skip(1)) {
        let Some(w) = wake(why, &depth, a, b) else {
            continue;
        };
        let col = (px_ns > 0).then(|| (w.at - why.path.window.0) / px_ns);
        if col.is_some() && col == last_col {
            lane.cut.wakes += 1;
            continue;
        }
        last_col = col;
        lane.wakes.push(w);
    }
    let mut run: Vec<&Segment> = Vec::new();
    for s in segs {
        lane.depth = lane.depth.max(level(&depth, s));
        let small = px_ns > 0 && s.ns() < px_ns;
        let fits = run.first().is_some_and(|f| s.end - f.start <= px_ns);
        if !small || !fits {
            flush(why, &depth, &mut run, &mut lane);
        }
        match small {
            true => run.push(s),
            false => lane.segments.push(as_walked(why, &depth, s)),
        }
    }
    flush(why, &depth, &mut run, &mut lane);
    lane
}

/// Each hop's depth: hops are numbered as met, a waker after the thread it woke.
fn depths(why: &Why) -> Vec<u32> {
    let mut d: Vec<u32> = Vec::with_capacity(why.hops.len());
    for h in &why.hops {
        let v = h
            .parent
            .and_then(|p| d.get(p as usize))
            .map_or(0, |p| p + 1);
        d.push(v);
    }
    d
}

/// The wake-up between two consecutive segments, if `a`'s hop (or a chain of them) ends
/// where `b` begins: the path leaves `a`'s branch of the tree for an ancestor's. Its
/// waker is the hop just below that ancestor on `a`'s branch.
fn wake(why: &Why, depth: &[u32], a: &Segment, b: &Segment) -> Option<Wake> {
    if a.node == b.node {
        return None;
    }
    let parent = |n: u32| why.hops.get(n as usize).and_then(|h| h.parent);
    let d = |n: u32| depth_of(depth, n);
    // The lowest common ancestor of the two hops.
    let (mut x, mut y) = (a.node, b.node);
    while d(x) > d(y) {
        x = parent(x)?;
    }
    while d(y) > d(x) {
        y = parent(y)?;
    }
    while x != y {
        (x, y) = (parent(x)?, parent(y)?);
    }
    if x == a.node {
        // `b` went down: a new wait of a's thread began, no wake-up.
        return None;
    }
    let mut waker = a.node;
    while parent(waker)? != x {
        waker = parent(waker)?;
    }
    let tid = |n: u32| why.hops.get(n as usize).map_or(0, |h| h.tid);
    Some(Wake {
        at: a.end,
        from: tid(waker),
        from_depth: d(waker),
        to: tid(x),
        to_depth: d(x),
    })
}

/// The depth of hop `node` (0 where the walk gave no such hop).
fn depth_of(depth: &[u32], node: u32) -> u32 {
    depth.get(node as usize).copied().unwrap_or(0)
}

/// The depth of a segment's hop.
fn level(depth: &[u32], s: &Segment) -> u32 {
    depth_of(depth, s.node)
}

/// A segment drawn as the walk gave it.
fn as_walked(why: &Why, depth: &[u32], s: &Segment) -> LaneSegment {
    LaneSegment {
        start: s.start,
        end: s.end,
        tid: s.tid,
        depth: level(depth, s),
        state: s.state,
        detail: why.detail(s),
        merged: 1,
    }
}

/// Ends a run of small segments: one alone is kept as it is; more are one drawable.
fn flush(why: &Why, depth: &[u32], run: &mut Vec<&Segment>, lane: &mut Lane) {
    match run.len() {
        0 => {}
        1 => lane.segments.push(as_walked(why, depth, run[0])),
        n => {
            let mut by_state = [0u64; State::ALL.len()];
            let mut longest = run[0];
            let mut by_tid: Vec<(i32, u64)> = Vec::new();
            for s in run.iter() {
                by_state[s.state as usize] += s.ns();
                if s.ns() > longest.ns() {
                    longest = s;
                }
                match by_tid.iter_mut().find(|t| t.0 == s.tid) {
                    Some(t) => t.1 += s.ns(),
                    None => by_tid.push((s.tid, s.ns())),
                }
            }
            let state = State::ALL
                .into_iter()
                .max_by_key(|s| (by_state[*s as usize], std::cmp::Reverse(*s)))
                .unwrap_or(State::Unknown);
            let tid = by_tid
                .iter()
                .max_by_key(|t| (t.1, std::cmp::Reverse(t.0)))
                .map_or(longest.tid, |t| t.0);
            let times: Vec<String> = State::ALL
                .into_iter()
                .filter(|s| by_state[*s as usize] > 0)
                .map(|s| format!("{} {}", s.name(), fmt_dur(by_state[s as usize])))
                .collect();
            lane.segments.push(LaneSegment {
                start: run[0].start,
                end: run[n - 1].end,
                tid,
                depth: level(depth, longest),
                state,
                detail: format!("{n} segments under a pixel: {}", times.join(", ")),
                merged: n as u32,
            });
            lane.cut.merged += n as u64;
        }
    }
    run.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstate_analyze::critical::{Detail, Hop};

    fn seg(start: u64, end: u64, tid: i32, node: u32, state: State) -> Segment {
        Segment {
            start,
            end,
            tid,
            node,
            state,
            detail: Detail::None,
        }
    }

    /// A (node 0) runs, blocks; B (node 1, woke A) is woken by C (node 2), runs and
    /// wakes A; A is runnable, then runs.
    fn why(segments: Vec<Segment>) -> Why {
        let hops = vec![
            Hop {
                parent: None,
                tid: 10,
            },
            Hop {
                parent: Some(0),
                tid: 20,
            },
            Hop {
                parent: Some(1),
                tid: 30,
            },
        ];
        let mut names = kstate_analyze::fxmap::FxMap::default();
        for (t, n) in [(10, "a"), (20, "b"), (30, "c")] {
            names.insert(t, n.to_string());
        }
        let window = (segments[0].start, segments.last().map_or(0, |s| s.end));
        Why {
            path: super::super::Path {
                tid: 10,
                comm: "a".into(),
                window,
                wall_ns: window.1 - window.0,
                by_state: Vec::new(),
                by_thread: Vec::new(),
                segments,
                tree: super::super::Node {
                    tid: 10,
                    comm: "a".into(),
                    ns: 0,
                    states: Vec::new(),
                    wakers: Vec::new(),
                },
            },
            requests: Vec::new(),
            median: None,
            spans_unmatched: 0,
            trace_start: 0,
            lost: (0, false),
            events_read: 0,
            notes: Vec::new(),
            segments: super::super::Kept {
                total: 0,
                merged: 0,
                left_out: 0,
                max: 0,
            },
            names,
            hops,
        }
    }

    fn chain() -> Why {
        why(vec![
            seg(0, 100, 10, 0, State::Running),
            seg(100, 300, 30, 2, State::Running),
            seg(300, 310, 20, 1, State::Runnable),
            seg(310, 400, 20, 1, State::Running),
            seg(400, 405, 10, 0, State::Runnable),
            seg(405, 406, 10, 0, State::Running),
            seg(406, 407, 10, 0, State::Runnable),
            seg(407, 500, 10, 0, State::Running),
        ])
    }

    #[test]
    fn hops_are_the_wake_ups_back_up_the_chain() {
        let l = lane(&chain(), 0);
        let w: Vec<(u64, i32, u32, i32, u32)> = l
            .wakes
            .iter()
            .map(|w| (w.at, w.from, w.from_depth, w.to, w.to_depth))
            .collect();
        // C woke B at 300, B woke A at 400; A blocking at 100 is no wake-up.
        assert_eq!(w, [(300, 30, 2, 20, 1), (400, 20, 1, 10, 0)]);
        assert_eq!(l.segments.len(), 8);
        assert_eq!(l.depth, 2);
        assert_eq!(l.cut.merged, 0);
    }

    #[test]
    fn a_resolution_merges_only_what_is_under_a_column() {
        let l = lane(&chain(), 10);
        let spans: Vec<(u64, u64, State, u32)> = l
            .segments
            .iter()
            .map(|s| (s.start, s.end, s.state, s.merged))
            .collect();
        // 300-310 is a column long: kept; 400-407 is three small segments and a fourth,
        // all within 10 ns: one run, runnable (6 ns) over running (1 ns).
        assert_eq!(
            spans,
            [
                (0, 100, State::Running, 1),
                (100, 300, State::Running, 1),
                (300, 310, State::Runnable, 1),
                (310, 400, State::Running, 1),
                (400, 407, State::Runnable, 3),
                (407, 500, State::Running, 1),
            ]
        );
        assert_eq!(l.cut.merged, 3);
        // The lane still covers the path without gaps.
        assert!(l.segments.windows(2).all(|w| w[0].end == w[1].start));
        // One wake-up per column: 300 and 400 are in different columns.
        assert_eq!(l.wakes.len(), 2);
        let l = lane(&chain(), 1000);
        assert_eq!(l.wakes.len(), 1);
        assert_eq!(l.cut.wakes, 1);
    }
}
