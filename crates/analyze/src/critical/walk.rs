//! The backward walk. It starts at the end of the window with the thread asked about
//! and takes the events latest first. At each moment it follows one thread (the
//! current frame) in one phase:
//! - `Running` on a CPU, until (going back) the switch that put it there;
//! - `Runnable`, waiting for that CPU, until the wake-up or preemption that made it
//!   ready, counting which tasks held the CPU meanwhile;
//! - blocked with its wake-up already seen: woken by a thread, the walk follows that
//!   thread instead (the blocked one is suspended on a stack, and taken up again at the
//!   switch that put it to sleep, however far the chain went meanwhile); woken from an
//!   interrupt, the stretch belongs to what the interrupt served, named from the events
//!   of its context on that CPU (read as the walk goes on back: they came first);
//! - `Unknown`, where the events do not fit together (lost, not recorded), until the
//!   thread's next event says what it was doing.
//!
//! A thread is suspended at most once (a suspended thread is asleep, so it cannot wake
//! one of the threads followed meanwhile): a waker already on the stack means the events
//! are inconsistent, and the chain is cut there (`unknown`).

use std::collections::VecDeque;
use std::sync::Arc;

use kstate_format::{Lost, Trace};

use super::chunks::{infer_switch_ins, Backward};
use super::events::{Bound, Has, Kind, Rec, FLAG_HARDIRQ, FLAG_NMI, FLAG_SOFTIRQ};
use super::{Detail, Hop, Segment, Sink, State, WalkQuery, Walked};
use crate::analyzers::block::{Role, Rq};
use crate::error::Error;
use crate::fxmap::FxMap;
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::stream::page_index::PageIndex;

/// How far before the window the walk reads on to name an interrupt or a block request
/// whose wake-up lies in the window.
const LOOKBACK_NS: u64 = 1_000_000_000;

/// Holders kept per runnable stretch.
const HOLDERS: usize = 8;

/// Segments waiting on a cause (an interrupt or a request still to be named) at most:
/// past this the oldest cause is named from what was read (memory stays bounded when a
/// request's issue or insert is far back, or not recorded).
pub const HOLD_MAX: usize = 65_536;

/// Held segments are handed over once this many wait.
const RELEASE_AT: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Frame {
    tid: i32,
    node: u32,
}

#[derive(Debug, Clone)]
enum Phase {
    /// Nothing seen yet of the thread (at the walk's start): its first event, going
    /// back, says what it was doing until then.
    Start,
    Running {
        cpu: u32,
    },
    Runnable {
        cpu: u32,
        /// The CPU's holders are counted from here back to the previous switch there.
        mark: u64,
        /// The task that held the CPU up to `mark`.
        held_by: i32,
        holders: Vec<(i32, u64)>,
    },
    /// Blocked; cause `.0` ends it.
    Blocked(u32),
    Unknown(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Hard,
    Soft,
}

/// What woke a thread from interrupt context (or why that is not known), gathered from
/// the events of the context going back.
#[derive(Debug, Clone)]
struct Cause {
    ctx: Ctx,
    /// Decided when the wake-up was met (not an interrupt's).
    fixed: Option<String>,
    /// A stretch after the thread went to sleep, back on a CPU with no wake-up between:
    /// woken while it was still going to sleep if a wake-up of it comes (going back)
    /// before its switch in, and then the stretch stands as it is (`keep`); else `fixed`.
    early: bool,
    keep: bool,
    /// sched_wakeup only: a hard-irq context may be the IPI of a queued wake-up.
    queued: bool,
    rq: Option<(Rq, u64)>,
    issue: Option<u64>,
    insert: Option<u64>,
    timer: Option<u64>,
    net: Option<u32>,
    irq: Option<(i32, u32)>,
    vec: Option<u32>,
    /// Exits met going back whose entries are still to come (nested or earlier handlers).
    skip_irq: u32,
    skip_soft: u32,
    skip_timer: u32,
    /// The CPU whose context is searched, while `searching`.
    cpu: u32,
    searching: bool,
    /// The request event looked for (going back) to time the request.
    want: Want,
}

/// What a block request's completion still waits for, going back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Nothing,
    Issue,
    Insert,
}

impl Cause {
    fn new(ctx: Ctx) -> Cause {
        Cause {
            ctx,
            fixed: None,
            early: false,
            keep: false,
            queued: false,
            rq: None,
            issue: None,
            insert: None,
            timer: None,
            net: None,
            irq: None,
            vec: None,
            skip_irq: 0,
            skip_soft: 0,
            skip_timer: 0,
            cpu: 0,
            searching: false,
            want: Want::Nothing,
        }
    }

    /// Everything looked for is found (or known not to be in the recording).
    fn ready(&self) -> bool {
        !self.searching && self.want == Want::Nothing && !self.early
    }
}

fn rq_key(rq: &Rq) -> (u32, u64, u8) {
    (rq.dev, rq.sector, rq.dir as u8)
}

pub(crate) struct Walker {
    root: i32,
    window: (u64, u64),
    has: Has,
    cur: Frame,
    phase: Phase,
    /// The path is known from here on (going back, the walk has reached this time).
    cursor: u64,
    stack: Vec<Frame>,
    on_stack: FxMap<i32, usize>,
    hops: Vec<Hop>,
    hop_ids: FxMap<(u32, i32), u32>,
    /// Segments not yet handed over, latest first: one whose state a cause decides
    /// waits, with those after it, until the cause is named (at most [`HOLD_MAX`]).
    held: VecDeque<(Segment, Option<u32>)>,
    /// `--span` marks of the thread not yet handed over, latest first.
    marks: VecDeque<(u64, bool)>,
    /// Causes still to be handed over with their segment, by id (ids are not reused).
    causes: FxMap<u32, Cause>,
    next_cause: u32,
    /// Causes named from what had been read when [`HOLD_MAX`] segments waited.
    forced: u64,
    /// Per CPU, causes still gathering events of their context.
    pending: Vec<Vec<u32>>,
    pending_n: usize,
    rq_issue: FxMap<(u32, u64, u8), Vec<u32>>,
    rq_insert: FxMap<(u32, u64, u8), Vec<u32>>,
    /// The root thread was created here (its life starts in the window).
    born: Option<u64>,
    seen_root: bool,
    lost: (u64, bool),
    loss_near_path: u64,
    /// The cause waiting for an early wake-up of the current thread (see `Cause::early`).
    early: Option<u32>,
}

impl Walker {
    fn new(root: i32, window: (u64, u64), start: u64, has: Has) -> Walker {
        Walker {
            root,
            window,
            has,
            cur: Frame { tid: root, node: 0 },
            phase: Phase::Start,
            cursor: start,
            stack: Vec::new(),
            on_stack: FxMap::default(),
            hops: vec![Hop {
                parent: None,
                tid: root,
            }],
            hop_ids: FxMap::default(),
            held: VecDeque::new(),
            marks: VecDeque::new(),
            causes: FxMap::default(),
            next_cause: 0,
            forced: 0,
            pending: Vec::new(),
            pending_n: 0,
            rq_issue: FxMap::default(),
            rq_insert: FxMap::default(),
            born: None,
            seen_root: false,
            lost: (0, false),
            loss_near_path: 0,
            early: None,
        }
    }

    /// The path is complete back to the window's start.
    fn path_done(&self) -> bool {
        self.cursor <= self.window.0 || self.born.is_some()
    }

    /// Nothing is left to find: the path is complete and every interrupt and request on
    /// it is named as far as the events go.
    fn done(&self) -> bool {
        self.path_done() && self.pending_n == 0 && self.rq_issue.is_empty()
    }

    /// Takes one event, latest first.
    #[inline]
    fn event(&mut self, r: &Rec) {
        if r.lost.is_some() {
            self.loss(r);
        }
        if self.pending_n > 0 {
            self.context(r);
        }
        if let Kind::Rq { role, rq } = r.kind {
            if !self.rq_issue.is_empty() || !self.rq_insert.is_empty() {
                self.request(role, &rq, r.ts);
            }
        }
        if self.path_done() {
            return;
        }
        if let Kind::Span { begin } = r.kind {
            if r.pid == self.root && r.ts >= self.window.0 && r.ts <= self.window.1 {
                self.marks.push_back((r.ts, begin));
            }
            return;
        }
        self.step(r);
    }

    fn loss(&mut self, r: &Rec) {
        self.early_wake(false);
        if r.ts >= self.window.0 && r.ts <= self.window.1 {
            match r.lost {
                Lost::Count(n) => self.lost.0 += n,
                _ => self.lost.1 = true,
            }
        }
        if self.path_done() {
            return;
        }
        // The current thread's state before the gap on its CPU is not known.
        let tied = match self.phase {
            Phase::Running { cpu } | Phase::Runnable { cpu, .. } => cpu == r.cpu,
            _ => false,
        };
        if tied {
            self.close(r.ts);
            self.loss_near_path += 1;
            self.phase = Phase::Unknown(format!(
                "events were lost on CPU {} here: what {} did before is not known",
                r.cpu,
                if self.cur.tid == self.root {
                    "the thread"
                } else {
                    "this thread"
                }
            ));
        }
    }

    /// Ends the current phase at `t` (going back): its segment is `[t, cursor)`.
    fn close(&mut self, t: u64) {
        let t = t.min(self.cursor);
        let (state, detail, cause) = match &mut self.phase {
            Phase::Start => return,
            Phase::Running { .. } => (State::Running, Detail::None, None),
            Phase::Runnable {
                cpu,
                mark,
                held_by,
                holders,
            } => {
                if *mark > t {
                    add_holder(holders, *held_by, *mark - t);
                    *mark = t;
                }
                // The phase ends here: its holders go to the segment.
                let mut h = std::mem::take(holders);
                h.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                h.truncate(HOLDERS);
                (
                    State::Runnable,
                    Detail::Runnable {
                        cpu: *cpu,
                        holders: h,
                    },
                    None,
                )
            }
            Phase::Blocked(c) => (State::Unknown, Detail::None, Some(*c)),
            Phase::Unknown(why) => (State::Unknown, Detail::Unknown { why: why.clone() }, None),
        };
        self.push(t, self.cursor, state, detail, cause);
        self.cursor = t;
    }

    fn push(&mut self, start: u64, end: u64, state: State, detail: Detail, cause: Option<u32>) {
        let (a, b) = self.window;
        let (s, e) = (start.max(a), end.min(b));
        if s >= e {
            return;
        }
        let (tid, node) = (self.cur.tid, self.cur.node);
        // The same stretch continued (a loss mark, a holder counted): one segment.
        if let Some((last, None)) = self.held.back_mut() {
            if cause.is_none()
                && last.start == e
                && last.tid == tid
                && last.node == node
                && last.state == state
                && last.detail == detail
            {
                last.start = s;
                return;
            }
        }
        self.held.push_back((
            Segment {
                start: s,
                end: e,
                tid,
                node,
                state,
                detail,
            },
            cause,
        ));
    }

    fn new_cause(&mut self, c: Cause) -> u32 {
        let id = self.next_cause;
        self.next_cause += 1;
        self.causes.insert(id, c);
        id
    }

    /// Hands the segments whose states are known over to `sink`, latest first, each
    /// after the marks at or after its start; with `all` (the walk is over) every one.
    fn release(&mut self, sink: &mut dyn Sink, names: &Naming<'_>, all: bool) {
        while let Some((_, cause)) = self.held.front() {
            if let Some(c) = *cause {
                let ready = self.causes.get(&c).is_none_or(Cause::ready);
                if !ready && !all && self.held.len() <= HOLD_MAX {
                    break;
                }
                if !ready {
                    self.abandon(c);
                    self.forced += u64::from(!all);
                }
            }
            let Some((mut seg, cause)) = self.held.pop_front() else {
                break;
            };
            if let Some(c) = cause.and_then(|c| self.causes.remove(&c)) {
                if !c.keep {
                    (seg.state, seg.detail) = decide(&c, names);
                }
            }
            while let Some(&(ts, begin)) = self.marks.front() {
                if ts < seg.start {
                    break;
                }
                sink.mark(ts, begin);
                self.marks.pop_front();
            }
            sink.segment(seg);
        }
        if all {
            for (ts, begin) in self.marks.drain(..) {
                sink.mark(ts, begin);
            }
        }
    }

    /// Cause `id` is named with what was found: its searches end.
    fn abandon(&mut self, id: u32) {
        let Some(c) = self.causes.get_mut(&id) else {
            return;
        };
        c.early = false;
        if c.searching {
            c.searching = false;
            if let Some(list) = self.pending.get_mut(c.cpu as usize) {
                if let Some(i) = list.iter().position(|&x| x == id) {
                    list.swap_remove(i);
                    self.pending_n -= 1;
                }
            }
        }
        if let Some(rq) = c.rq.map(|r| rq_key(&r.0)) {
            let map = match c.want {
                Want::Issue => Some(&mut self.rq_issue),
                Want::Insert => Some(&mut self.rq_insert),
                Want::Nothing => None,
            };
            if let Some(map) = map {
                if let Some(ids) = map.get_mut(&rq) {
                    ids.retain(|&x| x != id);
                    if ids.is_empty() {
                        map.remove(&rq);
                    }
                }
            }
        }
        c.want = Want::Nothing;
    }

    /// The thread's events do not fit its phase: unknown back to here, and the event
    /// read as if nothing were known.
    fn misfit(&mut self, r: &Rec) {
        self.close(r.ts);
        self.phase =
            Phase::Unknown(format!(
            "the scheduler events of {} do not fit together here (events lost, or not recorded)",
            if self.cur.tid == self.root { "the thread" } else { "this thread" }
        ));
        self.step(r);
    }

    fn step(&mut self, r: &Rec) {
        let x = self.cur.tid;
        if self.early.is_some() {
            // Back to the thread's switch in (or a frame below it) with no wake-up met.
            if let Kind::Switch { prev, next, .. } = r.kind {
                let on_path = |t: i32| t == x || self.on_stack.contains_key(&t);
                if on_path(prev) || on_path(next) {
                    self.early_wake(false);
                }
            }
        }
        match r.kind {
            Kind::Switch {
                prev,
                next,
                prev_runnable,
                prev_dead,
            } => {
                if prev != x && prev != 0 && !self.stack.is_empty() {
                    if let Some(&k) = self.on_stack.get(&prev) {
                        return self.resume(k, r);
                    }
                }
                if prev != x && next != x {
                    // Another task's switch: it counts only as a holder of the CPU the
                    // thread waits for; on the CPU the thread is running on, the trace
                    // misses the switch that put the thread there.
                    if matches!(self.phase, Phase::Running { cpu } if cpu == r.cpu) {
                        return self.misfit(r);
                    }
                    self.held(r, prev);
                    return;
                }
                if x == self.root {
                    self.seen_root = true;
                }
                match self.phase.clone() {
                    Phase::Start if prev == x && prev_dead && x == self.root => {
                        // The thread's life ends here.
                        self.window.1 = self.window.1.min(r.ts);
                        self.cursor = self.cursor.min(r.ts);
                        self.phase = Phase::Running { cpu: r.cpu };
                    }
                    Phase::Start | Phase::Unknown(_) => {
                        let start = matches!(self.phase, Phase::Start);
                        if next == x {
                            // Running after the switch.
                            if start {
                                self.phase = Phase::Running { cpu: r.cpu };
                            }
                            self.close(r.ts);
                            self.runnable_from(r, prev);
                        } else if start && !prev_runnable {
                            self.phase = Phase::Unknown(match x == self.root {
                                true => {
                                    "asleep when the recording ends: what woke it is not recorded"
                                        .into()
                                }
                                false => "asleep: what woke it is not recorded".into(),
                            });
                            self.close(r.ts);
                            self.phase = Phase::Running { cpu: r.cpu };
                        } else {
                            if start {
                                self.phase = Phase::Runnable {
                                    cpu: r.cpu,
                                    mark: r.ts,
                                    held_by: next,
                                    holders: Vec::new(),
                                };
                            }
                            self.close(r.ts);
                            self.phase = Phase::Running { cpu: r.cpu };
                        }
                    }
                    Phase::Running { cpu } => {
                        if next == x && prev != x && cpu == r.cpu {
                            self.close(r.ts);
                            self.runnable_from(r, prev);
                        } else if next == x && prev == x {
                            // A switch from a task to itself: still running.
                        } else {
                            self.misfit(r);
                        }
                    }
                    Phase::Runnable { .. } => {
                        if prev == x && next != x {
                            self.held(r, next);
                            let early = !prev_runnable && self.has.waking && self.early.is_none();
                            if !prev_runnable && !early {
                                // Asleep here, and back on a CPU with no wake-up seen.
                                self.phase = Phase::Unknown(self.no_wakeup_why());
                            }
                            self.close(r.ts);
                            if early {
                                self.await_early_wake(r.ts);
                            }
                            self.phase = Phase::Running { cpu: r.cpu };
                        } else {
                            self.misfit(r);
                        }
                    }
                    Phase::Blocked(_) => {
                        if prev == x && next != x {
                            self.close(r.ts);
                            self.phase = Phase::Running { cpu: r.cpu };
                        } else {
                            self.misfit(r);
                        }
                    }
                }
            }
            Kind::Wake { pid, new, .. } if pid == x => {
                if x == self.root {
                    self.seen_root = true;
                }
                match self.phase {
                    // A running task woken (it had not gone to sleep yet): no change, but
                    // the stretch after its switch out was spent waiting for a CPU.
                    Phase::Running { .. } => self.early_wake(true),
                    Phase::Blocked(_) => {}
                    Phase::Start => {
                        self.phase = Phase::Runnable {
                            cpu: r.cpu,
                            mark: r.ts,
                            held_by: 0,
                            holders: Vec::new(),
                        };
                        self.close(r.ts);
                        self.woken(r, new);
                    }
                    Phase::Runnable { .. } | Phase::Unknown(_) => {
                        self.close(r.ts);
                        self.woken(r, new);
                    }
                }
            }
            _ => {}
        }
    }

    /// A switch `r` while the thread waits for a CPU: if on that CPU, the task that held
    /// it since the switch after is counted, and `before` held it up to `r`.
    fn held(&mut self, r: &Rec, before: i32) {
        if let Phase::Runnable {
            cpu,
            mark,
            held_by,
            holders,
        } = &mut self.phase
        {
            if *cpu == r.cpu {
                add_holder(holders, *held_by, mark.saturating_sub(r.ts));
                *mark = r.ts;
                *held_by = before;
            }
        }
    }

    /// The thread was switched in by `r`: before it, it waited for that CPU, held until
    /// then by `prev`.
    fn runnable_from(&mut self, r: &Rec, prev: i32) {
        self.phase = Phase::Runnable {
            cpu: r.cpu,
            mark: r.ts,
            held_by: prev,
            holders: Vec::new(),
        };
    }

    /// The thread went to sleep at `ts` (its stretch after, just closed) and came back with
    /// no wake-up seen: the wake-up may have come while it was still on its way off the
    /// CPU (the waker's event before the switch), which the walk meets next, going back.
    fn await_early_wake(&mut self, ts: u64) {
        let start = ts.max(self.window.0);
        let tid = self.cur.tid;
        let fits =
            |(s, c): &(Segment, Option<u32>)| c.is_none() && s.start == start && s.tid == tid;
        if !self.held.back().is_some_and(fits) {
            return;
        }
        let mut c = Cause::new(Ctx::Soft);
        (c.early, c.fixed) = (true, Some(self.no_wakeup_why()));
        let id = self.new_cause(c);
        if let Some(last) = self.held.back_mut() {
            last.1 = Some(id);
        }
        self.early = Some(id);
    }

    /// Ends the wait for an early wake-up: `woken` if it came.
    fn early_wake(&mut self, woken: bool) {
        if let Some(c) = self.early.take().and_then(|id| self.causes.get_mut(&id)) {
            c.early = false;
            c.keep = woken;
        }
    }

    fn no_wakeup_why(&self) -> String {
        if !self.has.waking && !self.has.wakeup {
            "woken, but the recording has no sched:sched_waking or sched:sched_wakeup to say by what".into()
        } else if self.lost.0 > 0 || self.lost.1 {
            "woken with no wake-up event seen (events were lost)".into()
        } else {
            "woken with no wake-up event seen".into()
        }
    }

    /// The thread, blocked before `r`, was woken by `r`.
    fn woken(&mut self, r: &Rec, new: bool) {
        let x = self.cur.tid;
        if new && x == self.root && self.stack.is_empty() {
            // The thread starts here.
            self.born = Some(r.ts);
            return;
        }
        let ctx = if r.flags & (FLAG_HARDIRQ | FLAG_NMI) != 0 {
            Some(Ctx::Hard)
        } else if r.flags & FLAG_SOFTIRQ != 0 {
            Some(Ctx::Soft)
        } else {
            None
        };
        match ctx {
            Some(ctx) => {
                let mut c = Cause::new(ctx);
                c.queued = !self.has.waking;
                (c.cpu, c.searching) = (r.cpu, true);
                let id = self.new_cause(c);
                let cpu = r.cpu as usize;
                if cpu >= self.pending.len() {
                    self.pending.resize(cpu + 1, Vec::new());
                }
                self.pending[cpu].push(id);
                self.pending_n += 1;
                self.phase = Phase::Blocked(id);
            }
            None => {
                let waker = r.pid;
                let fixed = if waker == 0 {
                    Some(match self.has.waking {
                        true => "woken from the idle task's context, not by a thread or an interrupt the recording names".to_string(),
                        false => "sched_wakeup was recorded on the woken task's CPU (a queued wake-up): record sched:sched_waking to name the waker".to_string(),
                    })
                } else if waker == x || self.on_stack.contains_key(&waker) {
                    Some(format!(
                        "woken by thread {waker}, already on this path: the events are inconsistent (lost?), the chain is cut here"
                    ))
                } else {
                    None
                };
                if let Some(why) = fixed {
                    let mut c = Cause::new(Ctx::Soft);
                    c.fixed = Some(why);
                    self.phase = Phase::Blocked(self.new_cause(c));
                    return;
                }
                // Follow the waker: it was running on this CPU when it woke the thread.
                self.on_stack.insert(x, self.stack.len());
                self.stack.push(self.cur);
                let node = self.hop(self.cur.node, waker);
                self.cur = Frame { tid: waker, node };
                self.phase = Phase::Running { cpu: r.cpu };
            }
        }
    }

    fn hop(&mut self, parent: u32, tid: i32) -> u32 {
        let n = self.hops.len() as u32;
        let id = *self.hop_ids.entry((parent, tid)).or_insert(n);
        if id == n {
            self.hops.push(Hop {
                parent: Some(parent),
                tid,
            });
        }
        id
    }

    /// Suspended frame `k` went to sleep at switch `r`: the frames followed since are
    /// done, and it ran before.
    fn resume(&mut self, k: usize, r: &Rec) {
        self.close(r.ts);
        let frame = self.stack[k];
        for f in self.stack.drain(k..) {
            self.on_stack.remove(&f.tid);
        }
        self.cur = frame;
        self.phase = Phase::Running { cpu: r.cpu };
    }

    /// An event on a CPU where an interrupt context that woke a thread is being named.
    fn context(&mut self, r: &Rec) {
        let cpu = r.cpu as usize;
        let Some(list) = self.pending.get_mut(cpu) else {
            return;
        };
        if list.is_empty() {
            return;
        }
        let mut i = 0;
        while i < list.len() {
            let id = list[i];
            let Some(c) = self.causes.get_mut(&id) else {
                list.swap_remove(i);
                self.pending_n -= 1;
                continue;
            };
            let inside = match c.ctx {
                Ctx::Hard => r.flags & (FLAG_HARDIRQ | FLAG_NMI) != 0,
                Ctx::Soft => r.flags & FLAG_SOFTIRQ != 0,
            } && !matches!(r.kind, Kind::Switch { .. });
            let mut done = !inside;
            if inside {
                match r.kind {
                    Kind::Rq {
                        role: Role::Complete,
                        rq,
                    } if c.rq.is_none() => {
                        c.rq = Some((rq, r.ts));
                        c.want = Want::Issue;
                        self.rq_issue.entry(rq_key(&rq)).or_default().push(id);
                    }
                    Kind::TimerExit => c.skip_timer += 1,
                    Kind::TimerEntry { function } => match c.skip_timer {
                        0 => {
                            c.timer.get_or_insert(function);
                        }
                        _ => c.skip_timer -= 1,
                    },
                    Kind::NetRx { dev } => {
                        c.net.get_or_insert(dev);
                    }
                    Kind::IrqExit if c.ctx == Ctx::Hard => c.skip_irq += 1,
                    Kind::IrqEntry { irq, name } if c.ctx == Ctx::Hard => match c.skip_irq {
                        0 => {
                            c.irq = Some((irq, name));
                            done = true;
                        }
                        _ => c.skip_irq -= 1,
                    },
                    Kind::SoftExit if c.ctx == Ctx::Soft => c.skip_soft += 1,
                    Kind::SoftEntry { vec } if c.ctx == Ctx::Soft => match c.skip_soft {
                        0 => {
                            c.vec = Some(vec);
                            done = true;
                        }
                        _ => c.skip_soft -= 1,
                    },
                    _ => {}
                }
            }
            if done {
                c.searching = false;
                list.swap_remove(i);
                self.pending_n -= 1;
            } else {
                i += 1;
            }
        }
    }

    /// A block request event while requests that woke threads wait for their issue and
    /// insert times.
    fn request(&mut self, role: Role, rq: &Rq, ts: u64) {
        let key = rq_key(rq);
        match role {
            Role::Issue => {
                // An earlier request's issue: those waiting for their insert had none
                // (issued straight to the device).
                for id in self.rq_insert.remove(&key).into_iter().flatten() {
                    if let Some(c) = self.causes.get_mut(&id) {
                        c.want = Want::Nothing;
                    }
                }
                if let Some(ids) = self.rq_issue.remove(&key) {
                    for &id in &ids {
                        if let Some(c) = self.causes.get_mut(&id) {
                            c.issue = Some(ts);
                            c.want = Want::Insert;
                        }
                    }
                    self.rq_insert.entry(key).or_default().extend(ids);
                }
            }
            Role::Insert => {
                for id in self.rq_insert.remove(&key).into_iter().flatten() {
                    if let Some(c) = self.causes.get_mut(&id) {
                        c.insert = Some(ts);
                        c.want = Want::Nothing;
                    }
                }
            }
            _ => {}
        }
    }

    /// The walk reached the window's start (or the recording's, or the thread's birth).
    fn finish(mut self, sink: &mut dyn Sink, names: &Naming<'_>) -> Finished {
        let start = self.born.unwrap_or(self.window.0).max(self.window.0);
        if matches!(self.phase, Phase::Start) {
            self.phase = Phase::Unknown("no scheduler event of the thread in the recording".into());
        }
        self.close(start);
        self.release(sink, names, true);
        Finished {
            start,
            // A thread that exited before the window has an empty path.
            end: self.window.1.max(start),
            hops: self.hops,
            lost: self.lost,
            seen_root: self.seen_root,
            loss_near_path: self.loss_near_path,
            forced: self.forced,
        }
    }
}

struct Finished {
    start: u64,
    end: u64,
    hops: Vec<Hop>,
    lost: (u64, bool),
    seen_root: bool,
    loss_near_path: u64,
    forced: u64,
}

/// What names a cause: the interned names, the vector names, the kernel's symbols.
struct Naming<'a> {
    bound: &'a Bound,
    ksyms: &'a kstate_symbols::ksyms::LazyKsyms,
}

fn add_holder(holders: &mut Vec<(i32, u64)>, tid: i32, ns: u64) {
    if ns == 0 {
        return;
    }
    match holders.iter_mut().find(|h| h.0 == tid) {
        Some(h) => h.1 += ns,
        None => holders.push((tid, ns)),
    }
}

/// What a cause makes of the stretch it ended.
fn decide(c: &Cause, names: &Naming<'_>) -> (State, Detail) {
    let (bound, ksyms, has) = (names.bound, names.ksyms, &names.bound.has);
    let unknown = |why: String| (State::Unknown, Detail::Unknown { why });
    if let Some(why) = &c.fixed {
        return unknown(why.clone());
    }
    let name = |i: u32| bound.names.get(i as usize).cloned().unwrap_or_default();
    let vec_name = |v: u32| {
        bound
            .vec_names
            .get(v as usize)
            .filter(|n| !n.is_empty())
            .cloned()
            .unwrap_or_else(|| format!("vec {v}"))
    };
    if let Some((rq, done)) = c.rq {
        return (
            State::Disk,
            Detail::Disk {
                dev: rq.dev,
                dir: rq.dir.letter(),
                sector: rq.sector,
                queue_ns: c.issue.zip(c.insert).map(|(i, q)| i.saturating_sub(q)),
                device_ns: c.issue.map(|i| done.saturating_sub(i)),
            },
        );
    }
    if let Some(f) = c.timer {
        return (
            State::Sleep,
            Detail::Timer {
                function: (f != 0).then(|| ksyms.name(f)).flatten(),
            },
        );
    }
    match c.ctx {
        Ctx::Soft => {
            let vec = c.vec.map(vec_name);
            let dev = c.net.map(name).filter(|d| !d.is_empty());
            match vec.as_deref() {
                Some("NET_RX") | Some("NET_TX") => (
                    State::Net,
                    Detail::Net {
                        vec: vec.unwrap_or_default(),
                        dev,
                    },
                ),
                Some("TIMER") | Some("HRTIMER") => (State::Sleep, Detail::Timer { function: None }),
                Some(_) if dev.is_some() => (
                    State::Net,
                    Detail::Net {
                        vec: vec.unwrap_or_default(),
                        dev,
                    },
                ),
                Some(v) => (State::Softirq, Detail::Softirq { vec: v.to_string() }),
                None if dev.is_some() => (
                    State::Net,
                    Detail::Net {
                        vec: String::new(),
                        dev,
                    },
                ),
                None => unknown(match has.softirq {
                    false => "woken in softirq context; the recording has no irq:softirq_entry/softirq_exit to name the vector (record -e why)".into(),
                    true => "woken in softirq context that began before the events the walk read".into(),
                }),
            }
        }
        Ctx::Hard => match c.irq {
            Some((irq, n)) => (
                State::Irq,
                Detail::Irq {
                    irq: irq as i64,
                    name: name(n),
                },
            ),
            None if c.queued => unknown(
                "sched_wakeup was recorded in interrupt context on the woken task's CPU (a queued wake-up, its waker not named): record sched:sched_waking".into(),
            ),
            None if !has.irq => unknown(
                "woken in hard-irq context; the recording has no irq:irq_handler_entry/exit (nor a timer or block event there) to name the interrupt (record -e why)".into(),
            ),
            None if !has.hrtimer => unknown(
                "woken in hard-irq context outside any irq handler the recording has (a timer or IPI vector): record timer:hrtimer_expire_entry to name timers".into(),
            ),
            None => unknown(
                "woken in hard-irq context by a system vector (IPI, local timer) that no recorded event names".into(),
            ),
        },
    }
}

/// The first and last event of the recording, where no page index tells them.
fn scan_span(trace: &Trace) -> Result<Option<(u64, u64)>, Error> {
    let mut m = Merger::new(trace, None, IdFilter::all())?;
    let mut span: Option<(u64, u64)> = None;
    loop {
        match m.step() {
            Ok(true) => {
                let ts = m.current_ts();
                span.get_or_insert((ts, ts)).1 = ts;
            }
            Ok(false) => break,
            Err(_) => continue,
        }
    }
    Ok(span)
}

/// The time of `tid`'s first scheduler event at or after `from`, if any.
fn probe(
    trace: &Trace,
    bound: &mut Bound,
    index: Option<&Arc<PageIndex>>,
    tid: i32,
    from: u64,
) -> Result<Option<u64>, Error> {
    let ids: Vec<u32> = bound.ids.clone();
    let filter = IdFilter::only(ids);
    let mut m = match index {
        Some(i) => Merger::indexed(trace, filter, i, Some(from))?,
        None => Merger::new(trace, None, filter)?,
    };
    loop {
        match m.step() {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(_) => continue,
        }
        let ev = m.current();
        if ev.ts < from {
            continue;
        }
        if let Some(r) = bound.decode(&ev, |_, _| {}) {
            let about = match r.kind {
                Kind::Switch { prev, next, .. } => prev == tid || next == tid,
                Kind::Wake { pid, .. } => pid == tid,
                _ => false,
            };
            if about {
                return Ok(Some(r.ts));
            }
        }
    }
}

pub(crate) fn run(trace: &Trace, q: &WalkQuery, sink: &mut dyn Sink) -> Result<Walked, Error> {
    let mut bound = Bound::bind(trace, q.span.as_ref())?;
    let index = PageIndex::build(trace).ok().map(Arc::new);
    let span = match index.as_ref().and_then(|i| i.event_span()) {
        Some(s) => Some(s),
        None => scan_span(trace)?,
    };
    let Some((first, last)) = span else {
        return Err(Error::Query(format!(
            "{}: the recording holds no events",
            trace.path.display()
        )));
    };
    let (a, b) = match &q.window {
        Some(w) => {
            let (a, b) = w.resolve(first);
            (a.max(first), b.min(last))
        }
        None => (first, last),
    };
    if a > b {
        return Err(Error::Query(format!(
            "the window lies outside the recording ({} .. {})",
            crate::filter::fmt_secs(first),
            crate::filter::fmt_secs(last)
        )));
    }
    let tid = who(trace, q, (a, b))?;
    let end = probe(trace, &mut bound, index.as_ref(), tid, b)?
        .unwrap_or(last)
        .max(b);
    let mut walker = Walker::new(tid, (a, b), end, bound.has);
    let mut back = Backward::new(
        trace,
        bound.ids.clone(),
        index,
        end,
        a.saturating_sub(LOOKBACK_NS),
    )?;
    let mut names = Names::default();
    let mut chunk = Vec::new();
    let mut inferred = 0;
    let ksyms = kstate_symbols::ksyms::LazyKsyms::new(trace.kallsyms.as_deref());
    while back.next(&mut bound, &mut |t, c| names.note(t, c), &mut chunk)? {
        names.end_chunk();
        inferred += infer_switch_ins(&mut chunk);
        let naming = Naming {
            bound: &bound,
            ksyms: &ksyms,
        };
        for r in chunk.iter().rev() {
            walker.event(r);
            if walker.held.len() >= RELEASE_AT {
                walker.release(sink, &naming, false);
            }
        }
        walker.release(sink, &naming, false);
        if walker.done() {
            break;
        }
    }
    let naming = Naming {
        bound: &bound,
        ksyms: &ksyms,
    };
    let f = walker.finish(sink, &naming);
    if !f.seen_root {
        return Err(Error::Query(format!(
            "thread {} has no scheduler event in {} (within the window)",
            tid,
            trace.path.display()
        )));
    }
    let mut notes = Vec::new();
    if inferred > 0 {
        notes.push(format!(
            "{inferred} switch-ins inferred: this kernel did not trace some switches (a CPU leaving idle, now and then one between two tasks); each is placed at the latest of the task's wake-up and the last sign of what the CPU ran before (an error of up to a tick)"
        ));
    }
    if back.held_whole {
        notes.push("this file's pages are not indexed (perf.data, Parquet): the walk held the window's events in memory".into());
    }
    if f.loss_near_path > 0 {
        notes.push(format!(
            "{} stretches next to lost events are unknown",
            f.loss_near_path
        ));
    }
    if f.forced > 0 {
        notes.push(format!(
            "{} interrupts or requests were named from the events read while {HOLD_MAX} segments waited on them (their queue or device time may be unknown)",
            f.forced
        ));
    }
    for e in &back.errors {
        notes.push(format!("damaged data: {e}"));
    }
    // Every thread's name, as sched_switch last gave it, else as the capture saved it
    // (bounded by the threads).
    let mut comms: FxMap<i32, String> = trace.comms.iter().map(|(&t, c)| (t, c.clone())).collect();
    for (t, c) in names.all {
        let n = c.iter().position(|&b| b == 0).unwrap_or(16);
        comms.insert(t, String::from_utf8_lossy(&c[..n]).into_owned());
    }
    Ok(Walked {
        tid,
        window: (f.start, f.end),
        trace_start: first,
        hops: f.hops,
        comms,
        lost: f.lost,
        events_read: back.read,
        notes,
    })
}

/// Task names from sched_switch: within a chunk the latest wins; a chunk keeps the
/// names that later chunks (read first) gave.
#[derive(Default)]
struct Names {
    all: FxMap<i32, [u8; 16]>,
    chunk: FxMap<i32, [u8; 16]>,
    /// The last name noted per slot (tid modulo its length): most switches repeat a few.
    recent: Vec<(i32, [u8; 16])>,
}

impl Names {
    #[inline]
    fn note(&mut self, tid: i32, c: &[u8]) {
        let mut n = [0u8; 16];
        let len = c.iter().position(|&b| b == 0).unwrap_or(c.len()).min(16);
        n[..len].copy_from_slice(&c[..len]);
        if self.recent.is_empty() {
            self.recent = vec![(-1, [0; 16]); 64];
        }
        let slot = &mut self.recent[tid as u32 as usize % 64];
        if *slot == (tid, n) {
            return;
        }
        *slot = (tid, n);
        self.chunk.insert(tid, n);
    }

    fn end_chunk(&mut self) {
        for (t, n) in self.chunk.drain() {
            self.all.entry(t).or_insert(n);
        }
        self.recent.clear();
    }
}

/// The thread `q.who` names in the window `(a, b)`.
fn who(trace: &Trace, q: &WalkQuery, (a, b): (u64, u64)) -> Result<i32, Error> {
    let (comm, pid, what) = match &q.who {
        super::Who::Tid(t) if *t > 0 => return Ok(*t),
        super::Who::Tid(t) => {
            return Err(Error::Query(format!(
                "--tid {t}: not a thread the path can follow (0 is the idle task)"
            )))
        }
        super::Who::Pid(p) => (None, Some(*p), format!("--pid {p}")),
        super::Who::Comm(c) => (Some(c.as_str()), None, format!("--comm {c}")),
    };
    let found = super::select::candidates(trace, &q.tgids, comm, pid, Some((a, b)))?;
    match found.as_slice() {
        [one] => Ok(one.tid),
        [] => Err(Error::Query(format!(
            "{what}: no such thread was switched in the window ({} .. {})",
            crate::filter::fmt_secs(a),
            crate::filter::fmt_secs(b)
        ))),
        many => {
            let list: Vec<String> = many
                .iter()
                .take(10)
                .map(|c| format!("{}-{} ({} switches)", c.comm, c.tid, c.switches))
                .collect();
            Err(Error::Query(format!(
                "{what} matches {} threads in the window: {}{}; choose one with --tid",
                many.len(),
                list.join(", "),
                if many.len() > 10 { ", ..." } else { "" }
            )))
        }
    }
}
