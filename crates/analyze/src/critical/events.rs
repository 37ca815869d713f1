//! The events the walk reads, resolved once per file, and each event decoded into a
//! small record ([`Rec`]) that a chunk holds until it is handed over in reverse.

use kstate_format::{Endian, Field, FieldRef, Lost, Trace};

use super::SpanSpec;
use crate::analyzers::block::{Role, Rq, RqEvents};
use crate::analyzers::sched::{self, StateNames, Switch};
use crate::error::Error;
use crate::fxmap::FxMap;
use kstate_format::stream::merge::Event;

/// `common_flags` bits (include/linux/trace_events.h, `enum trace_flag_type`).
pub const FLAG_HARDIRQ: u8 = 0x08;
pub const FLAG_SOFTIRQ: u8 = 0x10;
pub const FLAG_NMI: u8 = 0x40;

/// Offset of `common_flags` in every event since Linux 2.6.31.
const COMMON_FLAGS_OFFSET: usize = 2;

/// One event as the walk needs it.
#[derive(Debug, Clone, Copy)]
pub struct Rec {
    pub ts: u64,
    pub cpu: u32,
    /// The task the event was recorded in (`common_pid`).
    pub pid: i32,
    /// `common_flags`: the context (hard irq, softirq, NMI).
    pub flags: u8,
    /// Events lost on this CPU just before this one.
    pub lost: Lost,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `prev` left the CPU (still runnable: preempted), `next` got it.
    Switch {
        prev: i32,
        next: i32,
        prev_runnable: bool,
        /// `prev` exited (X or Z).
        prev_dead: bool,
    },
    /// `pid` was woken onto CPU `target` (`new`: a new task's first wake-up, by its
    /// parent).
    Wake {
        pid: i32,
        new: bool,
        target: u32,
    },
    IrqEntry {
        irq: i32,
        name: u32,
    },
    IrqExit,
    SoftEntry {
        vec: u32,
    },
    SoftExit,
    /// A timer's function about to run (`hrtimer_expire_entry`, `timer_expire_entry`).
    TimerEntry {
        function: u64,
    },
    TimerExit,
    Rq {
        role: Role,
        rq: Rq,
    },
    /// A packet received on a device (`netif_receive_skb`, `napi_poll`).
    NetRx {
        dev: u32,
    },
    /// A request of the thread began or ended (`--span`).
    Span {
        begin: bool,
    },
}

/// What each event id is to the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role2 {
    None,
    Switch,
    Wake { new: bool },
    IrqEntry,
    IrqExit,
    SoftEntry,
    SoftExit,
    TimerEntry,
    TimerExit,
    Rq,
    NetRx,
    SpanBegin,
    SpanEnd,
}

/// How a span's begin or end event is told apart from others of its id.
#[derive(Debug, Clone)]
enum SpanTest {
    Any,
    /// A raw_syscalls event whose `id` field is this number.
    SyscallNr(FieldRef, i64),
    /// A marker line (ftrace `print`'s `buf`) starting with this text.
    Marker(Field, Vec<u8>),
}

/// The walk's events in one file.
pub struct Bound {
    roles: Vec<Role2>,
    sw: Switch,
    states: StateNames,
    /// The prev_state bits of a task that exited.
    dead: u64,
    wake_pid: Vec<Option<FieldRef>>,
    wake_target: Vec<Option<FieldRef>>,
    irq: Option<(FieldRef, Field)>,
    softirq_vec: Vec<Option<FieldRef>>,
    pub vec_names: Vec<String>,
    timer_fn: Vec<Option<FieldRef>>,
    rq: Option<RqEvents>,
    net_dev: Vec<Option<Field>>,
    span_test: Vec<Option<SpanTest>>,
    /// The end's test where a span's two ends are one event id (marker lines).
    span_end_same: Option<SpanTest>,
    /// Names interned from events (IRQ handlers, network devices).
    pub names: Vec<String>,
    name_ids: FxMap<Vec<u8>, u32>,
    /// The event ids to read.
    pub ids: Vec<u32>,
    /// Which classes of events the recording lacks, for `unknown`'s reasons.
    pub has: Has,
}

/// The event classes a recording has.
#[derive(Debug, Clone, Copy, Default)]
pub struct Has {
    /// sched_waking (the waker's own event); else only sched_wakeup, which a wake-up
    /// queued to the target CPU records there, in another task's context.
    pub waking: bool,
    pub wakeup: bool,
    pub irq: bool,
    pub softirq: bool,
    pub hrtimer: bool,
    pub timer: bool,
    pub block: bool,
    pub net: bool,
}

impl Bound {
    /// Resolves the events of `trace`; sched_switch is required, the rest are used where
    /// recorded (the path says `unknown` where one is missing, and names it).
    pub fn bind(trace: &Trace, span: Option<&SpanSpec>) -> Result<Bound, Error> {
        let n = trace.events.id_limit();
        let mut missing = Vec::new();
        let Some(sw) = sched::switch(trace, &mut missing) else {
            return Err(Error::Query(format!(
                "{}: kstate why needs sched:sched_switch (with sched:sched_waking, irq, softirq, block and timer events to name the waits); record with `kstate record -e why ...`",
                trace.path.display()
            )));
        };
        let states = trace
            .events
            .get(sw.id)
            .map(|e| StateNames::from_print_fmt(&e.print_fmt))
            .unwrap_or_else(|| StateNames::from_print_fmt(""));
        let mut b = Bound {
            roles: vec![Role2::None; n],
            sw,
            dead: states
                .flags
                .iter()
                .filter(|(_, n)| n == "X" || n == "Z")
                .fold(0, |d, (v, _)| d | v),
            states,
            wake_pid: vec![None; n],
            wake_target: vec![None; n],
            irq: None,
            softirq_vec: vec![None; n],
            vec_names: Vec::new(),
            timer_fn: vec![None; n],
            rq: None,
            net_dev: vec![None; n],
            span_test: vec![None; n],
            span_end_same: None,
            names: Vec::new(),
            name_ids: FxMap::default(),
            ids: vec![sw.id],
            has: Has::default(),
        };
        b.roles[sw.id as usize] = Role2::Switch;
        let find = |spec: &str| trace.events.find(spec);
        // The waker's own event where recorded; sched_wakeup only without it.
        let waking = find("sched:sched_waking").filter(|e| e.field("pid").is_some());
        b.has.waking = waking.is_some();
        let wakeup = find("sched:sched_wakeup").filter(|e| e.field("pid").is_some());
        b.has.wakeup = wakeup.is_some();
        let wake = waking.or(wakeup);
        let new = find("sched:sched_wakeup_new").filter(|e| e.field("pid").is_some());
        for (ev, is_new) in [(wake, false), (new, true)] {
            if let Some(ev) = ev {
                b.set(ev.id, Role2::Wake { new: is_new });
                b.wake_pid[ev.id as usize] = ev.field("pid").map(FieldRef::from);
                b.wake_target[ev.id as usize] = ev.field("target_cpu").map(FieldRef::from);
            }
        }
        if let (Some(en), Some(ex)) = (find("irq:irq_handler_entry"), find("irq:irq_handler_exit"))
        {
            if let (Some(irq), Some(name)) = (en.field("irq"), en.field("name")) {
                b.irq = Some((irq.into(), name.clone()));
                b.set(en.id, Role2::IrqEntry);
                b.set(ex.id, Role2::IrqExit);
                b.has.irq = true;
            }
        }
        if let (Some(en), Some(ex)) = (find("irq:softirq_entry"), find("irq:softirq_exit")) {
            if let Some(vec) = en.field("vec") {
                b.softirq_vec[en.id as usize] = Some(vec.into());
                b.vec_names = crate::analyzers::softirq::vector_names(en);
                b.set(en.id, Role2::SoftEntry);
                b.set(ex.id, Role2::SoftExit);
                b.has.softirq = true;
            }
        }
        for (en, ex, hr) in [
            (
                "timer:hrtimer_expire_entry",
                "timer:hrtimer_expire_exit",
                true,
            ),
            ("timer:timer_expire_entry", "timer:timer_expire_exit", false),
        ] {
            if let (Some(en), Some(ex)) = (find(en), find(ex)) {
                b.timer_fn[en.id as usize] = en.field("function").map(FieldRef::from);
                b.set(en.id, Role2::TimerEntry);
                b.set(ex.id, Role2::TimerExit);
                match hr {
                    true => b.has.hrtimer = true,
                    false => b.has.timer = true,
                }
            }
        }
        if let Some(rq) = RqEvents::bind(trace, &mut Vec::new()) {
            for &id in &rq.ids {
                b.set(id, Role2::Rq);
            }
            b.rq = Some(rq);
            b.has.block = true;
        }
        for (spec, field) in [
            ("net:netif_receive_skb", "name"),
            ("napi:napi_poll", "dev_name"),
        ] {
            if let Some(ev) = find(spec) {
                if let Some(f) = ev.field(field) {
                    b.net_dev[ev.id as usize] = Some(f.clone());
                    b.set(ev.id, Role2::NetRx);
                    b.has.net = true;
                }
            }
        }
        if let Some(spec) = span {
            b.bind_span(trace, spec)?;
        }
        Ok(b)
    }

    fn set(&mut self, id: u32, role: Role2) {
        if let Some(r) = self.roles.get_mut(id as usize) {
            *r = role;
            if !self.ids.contains(&id) {
                self.ids.push(id);
            }
        }
    }

    fn bind_span(&mut self, trace: &Trace, spec: &SpanSpec) -> Result<(), Error> {
        let path = trace.path.display();
        let find = |name: &str| {
            trace.events.find(name).ok_or_else(|| {
                Error::Query(format!(
                    "{path}: --span needs {name}, which this recording does not have"
                ))
            })
        };
        let ends: [(u32, SpanTest); 2] = match spec {
            SpanSpec::Syscall(name) => {
                let own = (
                    trace.events.find(&format!("syscalls:sys_enter_{name}")),
                    trace.events.find(&format!("syscalls:sys_exit_{name}")),
                );
                match own {
                    (Some(a), Some(b)) => [(a.id, SpanTest::Any), (b.id, SpanTest::Any)],
                    _ => {
                        let nr = crate::analyzers::syscall_x86_64::X86_64
                            .iter()
                            .position(|n| *n == name)
                            .ok_or_else(|| {
                                Error::Query(format!(
                                    "--span syscall:{name}: no such system call (x86_64)"
                                ))
                            })? as i64;
                        let (a, b) = (
                            find("raw_syscalls:sys_enter")?,
                            find("raw_syscalls:sys_exit")?,
                        );
                        let id = |e: &kstate_format::EventFormat| {
                            e.field("id").map(FieldRef::from).ok_or_else(|| {
                                Error::Query(format!(
                                    "{path}: {}:{} has no id field",
                                    e.system, e.name
                                ))
                            })
                        };
                        [
                            (a.id, SpanTest::SyscallNr(id(a)?, nr)),
                            (b.id, SpanTest::SyscallNr(id(b)?, nr)),
                        ]
                    }
                }
            }
            SpanSpec::Marker { begin, end } => {
                let ev = find("ftrace:print")?;
                let buf = ev.field("buf").cloned().ok_or_else(|| {
                    Error::Query(format!("{path}: ftrace:print has no buf field"))
                })?;
                [
                    (
                        ev.id,
                        SpanTest::Marker(buf.clone(), begin.as_bytes().to_vec()),
                    ),
                    (ev.id, SpanTest::Marker(buf, end.as_bytes().to_vec())),
                ]
            }
            SpanSpec::Events { begin, end } => {
                let (a, b) = (find(begin)?, find(end)?);
                if a.id == b.id {
                    return Err(Error::Query(format!(
                        "--span {begin},{end}: the begin and end events must differ (for marker lines use marker:BEGIN,END)"
                    )));
                }
                [(a.id, SpanTest::Any), (b.id, SpanTest::Any)]
            }
        };
        // A span event that is also one the walk reads (a marker as both ends) keeps one
        // role per id: markers and syscalls are told apart by their test.
        let [(bid, btest), (eid, etest)] = ends;
        if bid == eid {
            self.set(bid, Role2::SpanBegin);
            self.span_test[bid as usize] = Some(btest);
            self.span_end_same = Some(etest);
        } else {
            if self.roles.get(bid as usize) != Some(&Role2::None)
                || self.roles.get(eid as usize) != Some(&Role2::None)
            {
                return Err(Error::Query(
                    "--span: the begin and end events must not be scheduler, interrupt or block events".into(),
                ));
            }
            self.set(bid, Role2::SpanBegin);
            self.set(eid, Role2::SpanEnd);
            self.span_test[bid as usize] = Some(btest);
            self.span_test[eid as usize] = Some(etest);
        }
        Ok(())
    }

    fn intern(&mut self, name: &[u8]) -> u32 {
        let name = match name.iter().position(|&c| c == 0) {
            Some(n) => &name[..n],
            None => name,
        };
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(String::from_utf8_lossy(name).into_owned());
        self.name_ids.insert(name.to_vec(), id);
        id
    }

    /// The record of `ev`, or `None` for an event of no use (a span event of another
    /// kind, a damaged one). `comm` is told the names sched_switch carries.
    #[inline]
    pub fn decode(&mut self, ev: &Event<'_>, mut comm: impl FnMut(i32, &[u8])) -> Option<Rec> {
        let (p, e) = (ev.payload, ev.endian);
        let role = *self.roles.get(ev.id as usize)?;
        let kind = match role {
            Role2::None => return None,
            Role2::Switch => {
                let sw = &self.sw;
                let prev = sw.prev_pid.get_i64(p, e)? as i32;
                let next = sw.next_pid.get_i64(p, e)? as i32;
                let state = sw.prev_state.get_u64(p, e).unwrap_or(0);
                comm(prev, sched::bytes(p, sw.prev_comm));
                comm(next, sched::bytes(p, sw.next_comm));
                Kind::Switch {
                    prev,
                    next,
                    prev_runnable: self.states.is_runnable(state),
                    prev_dead: state & self.dead != 0,
                }
            }
            Role2::Wake { new } => {
                let pid = self.wake_pid[ev.id as usize]?.get_i64(p, e)? as i32;
                // Old kernels have no target_cpu: the wakee goes to the waking CPU.
                let target = self.wake_target[ev.id as usize]
                    .and_then(|f| f.get_u64(p, e))
                    .map_or(ev.cpu, |c| c.min(u32::MAX as u64) as u32);
                Kind::Wake { pid, new, target }
            }
            Role2::IrqEntry => {
                let (irq, name) = self.irq.as_ref()?;
                let irq = irq.get_i64(p, e)? as i32;
                let name = name.data(p, e).unwrap_or(b"").to_vec();
                Kind::IrqEntry {
                    irq,
                    name: self.intern(&name),
                }
            }
            Role2::IrqExit => Kind::IrqExit,
            Role2::SoftEntry => Kind::SoftEntry {
                vec: self.softirq_vec[ev.id as usize]?.get_u64(p, e)? as u32,
            },
            Role2::SoftExit => Kind::SoftExit,
            Role2::TimerEntry => Kind::TimerEntry {
                function: self.timer_fn[ev.id as usize]
                    .and_then(|f| f.get_u64(p, e))
                    .unwrap_or(0),
            },
            Role2::TimerExit => Kind::TimerExit,
            Role2::Rq => {
                let (role, rq) = self.rq.as_ref()?.decode(ev.id, p, e);
                Kind::Rq { role, rq }
            }
            Role2::NetRx => {
                let name = self.net_dev[ev.id as usize]
                    .as_ref()
                    .and_then(|f| f.data(p, e))
                    .unwrap_or(b"")
                    .to_vec();
                Kind::NetRx {
                    dev: self.intern(&name),
                }
            }
            Role2::SpanBegin | Role2::SpanEnd => {
                let test = self.span_test[ev.id as usize].as_ref()?;
                let begin = role == Role2::SpanBegin;
                if span_matches(test, p, e) {
                    Kind::Span { begin }
                } else if begin
                    && self
                        .span_end_same
                        .as_ref()
                        .is_some_and(|t| span_matches(t, p, e))
                {
                    Kind::Span { begin: false }
                } else {
                    return None;
                }
            }
        };
        Some(Rec {
            ts: ev.ts,
            cpu: ev.cpu,
            pid: ev.pid(),
            flags: p.get(COMMON_FLAGS_OFFSET).copied().unwrap_or(0),
            lost: ev.lost_before,
            kind,
        })
    }
}

fn span_matches(test: &SpanTest, p: &[u8], e: Endian) -> bool {
    match test {
        SpanTest::Any => true,
        SpanTest::SyscallNr(f, nr) => f.get_i64(p, e) == Some(*nr),
        SpanTest::Marker(buf, prefix) => buf
            .data(p, e)
            .is_some_and(|b| b.trim_ascii_start().starts_with(prefix)),
    }
}
