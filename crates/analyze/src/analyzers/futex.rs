//! `futex`: user-space lock waits — time in futex() system calls per lock (plockstat's
//! view of pthread mutexes, condition variables, and Rust's std locks).
//!
//! Events: syscalls:sys_enter_futex / sys_exit_futex (task:task_newtask where recorded,
//! to learn which threads started during the recording share a process).
//! Pairs: per thread, an entry with the next exit. The operation is `op & 127` (without
//! FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME). Waits: FUTEX_WAIT, FUTEX_WAIT_BITSET,
//! FUTEX_LOCK_PI, FUTEX_LOCK_PI2, FUTEX_WAIT_REQUEUE_PI; wakes: FUTEX_WAKE,
//! FUTEX_WAKE_BITSET, FUTEX_WAKE_OP, FUTEX_REQUEUE, FUTEX_CMP_REQUEUE,
//! FUTEX_CMP_REQUEUE_PI, FUTEX_UNLOCK_PI; other operations are not reported.
//!
//! Key (`--by lock`, default): the futex word's address in its process and whether the
//! call waited or woke: `0x55d0c3a0e010@1234 wait` (1234: the thread group). Where the
//! thread group of a thread is unknown (no process table, no task_newtask), its thread
//! id stands in, written `@tid5678`. `--by tid`: the calling thread and the family
//! (`worker-5678 wait`). Value: time in the call (for waits: the wait). Flag column
//! `errors`: calls that returned an error (EAGAIN: the word changed before the wait;
//! ETIMEDOUT).
//!
//! plockstat's view, where the recording has the mappings (`kstate record --stacks` or
//! `--sample`): the lock is named by the data symbol holding the futex word
//! (`main_arena@1234 wait`, a `static` mutex by its path), or by its file and address in
//! it (`libc.so.6+0x1d3c80@1234`), else left as the address (heap, stack).
//! `--by caller` (needs `--stacks`): the lock, wait/wake and the function that made the
//! call, from the call chain taken at that futex() entry: `main_arena@1234 wait from
//! worker`; the rule for the caller is in [`kstate_symbols::stacks`]. `[no chain]`: the
//! call had no chain (lost); `[unknown caller]`: its chain showed only lock machinery.
//! Tasks that started during the recording are named from the events that tell their
//! names, where recorded ([`super::task_names`]).

use kstate_format::{FieldRef, Trace};

use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;
use kstate_symbols::stacks::{caller_label, Stacks};

use super::task_names::TaskNames;

/// `--by caller`'s caller of a call that has no chain (lost while recording).
pub const NO_CHAIN: &str = "[no chain]";
/// `--by caller`'s caller of a call whose chain shows only lock machinery.
pub const UNKNOWN_CALLER: &str = "[unknown caller]";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Family {
    Wait,
    Wake,
}

pub(crate) fn family(op: u64) -> Option<Family> {
    match op & 127 {
        // WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2
        0 | 6 | 9 | 11 | 13 => Some(Family::Wait),
        // WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP, UNLOCK_PI, WAKE_BITSET, CMP_REQUEUE_PI
        1 | 3 | 4 | 5 | 7 | 10 | 12 => Some(Family::Wake),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Lock {
    uaddr: u64,
    /// Thread group, or the thread when `known` is false.
    group: i32,
    known: bool,
    family: Family,
    /// Index into `Futex::callers` (`--by caller`), else 0.
    caller: u32,
}

/// `kstate record --holds`' probes on pthread_mutex_lock, where recorded: the caller of
/// each thread's lock call under way. A futex wait inside it has that caller, which the
/// chain cannot show (the uretprobe put its trampoline in place of the return address).
struct PendingLocks {
    lock: u32,
    locked: u32,
    caller: FieldRef,
    open: FxMap<i32, u64>,
}

impl PendingLocks {
    fn bind(trace: &Trace) -> Option<PendingLocks> {
        let l = trace.events.find(super::lockhold::LOCK)?;
        Some(PendingLocks {
            lock: l.id,
            locked: trace.events.find(super::lockhold::LOCKED)?.id,
            caller: l.field("caller")?.into(),
            open: FxMap::default(),
        })
    }
}

/// task:task_newtask, where recorded: which process each new thread belongs to.
pub(crate) struct NewTask {
    pub id: u32,
    pid: FieldRef,
    flags: FieldRef,
}

impl NewTask {
    pub(crate) fn bind(trace: &Trace) -> Option<NewTask> {
        trace.events.find("task:task_newtask").and_then(|e| {
            Some(NewTask {
                id: e.id,
                pid: e.field("pid")?.into(),
                flags: e.field("clone_flags")?.into(),
            })
        })
    }

    /// Notes the new task in `out.tasks` (the event runs in the parent).
    pub(crate) fn event(&self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        let child = self.pid.get_i64(p, e).unwrap_or(0) as i32;
        let flags = self.flags.get_u64(p, e).unwrap_or(0);
        out.tasks.new_task(ev.pid(), child, flags);
    }
}

pub struct Futex {
    by_tid: bool,
    enter: u32,
    exit: u32,
    uaddr: FieldRef,
    op: FieldRef,
    ret: FieldRef,
    newtask: Option<NewTask>,
    task_names: TaskNames,
    pairs: Pairs<i32, (u64, Family)>,
    index: FxMap<Lock, u32>,
    locks: Vec<Lock>,
    /// Per lock, its name where the mappings give one.
    names: Vec<Option<String>>,
    by_caller: bool,
    stacks: Option<Stacks>,
    callers: Vec<String>,
    caller_index: FxMap<String, u32>,
    pending: Option<PendingLocks>,
}

impl Analyzer for Futex {
    const INFO: Info = Info {
        name: "futex",
        about: "user-space lock waits: time in futex() waits and wakes per lock address",
        needs: "syscalls:sys_enter_futex + syscalls:sys_exit_futex (task:task_newtask for thread groups)",
        preset: "futex",
        by: &[
            ("lock", "futex address@process and wait/wake"),
            ("tid", "calling thread (comm-tid) and wait/wake"),
            (
                "caller",
                "lock, wait/wake and the calling function (record with --stacks)",
            ),
        ],
        flag_column: Some("errors"),
        value: "time in futex()",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<Futex>,
        live: Some(crate::analyzer::live::<Futex>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let en = need(trace, "syscalls:sys_enter_futex", &mut missing);
        let ex = need(trace, "syscalls:sys_exit_futex", &mut missing);
        let (Some(en), Some(ex)) = (en, ex) else {
            return Err(Missing::events(missing));
        };
        let (Some(uaddr), Some(op), Some(ret)) =
            (en.field("uaddr"), en.field("op"), ex.field("ret"))
        else {
            return Err(Missing::events(vec![
                "syscalls:sys_enter_futex with uaddr and op".into(),
            ]));
        };
        let newtask = NewTask::bind(trace);
        let pending = PendingLocks::bind(trace).filter(|_| by == "caller");
        let task_names = TaskNames::bind(trace);
        let mut ids = vec![en.id, ex.id];
        ids.extend(newtask.as_ref().map(|n| n.id));
        ids.extend(pending.iter().flat_map(|p| [p.lock, p.locked]));
        ids.extend(task_names.ids());
        ids.sort_unstable();
        ids.dedup();
        // A section that cannot be read leaves the locks as addresses (`kstate profile`
        // says what is wrong with it).
        let stacks = match by {
            "tid" => None,
            _ => Stacks::load(trace).ok().flatten(),
        };
        if by == "caller" && !stacks.as_ref().is_some_and(Stacks::has_chains) {
            return Err(Missing::stacks(
                "call chains at futex() (record with `kstate record -e futex --stacks`)",
            ));
        }
        Ok((
            Futex {
                by_tid: by == "tid",
                enter: en.id,
                exit: ex.id,
                uaddr: uaddr.into(),
                op: op.into(),
                ret: ret.into(),
                newtask,
                task_names,
                pairs: Pairs::default(),
                index: FxMap::default(),
                locks: Vec::new(),
                names: Vec::new(),
                by_caller: by == "caller",
                stacks,
                callers: Vec::new(),
                caller_index: FxMap::default(),
                pending,
            },
            ids,
        ))
    }

    fn measures(&self, id: u32) -> bool {
        id == self.enter || id == self.exit
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        let tid = ev.pid();
        if ev.id == self.enter {
            let op = self.op.get_u64(p, e).unwrap_or(u64::MAX);
            match family(op) {
                Some(f) => {
                    let uaddr = self.uaddr.get_u64(p, e).unwrap_or(0);
                    self.pairs.begin(tid, ev.cpu, (uaddr, f), out);
                }
                // Not reported; a pending pair of this thread would be stale anyway.
                None => {
                    self.pairs.end(tid);
                }
            }
        } else if ev.id == self.exit {
            let Some(o) = self.pairs.end(tid) else {
                return;
            };
            let (uaddr, fam) = o.v;
            let ret = self.ret.get_i64(p, e).unwrap_or(0);
            let lock = if self.by_tid {
                Lock {
                    uaddr: 0,
                    group: tid,
                    known: false,
                    family: fam,
                    caller: 0,
                }
            } else {
                let g = out.tasks.tgid(tid);
                Lock {
                    uaddr,
                    group: g.unwrap_or(tid),
                    known: g.is_some(),
                    family: fam,
                    caller: if self.by_caller {
                        self.caller(tid, g.unwrap_or(tid), o.start)
                    } else {
                        0
                    },
                }
            };
            let n = self.locks.len() as u32;
            let key = *self.index.entry(lock).or_insert(n);
            if key == n {
                self.locks.push(lock);
                // Where the thread group is unknown, the thread may lead it.
                let name = self
                    .stacks
                    .as_mut()
                    .filter(|_| !self.by_tid)
                    .and_then(|s| s.data_name(lock.group as u32, uaddr))
                    .map(|d| d.to_string());
                self.names.push(name);
            }
            out.pair(
                o.mark,
                Sample {
                    start: o.start,
                    value: ev.ts.saturating_sub(o.start),
                    key: key as u64,
                    tid,
                    cpu: o.cpu,
                    flag: ret < 0,
                    kind: Kind::Dur,
                },
            );
        } else {
            if let Some(nt) = self.newtask.as_ref().filter(|n| n.id == ev.id) {
                nt.event(ev, out);
            }
            if let Some(pl) = self.pending.as_mut() {
                if ev.id == pl.lock {
                    let c = pl.caller.get_u64(p, e).unwrap_or(0);
                    pl.open.insert(tid, c);
                } else if ev.id == pl.locked {
                    pl.open.remove(&tid);
                }
            }
            self.task_names.event(ev, out);
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.pairs.len() as u64
    }

    fn notes(&self) -> Vec<String> {
        match (&self.stacks, self.by_caller) {
            (Some(s), true) => s.describe_chains().into_iter().collect(),
            _ => Vec::new(),
        }
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        let l = self.locks[key as usize];
        let fam = match l.family {
            Family::Wait => "wait",
            Family::Wake => "wake",
        };
        if self.by_tid {
            return format!("{} {fam}", tasks.label(l.group));
        }
        let who = if l.known { "" } else { "tid" };
        let lock = match &self.names[key as usize] {
            Some(name) => name.clone(),
            None => format!("{:#x}", l.uaddr),
        };
        match self.by_caller {
            true => format!(
                "{lock}@{who}{} {fam} from {}",
                l.group, self.callers[l.caller as usize]
            ),
            false => format!("{lock}@{who}{} {fam}", l.group),
        }
    }
}

impl Futex {
    /// The caller of thread `tid`'s (of process `group`) futex() call entered at `ts`,
    /// interned.
    fn caller(&mut self, tid: i32, group: i32, ts: u64) -> u32 {
        let in_lock = self
            .pending
            .as_ref()
            .and_then(|p| p.open.get(&tid).copied());
        let named = in_lock.and_then(|ret| {
            let s = self.stacks.as_mut()?;
            s.code_name(group as u32, ret.wrapping_sub(1), ts)
        });
        let label = named.unwrap_or_else(|| {
            match self.stacks.as_ref().map(|s| s.caller_at(tid as u32, ts)) {
                Some(Some(Some(sym))) => caller_label(sym),
                Some(Some(None)) => UNKNOWN_CALLER.to_string(),
                _ => NO_CHAIN.to_string(),
            }
        });
        if let Some(&i) = self.caller_index.get(&label) {
            return i;
        }
        let i = self.callers.len() as u32;
        self.callers.push(label.clone());
        self.caller_index.insert(label, i);
        i
    }
}
