//! `offcpu`: time tasks spend off a CPU, from the sched_switch that takes them off to the
//! sched_switch that puts them back.
//!
//! Events: sched:sched_switch (sched:sched_wakeup, where recorded, names the waker).
//! Key: the state the task left in (`--by state`, default: `S` sleeping, `D`
//! uninterruptible, `R+`/`R` preempted, ... as trace-cmd prints prev_state, decoded with
//! the kernel's own print format), the comm of the task that woke it (`--by waker`;
//! `-` when no wake-up was seen, e.g. preempted tasks), or the task (`--by pid`).
//! The first wake-up after a task went off CPU names the waker (the task running
//! sched_wakeup, i.e. its common_pid).
//! Where the kernel did not trace a CPU leaving idle, the task's time off the CPU ends
//! at the wake-up that put it on that idle CPU ([`sched::IdleExits`]).

use kstate_format::Trace;

use super::sched::{self, Switch, Wakeup};
use crate::analyzer::{Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::merge::Event;
use crate::pair::Pairs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    State,
    Waker,
    Pid,
}

#[derive(Debug, Clone, Copy)]
struct Off {
    state: u64,
    /// Interned waker comm + 1; 0 = none seen.
    waker: u32,
}

pub struct OffCpu {
    by: By,
    sw: Switch,
    wakeups: Vec<Wakeup>,
    states: sched::StateNames,
    pairs: Pairs<i32, Off>,
    idle: sched::IdleExits,
    wakers: FxMap<String, u32>,
    waker_names: Vec<String>,
}

impl OffCpu {
    /// `tid` went on `cpu` at `at` (now, or earlier for an inferred switch-in).
    fn switched_in(&mut self, tid: i32, cpu: u32, at: u64, out: &mut Out) {
        let Some(o) = self.pairs.end(tid) else {
            return;
        };
        let key = match self.by {
            By::State => o.v.state,
            By::Waker => o.v.waker as u64,
            By::Pid => tid as u32 as u64,
        };
        out.pair(
            o.mark,
            Sample {
                start: o.start,
                value: at.saturating_sub(o.start),
                key,
                tid,
                cpu,
                flag: false,
                kind: Kind::Dur,
            },
        );
    }
}

impl Analyzer for OffCpu {
    const INFO: Info = Info {
        name: "offcpu",
        about: "off-CPU (wait) time by the state the task left in, or by its waker",
        needs: "sched:sched_switch (sched:sched_wakeup for --by waker)",
        preset: "sched",
        by: &[
            ("state", "state at switch-out: S, D, R+, ..."),
            ("waker", "comm of the task that woke it"),
            ("pid", "the waiting task (comm-pid)"),
        ],
        flag_column: None,
        value: "off-CPU time",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<OffCpu>,
        live: Some(crate::analyzer::live::<OffCpu>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let Some(sw) = sched::switch(trace, &mut missing) else {
            return Err(Missing(missing));
        };
        let by = match by {
            "waker" => By::Waker,
            "pid" => By::Pid,
            _ => By::State,
        };
        let mut wmissing = Vec::new();
        let wakeups = sched::wakeups(trace, &mut wmissing);
        if by == By::Waker && wakeups.is_empty() {
            return Err(Missing(wmissing));
        }
        let states = trace
            .events
            .get(sw.id)
            .map(|e| sched::StateNames::from_print_fmt(&e.print_fmt))
            .expect("bound above");
        let mut ids = vec![sw.id];
        ids.extend(wakeups.iter().map(|w| w.id));
        Ok((
            OffCpu {
                by,
                sw,
                wakeups,
                states,
                pairs: Pairs::default(),
                idle: sched::IdleExits::default(),
                wakers: FxMap::default(),
                waker_names: Vec::new(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        if ev.id == self.sw.id {
            let prev = self.sw.prev_pid.get_i64(p, e).unwrap_or(0) as i32;
            let next = self.sw.next_pid.get_i64(p, e).unwrap_or(0) as i32;
            let state = self.sw.prev_state.get_u64(p, e).unwrap_or(0) & self.states.key_bits();
            out.tasks.set_comm(prev, sched::bytes(p, self.sw.prev_comm));
            out.tasks.set_comm(next, sched::bytes(p, self.sw.next_comm));
            if let Some(woke) = self.idle.switch(ev.cpu, prev, next, ev.ts) {
                self.switched_in(prev, ev.cpu, woke, out);
            }
            if prev != 0 {
                self.pairs.begin(prev, ev.cpu, Off { state, waker: 0 }, out);
            }
            if next != 0 {
                self.switched_in(next, ev.cpu, ev.ts, out);
            }
            return;
        }
        if let Some(w) = self.wakeups.iter().find(|w| w.id == ev.id).copied() {
            let pid = w.pid.get_i64(p, e).unwrap_or(0) as i32;
            out.tasks.set_comm(pid, sched::bytes(p, w.comm));
            let Some(target) = w.target(ev, out) else {
                return;
            };
            self.idle.wakeup(target, pid, ev.ts);
            if self.by != By::Waker {
                return;
            }
            let Some(o) = self.pairs.get_mut(pid) else {
                return;
            };
            if o.v.waker != 0 {
                return;
            }
            let name = out.tasks.comm(ev.pid());
            let n = self.waker_names.len() as u32;
            let id = *self.wakers.entry(name.clone()).or_insert(n);
            if id == n {
                self.waker_names.push(name);
            }
            o.v.waker = id + 1;
        }
    }

    fn finish(&mut self, out: &mut Out) -> u64 {
        out.counts.inferred = self.idle.inferred;
        self.pairs.len() as u64
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        match self.by {
            By::State => self.states.name(key),
            By::Waker => match key {
                0 => "-".into(),
                k => self.waker_names[k as usize - 1].clone(),
            },
            By::Pid => tasks.label(key as u32 as i32),
        }
    }
}
