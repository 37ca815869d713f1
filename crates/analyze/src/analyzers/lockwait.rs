//! `lockwait`: kernel lock contention — how long tasks waited for contended locks.
//!
//! Events: lock:contention_begin (`lock_addr`, `flags`) and lock:contention_end
//! (`lock_addr`, `ret`), Linux 5.19+. The kernel emits them only when a lock was not free
//! at once (uncontended acquisitions cost no event), so every pair is a wait.
//!
//! Pairs: per waiting task and lock address (the idle task, pid 0 on every CPU, per CPU):
//! a begin opens the wait, the next end on the same lock closes it. Waits nest — a mutex
//! or rwsem slow path may contend on the lock's own `wait_lock` spinlock inside its wait
//! — which is why the lock address is part of the pair. A second begin on a lock whose
//! wait is open (a mutex's optimistic spin failing and the task going to sleep) continues
//! the same wait: the first begin's time and flags are kept, as `perf lock contention`
//! does.
//!
//! Keys (`--by`):
//! - `lock` (default): the lock, as `SYMBOL (type)` where the address lies in a kernel
//!   symbol of the trace's kallsyms (static locks, on kernels built with
//!   CONFIG_KALLSYMS_ALL), else `0xADDRESS (type)` — locks inside heap objects (an
//!   mm_struct's mmap_lock, a run queue's lock) have no symbol, and the tracepoints record
//!   no caller. The type is the lock's kind from `flags`: spinlock, rwlock, rwsem, mutex,
//!   semaphore, rt-mutex, rwlock-rt, percpu-rwsem.
//! - `kind`: the kind and mode of the wait, as `perf lock` names them: spinlock,
//!   rwlock:R, rwlock:W, rwsem:R, rwsem:W, mutex, semaphore, rt-mutex, rwlock-rt:R/W,
//!   pcpu-sem:R/W.
//! - `task`: the waiting thread (comm-tid).
//!
//! Ranking: `--sort total` (the default) ranks keys by count x average wait — the total
//! is exactly that product — which is LKST's busywait/lock table order. Flag column
//! `failed`: waits that ended without the lock (`ret` != 0, e.g. a killable mutex wait
//! interrupted by a signal).
//!
//! Hold times: these tracepoints time only the waits. Kernel lock hold times need
//! lock:lock_acquired/lock_release (CONFIG_LOCK_STAT kernels only); the header says whether
//! the file has them, and where it has not, that they were not recorded, rather than
//! leaving a reader to take the silence for zero.
//!
//! The `flags` bits are the kernel's LCB_F_* (include/trace/events/lock.h), unchanged since
//! they appeared: SPIN 1, READ 2, WRITE 4, RT 8, PERCPU 16, MUTEX 32.

use kstate_format::{FieldRef, Trace};

use super::softirq::NO_FIELD;
use crate::analyzer::{need, Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;
use kstate_symbols::ksyms::LazyKsyms;

const SPIN: u64 = 1;
const READ: u64 = 2;
const WRITE: u64 = 4;
const RT: u64 = 8;
const PERCPU: u64 = 16;
const MUTEX: u64 = 32;
const MUTEX_SPIN: u64 = MUTEX | SPIN;

/// The lock's kind, whatever the mode of this wait.
fn lock_type(flags: u64) -> Option<&'static str> {
    let rw = flags & (READ | WRITE) != 0;
    Some(match flags & !(READ | WRITE) {
        0 if rw => "rwsem",
        0 => "semaphore",
        SPIN if rw => "rwlock",
        SPIN => "spinlock",
        RT if rw => "rwlock-rt",
        RT => "rt-mutex",
        PERCPU if rw => "percpu-rwsem",
        MUTEX | MUTEX_SPIN if !rw => "mutex",
        _ => return None,
    })
}

/// The kind and mode of one wait, as perf lock's `lock_type_table` prints it.
fn wait_kind(flags: u64) -> String {
    let mode = if flags & READ != 0 {
        ":R"
    } else if flags & WRITE != 0 {
        ":W"
    } else {
        ""
    };
    match lock_type(flags) {
        Some("rwsem") => format!("rwsem{mode}"),
        Some("rwlock") => format!("rwlock{mode}"),
        Some("rwlock-rt") => format!("rwlock-rt{mode}"),
        Some("percpu-rwsem") => format!("pcpu-sem{mode}"),
        Some(t) => t.to_string(),
        None => format!("flags={flags:#x}"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    Lock,
    Kind,
    Task,
}

pub struct LockWait {
    by: By,
    begin: u32,
    end: u32,
    begin_addr: FieldRef,
    flags: FieldRef,
    end_addr: FieldRef,
    ret: FieldRef,
    /// Open waits per (waiter, lock address); the waiter is the tid, or -1-cpu for pid 0.
    open: Pairs<(i64, u64), u64>,
    /// `--by lock`: (address, flags as the lock type) -> key, and back.
    index: FxMap<(u64, u64), u64>,
    keys: Vec<(u64, u64)>,
    ksyms: LazyKsyms,
    /// What the file says about kernel lock hold times (a header note).
    holds_note: String,
}

impl LockWait {
    fn lock_key(&mut self, addr: u64, flags: u64) -> u64 {
        // One row per lock, whatever the mode (a rwsem's readers and writers together).
        let t = flags & !(READ | WRITE) | if flags & (READ | WRITE) != 0 { READ } else { 0 };
        let n = self.keys.len() as u64;
        let k = *self.index.entry((addr, t)).or_insert(n);
        if k == n {
            self.keys.push((addr, flags));
        }
        k
    }
}

impl Analyzer for LockWait {
    const INFO: Info = Info {
        name: "lockwait",
        about: "kernel lock contention: wait time per lock (sorted by count x avg = total)",
        needs: "lock:contention_begin + lock:contention_end",
        preset: "lock",
        by: &[
            (
                "lock",
                "the lock: SYMBOL (type) from kallsyms, else 0xADDRESS (type)",
            ),
            ("kind", "lock kind and mode (spinlock, rwsem:W, mutex, ...)"),
            ("task", "waiting thread (comm-tid)"),
        ],
        flag_column: Some("failed"),
        value: "wait",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<LockWait>,
        live: Some(crate::analyzer::live::<LockWait>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let b = need(trace, "lock:contention_begin", &mut missing);
        let e = need(trace, "lock:contention_end", &mut missing);
        let (Some(b), Some(e)) = (b, e) else {
            return Err(Missing::events(missing));
        };
        let (Some(begin_addr), Some(flags), Some(end_addr)) =
            (b.field("lock_addr"), b.field("flags"), e.field("lock_addr"))
        else {
            return Err(Missing::events(vec![
                "lock:contention_begin/end with fields lock_addr and flags".into(),
            ]));
        };
        let by = match by {
            "kind" => By::Kind,
            "task" => By::Task,
            _ => By::Lock,
        };
        let s = LockWait {
            by,
            begin: b.id,
            end: e.id,
            begin_addr: begin_addr.into(),
            flags: flags.into(),
            end_addr: end_addr.into(),
            ret: e.field("ret").map_or(NO_FIELD, FieldRef::from),
            open: Pairs::default(),
            index: FxMap::default(),
            keys: Vec::new(),
            ksyms: if by == By::Lock {
                LazyKsyms::new(trace.kallsyms.as_deref())
            } else {
                LazyKsyms::default()
            },
            holds_note: kernel_holds_note(trace),
        };
        Ok((s, vec![b.id, e.id]))
    }

    #[inline]
    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let pid = ev.pid();
        let waiter = if pid == 0 {
            -1 - ev.cpu as i64
        } else {
            pid as i64
        };
        if ev.id == self.begin {
            let Some(addr) = self.begin_addr.get_u64(ev.payload, ev.endian) else {
                return;
            };
            let flags = self.flags.get_u64(ev.payload, ev.endian).unwrap_or(0);
            self.open.begin_first((waiter, addr), ev.cpu, flags, out);
        } else if ev.id == self.end {
            let Some(addr) = self.end_addr.get_u64(ev.payload, ev.endian) else {
                return;
            };
            let Some(o) = self.open.end((waiter, addr)) else {
                out.unmatched();
                return;
            };
            let ret = self.ret.get_i64(ev.payload, ev.endian).unwrap_or(0);
            let key = match self.by {
                By::Lock => self.lock_key(addr, o.v),
                By::Kind => o.v,
                By::Task => pid as u32 as u64,
            };
            out.pair(
                o.mark,
                Sample {
                    start: o.start,
                    value: ev.ts.saturating_sub(o.start),
                    key,
                    tid: pid,
                    cpu: o.cpu,
                    flag: ret != 0,
                    kind: Kind::Dur,
                },
            );
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.open.len() as u64
    }

    fn notes(&self) -> Vec<String> {
        vec![self.holds_note.clone()]
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        match self.by {
            By::Task => tasks.label(key as u32 as i32),
            By::Kind => wait_kind(key),
            By::Lock => {
                let Some(&(addr, flags)) = self.keys.get(key as usize) else {
                    return format!("key {key}");
                };
                let t = lock_type(flags).map_or_else(|| format!("flags={flags:#x}"), String::from);
                match self.ksyms.name(addr) {
                    Some(sym) => format!("{sym} ({t})"),
                    None => format!("{addr:#x} ({t})"),
                }
            }
        }
    }
}

/// Kernel lock hold times need lock:lock_acquired/lock_release, which the kernel has
/// only with CONFIG_LOCK_STAT (lock:contention_begin/end, which `lockwait` pairs, are
/// always there since 5.19): says which case `trace` is, instead of printing zeros.
pub fn kernel_holds_note(trace: &Trace) -> String {
    let has = |n: &str| trace.events.find(n).is_some();
    if has("lock:lock_acquired") || has("lock:lock_release") {
        return "kernel lock hold times: lock:lock_acquired/lock_release are in this file (kstate does not pair them into hold times yet)".into();
    }
    if recorded_here(trace) && !live_event("lock/lock_acquired") {
        "kernel lock hold times: not recorded (this kernel has no lock:lock_acquired; needs CONFIG_LOCK_STAT)".into()
    } else {
        "kernel lock hold times: not recorded (no lock:lock_acquired in this file; a kernel has it only with CONFIG_LOCK_STAT)".into()
    }
}

/// Whether `trace` was recorded on the running kernel: its uname names this release.
fn recorded_here(trace: &Trace) -> bool {
    let Ok(rel) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let rel = rel.trim();
    trace
        .uname
        .as_deref()
        .is_some_and(|u| !rel.is_empty() && u.split_whitespace().any(|w| w == rel))
}

/// Whether the running kernel's tracefs has the event (`system/name`); a tracefs that
/// cannot be read counts as having it, so that nothing is claimed about the kernel.
fn live_event(event: &str) -> bool {
    let roots = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    let Some(root) = roots
        .iter()
        .find(|r| std::path::Path::new(r).join("events").is_dir())
    else {
        return true;
    };
    std::path::Path::new(root)
        .join("events")
        .join(event)
        .is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_as_perf_names_them() {
        for (flags, kind, ty) in [
            (0, "semaphore", "semaphore"),
            (SPIN, "spinlock", "spinlock"),
            (SPIN | READ, "rwlock:R", "rwlock"),
            (SPIN | WRITE, "rwlock:W", "rwlock"),
            (READ, "rwsem:R", "rwsem"),
            (WRITE, "rwsem:W", "rwsem"),
            (RT, "rt-mutex", "rt-mutex"),
            (RT | READ, "rwlock-rt:R", "rwlock-rt"),
            (PERCPU | WRITE, "pcpu-sem:W", "percpu-rwsem"),
            (MUTEX, "mutex", "mutex"),
            (MUTEX | SPIN, "mutex", "mutex"),
        ] {
            assert_eq!(wait_kind(flags), kind, "{flags:#x}");
            assert_eq!(lock_type(flags), Some(ty), "{flags:#x}");
        }
        assert_eq!(wait_kind(PERCPU), "flags=0x10");
        assert_eq!(lock_type(MUTEX | READ), None);
    }
}
