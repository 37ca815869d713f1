//! `microstate`: per thread, the share of its wall time in each state — the columns of
//! Solaris `prstat -mL` — from scheduler, system-call, futex and page-fault events.
//!
//! Record with `kstate record -e sched,syscall,futex -a ...` (add
//! `exceptions:page_fault_user` for TFL/DFL).
//!
//! States (every nanosecond of a thread's observed life is in exactly one):
//! - USR: on a CPU, not in a system call.
//! - SYS: on a CPU inside a system call (raw_syscalls:sys_enter..sys_exit, or the
//!   syscalls:sys_enter_*/sys_exit_* events where raw_syscalls are absent). A thread
//!   that goes to sleep outside any system call is in the kernel too: that on-CPU
//!   stretch counts as SYS.
//! - TFL / DFL: time in text / data page faults — a lower bound. exceptions:page_fault_user
//!   marks a fault's entry only; its end is not traced. Counted is a fault that slept:
//!   from its entry to the thread's switch-out in a sleeping state (with no system call
//!   or other event of the thread in between — it cannot have left the fault and slept
//!   without one), plus that sleep. Faults that did not sleep count 0 (their time is in
//!   USR). Text faults: error_code bit 4 (x86 instruction fetch) or address == ip.
//!   Without page-fault events TFL and DFL are 0, and sleeps in faults are SLP.
//! - LCK: asleep inside a futex wait (FUTEX_WAIT, WAIT_BITSET, LOCK_PI, LOCK_PI2,
//!   WAIT_REQUEUE_PI — futex.rs's decoding — from syscalls:sys_enter_futex, or
//!   raw_syscalls:sys_enter of futex with its op argument; futex_wait and futex_waitv
//!   always), from the switch-out to the wake-up.
//! - SLP: any other sleep (switched out in S, D, ...), from switch-out to wake-up.
//! - LAT: runnable but not running: from the wake-up (or a preemption) to the switch-in.
//!
//! Counts: VCX (switched out sleeping), ICX (switched out runnable: preempted), SCL
//! (system-call entries).
//!
//! A thread's observed life starts at its first event (its own event, a switch, a
//! wake-up) and ends at its last switch-out in state X or Z (it exited) or the end of the
//! trace; the shares add up to 100 % of it. Until a thread's first system-call event
//! tells which, a running stretch counts as USR (SYS if it goes to sleep). Spans that
//! straddle lost events are dropped (and counted); the shares are of the time kept.
//!
//! Output: a `microstate` table, one row per thread (shares in %, wall time in ns, the
//! counts), sorted by LCK, then wall time. The per-key rows are `comm-tid STATE`: each
//! continuous stretch in a state is one value (`--log`: one row per stretch, a state
//! timeline). With `--interval S`, values are instead the time in each state per
//! interval of S from the first event (`--log`: the time series, one row per thread,
//! state and interval, starting at the interval's start; a state absent from an
//! interval has no row). In interval mode, a running stretch whose kind is only known
//! later (a thread's first, or one after a page fault) is split at interval ends as USR.

use kstate_format::{FieldRef, Trace};

use super::futex::{family, Family};
use super::sched::{self, Switch, Wakeup};
use crate::analyzer::{
    Analyzer, Cell, Info, Kind, Missing, Out, Sample, Table, Tasks, Traits, Unit,
};
use crate::fxmap::FxMap;
use kstate_format::stream::merge::{Event, LossMark};

const USR: usize = 0;
const SYS: usize = 1;
const TFL: usize = 2;
const DFL: usize = 3;
const LCK: usize = 4;
const SLP: usize = 5;
const LAT: usize = 6;
const NSTATES: usize = 7;
const NAMES: [&str; NSTATES] = ["USR", "SYS", "TFL", "DFL", "LCK", "SLP", "LAT"];

/// x86 page-fault error code: the fault was an instruction fetch.
const PF_INSTR: u64 = 1 << 4;

/// What a running thread is doing, as far as the events told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Not known yet (no system-call event since it was first seen).
    Unknown,
    User,
    Sys,
    /// Entered a page fault (text or not) and nothing of it seen since.
    Fault {
        text: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Not seen yet, or exited.
    Nowhere,
    On,
    /// Runnable, waiting for a CPU.
    Ready,
    /// Asleep; the state it counts in (LCK, SLP, TFL, DFL).
    Off(usize),
}

#[derive(Debug, Clone)]
struct Th {
    at: At,
    mode: Mode,
    since: u64,
    mark: LossMark,
    cpu: u32,
    futex_wait: bool,
    acc: [u64; NSTATES],
    /// The current interval's share of `acc`.
    ival: [u64; NSTATES],
    vcx: u64,
    icx: u64,
    scl: u64,
}

impl Th {
    fn new() -> Th {
        Th {
            at: At::Nowhere,
            mode: Mode::Unknown,
            since: 0,
            mark: LossMark { gen: 0, open: 0 },
            cpu: 0,
            futex_wait: false,
            acc: [0; NSTATES],
            ival: [0; NSTATES],
            vcx: 0,
            icx: 0,
            scl: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    None,
    Switch,
    Wakeup(u8),
    /// raw_syscalls:sys_enter / sys_exit: the mode changes and SCL.
    RawEnter,
    RawExit,
    /// syscalls:sys_enter_NAME / sys_exit_NAME driving the mode (no raw_syscalls).
    /// `futex`: 0 not a futex call, 1 futex (look at op), 2 always a wait.
    Enter {
        futex: u8,
    },
    Exit {
        futex: bool,
    },
    /// syscalls:sys_enter_futex / sys_exit_futex next to raw_syscalls: the wait flag only.
    FutexEnter {
        always: bool,
    },
    FutexExit,
    Fault,
    /// task:task_newtask: which thread group a new thread joins.
    NewTask,
}

pub struct Microstate {
    sw: Switch,
    wakeups: Vec<Wakeup>,
    states: sched::StateNames,
    /// prev_state bits of an exited task (X, Z).
    dead: u64,
    roles: Vec<Role>,
    raw_nr: Option<FieldRef>,
    /// raw sys_enter's args[1] (futex op).
    raw_arg1: Option<FieldRef>,
    futex_op: Option<FieldRef>,
    /// futex, futex_waitv, futex_wait numbers (raw_syscalls).
    futex_nrs: [i64; 3],
    fault: Option<(FieldRef, FieldRef, FieldRef)>,
    /// task_newtask's pid and clone_flags.
    newtask: Option<(FieldRef, FieldRef)>,
    threads: FxMap<i32, Th>,
    interval: Option<u64>,
    ival_start: u64,
    started: bool,
    broken: u64,
    notes: Vec<String>,
    seen: Seen,
    idle: sched::IdleExits,
}

/// Events of each kind met, for the notes: a file can define events it holds none of.
#[derive(Debug, Default)]
struct Seen {
    wakeups: u64,
    raw: u64,
    sys: u64,
    futex: u64,
    faults: u64,
}

/// `--by thread` key: the thread and the state.
fn key(tid: i32, state: usize) -> u64 {
    ((tid as u32 as u64) << 3) | state as u64
}

impl Microstate {
    /// Counts `[th.since, to)` in `state` for thread `tid`, then moves `since` to `to`.
    fn charge(&mut self, tid: i32, state: usize, to: u64, out: &mut Out) {
        let interval = self.interval;
        let Some(th) = self.threads.get_mut(&tid) else {
            return;
        };
        let from = th.since;
        let ok = th.mark.open == 0 && th.mark == out.mark();
        th.since = to;
        th.mark = out.mark();
        let sel = out.sel();
        let ns = sel.overlap_ns(from, to);
        if !ok {
            if ns > 0 {
                self.broken += 1;
                out.counts.broken_by_loss += 1;
            }
            return;
        }
        if ns == 0 {
            return;
        }
        th.acc[state] += ns;
        if interval.is_some() {
            th.ival[state] += ns;
        } else {
            out.emit(Sample {
                start: from.max(sel.include.0),
                value: ns,
                key: key(tid, state),
                tid,
                cpu: th.cpu,
                flag: false,
                kind: Kind::Dur,
            });
        }
    }

    /// The state a running stretch that ends now counts in; `sleeping`: it ends with the
    /// thread going to sleep.
    fn running_state(mode: Mode, sleeping: bool) -> usize {
        match mode {
            Mode::Sys => SYS,
            Mode::Fault { text } if sleeping => {
                if text {
                    TFL
                } else {
                    DFL
                }
            }
            // Asleep without a system call: in the kernel all the same.
            Mode::User | Mode::Unknown if sleeping => SYS,
            _ => USR,
        }
    }

    /// Closes whatever the thread was doing up to now (as if it kept doing it).
    fn close(&mut self, tid: i32, now: u64, out: &mut Out) {
        let Some(th) = self.threads.get(&tid) else {
            return;
        };
        let state = match th.at {
            At::Nowhere => return,
            At::On => Self::running_state(th.mode, false),
            At::Ready => LAT,
            At::Off(s) => s,
        };
        self.charge(tid, state, now, out);
    }

    fn thread(&mut self, tid: i32, out: &Out) -> &mut Th {
        let now = out.now();
        let mark = out.mark();
        let th = self.threads.entry(tid).or_insert_with(Th::new);
        if th.at == At::Nowhere {
            th.since = now;
            th.mark = mark;
        }
        th
    }

    /// `tid` ran on `cpu` from its wake-up at `woke`, though no switch-in was traced
    /// ([`sched::IdleExits`]): its wait ends there, not at its first own event.
    fn inferred_switch_in(&mut self, tid: i32, woke: u64, out: &mut Out) {
        let Some(th) = self.threads.get(&tid) else {
            return;
        };
        if matches!(th.at, At::Ready | At::Off(_)) {
            let at = woke.max(th.since);
            self.close(tid, at, out);
            if let Some(th) = self.threads.get_mut(&tid) {
                th.at = At::On;
            }
        }
    }

    /// An event the thread itself made: it is running now.
    fn own(&mut self, tid: i32, cpu: u32, out: &mut Out) {
        if let Some(woke) = self.idle.running(cpu, tid) {
            self.inferred_switch_in(tid, woke, out);
        }
        let now = out.now();
        let th = self.thread(tid, out);
        th.cpu = cpu;
        match th.at {
            At::On => {}
            At::Nowhere => th.at = At::On,
            // A switch-in was lost: close the wait, run from now.
            At::Ready | At::Off(_) => {
                self.close(tid, now, out);
                if let Some(th) = self.threads.get_mut(&tid) {
                    th.at = At::On;
                }
            }
        }
    }

    /// The running thread changes mode now (system call entry or exit, fault).
    fn set_mode(&mut self, tid: i32, cpu: u32, to: Mode, out: &mut Out) {
        self.own(tid, cpu, out);
        let now = out.now();
        let Some(th) = self.threads.get(&tid) else {
            return;
        };
        let state = match (th.mode, to) {
            // An exit ends a system call, whatever was believed.
            (_, Mode::User) => SYS,
            (Mode::Sys, _) => SYS,
            _ => USR,
        };
        self.charge(tid, state, now, out);
        if let Some(th) = self.threads.get_mut(&tid) {
            th.mode = to;
        }
    }

    fn sys_enter(&mut self, tid: i32, cpu: u32, futex_wait: bool, out: &mut Out) {
        self.set_mode(tid, cpu, Mode::Sys, out);
        let counted = out.sel().contains(out.now());
        if let Some(th) = self.threads.get_mut(&tid) {
            th.futex_wait = futex_wait;
            if counted {
                th.scl += 1;
            }
        }
    }

    fn sys_exit(&mut self, tid: i32, cpu: u32, out: &mut Out) {
        self.set_mode(tid, cpu, Mode::User, out);
        if let Some(th) = self.threads.get_mut(&tid) {
            th.futex_wait = false;
        }
    }

    fn switch(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        let prev = self.sw.prev_pid.get_i64(p, e).unwrap_or(0) as i32;
        let next = self.sw.next_pid.get_i64(p, e).unwrap_or(0) as i32;
        let state = self.sw.prev_state.get_u64(p, e).unwrap_or(0);
        out.tasks.set_comm(prev, sched::bytes(p, self.sw.prev_comm));
        out.tasks.set_comm(next, sched::bytes(p, self.sw.next_comm));
        let now = ev.ts;
        let counted = out.sel().contains(now);
        if let Some(woke) = self.idle.switch(ev.cpu, prev, next, ev.ts) {
            self.inferred_switch_in(prev, woke, out);
        }
        if prev != 0 {
            self.own(prev, ev.cpu, out);
            let th = &self.threads[&prev];
            let mode = th.mode;
            let futex_wait = th.futex_wait;
            if self.states.is_runnable(state) {
                self.charge(prev, Self::running_state(mode, false), now, out);
                let th = self.threads.get_mut(&prev).expect("seen above");
                th.at = At::Ready;
                if counted {
                    th.icx += 1;
                }
            } else {
                self.charge(prev, Self::running_state(mode, true), now, out);
                let th = self.threads.get_mut(&prev).expect("seen above");
                if state & self.dead != 0 {
                    // Exited: its observed life ends here.
                    th.at = At::Nowhere;
                    th.mode = Mode::Unknown;
                    th.futex_wait = false;
                } else {
                    th.at = At::Off(match mode {
                        Mode::Sys if futex_wait => LCK,
                        Mode::Fault { text: true } => TFL,
                        Mode::Fault { text: false } => DFL,
                        _ => SLP,
                    });
                    if counted {
                        th.vcx += 1;
                    }
                }
            }
        }
        if next != 0 {
            let th = self.thread(next, out);
            th.cpu = ev.cpu;
            if th.at != At::On {
                self.close(next, now, out);
                let th = self.threads.get_mut(&next).expect("inserted above");
                th.at = At::On;
            }
        }
    }

    fn wakeup(&mut self, pid: i32, cpu: u32, out: &mut Out) {
        if pid == 0 {
            return;
        }
        let now = out.now();
        let th = self.thread(pid, out);
        match th.at {
            At::Nowhere => {
                th.at = At::Ready;
                th.cpu = cpu;
            }
            At::Off(_) => {
                self.close(pid, now, out);
                let th = self.threads.get_mut(&pid).expect("seen above");
                th.at = At::Ready;
            }
            // Woken while still running (about to sleep), or already runnable.
            At::On | At::Ready => {}
        }
    }

    /// Ends the intervals that end at or before `now`.
    fn intervals_to(&mut self, now: u64, out: &mut Out) {
        let Some(step) = self.interval else {
            return;
        };
        while now >= self.ival_start + step {
            let end = self.ival_start + step;
            self.end_interval(end, out);
        }
    }

    /// Splits every thread's current stretch at `end` and emits the interval's values.
    fn end_interval(&mut self, end: u64, out: &mut Out) {
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.close(tid, end, out);
            let Some(th) = self.threads.get_mut(&tid) else {
                continue;
            };
            let (cpu, vals) = (th.cpu, std::mem::take(&mut th.ival));
            for (s, &v) in vals.iter().enumerate() {
                if v > 0 {
                    out.emit(Sample {
                        start: self.ival_start,
                        value: v,
                        key: key(tid, s),
                        tid,
                        cpu,
                        flag: false,
                        kind: Kind::Dur,
                    });
                }
            }
        }
        self.ival_start = end;
    }
}

impl Analyzer for Microstate {
    const INFO: Info = Info {
        name: "microstate",
        about: "per-thread microstates (prstat -mL): USR SYS TFL DFL LCK SLP LAT, VCX ICX SCL",
        needs: "sched:sched_switch + sched:sched_wakeup, raw_syscalls (or syscalls:*), syscalls:sys_enter_futex (exceptions:page_fault_user for TFL/DFL)",
        preset: "sched,syscall,futex",
        by: &[(
            "thread",
            "comm-tid and state; the microstate table has one row per thread",
        )],
        flag_column: None,
        value: "time in state",
        unit: Unit::Ns,
        traits: Traits {
            per_interval: true,
            ..Traits::DEFAULT
        },
        run: crate::piped::drive_piped::<Microstate>,
        live: Some(crate::analyzer::live::<Microstate>),
    };

    fn bind(trace: &Trace, _by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let Some(sw) = sched::switch(trace, &mut missing) else {
            return Err(Missing::events(missing));
        };
        let wakeups = sched::wakeups(trace, &mut Vec::new());
        let states = trace
            .events
            .get(sw.id)
            .map(|e| sched::StateNames::from_print_fmt(&e.print_fmt))
            .expect("bound above");
        let dead = states
            .flags
            .iter()
            .filter(|(_, n)| n == "X" || n == "Z")
            .fold(0, |m, (v, _)| m | v);
        let mut roles = vec![Role::None; trace.events.id_limit()];
        let mut ids = vec![sw.id];
        roles[sw.id as usize] = Role::Switch;
        for (i, w) in wakeups.iter().enumerate() {
            roles[w.id as usize] = Role::Wakeup(i as u8);
            ids.push(w.id);
        }
        // System calls: raw_syscalls, else the per-call events.
        let (mut raw_nr, mut raw_arg1) = (None, None);
        let raw = (
            trace.events.find("raw_syscalls:sys_enter"),
            trace.events.find("raw_syscalls:sys_exit"),
        );
        let x86_64 = match &trace.uname {
            Some(u) => u.contains("x86_64"),
            None => cfg!(target_arch = "x86_64"),
        };
        let nr_of = |name: &str| -> i64 {
            if !x86_64 {
                return -1;
            }
            super::syscall_x86_64::X86_64
                .iter()
                .position(|n| *n == name)
                .map_or(-1, |i| i as i64)
        };
        let futex_nrs = [nr_of("futex"), nr_of("futex_waitv"), nr_of("futex_wait")];
        if let (Some(en), Some(ex)) = raw {
            if let Some(id) = en.field("id") {
                roles[en.id as usize] = Role::RawEnter;
                roles[ex.id as usize] = Role::RawExit;
                ids.extend([en.id, ex.id]);
                raw_nr = Some(FieldRef::from(id));
                raw_arg1 = en.field("args").map(|a| FieldRef {
                    offset: a.offset as u32 + 8,
                    size: 8,
                    signed: false,
                });
            }
        }
        let mut futex_op = None;
        let raw_bound = raw_nr.is_some();
        for ev in trace.events.iter().filter(|e| e.system == "syscalls") {
            if let Some(name) = ev.name.strip_prefix("sys_enter_") {
                let futex = match name {
                    "futex" => 1,
                    "futex_wait" | "futex_waitv" => 2,
                    _ => 0,
                };
                if futex == 1 {
                    futex_op = ev.field("op").map(FieldRef::from);
                    if futex_op.is_none() {
                        continue;
                    }
                }
                if raw_bound {
                    if futex > 0 {
                        roles[ev.id as usize] = Role::FutexEnter { always: futex == 2 };
                        ids.push(ev.id);
                    }
                } else {
                    roles[ev.id as usize] = Role::Enter { futex };
                    ids.push(ev.id);
                }
            } else if let Some(name) = ev.name.strip_prefix("sys_exit_") {
                let futex = matches!(name, "futex" | "futex_wait" | "futex_waitv");
                if raw_bound {
                    if futex {
                        roles[ev.id as usize] = Role::FutexExit;
                        ids.push(ev.id);
                    }
                } else {
                    roles[ev.id as usize] = Role::Exit { futex };
                    ids.push(ev.id);
                }
            }
        }
        let fault = trace
            .events
            .find("exceptions:page_fault_user")
            .and_then(|e| {
                let f = |n: &str| e.field(n).map(FieldRef::from);
                let r = (f("address")?, f("ip")?, f("error_code")?);
                roles[e.id as usize] = Role::Fault;
                ids.push(e.id);
                Some(r)
            });
        let newtask = trace.events.find("task:task_newtask").and_then(|e| {
            let r = (e.field("pid")?.into(), e.field("clone_flags")?.into());
            roles[e.id as usize] = Role::NewTask;
            ids.push(e.id);
            Some(r)
        });
        Ok((
            Microstate {
                sw,
                wakeups,
                states,
                dead,
                roles,
                raw_nr,
                raw_arg1,
                futex_op,
                futex_nrs,
                fault,
                newtask,
                threads: FxMap::default(),
                interval: None,
                ival_start: 0,
                started: false,
                broken: 0,
                notes: Vec::new(),
                seen: Seen::default(),
                idle: sched::IdleExits::default(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        if !self.started {
            self.started = true;
            self.interval = out.interval();
            self.ival_start = ev.ts;
        }
        self.intervals_to(ev.ts, out);
        let (p, e) = (ev.payload, ev.endian);
        let tid = ev.pid();
        let Some(&role) = self.roles.get(ev.id as usize) else {
            return;
        };
        // Any event made by a task in process context says it is running; an interrupt
        // (hard or soft) runs on whoever is current, which is running too.
        match role {
            Role::None => {}
            Role::Switch => self.switch(ev, out),
            Role::Wakeup(i) => {
                let w = self.wakeups[i as usize];
                let pid = w.pid.get_i64(p, e).unwrap_or(0) as i32;
                out.tasks.set_comm(pid, sched::bytes(p, w.comm));
                self.seen.wakeups += 1;
                let Some(target) = w.target(ev, out) else {
                    return;
                };
                self.idle.wakeup(target, pid, ev.ts);
                self.wakeup(pid, ev.cpu, out);
            }
            _ if tid == 0 => {}
            Role::RawEnter => {
                let nr = self.raw_nr.and_then(|f| f.get_i64(p, e)).unwrap_or(-1);
                self.seen.raw += 1;
                if nr >= 0 && self.futex_nrs.contains(&nr) {
                    self.seen.futex += 1;
                }
                let wait = if nr < 0 {
                    false
                } else if nr == self.futex_nrs[0] {
                    self.raw_arg1
                        .and_then(|f| f.get_u64(p, e))
                        .is_some_and(|op| family(op) == Some(Family::Wait))
                } else {
                    nr == self.futex_nrs[1] || nr == self.futex_nrs[2]
                };
                self.sys_enter(tid, ev.cpu, wait, out);
            }
            Role::RawExit | Role::Exit { .. } => self.sys_exit(tid, ev.cpu, out),
            Role::Enter { futex } => {
                self.seen.sys += 1;
                self.seen.futex += (futex > 0) as u64;
                let wait = match futex {
                    1 => self
                        .futex_op
                        .and_then(|f| f.get_u64(p, e))
                        .is_some_and(|op| family(op) == Some(Family::Wait)),
                    2 => true,
                    _ => false,
                };
                self.sys_enter(tid, ev.cpu, wait, out);
            }
            Role::FutexEnter { always } => {
                self.seen.futex += 1;
                // Next to raw_syscalls: the raw entry already changed the mode.
                let wait = always
                    || self
                        .futex_op
                        .and_then(|f| f.get_u64(p, e))
                        .is_some_and(|op| family(op) == Some(Family::Wait));
                self.own(tid, ev.cpu, out);
                if let Some(th) = self.threads.get_mut(&tid) {
                    th.futex_wait |= wait;
                }
            }
            Role::FutexExit => {
                if let Some(th) = self.threads.get_mut(&tid) {
                    th.futex_wait = false;
                }
            }
            Role::NewTask => {
                // The event runs in the parent.
                let Some((pid, flags)) = self.newtask else {
                    return;
                };
                let child = pid.get_i64(p, e).unwrap_or(0) as i32;
                let flags = flags.get_u64(p, e).unwrap_or(0);
                out.tasks.new_task(tid, child, flags);
            }
            Role::Fault => {
                let Some((addr, ip, code)) = self.fault else {
                    return;
                };
                self.seen.faults += 1;
                let (a, i, c) = (addr.get_u64(p, e), ip.get_u64(p, e), code.get_u64(p, e));
                let text = c.unwrap_or(0) & PF_INSTR != 0 || (a.is_some() && a == i);
                self.set_mode(tid, ev.cpu, Mode::Fault { text }, out);
            }
        }
    }

    fn finish(&mut self, out: &mut Out) -> u64 {
        out.counts.inferred = self.idle.inferred;
        let now = out.now();
        if self.interval.is_some() {
            self.intervals_to(now, out);
            self.end_interval(now, out);
        } else {
            let tids: Vec<i32> = self.threads.keys().copied().collect();
            for tid in tids {
                self.close(tid, now, out);
            }
        }
        let seen = &self.seen;
        let mut notes = Vec::new();
        if seen.wakeups == 0 {
            notes.push("no sched:sched_wakeup events: sleeps last until the switch-in, and LAT holds only preemptions".to_string());
        }
        if seen.raw + seen.sys == 0 {
            notes.push("no system-call events (record -e syscall): SCL is 0 and SYS holds only the on-CPU time before sleeps".to_string());
        } else if seen.raw == 0 {
            notes.push("no raw_syscalls events: SYS and SCL cover only the system calls whose syscalls:* events were recorded".to_string());
        }
        if seen.futex == 0 {
            notes.push("no futex calls seen (record -e futex or -e syscall): LCK is 0 and lock waits would be SLP".to_string());
        }
        if seen.faults == 0 {
            notes.push("no exceptions:page_fault_user events: TFL and DFL are 0 and sleeps in page faults count as SLP (record -e exceptions:page_fault_user)".to_string());
        } else {
            notes.push("TFL/DFL are lower bounds: a page fault's end is not traced, so only faults that slept count, from entry to wake-up".to_string());
        }
        self.notes.extend(notes);
        if self.broken > 0 {
            self.notes.push(format!(
                "{} state stretches spanning lost events were dropped; those threads' shares cover the rest",
                self.broken
            ));
        }
        0
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        let tid = (key >> 3) as u32 as i32;
        format!("{} {}", tasks.label(tid), NAMES[(key & 7) as usize])
    }

    fn tables(&mut self, out: &Out) -> Vec<Table> {
        let mut rows: Vec<(i32, &Th, u64)> = self
            .threads
            .iter()
            .map(|(&tid, th)| (tid, th, th.acc.iter().sum::<u64>()))
            .filter(|(tid, _, wall)| *wall > 0 && out.selects_task(*tid))
            .collect();
        // By LCK share (as prstat -s lck), then wall time.
        let lck = |th: &Th, wall: u64| th.acc[LCK] as f64 / wall as f64;
        rows.sort_by(|a, b| {
            lck(b.1, b.2)
                .total_cmp(&lck(a.1, a.2))
                .then(b.2.cmp(&a.2))
                .then(a.0.cmp(&b.0))
        });
        let pct =
            |v: u64, wall: u64| Cell::Float((v as f64 * 10000.0 / wall as f64).round() / 100.0);
        let rows = rows
            .into_iter()
            .map(|(tid, th, wall)| {
                let mut r = vec![
                    Cell::Int(tid as u32 as u64),
                    Cell::Text(out.tasks.tgid(tid).map_or("-".into(), |g| g.to_string())),
                    Cell::Text(out.tasks.comm(tid)),
                    Cell::Int(wall),
                ];
                r.extend(th.acc.iter().map(|&v| pct(v, wall)));
                r.extend([Cell::Int(th.vcx), Cell::Int(th.icx), Cell::Int(th.scl)]);
                r
            })
            .collect();
        vec![Table {
            name: "microstate",
            title: "microstates per thread, % of its observed time (prstat -mL), by LCK share"
                .into(),
            columns: vec![
                "tid", "pid", "comm", "wall_ns", "usr", "sys", "tfl", "dfl", "lck", "slp", "lat",
                "vcx", "icx", "scl",
            ],
            rows,
        }]
    }

    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let k = key(1234, LCK);
        assert_eq!((k >> 3) as i32, 1234);
        assert_eq!(NAMES[(k & 7) as usize], "LCK");
        assert_eq!(key(i32::MAX, LAT) >> 3, i32::MAX as u64);
    }

    #[test]
    fn running_states() {
        use Mode::*;
        assert_eq!(Microstate::running_state(User, false), USR);
        assert_eq!(Microstate::running_state(Sys, false), SYS);
        assert_eq!(Microstate::running_state(Sys, true), SYS);
        assert_eq!(Microstate::running_state(User, true), SYS);
        assert_eq!(Microstate::running_state(Fault { text: true }, true), TFL);
        assert_eq!(Microstate::running_state(Fault { text: false }, true), DFL);
        assert_eq!(Microstate::running_state(Fault { text: false }, false), USR);
        assert_eq!(Microstate::running_state(Unknown, false), USR);
    }
}
