//! User-lock hold times (plockstat -H): how long each pthread mutex was held, from the
//! uprobes `kstate record --holds` places on the C library's lock and unlock.
//!
//! Pairing rules:
//! 1. `kstate_mutex_lock` (entry: mutex, caller's return address) opens a call for the
//!    thread; `kstate_mutex_locked` (return) with result 0 turns it into a hold of
//!    (thread, mutex) from the return's time; a non-zero result (EDEADLK, EINVAL...)
//!    drops it.
//! 2. `kstate_mutex_unlock` (entry) of the same thread and mutex ends the hold: its time
//!    minus the acquisition is the hold time. An unlock with no open hold (the lock was
//!    taken before the recording, or by `trylock`, which is not probed) counts nothing.
//! 3. A second acquisition of a held (thread, mutex) (a recursive mutex) replaces the
//!    first, as any pair whose end was lost.
//!
//! Holds include what the holder did meanwhile, condition-variable waits too (glibc
//! releases and retakes the mutex inside `pthread_cond_wait` without these entry points).
//! Keys: `lock` (the mutex, named from the process's symbols where the recording has its
//! mappings, `@PID`), `caller` (the lock and the function that called
//! `pthread_mutex_lock`).

use kstate_format::{FieldRef, Trace};

use super::futex::NewTask;
use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;
use kstate_symbols::stacks::Stacks;

pub const LOCK: &str = "kstate_mutex_lock";
pub const LOCKED: &str = "kstate_mutex_locked";
pub const UNLOCK: &str = "kstate_mutex_unlock";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    mutex: u64,
    group: i32,
    /// The return address into the caller (`--by caller`), else 0.
    caller: u64,
}

pub struct LockHold {
    by_caller: bool,
    lock: u32,
    locked: u32,
    unlock: u32,
    lock_mutex: FieldRef,
    lock_caller: FieldRef,
    ret: FieldRef,
    unlock_mutex: FieldRef,
    newtask: Option<NewTask>,
    /// Calls under way per thread: (mutex, caller address).
    calls: FxMap<i32, (u64, u64)>,
    /// Holds per (thread, mutex): the caller address.
    holds: Pairs<(i32, u64), u64>,
    index: FxMap<Key, u32>,
    /// Per key, as shown (named when it is made: naming needs the mappings' caches).
    labels: Vec<String>,
    stacks: Option<Stacks>,
}

impl Analyzer for LockHold {
    const INFO: Info = Info {
        name: "lockhold",
        about: "user-lock hold times: how long each pthread mutex was held, per lock or caller",
        needs: "the uprobes of `kstate record --holds` (kstate_mutex_lock, kstate_mutex_locked, kstate_mutex_unlock)",
        preset: "futex",
        by: &[
            ("lock", "the mutex: its symbol or address @process"),
            ("caller", "the mutex and the function that locked it"),
        ],
        flag_column: None,
        value: "hold",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<LockHold>,
        live: Some(crate::analyzer::live::<LockHold>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let l = need(trace, LOCK, &mut missing);
        let d = need(trace, LOCKED, &mut missing);
        let u = need(trace, UNLOCK, &mut missing);
        let (Some(l), Some(d), Some(u)) = (l, d, u) else {
            return Err(Missing::events(missing));
        };
        let (Some(lm), Some(lc), Some(ret), Some(um)) = (
            l.field("mutex"),
            l.field("caller"),
            d.field("ret"),
            u.field("mutex"),
        ) else {
            return Err(Missing::events(vec![
                "kstate_mutex_* probes with mutex, caller and ret".into(),
            ]));
        };
        let newtask = NewTask::bind(trace);
        let mut ids = vec![l.id, d.id, u.id];
        ids.extend(newtask.as_ref().map(|n| n.id));
        Ok((
            LockHold {
                by_caller: by == "caller",
                lock: l.id,
                locked: d.id,
                unlock: u.id,
                lock_mutex: lm.into(),
                lock_caller: lc.into(),
                ret: ret.into(),
                unlock_mutex: um.into(),
                newtask,
                calls: FxMap::default(),
                holds: Pairs::default(),
                index: FxMap::default(),
                labels: Vec::new(),
                // A section that cannot be read leaves locks and callers as addresses.
                stacks: Stacks::load(trace).ok().flatten(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        let tid = ev.pid();
        if ev.id == self.lock {
            let m = self.lock_mutex.get_u64(p, e).unwrap_or(0);
            let c = self.lock_caller.get_u64(p, e).unwrap_or(0);
            self.calls.insert(tid, (m, c));
        } else if ev.id == self.locked {
            let Some((m, c)) = self.calls.remove(&tid) else {
                return;
            };
            if self.ret.get_i64(p, e) == Some(0) {
                self.holds.begin((tid, m), ev.cpu, c, out);
            }
        } else if ev.id == self.unlock {
            let m = self.unlock_mutex.get_u64(p, e).unwrap_or(0);
            let Some(o) = self.holds.end((tid, m)) else {
                return;
            };
            let group = out.tasks.tgid(tid).unwrap_or(tid);
            let key = self.key(
                Key {
                    mutex: m,
                    group,
                    caller: if self.by_caller { o.v } else { 0 },
                },
                o.start,
            );
            out.pair(
                o.mark,
                Sample {
                    start: o.start,
                    value: ev.ts.saturating_sub(o.start),
                    key: key as u64,
                    tid,
                    cpu: o.cpu,
                    flag: false,
                    kind: Kind::Dur,
                },
            );
        } else if let Some(nt) = self.newtask.as_ref().filter(|n| n.id == ev.id) {
            nt.event(ev, out);
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.holds.len() as u64
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        self.labels[key as usize].clone()
    }
}

impl LockHold {
    /// The key's index, made and named at its first hold (starting at `ts`).
    fn key(&mut self, k: Key, ts: u64) -> u32 {
        let n = self.labels.len() as u32;
        let i = *self.index.entry(k).or_insert(n);
        if i == n {
            let st = self.stacks.as_mut();
            let (lock, from) = match st {
                Some(s) => (
                    s.data_name(k.group as u32, k.mutex).map(|d| d.to_string()),
                    (k.caller != 0)
                        .then(|| s.code_name(k.group as u32, k.caller.wrapping_sub(1), ts))
                        .flatten(),
                ),
                None => (None, None),
            };
            let lock = lock.unwrap_or_else(|| format!("{:#x}", k.mutex));
            self.labels.push(match self.by_caller {
                true => {
                    let from = from.unwrap_or_else(|| format!("{:#x}", k.caller));
                    format!("{lock}@{} from {from}", k.group)
                }
                false => format!("{lock}@{}", k.group),
            });
        }
        i
    }
}
