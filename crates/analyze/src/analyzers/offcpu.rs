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
//!
//! On several threads the recording is cut into time slices ([`crate::slices`]). A waker
//! a later slice has not seen named is named at the join as the slices before knew it,
//! and each slice's waker numbers are renumbered into the joined pass's
//! ([`Sliced::rekey`]).

use kstate_format::Trace;

use super::sched::{self, Switch, SwitchHead, Wakeup};
use crate::analyzer::{Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::{FxMap, FxSet};
use crate::pair::{Open, Pairs};
use crate::slices::Sliced;
use kstate_format::stream::merge::Event;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    State,
    Waker,
    Pid,
}

impl By {
    fn named(by: &str) -> By {
        match by {
            "waker" => By::Waker,
            "pid" => By::Pid,
            _ => By::State,
        }
    }
}

/// Who woke a task: the waker's name at the wake-up, or, in a time slice after the
/// first that has not seen the waker named yet, the name it had at the slice's start.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Waker {
    Name(String),
    Before(i32),
}

impl Waker {
    /// The name, `tasks` being the names known at the slice's start for `Before`.
    fn name(&self, tasks: &Tasks) -> String {
        match self {
            Waker::Name(name) => name.clone(),
            Waker::Before(pid) => tasks.comm(*pid),
        }
    }
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
    /// Wakers met, numbered from 0 in the order met.
    waker_ids: FxMap<Waker, u32>,
    wakers: Vec<Waker>,
    /// In a time slice after the first: each thread's first switch there, and the
    /// switches whose inference of a missed switch-in reads state from before it.
    heads: Option<Box<Heads>>,
}

/// A switch in a time slice after the first that meets state the slices before may hold,
/// for the join ([`Sliced::stitch`]).
#[derive(Debug, Clone, Copy)]
enum Head {
    /// `tid`'s first switch in the slice put it on `cpu` at `at`: it ends the time off
    /// the CPU the slices before left open, if they did.
    In { tid: i32, cpu: u32, at: u64 },
    /// A switch took `sw.prev` off `sw.cpu`, and whether the trace missed its switch-in
    /// there reads state from before the slice ([`sched::IdleExits::switch_in_slice`]).
    /// The time off the CPU open until this switch (`open`, the slice's own; at `prev`'s
    /// first switch in the slice, the one the slices before left) ends at that missed
    /// switch-in, or else is replaced by this switch's (unmatched).
    Out {
        sw: SwitchHead,
        open: Option<Open<Off>>,
    },
    /// The first wake-up in the slice of `tid`, before its first switch there and with
    /// no time off the CPU the slice saw begin: `waker` names the time the slices before
    /// left open, if its waker is not named yet.
    Woken { tid: i32, waker: u32 },
}

#[derive(Debug, Default)]
struct Heads {
    switched: sched::Switched,
    /// Threads with a [`Head::Woken`].
    woken: FxSet<i32>,
    heads: Vec<Head>,
}

impl Heads {
    /// [`sched::IdleExits::switch`] in the slice, recording what the join needs. What it
    /// cannot tell is left to the join, `prev`'s open time off the CPU taken along: the
    /// switch then ends none and replaces none (`None`).
    fn switch(
        &mut self,
        idle: &mut sched::IdleExits,
        pairs: &mut Pairs<i32, Off>,
        cpu: u32,
        prev: i32,
        next: i32,
        ts: u64,
    ) -> Option<u64> {
        let prev_first = prev != 0 && self.switched.first(prev);
        // `next` after `prev`: in a switch from a task to itself, the task's first switch
        // is its switch-out.
        if next != 0 && self.switched.first(next) {
            self.heads.push(Head::In {
                tid: next,
                cpu,
                at: ts,
            });
        }
        match idle.switch_in_slice(cpu, prev, next, ts, prev_first) {
            Ok(woke) => woke,
            Err(sw) => {
                let open = pairs.end(prev);
                self.heads.push(Head::Out { sw, open });
                None
            }
        }
    }
}

impl OffCpu {
    /// The key of waker task `tid` now: its name, or in a slice after the first that has
    /// not seen it named, the name it had before.
    fn waker(&mut self, tid: i32, out: &Out) -> u32 {
        let w = match self.heads.is_some() && !out.tasks.knows(tid) {
            true => Waker::Before(tid),
            false => Waker::Name(out.tasks.comm(tid)),
        };
        self.intern(w) + 1
    }

    /// The number of waker `w`, from 0.
    fn intern(&mut self, w: Waker) -> u32 {
        let n = self.wakers.len() as u32;
        let id = *self.waker_ids.entry(w.clone()).or_insert(n);
        if id == n {
            self.wakers.push(w);
        }
        id
    }

    /// `tid` went on `cpu` at `at` (now, or earlier for an inferred switch-in).
    fn switched_in(&mut self, tid: i32, cpu: u32, at: u64, out: &mut Out) {
        if let Some(o) = self.pairs.end(tid) {
            self.ended(tid, cpu, at, &o, out);
        }
    }

    /// The time off the CPU that began at `o` ended at `at` on `cpu`.
    fn ended(&self, tid: i32, cpu: u32, at: u64, o: &Open<Off>, out: &mut Out) {
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
        run: crate::slices::drive_sliced::<OffCpu>,
        live: Some(crate::analyzer::live::<OffCpu>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let Some(sw) = sched::switch(trace, &mut missing) else {
            return Err(Missing::events(missing));
        };
        let by = By::named(by);
        let mut wmissing = Vec::new();
        let wakeups = sched::wakeups(trace, &mut wmissing);
        if by == By::Waker && wakeups.is_empty() {
            return Err(Missing::events(wmissing));
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
                waker_ids: FxMap::default(),
                wakers: Vec::new(),
                heads: None,
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
            let woke = match &mut self.heads {
                None => self.idle.switch(ev.cpu, prev, next, ev.ts),
                Some(h) => h.switch(&mut self.idle, &mut self.pairs, ev.cpu, prev, next, ev.ts),
            };
            if let Some(woke) = woke {
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
            match self.pairs.get_mut(pid).map(|o| o.v.waker) {
                Some(0) => {
                    let waker = self.waker(ev.pid(), out);
                    self.pairs.get_mut(pid).expect("open").v.waker = waker;
                }
                Some(_) => {}
                None => {
                    // In a slice, the time off the CPU the slices before left open, if
                    // any, may wait for its waker.
                    let first = self
                        .heads
                        .as_mut()
                        .is_some_and(|h| !h.switched.seen(pid) && h.woken.insert(pid));
                    if first {
                        let waker = self.waker(ev.pid(), out);
                        let h = self.heads.as_mut().expect("in a slice");
                        h.heads.push(Head::Woken { tid: pid, waker });
                    }
                }
            }
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
                k => self.wakers[k as usize - 1].name(tasks),
            },
            By::Pid => tasks.label(key as u32 as i32),
        }
    }
}

impl Sliced for OffCpu {
    fn record_heads(&mut self) {
        self.heads = Some(Box::default());
    }

    fn rekey(&mut self, next: &mut Self, tasks: &Tasks) -> Option<Vec<u64>> {
        if self.by != By::Waker {
            return None;
        }
        let mut map = vec![0];
        for w in &next.wakers {
            map.push(self.intern(Waker::Name(w.name(tasks))) as u64 + 1);
        }
        // What `next` holds for the join is numbered as its aggregates are.
        let to = |w: &mut u32| *w = map[*w as usize] as u32;
        next.pairs.values_mut().for_each(|o| to(&mut o.v.waker));
        for head in next.heads.iter_mut().flat_map(|h| h.heads.iter_mut()) {
            match head {
                Head::Out { open: Some(o), .. } => to(&mut o.v.waker),
                Head::Woken { waker, .. } => to(waker),
                _ => {}
            }
        }
        Some(map)
    }

    fn stitch(&mut self, mut next: Self, out: &mut Out) {
        let heads = next.heads.take().map_or(Vec::new(), |h| h.heads);
        // Each thread's and each CPU's state from before the slice is met by its first
        // switch there; a thread's first wake-up comes before that switch.
        for head in heads {
            match head {
                Head::Woken { tid, waker } => {
                    if let Some(o) = self.pairs.get_mut(tid).filter(|o| o.v.waker == 0) {
                        o.v.waker = waker;
                    }
                }
                Head::In { tid, cpu, at } => {
                    self.idle.join_switch_in(tid);
                    self.switched_in(tid, cpu, at, out);
                }
                Head::Out { sw, open } => {
                    let open = match sw.first {
                        true => self.pairs.end(sw.prev),
                        false => open,
                    };
                    let woke = self.idle.join_switch(&sw);
                    match (open, woke) {
                        (Some(o), Some(at)) => self.ended(sw.prev, sw.cpu, at, &o, out),
                        (Some(_), None) => out.unmatched(),
                        (None, _) => {}
                    }
                }
            }
        }
        // What `next` holds open began in its slice, after its thread's first switch
        // there, which met what we held for the thread.
        for (tid, o) in next.pairs.take_all() {
            self.pairs.put(tid, o);
        }
        self.idle.join(next.idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzers::slice_check::{formats, random_run, slices_match_one_pass};

    #[test]
    fn slices_joined_are_one_pass() {
        let trace = formats();
        let (mut inferred, mut unmatched) = (0, 0);
        for seed in 0..60 {
            let recs = random_run(&trace, seed, 40, false);
            for by in ["state", "pid", "waker"] {
                let c = slices_match_one_pass::<OffCpu>(&trace, by, &recs, seed);
                inferred += c.inferred;
                unmatched += c.unmatched;
            }
        }
        // The runs met what the join must get right.
        assert!(inferred > 60 && unmatched > 300, "{inferred} {unmatched}");
    }
}
