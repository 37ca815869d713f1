//! Events to slices: the one state machine behind the timeline's summaries and its
//! re-reads, so that both draw the same slices.
//!
//! Rules (a slice is emitted when it ends; one still open at the end of the read is cut
//! there):
//! - sched_switch on CPU c at t, `prev` out in state s, `next` in: c's task slice of
//!   `prev` ends (idle, pid 0, has none); `prev`'s running slice ends, and it becomes
//!   preempted (s runnable) or asleep in s with the system call it is in (S, D, I, other;
//!   X and Z end the thread); `next`'s waiting or sleeping slice ends and it runs on c.
//! - sched_waking (or sched_wakeup where waking is not recorded; sched_wakeup_new always)
//!   of a sleeping thread at t: its sleep ends and it is runnable, woken by the task that
//!   ran the wake-up (common_pid; 0 for an interrupt on an idle CPU) on that CPU. A thread
//!   first seen by its wake-up is runnable from there.
//! - sys_enter / sys_exit of the same number by one thread: a system-call slice.
//! - irq_handler_entry/exit, softirq_entry/exit on one CPU: interrupt slices.
//! - block_rq_insert (where recorded) to block_rq_issue: queued; issue to
//!   block_rq_complete: in the device; by device, sector and direction (a requeue drops
//!   the request).
//!
//! - a CPU's task whose switch-out went unrecorded (lost events, a recording filtered by
//!   process) stops running there at the CPU's next switch, or where it is next switched
//!   in elsewhere.
//!
//! A thread's state before its first sched event is unknown: nothing is drawn for it.

use kstate_format::{EventFormat, FieldRef, Trace};

use super::{Described, Kind, RowKey, Slice, TrackKey, NONE};
use super::{ROW_DEVICE, ROW_IRQ, ROW_QUEUED, ROW_SOFTIRQ, ROW_STATE, ROW_SYSCALL, ROW_TASK};
use kstate_analyze::analyzer::{need, Tasks};
use kstate_analyze::analyzers::block::{self, Dir, RqEvents};
use kstate_analyze::analyzers::sched::{self, StateNames, Switch};
use kstate_analyze::fxmap::FxMap;
use kstate_format::stream::merge::{Event, IdFilter};

pub trait Sink {
    fn slice(&mut self, row: RowKey, s: Slice);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    None,
    Switch,
    /// sched_waking, sched_wakeup(_new): the woken pid field.
    Wake,
    RawEnter,
    RawExit,
    Enter,
    Exit,
    IrqEntry,
    IrqExit,
    SoftEntry,
    SoftExit,
    Block,
    NewTask,
    Rename,
}

/// A thread's state, since when.
#[derive(Debug, Clone, Copy)]
enum St {
    Unknown,
    Running {
        since: u64,
        cpu: u32,
    },
    Runnable {
        since: u64,
        waker: u32,
        cpu: i32,
    },
    Preempted {
        since: u64,
        bits: i32,
    },
    Asleep {
        since: u64,
        kind: Kind,
        bits: i32,
        reason: u32,
    },
    Dead,
}

#[derive(Debug, Clone, Copy)]
struct Thread {
    st: St,
    /// The system call it is in, and since when.
    sys: Option<(i64, u64)>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    task: Option<(i32, u64)>,
    irq: Option<(u32, u64)>,
    softirq: Option<(u32, u64)>,
}

/// A block request in progress.
#[derive(Debug, Clone, Copy)]
struct Request {
    inserted: Option<u64>,
    issued: Option<u64>,
    sectors: i32,
}

/// What labels stand for, learned while reading.
#[derive(Clone)]
pub struct Names {
    pub tasks: Tasks,
    syscalls: &'static [&'static str],
    /// syscalls:sys_enter_NAME: names by number, learned from records.
    learned: FxMap<i64, String>,
    irqs: FxMap<u32, String>,
    vectors: Vec<String>,
    states: Option<StateNames>,
    devices: FxMap<u32, String>,
    pub missing: Vec<String>,
}

pub struct Machine {
    roles: Vec<Role>,
    ids: Vec<u32>,
    sw: Option<Switch>,
    /// The woken pid of each wake-up event id.
    wake_pid: Vec<Option<FieldRef>>,
    /// Syscall number (and return value) fields by event id.
    nr: Vec<Option<FieldRef>>,
    ret: Vec<Option<FieldRef>>,
    /// syscalls:sys_enter_NAME: the name by event id.
    enter_names: FxMap<u32, String>,
    irq: Option<(FieldRef, Option<kstate_format::Field>)>,
    dev_names: block::DevNames,
    vec: Option<FieldRef>,
    rq: Option<RqEvents>,
    nr_sector: Vec<Option<FieldRef>>,
    newtask: Option<(FieldRef, FieldRef, (usize, usize))>,
    rename: Option<(FieldRef, (usize, usize))>,
    /// `prev_state` bits to the kind of being off a CPU (None: the thread ended).
    state_kinds: FxMap<i32, Option<Kind>>,
    threads: FxMap<i32, Thread>,
    cpus: Vec<Cpu>,
    requests: FxMap<(u32, u64, Dir), Request>,
    names: Names,
}

fn field(ev: &EventFormat, name: &str) -> Option<FieldRef> {
    ev.field(name).map(FieldRef::from)
}

impl Machine {
    pub fn bind(trace: &Trace, tasks: Tasks) -> Machine {
        let n = trace.events.id_limit();
        let mut m = Machine {
            roles: vec![Role::None; n],
            ids: Vec::new(),
            sw: None,
            wake_pid: vec![None; n],
            nr: vec![None; n],
            ret: vec![None; n],
            enter_names: FxMap::default(),
            irq: None,
            dev_names: block::DevNames::new(trace),
            vec: None,
            rq: None,
            nr_sector: vec![None; n],
            newtask: None,
            rename: None,
            state_kinds: FxMap::default(),
            threads: FxMap::default(),
            cpus: vec![Cpu::default(); trace.cpu_limit().max(1) as usize],
            requests: FxMap::default(),
            names: Names {
                tasks,
                syscalls: kstate_analyze::analyzers::syscall::table(trace),
                learned: FxMap::default(),
                irqs: FxMap::default(),
                vectors: Vec::new(),
                states: None,
                devices: FxMap::default(),
                missing: Vec::new(),
            },
        };
        let mut missing = Vec::new();
        let mut role = |m: &mut Machine, id: u32, r: Role| {
            m.roles[id as usize] = r;
            m.ids.push(id);
        };
        if let Some(sw) = sched::switch(trace, &mut missing) {
            role(&mut m, sw.id, Role::Switch);
            m.names.states = trace
                .events
                .get(sw.id)
                .map(|e| StateNames::from_print_fmt(&e.print_fmt));
            m.sw = Some(sw);
            // Who woke a thread: sched_waking runs in the waker; without it, sched_wakeup.
            let waking = trace.events.find("sched:sched_waking");
            let mut wakes: Vec<&EventFormat> = waking.into_iter().collect();
            for name in ["sched:sched_wakeup_new", "sched:sched_wakeup"] {
                if name.ends_with("wakeup") && waking.is_some() {
                    continue;
                }
                wakes.extend(trace.events.find(name));
            }
            for ev in wakes {
                if let Some(pid) = field(ev, "pid") {
                    m.wake_pid[ev.id as usize] = Some(pid);
                    role(&mut m, ev.id, Role::Wake);
                }
            }
        } else {
            m.names.missing.push(
                "threads' states and CPUs' tasks: no sched:sched_switch (record -e sched)".into(),
            );
        }
        m.bind_syscalls(trace, &mut role);
        let mut absent = Vec::new();
        if let (Some(en), Some(ex)) = (
            need(trace, "irq:irq_handler_entry", &mut absent),
            need(trace, "irq:irq_handler_exit", &mut absent),
        ) {
            if let (Some(irq), Some(irq_x)) = (field(en, "irq"), field(ex, "irq")) {
                m.irq = Some((irq, en.field("name").cloned()));
                let _ = irq_x;
                role(&mut m, en.id, Role::IrqEntry);
                role(&mut m, ex.id, Role::IrqExit);
            }
        }
        if let (Some(en), Some(ex)) = (
            need(trace, "irq:softirq_entry", &mut absent),
            need(trace, "irq:softirq_exit", &mut absent),
        ) {
            if let Some(v) = field(en, "vec") {
                m.vec = Some(v);
                m.names.vectors = kstate_analyze::analyzers::softirq::vector_names(en);
                role(&mut m, en.id, Role::SoftEntry);
                role(&mut m, ex.id, Role::SoftExit);
            }
        }
        if let Some(rq) = RqEvents::bind(trace, &mut absent) {
            for &id in &rq.ids {
                role(&mut m, id, Role::Block);
                if let Some(ev) = trace.events.get(id) {
                    m.nr_sector[id as usize] = field(ev, "nr_sector");
                }
            }
            m.rq = Some(rq);
        }
        if let Some(ev) = trace.events.find("task:task_newtask") {
            if let (Some(pid), Some(flags), Some(comm)) =
                (field(ev, "pid"), field(ev, "clone_flags"), ev.field("comm"))
            {
                m.newtask = Some((pid, flags, (comm.offset, comm.size)));
                role(&mut m, ev.id, Role::NewTask);
            }
        }
        if let Some(ev) = trace.events.find("task:task_rename") {
            if let (Some(pid), Some(comm)) = (field(ev, "pid"), ev.field("newcomm")) {
                m.rename = Some((pid, (comm.offset, comm.size)));
                role(&mut m, ev.id, Role::Rename);
            }
        }
        m
    }

    fn bind_syscalls(&mut self, trace: &Trace, role: &mut dyn FnMut(&mut Machine, u32, Role)) {
        let (en, ex) = (
            trace.events.find("raw_syscalls:sys_enter"),
            trace.events.find("raw_syscalls:sys_exit"),
        );
        if let (Some(en), Some(ex)) = (en, ex) {
            if let (Some(a), Some(b), Some(ret)) =
                (field(en, "id"), field(ex, "id"), field(ex, "ret"))
            {
                self.nr[en.id as usize] = Some(a);
                self.nr[ex.id as usize] = Some(b);
                self.ret[ex.id as usize] = Some(ret);
                role(self, en.id, Role::RawEnter);
                role(self, ex.id, Role::RawExit);
                return;
            }
        }
        let mut any = false;
        for ev in trace.events.iter().filter(|e| e.system == "syscalls") {
            let Some(nr) = field(ev, "__syscall_nr") else {
                continue;
            };
            if let Some(name) = ev.name.strip_prefix("sys_enter_") {
                self.nr[ev.id as usize] = Some(nr);
                self.enter_names.insert(ev.id, name.to_string());
                role(self, ev.id, Role::Enter);
                any = true;
            } else if ev.name.starts_with("sys_exit_") {
                self.nr[ev.id as usize] = Some(nr);
                self.ret[ev.id as usize] = field(ev, "ret");
                role(self, ev.id, Role::Exit);
            }
        }
        if !any {
            self.names
                .missing
                .push("system calls: no raw_syscalls events (record -e syscall)".into());
        }
    }

    /// The events the machine reads.
    pub fn filter(&self) -> IdFilter {
        IdFilter::only(self.ids.iter().copied())
    }

    pub fn into_names(self) -> Names {
        self.names
    }

    fn thread(&mut self, tid: i32) -> &mut Thread {
        self.threads.entry(tid).or_insert(Thread {
            st: St::Unknown,
            sys: None,
        })
    }

    /// How a thread switched out in state `bits` is off the CPU (None: it ended).
    fn off_kind(&mut self, bits: i32) -> Option<Kind> {
        if let Some(k) = self.state_kinds.get(&bits) {
            return *k;
        }
        let name = self
            .names
            .states
            .as_ref()
            .map_or_else(String::new, |s| s.name(bits as u32 as u64));
        let k = match name.chars().next() {
            Some('X') | Some('Z') => None,
            Some('S') => Some(Kind::Sleeping),
            Some('D') => Some(Kind::Blocked),
            Some('I') => Some(Kind::Idle),
            _ => Some(Kind::Off),
        };
        self.state_kinds.insert(bits, k);
        k
    }

    pub fn event(&mut self, ev: &Event<'_>, sink: &mut dyn Sink) {
        let Some(&role) = self.roles.get(ev.id as usize) else {
            return;
        };
        let t = ev.ts;
        let (p, e) = (ev.payload, ev.endian);
        match role {
            Role::None => {}
            Role::Switch => {
                let Some(sw) = self.sw else { return };
                let prev = sw.prev_pid.get_i64(p, e).unwrap_or(0) as i32;
                let next = sw.next_pid.get_i64(p, e).unwrap_or(0) as i32;
                let bits = sw.prev_state.get_i64(p, e).unwrap_or(0) as i32;
                let runnable = self
                    .names
                    .states
                    .as_ref()
                    .is_some_and(|s| s.is_runnable(bits as u32 as u64));
                self.names
                    .tasks
                    .set_comm(prev, sched::bytes(p, sw.prev_comm));
                self.names
                    .tasks
                    .set_comm(next, sched::bytes(p, sw.next_comm));
                self.switch(ev.cpu, t, prev, bits, runnable, next, sink);
            }
            Role::Wake => {
                let Some(f) = self.wake_pid[ev.id as usize] else {
                    return;
                };
                let pid = f.get_i64(p, e).unwrap_or(0) as i32;
                if pid == 0 {
                    return;
                }
                let st = self.thread(pid).st;
                if let St::Asleep { .. } | St::Unknown = st {
                    state_slice(sink, pid, st, t);
                    self.thread(pid).st = St::Runnable {
                        since: t,
                        waker: ev.pid() as u32,
                        cpu: ev.cpu as i32,
                    };
                }
            }
            Role::RawEnter | Role::Enter => {
                let nr = self.nr[ev.id as usize]
                    .and_then(|f| f.get_i64(p, e))
                    .unwrap_or(-1);
                if role == Role::Enter && !self.names.learned.contains_key(&nr) {
                    if let Some(n) = self.enter_names.get(&ev.id).cloned() {
                        self.names.learned.insert(nr, n);
                    }
                }
                self.thread(ev.pid()).sys = Some((nr, t));
            }
            Role::RawExit | Role::Exit => {
                let nr = self.nr[ev.id as usize]
                    .and_then(|f| f.get_i64(p, e))
                    .unwrap_or(-1);
                let tid = ev.pid();
                let ret = self.ret[ev.id as usize]
                    .and_then(|f| f.get_i64(p, e))
                    .unwrap_or(0);
                if let Some((n, since)) = self.thread(tid).sys.take() {
                    if n == nr {
                        let ret = ret.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
                        syscall_slice(sink, tid, nr, since, t, ret);
                    }
                }
            }
            Role::IrqEntry => {
                let Some((irq, name)) = &self.irq else { return };
                let n = irq.get_u64(p, e).unwrap_or(0) as u32;
                self.names.irqs.entry(n).or_insert_with(|| {
                    name.as_ref()
                        .and_then(|f| f.str(p, e))
                        .map(|s| s.into_owned())
                        .unwrap_or_default()
                });
                if let Some(c) = self.cpus.get_mut(ev.cpu as usize) {
                    c.irq = Some((n, t));
                }
            }
            Role::SoftEntry => {
                let v = self.vec.and_then(|f| f.get_u64(p, e)).unwrap_or(0) as u32;
                if let Some(c) = self.cpus.get_mut(ev.cpu as usize) {
                    c.softirq = Some((v, t));
                }
            }
            Role::IrqExit | Role::SoftExit => {
                let Some(c) = self.cpus.get_mut(ev.cpu as usize) else {
                    return;
                };
                let (open, row, kind) = match role {
                    Role::IrqExit => (c.irq.take(), ROW_IRQ, Kind::Irq),
                    _ => (c.softirq.take(), ROW_SOFTIRQ, Kind::Softirq),
                };
                if let Some((n, since)) = open {
                    cpu_slice(sink, ev.cpu, row, kind, n, since, t);
                }
            }
            Role::Block => {
                let dev = self.block(ev, sink);
                // Devices are named when first seen, as the block analyzers name them.
                if let Some(dev) = dev {
                    if !self.names.devices.contains_key(&dev) {
                        let key = self.dev_names.key_name((dev as u64) << 8);
                        let name = key
                            .split_once('(')
                            .map_or(key.as_str(), |x| x.1.trim_end_matches(')'))
                            .to_string();
                        self.names.devices.insert(dev, name);
                    }
                }
            }
            Role::NewTask => {
                let Some((pid, flags, comm)) = self.newtask else {
                    return;
                };
                let child = pid.get_i64(p, e).unwrap_or(0) as i32;
                let flags = flags.get_u64(p, e).unwrap_or(0);
                self.names.tasks.new_task(ev.pid(), child, flags);
                self.names.tasks.set_comm(child, sched::bytes(p, comm));
            }
            Role::Rename => {
                let Some((pid, comm)) = self.rename else {
                    return;
                };
                let tid = pid.get_i64(p, e).unwrap_or(0) as i32;
                self.names.tasks.set_comm(tid, sched::bytes(p, comm));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn switch(
        &mut self,
        cpu: u32,
        t: u64,
        prev: i32,
        bits: i32,
        runnable: bool,
        next: i32,
        sink: &mut dyn Sink,
    ) {
        let mut stale = None;
        if let Some(c) = self.cpus.get_mut(cpu as usize) {
            if let Some((tid, since)) = c.task.take() {
                // The CPU's task was not `prev`: its switch-out went unrecorded (events
                // lost, or filtered by process). It stopped running here by now.
                if tid != prev && tid != 0 {
                    stale = Some(tid);
                }
                if tid != 0 {
                    cpu_slice(sink, cpu, ROW_TASK, Kind::Task, tid as u32, since, t);
                }
            }
            c.task = Some((next, t));
        }
        if let Some(tid) = stale {
            let st = self.thread(tid).st;
            if let St::Running { cpu: c, .. } = st {
                if c == cpu {
                    state_slice(sink, tid, st, t);
                    self.thread(tid).st = St::Unknown;
                }
            }
        }
        if prev != 0 {
            let off = if runnable {
                Some(Kind::Preempted)
            } else {
                self.off_kind(bits)
            };
            let th = *self.thread(prev);
            if let St::Running { .. } = th.st {
                state_slice(sink, prev, th.st, t);
            }
            let reason = th.sys.map_or(NONE, |(nr, _)| nr as u32);
            self.thread(prev).st = match off {
                None => St::Dead,
                Some(Kind::Preempted) => St::Preempted { since: t, bits },
                Some(kind) => St::Asleep {
                    since: t,
                    kind,
                    bits,
                    reason,
                },
            };
        }
        if next != 0 {
            let st = self.thread(next).st;
            match st {
                // Running here already (a switch to itself): it goes on.
                St::Running { cpu: c, .. } if c == cpu => {}
                // Running elsewhere (its switch-out unrecorded: it moved here), waiting,
                // asleep: that ends now.
                _ => state_slice(sink, next, st, t),
            }
            self.thread(next).st = St::Running { since: t, cpu };
        }
    }

    /// A request event; the device it is about.
    fn block(&mut self, ev: &Event<'_>, sink: &mut dyn Sink) -> Option<u32> {
        let rq = self.rq.as_ref()?;
        let (role, r) = rq.decode(ev.id, ev.payload, ev.endian);
        let key = (r.dev, r.sector, r.dir);
        let sectors = self.nr_sector[ev.id as usize]
            .and_then(|f| f.get_u64(ev.payload, ev.endian))
            .unwrap_or(0)
            .min(i32::MAX as u64) as i32;
        let t = ev.ts;
        let dev = TrackKey::Device(r.dev);
        let slice = |start, kind, sectors| Slice {
            start,
            end: t,
            kind,
            label: r.dir as u32,
            arg: sectors,
        };
        match role {
            block::Role::Insert => {
                self.requests.insert(
                    key,
                    Request {
                        inserted: Some(t),
                        issued: None,
                        sectors,
                    },
                );
            }
            block::Role::Issue => {
                let q = self.requests.entry(key).or_insert(Request {
                    inserted: None,
                    issued: None,
                    sectors,
                });
                if let Some(at) = q.inserted.take() {
                    let n = q.sectors.max(sectors);
                    sink.slice((dev, ROW_QUEUED), slice(at, Kind::Queued, n));
                }
                q.issued = Some(t);
                q.sectors = q.sectors.max(sectors);
            }
            block::Role::Complete => {
                if let Some(q) = self.requests.remove(&key) {
                    if let Some(at) = q.issued {
                        sink.slice((dev, ROW_DEVICE), slice(at, Kind::Device, q.sectors));
                    }
                }
            }
            block::Role::Requeue => {
                self.requests.remove(&key);
            }
            block::Role::None => return None,
        }
        Some(r.dev)
    }

    /// Ends the read at `end`: what is still open is cut there.
    pub fn finish(&mut self, end: u64, sink: &mut dyn Sink) {
        let mut threads: Vec<(i32, Thread)> = self.threads.iter().map(|(k, v)| (*k, *v)).collect();
        threads.sort_by_key(|x| x.0);
        for (tid, th) in threads {
            state_slice(sink, tid, th.st, end);
            if let Some((nr, since)) = th.sys {
                if end >= since {
                    syscall_slice(sink, tid, nr, since, end, 0);
                }
            }
        }
        for (c, cpu) in self.cpus.iter().enumerate() {
            let open = [
                (
                    cpu.task
                        .filter(|x| x.0 != 0)
                        .map(|(tid, s)| (tid as u32, s)),
                    ROW_TASK,
                    Kind::Task,
                ),
                (cpu.irq, ROW_IRQ, Kind::Irq),
                (cpu.softirq, ROW_SOFTIRQ, Kind::Softirq),
            ];
            for (open, row, kind) in open {
                if let Some((label, since)) = open.filter(|x| end >= x.1) {
                    cpu_slice(sink, c as u32, row, kind, label, since, end);
                }
            }
        }
        let mut reqs: Vec<_> = self.requests.iter().map(|(k, v)| (*k, *v)).collect();
        reqs.sort_by_key(|(k, _)| *k);
        for ((dev, _, dir), q) in reqs {
            let (row, at, kind) = match (q.issued, q.inserted) {
                (Some(at), _) => (ROW_DEVICE, at, Kind::Device),
                (None, Some(at)) => (ROW_QUEUED, at, Kind::Queued),
                _ => continue,
            };
            if end >= at {
                let s = Slice {
                    start: at,
                    end,
                    kind,
                    label: dir as u32,
                    arg: q.sectors,
                };
                sink.slice((TrackKey::Device(dev), row), s);
            }
        }
    }
}

impl St {
    /// Being in this state from when it began to `end`, as a slice (none for an unknown
    /// state, or an end before the start).
    fn until(self, end: u64) -> Option<Slice> {
        let (start, kind, label, arg) = match self {
            St::Running { since, cpu } => (since, Kind::Running, cpu, 0),
            St::Runnable { since, waker, cpu } => (since, Kind::Runnable, waker, cpu),
            St::Preempted { since, bits } => (since, Kind::Preempted, NONE, bits),
            St::Asleep {
                since,
                kind,
                bits,
                reason,
            } => (since, kind, reason, bits),
            St::Unknown | St::Dead => return None,
        };
        (end >= start).then_some(Slice {
            start,
            end,
            kind,
            label,
            arg,
        })
    }
}

/// Thread `tid`'s state `st`, ended at `end`.
fn state_slice(sink: &mut dyn Sink, tid: i32, st: St, end: u64) {
    if let Some(s) = st.until(end) {
        sink.slice((TrackKey::Thread(tid), ROW_STATE), s);
    }
}

fn syscall_slice(sink: &mut dyn Sink, tid: i32, nr: i64, start: u64, end: u64, ret: i32) {
    let s = Slice {
        start,
        end,
        kind: Kind::Syscall,
        label: nr as u32,
        arg: ret,
    };
    sink.slice((TrackKey::Thread(tid), ROW_SYSCALL), s);
}

fn cpu_slice(sink: &mut dyn Sink, cpu: u32, row: u8, kind: Kind, label: u32, start: u64, end: u64) {
    let s = Slice {
        start,
        end,
        kind,
        label,
        arg: 0,
    };
    sink.slice((TrackKey::Cpu(cpu), row), s);
}

impl Names {
    fn syscall(&self, nr: u32) -> String {
        let nr = nr as i32 as i64;
        if let Some(n) = self.learned.get(&nr) {
            return n.clone();
        }
        match self.syscalls.get(nr as usize) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => format!("sys_{nr}"),
        }
    }

    fn state(&self, bits: i32) -> String {
        self.states
            .as_ref()
            .map_or_else(|| format!("{bits:#x}"), |s| s.name(bits as u32 as u64))
    }

    fn irq(&self, n: u32) -> String {
        match self.irqs.get(&n) {
            Some(name) => format!("irq {n} {name}"),
            None => format!("irq {n}"),
        }
    }

    fn vector(&self, v: u32) -> String {
        match self.vectors.get(v as usize) {
            Some(n) if !n.is_empty() => n.clone(),
            _ => format!("vec {v}"),
        }
    }

    fn task(&self, tid: i32) -> String {
        if tid == 0 {
            return "<idle>".into();
        }
        self.tasks.label(tid)
    }

    /// A drawable's label in a few words.
    pub fn label_text(&self, kind: Kind, label: u32) -> String {
        match kind {
            Kind::Running => format!("running on CPU {label}"),
            Kind::Runnable if label == NONE => "runnable".into(),
            Kind::Runnable => format!("runnable, woken by {}", self.task(label as i32)),
            Kind::Preempted => "preempted (runnable)".into(),
            k if k.is_sleep() && label == NONE => k.name().into(),
            k if k.is_sleep() => format!("{} in {}", k.name(), self.syscall(label)),
            Kind::Syscall => self.syscall(label),
            Kind::Task => self.task(label as i32),
            Kind::Irq => self.irq(label),
            Kind::Softirq => self.vector(label),
            Kind::Queued | Kind::Device => {
                format!("{} {}", Dir::from_code(label as u64).letter(), kind.name())
            }
            _ => kind.name().into(),
        }
    }

    pub fn describe(&self, row: RowKey, s: &Slice) -> Described {
        let mut d = Described {
            what: self.label_text(s.kind, s.label),
            ..Described::default()
        };
        let facts = &mut d.facts;
        let tid = match row.0 {
            TrackKey::Thread(t) => Some(t),
            _ => None,
        };
        match s.kind {
            Kind::Running => facts.push(("cpu".into(), s.label.to_string())),
            Kind::Runnable => {
                if s.label != NONE {
                    let waker = s.label as i32;
                    facts.push(("waker".into(), self.task(waker)));
                    facts.push(("woken on cpu".into(), s.arg.to_string()));
                    d.from = Some(match waker {
                        0 => (TrackKey::Cpu(s.arg as u32), s.start),
                        w => (TrackKey::Thread(w), s.start),
                    });
                }
                if let Some(t) = tid {
                    d.rows.push(("runq", self.tasks.label(t)));
                }
            }
            Kind::Preempted => {
                facts.push(("state".into(), self.state(s.arg)));
                d.rows.push(("offcpu", self.state(s.arg)));
            }
            k if k.is_sleep() => {
                facts.push(("state".into(), self.state(s.arg)));
                if s.label != NONE {
                    facts.push(("in system call".into(), self.syscall(s.label)));
                }
                d.rows.push(("offcpu", self.state(s.arg)));
            }
            Kind::Syscall => {
                facts.push(("return value".into(), s.arg.to_string()));
                d.rows.push(("syscall", self.syscall(s.label)));
            }
            Kind::Task => {
                facts.push(("task".into(), self.task(s.label as i32)));
                if let Some(g) = self.tasks.tgid(s.label as i32) {
                    facts.push(("process".into(), g.to_string()));
                }
            }
            Kind::Irq => d.rows.push(("irq", self.irq(s.label))),
            Kind::Softirq => d.rows.push(("softirq", self.vector(s.label))),
            Kind::Queued | Kind::Device => {
                if let TrackKey::Device(dev) = row.0 {
                    let dir = Dir::from_code(s.label as u64);
                    let (ma, mi) = block::major_minor(dev);
                    let name = self
                        .devices
                        .get(&dev)
                        .cloned()
                        .unwrap_or_else(|| format!("{ma}:{mi}"));
                    facts.push(("device".into(), name.clone()));
                    facts.push(("sectors".into(), s.arg.to_string()));
                    let key = format!("{:08x}-{}({name})", (ma << 8) | mi, dir.letter());
                    if s.kind == Kind::Device {
                        d.rows.push(("biotime", key.clone()));
                    }
                    d.rows.push(("blkqueue", key));
                }
            }
            _ => {}
        }
        if let Some(t) = tid {
            d.facts.insert(0, ("thread".into(), self.tasks.label(t)));
        }
        d
    }
}
