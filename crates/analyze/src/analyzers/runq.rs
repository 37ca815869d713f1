//! `runq`: wake-up-to-run latency, and run-queue length per CPU.
//!
//! Events: sched:sched_switch and sched:sched_wakeup (sched_wakeup_new too where
//! recorded; sched_migrate_task keeps queue lengths right when tasks move).
//!
//! Latency pairs (the rules, exactly):
//! 1. sched_wakeup/sched_wakeup_new of task P at t starts a pair for P unless one is open
//!    (a second wake-up before P ran does not restart the clock).
//! 2. sched_switch out of P (P is prev) while P's pair is open drops the pair: P was woken
//!    while still on a CPU, so there was no wait to run.
//! 3. sched_switch in of P (P is next) at t' closes the pair: latency t' - t, on that CPU.
//! 4. A switch-in the kernel did not trace (a CPU leaving idle, see
//!    [`sched::IdleExits`]) drops the pair and counts as inferred: P ran from its wake-up.
//!
//! The latency is measured from sched_wakeup (the task is on a run queue), not from
//! sched_waking (the waker starts the wake-up; it adds the cross-CPU wake-up path) — the
//! same choice as perf sched latency and bcc's runqlat. sched_waking is not read.
//! Preempted tasks waiting to run again are counted in the queue length but are not
//! wake-up latencies.
//!
//! Run-queue length ("queued": tasks runnable on a CPU but not running there): +1 when a
//! task is woken onto the CPU (target_cpu) or switched out still runnable (preempted),
//! -1 when it is switched in; sched_migrate_task moves a queued task. Tasks already
//! queued when the trace starts are unknown, so lengths are lower bounds until every
//! queued task has run once. Reported per CPU as the time-weighted mean over the selected
//! time and the maximum, with the number of context switches (`--stat`); `--log` adds a
//! row per change (key `rq/cpuN`, value = new length).
//!
//! Key: the woken task (`--by pid`, `comm-pid`, default) or the CPU it ran on (`--by cpu`).
//!
//! A task runs on one CPU at a time: a switch of a task on one CPU ends its being the
//! task of another, where a switch the trace missed left it (else it would never be
//! queued again while that CPU's switches are missing).
//!
//! On several threads the recording is cut into time slices ([`crate::slices`]). A slice
//! after the first knows a task's queue from the task's first switch there on. What it
//! cannot tell alone (a task's first switch, its wake-ups and migrations before it, the
//! inference of a missed switch-in) it keeps as heads, in order; between two heads it
//! sums each CPU's queue changes by the tasks it knows, relative to the length before
//! them ([`Seg`]). The join replays heads and sums against the queues the slices before
//! left: lengths, their time-weighted mean and maximum come out as one pass's, and what
//! a slice keeps grows with its heads (its tasks' first switches), not its events.
//! `--by queued` keys each wait by a queue length known only at the join, so it runs one
//! pass fed by decoder threads.

use kstate_format::{Error, FieldRef, Trace};

use super::sched::{self, Switch, SwitchHead, Wakeup};
use crate::analyzer::{
    Analyzer, Cell, Config, Info, Kind, LogSink, Missing, Out, Outcome, Sample, Table, Tasks,
    Traits, Unit,
};
use crate::filter::TimeSel;
use crate::fxmap::FxMap;
use crate::pair::{Open, Pairs};
use crate::slices::Sliced;
use kstate_format::stream::merge::Event;

#[derive(Debug, Clone, Default)]
struct CpuRq {
    len: u64,
    since: u64,
    /// Integral of len over selected time, in task-ns.
    area: u128,
    max: u64,
    switches: u64,
    seen: bool,
}

struct Migrate {
    id: u32,
    pid: FieldRef,
    dest: FieldRef,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Pid,
    Cpu,
    /// LKST's schedrun view: latency against the run-queue length the task found.
    Queued,
}

impl By {
    fn named(by: &str) -> By {
        match by {
            "cpu" => By::Cpu,
            "queued" => By::Queued,
            _ => By::Pid,
        }
    }
}

/// Runs runq on `cfg.threads` threads: in time slices, except `--by queued` (its keys
/// are queue lengths known only at the join), which runs one pass fed by decoder threads.
fn run(trace: &Trace, cfg: &Config, log: &mut dyn LogSink) -> Result<Outcome, Error> {
    match By::named(cfg.by.as_deref().unwrap_or_default()) {
        By::Queued => crate::piped::drive_piped::<Runq>(trace, cfg, log),
        _ => crate::slices::drive_sliced::<Runq>(trace, cfg, log),
    }
}

pub struct Runq {
    by: By,
    sw: Switch,
    wakeups: Vec<Wakeup>,
    migrate: Option<Migrate>,
    states: sched::StateNames,
    /// Woken task -> tasks already queued on its CPU when it was woken.
    pairs: Pairs<i32, u64>,
    idle: sched::IdleExits,
    /// Runnable, not running: task -> CPU whose queue it is counted in.
    queued: FxMap<i32, u32>,
    /// Task running on each CPU (0: idle or unknown).
    current: Vec<i32>,
    rq: Vec<CpuRq>,
    first: Option<u64>,
    /// In a time slice after the first: what the join needs of it.
    heads: Option<Box<Heads>>,
}

/// A CPU's run-queue changes in a time slice between two heads, by tasks whose queue the
/// slice knows: what one pass's [`Runq::change_at`] makes of them, whatever the length
/// the queue had before (the join knows it).
#[derive(Debug, Clone, Copy, Default)]
struct Seg {
    changes: u32,
    /// Times of the first and last change.
    first: u64,
    last: u64,
    /// The length after each change, less the length before the first.
    rel: i64,
    /// The greatest `rel` after a change in the selected time, if any was.
    max: Option<i64>,
    /// Selected ns between the first and the last change, and `rel` times each stretch.
    span: u64,
    area: i128,
}

impl Seg {
    fn change(&mut self, up: bool, at: u64, sel: TimeSel) {
        let t = match self.changes {
            0 => {
                self.first = at;
                at
            }
            _ => {
                // As `change_at`: a change before the CPU's last is taken to happen then.
                let t = at.max(self.last);
                let ov = sel.overlap_ns(self.last, t);
                self.span += ov;
                self.area += self.rel as i128 * ov as i128;
                t
            }
        };
        self.rel += if up { 1 } else { -1 };
        self.last = t;
        self.changes += 1;
        if sel.contains(t) {
            self.max = Some(self.max.map_or(self.rel, |m| m.max(self.rel)));
        }
    }
}

/// What a time slice after the first cannot tell alone, in order.
#[derive(Debug, Clone, Copy)]
enum Head {
    /// `cpu`'s first switch in the slice: its task is the slice's own from here.
    Cpu(u32),
    /// A change of `cpu`'s queue at `at`, before the slice's last head: the CPU's last
    /// change may be the join's.
    Len { cpu: u32, up: bool, at: u64 },
    /// `tid`, whose queue the slice does not know, is queued onto `cpu` at `at` unless it
    /// is queued already or running where the slice has seen no switch yet.
    Join { tid: i32, cpu: u32, at: u64 },
    /// `tid`, whose queue the slice does not know, leaves it at `at`.
    Leave { tid: i32, at: u64 },
    /// `tid`, whose queue the slice does not know, moves to `dest` if queued.
    Migrate { tid: i32, dest: u32, at: u64 },
    /// `tid`'s first switch in the slice puts it on `cpu` at `at`: its wait ends (the
    /// slices before's if open, else `open`, the slice's own from a wake-up in it).
    In {
        tid: i32,
        cpu: u32,
        at: u64,
        open: Option<Open<u64>>,
    },
    /// A switch-out of `sw.prev` whose missed-switch-in inference reads state from
    /// before the slice: it leaves `queue` at that switch-in if there was one, else at
    /// `at`; at its first switch in the slice, the wait the slices before left open is
    /// dropped.
    Out {
        sw: SwitchHead,
        at: u64,
        queue: Queue,
    },
}

/// The queue a switched-out task leaves.
#[derive(Debug, Clone, Copy)]
enum Queue {
    None,
    /// This CPU's, known to the slice.
    Cpu(u32),
    /// Whichever the join holds it in.
    Join,
}

#[derive(Debug, Default)]
struct Heads {
    /// Tasks that have switched in the slice: their waits are its own.
    switched: sched::Switched,
    /// Tasks whose queue the slice knows (in `Runq::queued` or in none): from their
    /// first dequeue in the slice on.
    known: sched::Switched,
    /// CPUs that have switched in the slice.
    cpus: Vec<bool>,
    heads: Vec<Head>,
    /// The time of the last head's event: no head changes a queue later.
    last_head: u64,
    /// Per CPU, its changes since the last head; the CPUs with some.
    open: Vec<Seg>,
    dirty: Vec<u32>,
    /// Closed segments: each comes before `heads[.0]`, on CPU `.1`.
    segs: Vec<(usize, u32, Seg)>,
}

impl Heads {
    fn new(cpus: usize) -> Heads {
        Heads {
            cpus: vec![false; cpus],
            ..Heads::default()
        }
    }

    /// Adds `head`, met at `now`, after the changes so far.
    fn push(&mut self, head: Head, now: u64) {
        self.close();
        self.heads.push(head);
        self.last_head = self.last_head.max(now);
    }

    /// Closes the CPUs' open segments.
    fn close(&mut self) {
        for cpu in self.dirty.drain(..) {
            let seg = std::mem::take(&mut self.open[cpu as usize]);
            self.segs.push((self.heads.len(), cpu, seg));
        }
    }

    /// A change of `cpu`'s queue at `at`, by a task whose queue the slice knows.
    fn change(&mut self, cpu: u32, up: bool, at: u64, sel: TimeSel) {
        if at < self.last_head {
            // An inferred switch-in from before a head: whether the CPU's last change,
            // which it may not precede, was a head's is for the join to say.
            return self.push(Head::Len { cpu, up, at }, at);
        }
        let c = cpu as usize;
        if c >= self.open.len() {
            self.open.resize(c + 1, Seg::default());
        }
        if self.open[c].changes == 0 {
            self.dirty.push(cpu);
        }
        self.open[c].change(up, at, sel);
    }

    /// A switch from `prev` to `next` on `cpu`: [`sched::IdleExits::switch`] in the
    /// slice, leaving to the join what it cannot tell (`prev`'s queue with it). Returns
    /// the inferred switch-in of `prev` and whether this is `next`'s first switch in the
    /// slice.
    #[allow(clippy::too_many_arguments)]
    fn switch(
        &mut self,
        idle: &mut sched::IdleExits,
        queued: &mut FxMap<i32, u32>,
        pairs: &mut Pairs<i32, u64>,
        cpu: u32,
        prev: i32,
        next: i32,
        ts: u64,
    ) -> (Option<u64>, bool) {
        let c = cpu as usize;
        if c >= self.cpus.len() {
            self.cpus.resize(c + 1, false);
        }
        if !self.cpus[c] {
            self.cpus[c] = true;
            self.push(Head::Cpu(cpu), ts);
        }
        let prev_first = prev != 0 && self.switched.first(prev);
        // `next` after `prev`: in a switch from a task to itself, the task's first switch
        // is its switch-out.
        let next_first = next != 0 && self.switched.first(next);
        match idle.switch_in_slice(cpu, prev, next, ts, prev_first) {
            Ok(woke) => (woke, next_first),
            Err(sw) => {
                let queue = match self.known.first(prev) {
                    true => Queue::Join,
                    false => queued.remove(&prev).map_or(Queue::None, Queue::Cpu),
                };
                pairs.end(prev);
                self.push(Head::Out { sw, at: ts, queue }, ts);
                (None, next_first)
            }
        }
    }
}

const LEVEL_KEY: u64 = 1 << 40;

impl Runq {
    fn rq(&mut self, cpu: u32) -> &mut CpuRq {
        let c = cpu as usize;
        if c >= self.rq.len() {
            self.rq.resize(c + 1, CpuRq::default());
        }
        &mut self.rq[c]
    }

    /// Changes CPU `cpu`'s queue length by one now, because of task `tid`.
    fn change(&mut self, cpu: u32, up: bool, tid: i32, out: &mut Out) {
        self.change_at(cpu, up, tid, out.now(), out);
    }

    /// The same at `at`, which may lie before now (an inferred switch-in): a change
    /// before the CPU's last one is taken to happen at that last one.
    fn change_at(&mut self, cpu: u32, up: bool, tid: i32, at: u64, out: &mut Out) {
        if let Some(h) = &mut self.heads {
            return h.change(cpu, up, at, out.sel());
        }
        let sel = out.sel();
        let r = self.rq(cpu);
        let now = if r.seen { at.max(r.since) } else { at };
        if r.seen {
            r.area += r.len as u128 * sel.overlap_ns(r.since, now) as u128;
        }
        r.seen = true;
        r.since = now;
        if up {
            r.len += 1;
        } else {
            r.len = r.len.saturating_sub(1);
        }
        if sel.contains(now) {
            r.max = r.max.max(r.len);
        }
        let len = r.len;
        if out.is_log() {
            out.emit(Sample {
                start: now,
                value: len,
                key: LEVEL_KEY | cpu as u64,
                tid,
                cpu,
                flag: false,
                kind: Kind::Level,
            });
        }
    }

    fn enqueue(&mut self, tid: i32, cpu: u32, out: &mut Out) {
        if self.heads.is_some() {
            return self.enqueue_in_slice(tid, cpu, out);
        }
        if self.queued.contains_key(&tid) || self.current.contains(&tid) {
            return;
        }
        self.queued.insert(tid, cpu);
        self.change(cpu, true, tid, out);
    }

    /// [`Runq::enqueue`] in a time slice after the first, which knows the tasks of the
    /// CPUs it has seen switch, and the queues of the tasks it has seen leave one.
    fn enqueue_in_slice(&mut self, tid: i32, cpu: u32, out: &mut Out) {
        let h = self.heads.as_mut().expect("in a slice");
        let known = h.known.seen(tid);
        if (known && self.queued.contains_key(&tid)) || self.current.contains(&tid) {
            return;
        }
        if known {
            // It has switched in the slice, so it runs on no CPU the slice has not seen
            // switch.
            self.queued.insert(tid, cpu);
            return self.change(cpu, true, tid, out);
        }
        h.push(
            Head::Join {
                tid,
                cpu,
                at: out.now(),
            },
            out.now(),
        );
    }

    /// sched_migrate_task of `tid` to `dest` at `at`: moves it if it is queued.
    fn migrate(&mut self, tid: i32, dest: u32, at: u64, out: &mut Out) {
        if self.queued.contains_key(&tid) {
            self.dequeue_at(tid, at, out);
            self.queued.insert(tid, dest);
            self.change_at(dest, true, tid, at, out);
        }
    }

    fn dequeue(&mut self, tid: i32, out: &mut Out) {
        self.dequeue_at(tid, out.now(), out);
    }

    fn dequeue_at(&mut self, tid: i32, at: u64, out: &mut Out) {
        if let Some(h) = &mut self.heads {
            if h.known.first(tid) {
                return h.push(Head::Leave { tid, at }, out.now());
            }
        }
        if let Some(cpu) = self.queued.remove(&tid) {
            self.change_at(cpu, false, tid, at, out);
        }
    }
}

impl Analyzer for Runq {
    const INFO: Info = Info {
        name: "runq",
        about: "wake-up-to-run latency; run-queue length per CPU",
        needs: "sched:sched_switch + sched:sched_wakeup (sched_wakeup_new, sched_migrate_task used if present)",
        preset: "sched",
        by: &[
            ("pid", "woken task (comm-pid)"),
            ("cpu", "CPU the task ran on"),
            (
                "queued",
                "tasks already queued on the CPU at wake-up (LKST's schedrun view)",
            ),
        ],
        flag_column: None,
        value: "latency",
        unit: Unit::Ns,
        traits: Traits {
            level: "run-queue length",
            ..Traits::DEFAULT
        },
        run,
        live: Some(crate::analyzer::live::<Runq>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let sw = sched::switch(trace, &mut missing);
        let wakeups = sched::wakeups(trace, &mut missing);
        let Some(sw) = sw else {
            return Err(Missing::events(missing));
        };
        if wakeups.is_empty() {
            return Err(Missing::events(missing));
        }
        let migrate = trace.events.find("sched:sched_migrate_task").and_then(|e| {
            Some(Migrate {
                id: e.id,
                pid: e.field("pid")?.into(),
                dest: e.field("dest_cpu")?.into(),
            })
        });
        let states = trace
            .events
            .get(sw.id)
            .map(|e| sched::StateNames::from_print_fmt(&e.print_fmt))
            .expect("bound above");
        let mut ids = vec![sw.id];
        ids.extend(wakeups.iter().map(|w| w.id));
        ids.extend(migrate.as_ref().map(|m| m.id));
        Ok((
            Runq {
                by: By::named(by),
                sw,
                wakeups,
                migrate,
                states,
                pairs: Pairs::default(),
                idle: sched::IdleExits::default(),
                queued: FxMap::default(),
                current: vec![0; trace.cpu_count.max(1) as usize],
                rq: Vec::new(),
                first: None,
                heads: None,
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        self.first.get_or_insert(ev.ts);
        let (p, e) = (ev.payload, ev.endian);
        if ev.id == self.sw.id {
            let prev = self.sw.prev_pid.get_i64(p, e).unwrap_or(0) as i32;
            let next = self.sw.next_pid.get_i64(p, e).unwrap_or(0) as i32;
            let state = self.sw.prev_state.get_u64(p, e).unwrap_or(0);
            out.tasks.set_comm(prev, sched::bytes(p, self.sw.prev_comm));
            out.tasks.set_comm(next, sched::bytes(p, self.sw.next_comm));
            if out.sel().contains(ev.ts) {
                self.rq(ev.cpu).switches += 1;
            }
            let c = ev.cpu as usize;
            if c >= self.current.len() {
                self.current.resize(c + 1, 0);
            }
            // A task runs on one CPU at a time: switched here, it no longer runs where a
            // switch the trace missed left it (a CPU whose switches stopped being traced
            // would keep it running there and never queued again).
            for (i, t) in self.current.iter_mut().enumerate() {
                if *t != 0 && (*t == prev || *t == next) && i != c {
                    *t = 0;
                }
            }
            self.current[c] = next;
            let (woke, next_first) = match &mut self.heads {
                None => (self.idle.switch(ev.cpu, prev, next, ev.ts), false),
                Some(h) => h.switch(
                    &mut self.idle,
                    &mut self.queued,
                    &mut self.pairs,
                    ev.cpu,
                    prev,
                    next,
                    ev.ts,
                ),
            };
            if let Some(woke) = woke {
                // Ran on an idle CPU from its wake-up: no latency to measure (the
                // idle exit's is not in the trace), and no longer queued since then.
                self.pairs.end(prev);
                self.dequeue_at(prev, woke, out);
            }
            if prev != 0 {
                // Rule 2: woken while still on a CPU.
                self.pairs.end(prev);
                // It was running, so not queued, whatever a missed switch-in left behind.
                self.dequeue(prev, out);
                if self.states.is_runnable(state) {
                    self.enqueue(prev, ev.cpu, out);
                }
            }
            if next != 0 {
                self.dequeue(next, out);
                if let (true, Some(h)) = (next_first, &mut self.heads) {
                    let open = self.pairs.end(next);
                    h.push(
                        Head::In {
                            tid: next,
                            cpu: ev.cpu,
                            at: ev.ts,
                            open,
                        },
                        ev.ts,
                    );
                    return;
                }
                // Rule 3.
                if let Some(o) = self.pairs.end(next) {
                    self.waited(next, ev.cpu, ev.ts, &o, out);
                }
            }
            return;
        }
        if let Some(w) = self.wakeups.iter().find(|w| w.id == ev.id).copied() {
            let pid = w.pid.get_i64(p, e).unwrap_or(0) as i32;
            if pid == 0 {
                return;
            }
            out.tasks.set_comm(pid, sched::bytes(p, w.comm));
            let Some(target) = w.target(ev, out) else {
                return;
            };
            self.idle.wakeup(target, pid, ev.ts);
            // Rule 1.
            let ahead = self.rq(target).len;
            self.pairs.begin_first(pid, target, ahead, out);
            self.enqueue(pid, target, out);
            return;
        }
        if let Some(m) = &self.migrate {
            if ev.id == m.id {
                let pid = m.pid.get_i64(p, e).unwrap_or(0) as i32;
                let dest = m.dest.get_u64(p, e).unwrap_or(0);
                let Some(dest) = out.cpu_field("sched_migrate_task dest_cpu", dest) else {
                    return;
                };
                if let Some(h) = self.heads.as_mut().filter(|h| !h.known.seen(pid)) {
                    h.push(
                        Head::Migrate {
                            tid: pid,
                            dest,
                            at: ev.ts,
                        },
                        ev.ts,
                    );
                    return;
                }
                self.migrate(pid, dest, ev.ts, out);
            }
        }
    }

    fn finish(&mut self, out: &mut Out) -> u64 {
        out.counts.inferred = self.idle.inferred;
        let now = out.now();
        let sel = out.sel();
        for r in &mut self.rq {
            if r.seen {
                r.area += r.len as u128 * sel.overlap_ns(r.since, now) as u128;
                r.since = now;
            }
        }
        self.pairs.len() as u64
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        if key & LEVEL_KEY != 0 {
            format!("rq/cpu{}", key & !LEVEL_KEY)
        } else if self.by == By::Cpu {
            format!("cpu{key}")
        } else if self.by == By::Queued {
            format!("{key} queued")
        } else {
            tasks.label(key as u32 as i32)
        }
    }

    fn tables(&mut self, out: &Out) -> Vec<Table> {
        let span = self.first.map_or(0, |f| out.sel().overlap_ns(f, out.now()));
        self.table(span)
    }

    fn interval_tables(&mut self, out: &Out, end: u64) -> Vec<Table> {
        let sel = out.sel();
        for r in &mut self.rq {
            if r.seen && r.since < end {
                r.area += r.len as u128 * sel.overlap_ns(r.since, end) as u128;
                r.since = end;
            }
        }
        let span = self.first.map_or(0, |f| sel.overlap_ns(f, end));
        let tables = self.table(span);
        for r in &mut self.rq {
            r.area = 0;
            r.switches = 0;
            r.max = r.len;
        }
        self.first = Some(end);
        tables
    }
}

impl Runq {
    /// `tid`, woken at `o`, was switched in on `cpu` at `at`.
    fn waited(&self, tid: i32, cpu: u32, at: u64, o: &Open<u64>, out: &mut Out) {
        out.pair(
            o.mark,
            Sample {
                start: o.start,
                value: at.saturating_sub(o.start),
                key: match self.by {
                    By::Cpu => cpu as u64,
                    By::Queued => o.v,
                    By::Pid => tid as u32 as u64,
                },
                tid,
                cpu,
                flag: false,
                kind: Kind::Dur,
            },
        );
    }

    /// Whether `tid` is the task of a CPU that has not switched in the slice being
    /// joined (`cpus` says which have), as the slices before left it.
    fn running_where_unseen(&self, tid: i32, cpus: &[bool]) -> bool {
        self.current
            .iter()
            .zip(cpus)
            .any(|(&t, &seen)| t == tid && !seen)
    }

    /// Applies a later slice's changes of `cpu`'s queue between two heads: what
    /// [`Runq::change_at`] would make of each, from the length and last change we hold.
    fn replay(&mut self, cpu: u32, s: &Seg, sel: TimeSel) {
        let r = self.rq(cpu);
        let len = r.len as i128;
        if r.seen {
            // (Its first change is at or after the last we hold: a head's is no later.)
            r.area += r.len as u128 * sel.overlap_ns(r.since, s.first) as u128;
        }
        r.area = (r.area as i128 + len * s.span as i128 + s.area) as u128;
        if let Some(m) = s.max {
            r.max = r.max.max((len + m as i128) as u64);
        }
        r.len = (len + s.rel as i128) as u64;
        r.since = s.last;
        r.seen = true;
    }

    /// The run-queue table over `span` ns.
    fn table(&self, span: u64) -> Vec<Table> {
        let rows = self
            .rq
            .iter()
            .enumerate()
            .filter(|(_, r)| r.seen || r.switches > 0)
            .map(|(cpu, r)| {
                let avg = if span > 0 {
                    r.area as f64 / span as f64
                } else {
                    0.0
                };
                vec![
                    Cell::Int(cpu as u64),
                    Cell::Int(r.switches),
                    Cell::Float((avg * 1000.0).round() / 1000.0),
                    Cell::Int(r.max),
                ]
            })
            .collect();
        vec![Table {
            name: "runqueue",
            title: "run queue per CPU (queued = runnable, not running; lower bound at start)"
                .into(),
            columns: vec!["cpu", "switches", "avg_queued", "max_queued"],
            rows,
        }]
    }
}

impl Sliced for Runq {
    fn sliceable(&self) -> bool {
        self.by != By::Queued
    }

    fn record_heads(&mut self) {
        self.heads = Some(Box::new(Heads::new(self.current.len())));
    }

    fn stitch(&mut self, mut next: Self, out: &mut Out) {
        debug_assert!(self.heads.is_none() && self.by != By::Queued);
        let mut h = next.heads.take().expect("a later slice records its heads");
        h.close();
        let sel = out.sel();
        let mut cpus = vec![false; self.current.len()];
        let mut segs = h.segs.iter().peekable();
        for (i, &head) in h.heads.iter().enumerate() {
            while let Some((_, cpu, seg)) = segs.next_if(|s| s.0 == i) {
                self.replay(*cpu, seg, sel);
            }
            match head {
                Head::Cpu(c) => {
                    if let Some(k) = cpus.get_mut(c as usize) {
                        *k = true;
                    }
                }
                Head::Len { cpu, up, at } => self.change_at(cpu, up, 0, at, out),
                Head::Join { tid, cpu, at } => {
                    if !self.queued.contains_key(&tid) && !self.running_where_unseen(tid, &cpus) {
                        self.queued.insert(tid, cpu);
                        self.change_at(cpu, true, tid, at, out);
                    }
                }
                Head::Leave { tid, at } => self.dequeue_at(tid, at, out),
                Head::Migrate { tid, dest, at } => self.migrate(tid, dest, at, out),
                Head::In { tid, cpu, at, open } => {
                    self.idle.join_switch_in(tid);
                    // A wait the slices before left open began first.
                    if let Some(o) = self.pairs.end(tid).or(open) {
                        self.waited(tid, cpu, at, &o, out);
                    }
                }
                Head::Out { sw, at, queue } => {
                    let at = self.idle.join_switch(&sw).unwrap_or(at);
                    if sw.first {
                        self.pairs.end(sw.prev);
                    }
                    match queue {
                        Queue::None => {}
                        Queue::Cpu(c) => self.change_at(c, false, sw.prev, at, out),
                        Queue::Join => self.dequeue_at(sw.prev, at, out),
                    }
                }
            }
        }
        for (_, cpu, seg) in segs {
            self.replay(*cpu, seg, sel);
        }
        // The queues the slice knows at its end, the waits it began (what we held for
        // a task it saw switch was ended above; for the others, ours began first).
        self.queued.extend(next.queued.drain());
        for (tid, o) in next.pairs.take_all() {
            if !self.pairs.contains(tid) {
                self.pairs.put(tid, o);
            }
        }
        for t in self.current.iter_mut() {
            // A task the slice saw switch runs on no CPU it did not.
            if *t != 0 && h.switched.seen(*t) {
                *t = 0;
            }
        }
        for (c, _) in h.cpus.iter().enumerate().filter(|(_, &k)| k) {
            if c >= self.current.len() {
                self.current.resize(c + 1, 0);
            }
            self.current[c] = next.current[c];
        }
        for (c, r) in next.rq.iter().enumerate() {
            if r.switches > 0 {
                self.rq(c as u32).switches += r.switches;
            }
        }
        self.idle.join(next.idle);
        self.first = self.first.or(next.first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::Cell;
    use crate::analyzers::slice_check::{formats, random_run, rec, slices_match_one_pass, tables};

    #[test]
    fn a_task_switched_on_one_cpu_runs_on_no_other() {
        let trace = formats();
        let switch = |ts, cpu, prev: u64, next: u64| {
            let v = [
                ("prev_pid", prev),
                ("prev_comm", prev),
                ("prev_state", 1),
                ("next_pid", next),
                ("next_comm", next),
            ];
            rec(&trace, ts, cpu, "sched:sched_switch", prev as i32, &v)
        };
        let wakeup = |ts, cpu, pid: u64| {
            let v = [("pid", pid), ("comm", pid), ("target_cpu", cpu as u64)];
            rec(&trace, ts, cpu, "sched:sched_wakeup", 0, &v)
        };
        // Task 8 is put on CPU 1, whose later switches the trace lacks, and then runs,
        // sleeps and is woken on CPU 0: that wake-up queues it there.
        let recs = [
            switch(1_000, 1, 0, 8),
            switch(2_000, 0, 0, 8),
            switch(3_000, 0, 8, 0),
            wakeup(4_000, 0, 8),
            switch(6_000, 0, 0, 8),
        ];
        let t = &tables::<Runq>(&trace, "pid", &recs)[0];
        assert_eq!(t.columns[3], "max_queued");
        let cpu0 = t.rows.iter().find(|r| r[0] == Cell::Int(0)).unwrap();
        assert_eq!(cpu0[3], Cell::Int(1), "{t:?}");
    }

    #[test]
    fn slices_joined_are_one_pass() {
        let trace = formats();
        let mut inferred = 0;
        for seed in 0..60 {
            let recs = random_run(&trace, seed, 80, true);
            // The runs take 80 us; the window weighs only part of the queues' times.
            for by in ["pid", "cpu", "pid@0.00002:0.00005"] {
                let c = slices_match_one_pass::<Runq>(&trace, by, &recs, seed);
                inferred += c.inferred;
            }
        }
        // The runs met what the join must get right.
        assert!(inferred > 60, "{inferred}");
    }
}
