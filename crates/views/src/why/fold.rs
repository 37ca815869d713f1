//! The path folded as the walk hands it over ([`kstate_analyze::critical::Sink`]): each segment
//! goes into the totals (by state, by thread) and its hop's tree lines at once, and into
//! the `--span` requests it overlaps; segments themselves are kept only when asked, up
//! to a number. Memory is bounded by the threads, the hops and the lines of the tree
//! (plus one small tally per request, and the segments asked for).

use kstate_analyze::critical::{Detail, Segment, Sink, State};
use kstate_analyze::fxmap::FxMap;

/// One path's totals, folded segment by segment.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// ns per state, in [`State::ALL`]'s order.
    pub by_state: [u64; State::ALL.len()],
    pub by_thread: FxMap<i32, u64>,
    /// Per hop (node), its lines: one per state and what it waited on.
    pub lines: FxMap<u32, Vec<Line>>,
}

/// A line of the tree as it is folded.
#[derive(Debug)]
pub(super) struct Line {
    pub state: State,
    pub key: LineKey,
    pub ns: u64,
    pub segments: u64,
    /// Runnable: ns per task that held the CPU.
    pub holders: FxMap<i32, u64>,
    pub queue_ns: Option<u64>,
    pub device_ns: Option<u64>,
}

/// What the segments of one line share: the CPU of a runnable wait, the device and
/// direction of a disk wait, else the whole detail.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum LineKey {
    Plain,
    Cpu(u32),
    Disk { dev: u32, dir: char },
    Other(Detail),
}

impl LineKey {
    fn of(d: &Detail) -> LineKey {
        match d {
            Detail::None => LineKey::Plain,
            Detail::Runnable { cpu, .. } => LineKey::Cpu(*cpu),
            Detail::Disk { dev, dir, .. } => LineKey::Disk {
                dev: *dev,
                dir: *dir,
            },
            d => LineKey::Other(d.clone()),
        }
    }

    /// Whether `d` belongs to this line (without building its key).
    fn matches(&self, d: &Detail) -> bool {
        match (self, d) {
            (LineKey::Plain, Detail::None) => true,
            (LineKey::Cpu(c), Detail::Runnable { cpu, .. }) => c == cpu,
            (LineKey::Disk { dev, dir }, Detail::Disk { dev: v, dir: x, .. }) => {
                dev == v && dir == x
            }
            (LineKey::Other(o), d) => o == d,
            _ => false,
        }
    }
}

impl Tally {
    /// Adds `ns` of segment `s` (all of it, or the part inside a request).
    pub fn fold(&mut self, s: &Segment, ns: u64) {
        self.by_state[s.state as usize] += ns;
        *self.by_thread.entry(s.tid).or_default() += ns;
        let lines = self.lines.entry(s.node).or_default();
        let at = match lines
            .iter()
            .position(|l| l.state == s.state && l.key.matches(&s.detail))
        {
            Some(i) => i,
            None => {
                lines.push(Line {
                    state: s.state,
                    key: LineKey::of(&s.detail),
                    ns: 0,
                    segments: 0,
                    holders: FxMap::default(),
                    queue_ns: None,
                    device_ns: None,
                });
                lines.len() - 1
            }
        };
        let line = &mut lines[at];
        line.ns += ns;
        line.segments += 1;
        match &s.detail {
            Detail::Runnable { holders, .. } => {
                for &(tid, ns) in holders {
                    *line.holders.entry(tid).or_default() += ns;
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
}

/// A request's `[begin, end)` and its tally.
pub(super) type Request = ((u64, u64), Tally);

/// The `--span` requests, cut as the segments come (latest first).
#[derive(Debug, Default)]
struct Requests {
    /// The request whose end was met and whose begin is still to come, with its end.
    open: Option<(u64, Tally)>,
    /// Requests whose begin was met: a segment reaching back past the begin completes
    /// them.
    closing: Vec<Request>,
    done: Vec<Request>,
    /// Begins with no end before the next begin or the window's end.
    unmatched: u64,
}

impl Requests {
    /// Read backward, a begin pairs with the end met last; an end met while one is open
    /// replaces it (read forward, that later end followed no begin), and a begin with
    /// none open had no end (the next begin, or the window's end, came first).
    fn mark(&mut self, ts: u64, begin: bool) {
        match begin {
            true => match self.open.take() {
                Some((end, t)) => self.closing.push(((ts, end), t)),
                None => self.unmatched += 1,
            },
            false => self.open = Some((ts, Tally::default())),
        }
    }

    fn segment(&mut self, s: &Segment) {
        if let Some((end, t)) = &mut self.open {
            // Its begin comes later (going back): it is at or before the segment's start.
            let hi = s.end.min(*end);
            if s.start < hi {
                t.fold(s, hi - s.start);
            }
        }
        if self.closing.is_empty() {
            return;
        }
        for ((b, e), t) in &mut self.closing {
            let (lo, hi) = (s.start.max(*b), s.end.min(*e));
            if lo < hi {
                t.fold(s, hi - lo);
            }
        }
        let mut i = 0;
        while i < self.closing.len() {
            match self.closing[i].0 .0 >= s.start {
                true => self.done.push(self.closing.swap_remove(i)),
                false => i += 1,
            }
        }
    }
}

/// The segments kept for the views that draw them, latest first.
#[derive(Debug, Default)]
pub(super) struct Keep {
    pub max: usize,
    pub segs: Vec<Segment>,
    /// Segments handed over.
    pub total: u64,
    /// Merged into the neighbour of the same hop, state and detail.
    pub merged: u64,
    /// Past `max`: the earliest.
    pub left_out: u64,
}

impl Keep {
    fn take(&mut self, s: Segment) {
        self.total += 1;
        if self.max == 0 {
            self.left_out += 1;
            return;
        }
        if let Some(last) = self.segs.last_mut() {
            if last.start == s.end
                && last.tid == s.tid
                && last.node == s.node
                && last.state == s.state
                && last.detail == s.detail
            {
                last.start = s.start;
                self.merged += 1;
                return;
            }
        }
        match self.segs.len() < self.max {
            true => self.segs.push(s),
            false => self.left_out += 1,
        }
    }
}

/// The sink `why::view` hands the walk.
#[derive(Debug, Default)]
pub(super) struct Fold {
    pub whole: Tally,
    requests: Requests,
    pub keep: Keep,
}

impl Fold {
    pub fn new(max_segments: usize) -> Fold {
        Fold {
            keep: Keep {
                max: max_segments,
                ..Keep::default()
            },
            ..Fold::default()
        }
    }

    /// The requests, in no order, and how many begins had no end. A request still open
    /// (an end whose begin is before the window) is not one.
    pub fn requests(&mut self) -> (Vec<Request>, u64) {
        let r = &mut self.requests;
        let mut done = std::mem::take(&mut r.done);
        done.append(&mut r.closing);
        (done, r.unmatched)
    }
}

impl Sink for Fold {
    fn segment(&mut self, s: Segment) {
        let ns = s.ns();
        self.whole.fold(&s, ns);
        if self.requests.open.is_some() || !self.requests.closing.is_empty() {
            self.requests.segment(&s);
        }
        self.keep.take(s);
    }

    fn mark(&mut self, ts: u64, begin: bool) {
        self.requests.mark(ts, begin);
    }
}
