//! Classification of a recording as CPU-busy, I/O-bound, lock-contention or other (the
//! three kinds of the seeds' OS-layer study), from [`Figures`] gathered in one pass.
//!
//! Figures (T = the time the recording covers, or the command's life from its first
//! context switch to its last when scoped to its threads; N = CPUs):
//! - CPU busy: time CPUs ran something other than the idle task, / (T x N);
//! - lock wait: kernel lock contention (contention_begin..end) plus futex wait calls
//!   (FUTEX_WAIT, WAIT_BITSET, LOCK_PI) of 10 ms or less, summed over threads, / (T x N);
//! - I/O wait: time threads slept in D state outside a kernel lock contention, / (T x N);
//! - CPU demand: on-CPU time plus time preempted and waiting for a CPU, / T;
//! - disk busy: time at least one block request was in flight, / T.
//!
//! [`verdict`] applies the rules (first match wins): lock-contention, I/O-bound, CPU-busy,
//! other; `kstate classify --help` states them with their thresholds.

use std::collections::{HashMap, HashSet};

use kstate_format::value::FieldRef;
use kstate_format::{Error, ErrorKind, Trace};

use kstate_analyze::analyzers::sched::IdleExits;
use kstate_format::stream::merge::{IdFilter, Merger};

#[cfg(target_arch = "aarch64")]
const NR_FUTEX: u64 = 98;
#[cfg(not(target_arch = "aarch64"))]
const NR_FUTEX: u64 = 202;
/// Futex waits longer than this are not counted as lock waits.
const FUTEX_MAX_NS: u64 = 10_000_000;

/// The figures a verdict is drawn from (ns, except the shares).
#[derive(Debug, Default, Clone)]
pub struct Figures {
    /// The time the figures cover: the command's life when scoped, else the recording's.
    pub span_ns: u64,
    /// The time the recording covers (first to last event).
    pub system_span_ns: u64,
    /// CPUs the recording covers.
    pub cpus: u32,
    /// Time any CPU ran something other than the idle task, summed over CPUs.
    pub busy_ns: u64,
    /// On-CPU time of the workload's threads (when scoped).
    pub wl_busy_ns: u64,
    /// Time the workload's threads were runnable but waiting for a CPU (preempted).
    pub wl_runq_ns: u64,
    /// Waits and CPU counted for the recorded command's threads only.
    pub scoped: bool,
    /// Kernel lock contention (contention_begin..end), summed over threads.
    pub kernel_lock_ns: u64,
    /// Futex waits of at most 10 ms, summed over threads.
    pub futex_ns: u64,
    /// Futex waits over 10 ms (idle threads), left out of `futex_ns`.
    pub futex_long: u64,
    /// D-state sleep outside a kernel lock contention, summed over threads.
    pub io_wait_ns: u64,
    /// D-state sleep inside a kernel lock contention.
    pub lock_d_ns: u64,
    /// Time at least one block request was in flight.
    pub disk_busy_ns: u64,
    /// Requests in flight integrated over time (ns x requests).
    pub disk_depth_ns: u64,
    /// Block requests issued.
    pub requests: u64,
    /// The most contended kernel lock: (address, flags, ns waited).
    pub top_lock: Option<(u64, u64, u64)>,
    /// The recording has lock:contention_begin/end.
    pub have_lock: bool,
    /// The recording has block:block_rq_issue/complete.
    pub have_block: bool,
    /// The recording has raw_syscalls:sys_enter/exit.
    pub have_syscalls: bool,
}

impl Figures {
    fn cap(&self) -> f64 {
        (self.span_ns as f64 * self.cpus.max(1) as f64).max(1.0)
    }
    fn cpu_ns(&self) -> u64 {
        if self.scoped {
            self.wl_busy_ns
        } else {
            self.busy_ns
        }
    }
    /// CPU busy: share of T x N.
    pub fn cpu(&self) -> f64 {
        self.cpu_ns() as f64 / self.cap()
    }
    /// CPU busy in CPUs' worth (/ T).
    pub fn cpus_worth(&self) -> f64 {
        self.cpu_ns() as f64 / (self.span_ns as f64).max(1.0)
    }
    /// On-CPU plus waiting-for-a-CPU time, in CPUs' worth (the command's, when scoped).
    pub fn demand(&self) -> f64 {
        self.cpu_ns().saturating_add(self.wl_runq_ns) as f64 / (self.span_ns as f64).max(1.0)
    }
    /// The whole system's CPU busy over the whole recording.
    pub fn system_cpu(&self) -> f64 {
        self.busy_ns as f64 / (self.system_span_ns as f64 * self.cpus.max(1) as f64).max(1.0)
    }
    /// Lock wait (kernel locks and short futex waits): share of T x N.
    pub fn lock(&self) -> f64 {
        self.kernel_lock_ns.saturating_add(self.futex_ns) as f64 / self.cap()
    }
    /// I/O wait: share of T x N.
    pub fn io(&self) -> f64 {
        self.io_wait_ns as f64 / self.cap()
    }
    /// Disk busy: share of T.
    pub fn disk(&self) -> f64 {
        self.disk_busy_ns as f64 / (self.span_ns as f64).max(1.0)
    }
    /// Mean requests in flight.
    pub fn depth(&self) -> f64 {
        self.disk_depth_ns as f64 / (self.span_ns as f64).max(1.0)
    }
}

fn lock_kind(flags: u64) -> &'static str {
    if flags & 32 != 0 {
        "mutex"
    } else if flags & 1 != 0 {
        if flags & 6 != 0 {
            "rwlock"
        } else {
            "spinlock"
        }
    } else if flags & 6 != 0 {
        "rwsem"
    } else {
        "lock"
    }
}

/// The verdict ("lock-contention", "I/O-bound", "CPU-busy" or "other") and the
/// evidence line that names the figures which decided it.
pub fn verdict(f: &Figures) -> (&'static str, String) {
    let pct = |x: f64| format!("{:.0} %", x * 100.0);
    let lock_ev = || {
        let mut s = format!(
            "lock waits {} of CPU time (kernel locks {}, futex {}; {} futex waits over 10 ms left out as idle)",
            pct(f.lock()),
            pct(f.kernel_lock_ns as f64 / f.cap()),
            pct(f.futex_ns as f64 / f.cap()),
            f.futex_long
        );
        if let Some((addr, flags, ns)) = f.top_lock {
            s += &format!(
                "; top kernel lock {addr:#x} ({}) {:.3} s",
                lock_kind(flags),
                ns as f64 / 1e9
            );
        }
        s
    };
    let io_ev = || {
        format!(
            "I/O wait {} of CPU time (threads in D state outside locks), disk busy {} of the time, {:.1} requests in flight on average, {} requests",
            pct(f.io()),
            pct(f.disk()),
            f.depth(),
            f.requests
        )
    };
    let cpu_ev = || {
        if f.scoped {
            format!(
                "CPU busy {} ({:.2} of {} CPUs) by the command, +{:.2} CPUs' worth waiting for a CPU, {} for the whole system",
                pct(f.cpu()),
                f.cpus_worth(),
                f.cpus,
                f.wl_runq_ns as f64 / (f.span_ns as f64).max(1.0),
                pct(f.system_cpu())
            )
        } else {
            format!(
                "CPU busy {} ({:.2} of {} CPUs)",
                pct(f.cpu()),
                f.cpus_worth(),
                f.cpus
            )
        }
    };
    if f.lock() >= 0.20 && f.lock() >= f.io() {
        ("lock-contention", format!("{}; {}", lock_ev(), cpu_ev()))
    } else if f.io() >= 0.20 && f.cpu() < 0.70 && f.disk() >= 0.30 {
        ("I/O-bound", format!("{}; {}", io_ev(), cpu_ev()))
    } else if f.cpu() >= 0.50 || f.demand() >= 0.6 {
        (
            "CPU-busy",
            format!(
                "{}; lock waits {}, I/O wait {}",
                cpu_ev(),
                pct(f.lock()),
                pct(f.io())
            ),
        )
    } else {
        let why = if f.io() >= 0.20 {
            "threads wait in D state but the disk is not busy"
        } else {
            "mostly idle or sleeping"
        };
        (
            "other",
            format!(
                "{why}: {}; lock waits {}; I/O wait {}, disk busy {}",
                cpu_ev(),
                pct(f.lock()),
                pct(f.io()),
                pct(f.disk())
            ),
        )
    }
}

/// Adds a span to a total. Times come from the file: a damaged one may be anywhere, and
/// a total that cannot grow further is still the truest figure left.
fn add(total: &mut u64, d: u64) {
    *total = total.saturating_add(d);
}

/// The trace has no sched_switch: never recorded, or (where the file is damaged) hidden
/// by the damage, which is named then, the damage to sched_switch's own format first.
fn no_switches(trace: &Trace) -> Error {
    const SWITCH: &str = "sched:sched_switch";
    let damage = trace
        .damage()
        .find(|e| e.event.as_deref() == Some(SWITCH))
        .or_else(|| trace.damage().next());
    let kind = ErrorKind::NotApplicable {
        analyzer: "classify",
    };
    let msg = match damage {
        Some(e) => format!(
            "classify needs {SWITCH} but this trace has none; the file is damaged, which may hide them: {e}"
        ),
        None => format!("classify needs {SWITCH} (record -e perf)"),
    };
    Error::new(kind, None, msg)
}

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, None, msg)
}

/// Who is on each CPU since when, from context switches, and from every other event's
/// `common_pid` (the task running on that CPU when the event was written). The second
/// source matters: a VM's CPU can leave idle without a recorded sched_switch (seen on this
/// project's CI, where a 500 ms spin pinned to a CPU showed 320 ms on it), and then the
/// task's own events are the first sign that it runs.
/// Where the task was woken onto that CPU, it ran from the wake-up
/// ([`IdleExits`], as the sched analyzers count it); otherwise from its first event.
#[derive(Default)]
struct OnCpu {
    /// Per CPU: the task on it (0: idle) and since when; absent: not known yet.
    cpus: HashMap<u32, (i32, u64)>,
    idle: IdleExits,
    busy_ns: u64,
    wl_busy_ns: u64,
}

impl OnCpu {
    /// Ends the current occupant's stretch on `cpu` at `ts`.
    fn close(&mut self, cpu: u32, ts: u64, wl: impl Fn(i32) -> bool) {
        if let Some((pid, since)) = self.cpus.remove(&cpu) {
            if pid != 0 {
                add(&mut self.busy_ns, ts.saturating_sub(since));
                if wl(pid) {
                    add(&mut self.wl_busy_ns, ts.saturating_sub(since));
                }
            }
        }
    }

    fn wakeup(&mut self, cpu: u32, pid: i32, ts: u64) {
        self.idle.wakeup(cpu, pid, ts);
    }

    /// A traced switch. Returns when `prev` began to run, if its switch-in was missed.
    fn switch(
        &mut self,
        cpu: u32,
        ts: u64,
        prev: i32,
        next: i32,
        wl: impl Fn(i32) -> bool,
    ) -> Option<u64> {
        // `prev` ran until now even when its switch-in was missed.
        let woke = self.idle.switch(cpu, prev, next, ts);
        let missed = self.cpus.get(&cpu).is_none_or(|c| c.0 != prev);
        let began = missed.then(|| self.start(cpu, woke.unwrap_or(ts), prev, &wl));
        self.close(cpu, ts, &wl);
        self.cpus.insert(cpu, (next, ts));
        began
    }

    /// An event written on `cpu` at `ts` by `pid`: if another task was thought to be on
    /// that CPU, a switch was missed, and `pid` runs from its wake-up or from here; returns
    /// when, then.
    fn seen(&mut self, cpu: u32, ts: u64, pid: i32, wl: impl Fn(i32) -> bool) -> Option<u64> {
        if self.cpus.get(&cpu).is_some_and(|c| c.0 == pid) {
            return None;
        }
        let woke = self.idle.running(cpu, pid);
        Some(self.start(cpu, woke.unwrap_or(ts), pid, &wl))
    }

    /// `pid` is on `cpu` from `at` (not before the current occupant came); returns when.
    fn start(&mut self, cpu: u32, at: u64, pid: i32, wl: impl Fn(i32) -> bool) -> u64 {
        let at = self.cpus.get(&cpu).map_or(at, |c| at.max(c.1));
        self.close(cpu, at, &wl);
        self.cpus.insert(cpu, (pid, at));
        at
    }

    /// Counts what is still open up to `last`: (busy, workload busy).
    fn finish(mut self, last: u64, wl: impl Fn(i32) -> bool) -> (u64, u64) {
        let cpus: Vec<u32> = self.cpus.keys().copied().collect();
        for cpu in cpus {
            self.close(cpu, last, &wl);
        }
        (self.busy_ns, self.wl_busy_ns)
    }
}

/// One pass over the trace; with `scope`, waits and workload CPU count only those threads.
pub fn figures(trace: &Trace, scope: Option<&HashSet<i32>>) -> Result<Figures, Error> {
    let ours = |tid: i32| scope.is_none_or(|s| s.contains(&tid));
    // The workload's threads when scoped; nothing otherwise (no workload CPU to count).
    let ours_only = |tid: i32| scope.is_some_and(|s| s.contains(&tid));
    let ev = |s: &str| trace.events.find(s);
    let sw = ev("sched:sched_switch").ok_or_else(|| no_switches(trace))?;
    let fr = |e: &kstate_format::event_format::EventFormat, n: &str| -> Result<FieldRef, Error> {
        e.field(n)
            .map(FieldRef::from)
            .ok_or_else(|| bad(format!("{}:{} lacks field {n}", e.system, e.name)))
    };
    let (prev_pid, prev_state, next_pid) = (
        fr(sw, "prev_pid")?,
        fr(sw, "prev_state")?,
        fr(sw, "next_pid")?,
    );
    let lb = ev("lock:contention_begin");
    let le = ev("lock:contention_end");
    let lock = match (lb, le) {
        (Some(b), Some(e)) => Some((b.id, e.id, fr(b, "lock_addr")?, fr(b, "flags")?)),
        _ => None,
    };
    let issue = ev("block:block_rq_issue");
    let complete = ev("block:block_rq_complete");
    let block = match (issue, complete) {
        (Some(i), Some(c)) => Some((
            i.id,
            c.id,
            fr(i, "dev")?,
            fr(i, "sector")?,
            fr(c, "dev")?,
            fr(c, "sector")?,
        )),
        _ => None,
    };
    let se = ev("raw_syscalls:sys_enter");
    let sx = ev("raw_syscalls:sys_exit");
    let sys = match (se, sx) {
        (Some(a), Some(b)) => {
            let args = a
                .field("args")
                .ok_or_else(|| bad("raw_syscalls:sys_enter lacks args"))?;
            let op = FieldRef {
                offset: args.offset as u32 + trace.long_size as u32,
                size: trace.long_size as u8,
                signed: false,
            };
            Some((a.id, b.id, fr(a, "id")?, op, fr(b, "id")?))
        }
        _ => None,
    };
    // Wake-ups date a switch-in the kernel did not trace (see [`OnCpu`]).
    let wakes: Vec<(u32, FieldRef)> = ["sched:sched_wakeup", "sched:sched_wakeup_new"]
        .into_iter()
        .filter_map(ev)
        .map(|e| Ok((e.id, fr(e, "pid")?)))
        .collect::<Result<_, Error>>()?;
    let mut ids = vec![sw.id];
    ids.extend(wakes.iter().map(|w| w.0));
    if let Some(l) = &lock {
        ids.extend([l.0, l.1]);
    }
    if let Some(b) = &block {
        ids.extend([b.0, b.1]);
    }
    if let Some(s) = &sys {
        ids.extend([s.0, s.1]);
    }
    let mut f = Figures {
        cpus: trace.cpu_count,
        have_lock: lock.is_some(),
        have_block: block.is_some(),
        have_syscalls: sys.is_some(),
        scoped: scope.is_some(),
        ..Figures::default()
    };
    let mut m = Merger::new(trace, None, IdFilter::only(ids))?;
    let (mut first, mut last) = (None::<u64>, 0u64);
    let mut on_cpu = OnCpu::default();
    // Workload threads switched out while runnable (preempted), since when.
    let mut runq: HashMap<i32, u64> = HashMap::new();
    // First and last context switch of a workload thread: its lifetime.
    let mut wl_span = (None::<u64>, 0u64);
    // Per thread: D-state sleep start, and whether inside a lock contention then.
    let mut dsleep: HashMap<i32, (u64, bool)> = HashMap::new();
    let mut in_lock: HashMap<i32, (u64, u64, u64)> = HashMap::new();
    let mut lock_tot: HashMap<(u64, u64), u64> = HashMap::new();
    let mut futex: HashMap<i32, u64> = HashMap::new();
    let mut inflight: HashMap<(u64, u64), ()> = HashMap::new();
    let mut depth_since = 0u64;
    while let Some(e) = m.next()? {
        let ts = e.ts;
        first.get_or_insert(ts);
        last = ts;
        let pl = e.payload;
        let en = e.endian;
        // A task seen running with no traced switch-in ended its wait when it began.
        let mut resumed = |pid: i32, at: u64| {
            if let Some((start, locked)) = dsleep.remove(&pid) {
                let d = at.saturating_sub(start);
                match locked {
                    true => add(&mut f.lock_d_ns, d),
                    false => add(&mut f.io_wait_ns, d),
                }
            }
            if let Some(since) = runq.remove(&pid) {
                add(&mut f.wl_runq_ns, at.saturating_sub(since));
            }
        };
        if e.id != sw.id {
            if let Some(at) = on_cpu.seen(e.cpu, ts, e.pid(), ours_only) {
                resumed(e.pid(), at);
            }
        }
        if let Some((_, pid)) = wakes.iter().find(|w| w.0 == e.id) {
            let pid = pid.get_i64(pl, en).unwrap_or(0) as i32;
            on_cpu.wakeup(e.cpu, pid, ts);
            continue;
        }
        if e.id == sw.id {
            let prev = prev_pid.get_i64(pl, en).unwrap_or(0) as i32;
            let next = next_pid.get_i64(pl, en).unwrap_or(0) as i32;
            let state = prev_state.get_u64(pl, en).unwrap_or(0);
            if let Some(at) = on_cpu.switch(e.cpu, ts, prev, next, ours_only) {
                resumed(prev, at);
            }
            if scope.is_some_and(|s| s.contains(&next) || s.contains(&prev)) {
                wl_span.0.get_or_insert(ts);
                wl_span.1 = ts;
            }
            if scope.is_some_and(|s| s.contains(&prev)) && state & 0xff == 0 {
                runq.insert(prev, ts);
            }
            if let Some(since) = runq.remove(&next) {
                add(&mut f.wl_runq_ns, ts.saturating_sub(since));
            }
            if prev != 0 && ours(prev) && state & 0x3 == 0x2 && state < 0x100 {
                dsleep.insert(prev, (ts, in_lock.contains_key(&prev)));
            }
            if let Some((start, locked)) = dsleep.remove(&next) {
                match locked {
                    true => add(&mut f.lock_d_ns, ts.saturating_sub(start)),
                    false => add(&mut f.io_wait_ns, ts.saturating_sub(start)),
                }
            }
        } else if let Some((b, end, addr, flags)) = &lock {
            if e.id == *b {
                if !ours(e.pid()) {
                    continue;
                }
                let a = addr.get_u64(pl, en).unwrap_or(0);
                let fl = flags.get_u64(pl, en).unwrap_or(0);
                in_lock.entry(e.pid()).or_insert((ts, a, fl));
                continue;
            } else if e.id == *end {
                if let Some((start, a, fl)) = in_lock.remove(&e.pid()) {
                    add(&mut f.kernel_lock_ns, ts.saturating_sub(start));
                    add(
                        lock_tot.entry((a, fl)).or_insert(0),
                        ts.saturating_sub(start),
                    );
                }
                continue;
            }
        }
        if let Some((i, c, idev, isec, cdev, csec)) = &block {
            if e.id == *i || e.id == *c {
                let depth = inflight.len() as u64;
                if depth > 0 {
                    let d = ts.saturating_sub(depth_since);
                    add(&mut f.disk_busy_ns, d);
                    add(&mut f.disk_depth_ns, depth.saturating_mul(d));
                }
                depth_since = ts;
                if e.id == *i {
                    let k = (
                        idev.get_u64(pl, en).unwrap_or(0),
                        isec.get_u64(pl, en).unwrap_or(0),
                    );
                    inflight.insert(k, ());
                    f.requests += 1;
                } else {
                    let k = (
                        cdev.get_u64(pl, en).unwrap_or(0),
                        csec.get_u64(pl, en).unwrap_or(0),
                    );
                    inflight.remove(&k);
                }
                continue;
            }
        }
        if let Some((enter, exit, eid, op, xid)) = &sys {
            if e.id == *enter && ours(e.pid()) && eid.get_u64(pl, en) == Some(NR_FUTEX) {
                let cmd = op.get_u64(pl, en).unwrap_or(0) & 0x7f;
                // FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET
                if matches!(cmd, 0 | 6 | 9) {
                    futex.insert(e.pid(), ts);
                }
            } else if e.id == *exit && xid.get_u64(pl, en) == Some(NR_FUTEX) {
                if let Some(start) = futex.remove(&e.pid()) {
                    // Longer waits are idle threads (pools, the recorder's own), not a
                    // lock handed over under contention.
                    let d = ts.saturating_sub(start);
                    if d <= FUTEX_MAX_NS {
                        add(&mut f.futex_ns, d);
                    } else {
                        f.futex_long += 1;
                    }
                }
            }
        }
    }
    // Damage is an error here, not a verdict on what could be read: records skipped as
    // damaged may have been any of the waits the verdict weighs.
    if let Some(e) = trace.damage().next() {
        return Err(e.clone());
    }
    if let Some(e) = m.no_format_errors().into_iter().next() {
        return Err(e);
    }
    // What is still open at the end counts up to the end.
    (f.busy_ns, f.wl_busy_ns) = on_cpu.finish(last, ours_only);
    for (start, locked) in dsleep.values() {
        match *locked {
            true => add(&mut f.lock_d_ns, last.saturating_sub(*start)),
            false => add(&mut f.io_wait_ns, last.saturating_sub(*start)),
        }
    }
    if !inflight.is_empty() {
        let d = last.saturating_sub(depth_since);
        add(&mut f.disk_busy_ns, d);
        add(
            &mut f.disk_depth_ns,
            (inflight.len() as u64).saturating_mul(d),
        );
    }
    f.span_ns = last.saturating_sub(first.unwrap_or(last));
    f.system_span_ns = f.span_ns;
    if let (Some(a), b) = wl_span {
        if b > a {
            f.span_ns = b - a;
        }
    }
    f.top_lock = lock_tot
        .into_iter()
        .max_by_key(|x| x.1)
        .map(|((a, fl), ns)| (a, fl, ns));
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::OnCpu;

    const SPIN: i32 = 42;
    fn wl(t: i32) -> bool {
        t == SPIN
    }

    #[test]
    fn a_missed_switch_in_is_inferred_from_the_tasks_own_events() {
        // CPU 0 idles from 0; the spin's switch-in at 100 is missing; its system calls
        // at 150 and 400 are seen; it is switched out at 500.
        let mut c = OnCpu::default();
        c.switch(0, 0, 7, 0, wl);
        // The first sign is when it began (a sleep before it ends there).
        assert_eq!(c.seen(0, 150, SPIN, wl), Some(150));
        assert_eq!(c.seen(0, 400, SPIN, wl), None);
        assert_eq!(c.switch(0, 500, SPIN, 0, wl), None);
        assert_eq!(c.finish(600, wl), (350, 350));
    }

    #[test]
    fn a_missed_switch_in_after_a_wake_up_counts_from_the_wake_up() {
        let mut c = OnCpu::default();
        c.switch(0, 0, 7, 0, wl);
        c.wakeup(0, SPIN, 100);
        c.seen(0, 150, SPIN, wl);
        c.switch(0, 500, SPIN, 0, wl);
        assert_eq!(c.finish(600, wl), (400, 400));
    }

    #[test]
    fn a_switch_out_of_an_unseen_task_counts_nothing_before_it() {
        let mut c = OnCpu::default();
        c.switch(0, 0, 7, 0, wl);
        // Thought idle; the spin is switched out at 300 without any sign before.
        c.switch(0, 300, SPIN, 9, wl);
        assert_eq!(c.finish(400, wl), (100, 0));
    }

    #[test]
    fn recorded_switches_count_as_before() {
        let mut c = OnCpu::default();
        c.switch(1, 10, 0, SPIN, wl);
        c.seen(1, 20, SPIN, wl);
        // An interrupt on the spin's CPU carries its pid: nothing changes.
        c.switch(1, 110, SPIN, 5, wl);
        c.switch(1, 130, 5, 0, wl);
        c.seen(1, 140, 0, wl);
        assert_eq!(c.finish(200, wl), (120, 100));
    }
}
