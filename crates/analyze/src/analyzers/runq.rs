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

use kstate_format::{FieldRef, Trace};

use super::sched::{self, Switch, Wakeup};
use crate::analyzer::{
    Analyzer, Cell, Info, Kind, Missing, Out, Sample, Table, Tasks, Traits, Unit,
};
use crate::fxmap::FxMap;
use crate::merge::Event;
use crate::pair::Pairs;

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
        if self.queued.contains_key(&tid) || self.current.contains(&tid) {
            return;
        }
        self.queued.insert(tid, cpu);
        self.change(cpu, true, tid, out);
    }

    fn dequeue(&mut self, tid: i32, out: &mut Out) {
        self.dequeue_at(tid, out.now(), out);
    }

    fn dequeue_at(&mut self, tid: i32, at: u64, out: &mut Out) {
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
        run: crate::piped::drive_piped::<Runq>,
        live: Some(crate::analyzer::live::<Runq>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let sw = sched::switch(trace, &mut missing);
        let wakeups = sched::wakeups(trace, &mut missing);
        let Some(sw) = sw else {
            return Err(Missing(missing));
        };
        if wakeups.is_empty() {
            return Err(Missing(missing));
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
                by: match by {
                    "cpu" => By::Cpu,
                    "queued" => By::Queued,
                    _ => By::Pid,
                },
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
            self.current[c] = next;
            if let Some(woke) = self.idle.switch(ev.cpu, prev, next, ev.ts) {
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
                // Rule 3.
                if let Some(o) = self.pairs.end(next) {
                    out.pair(
                        o.mark,
                        Sample {
                            start: o.start,
                            value: ev.ts.saturating_sub(o.start),
                            key: match self.by {
                                By::Cpu => ev.cpu as u64,
                                By::Queued => o.v,
                                By::Pid => next as u32 as u64,
                            },
                            tid: next,
                            cpu: ev.cpu,
                            flag: false,
                            kind: Kind::Dur,
                        },
                    );
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
                if self.queued.contains_key(&pid) {
                    self.dequeue(pid, out);
                    self.queued.insert(pid, dest);
                    self.change(dest, true, pid, out);
                }
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
