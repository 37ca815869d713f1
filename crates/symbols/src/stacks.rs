//! Call chains taken at tracepoint hits (`kstate record --stacks`: the STACKS section, one
//! user call chain at every futex() entry), found again for the trace's own events by
//! thread and time, and the caller each shows.
//!
//! The perf event and the trace event fire at the same tracepoint, on the same clock, a
//! few microseconds apart at most; a thread enters futex() again only after the previous
//! call returned. So the chain of an event is the same thread's chain nearest in time,
//! within [`JOIN_WINDOW_NS`].
//!
//! The caller is the first frame, from the leaf up, that is not lock machinery: not in
//! the C library or the dynamic loader (`libc.so*`, `libpthread*`, `ld-linux*`, `ld.so*`:
//! `syscall`, `__lll_lock_wait`, `pthread_mutex_lock`, malloc's own locking), not one of
//! Rust std's lock internals (names starting `std::sync::`, `std::sys::`, the same after
//! a `<`, or `core::ptr::drop_in_place<std::sync::`: `Mutex::lock`, the guard's drop,
//! `<std::sys::sync::mutex::futex::Mutex>::lock_contended`), and
//! named (an `[unknown]` frame is where a walk went astray). Chains recorded with a user
//! stack copy are unwound through the files' CFI ([`super::unwind`]), so glibc's own
//! functions (built without frame pointers) keep their callers; chains without one are
//! the kernel's frame-pointer walk, which loses the frames of code built without them.

use std::collections::HashMap;

use kstate_format::perf::decode::PerfRecord;
use kstate_format::{sections, Error, Trace};

use crate::data::DataName;
use crate::samples::read_section;
use crate::unwind::ChainCounts;
use crate::{frames, Kind, Sym, Symbolizer};

/// How far apart in time a trace event and its call chain may be.
pub const JOIN_WINDOW_NS: u64 = 50_000;

/// Call chains by thread, reduced to their callers; and the mappings, to name data.
pub struct Stacks {
    sy: Symbolizer,
    /// Per thread: (time, caller symbol or [`NO_CALLER`]), by time.
    by_tid: HashMap<u32, Vec<(u64, u32)>>,
    /// The tracepoint the chains were taken at, when there are any.
    pub event: Option<String>,
    pub chains: u64,
    /// Records the kernel lost.
    pub lost: u64,
    /// How the chains' user parts were found.
    pub unwound: ChainCounts,
}

const NO_CALLER: u32 = u32::MAX;

/// Whether a frame is lock machinery rather than the code that took the lock.
pub fn is_lock_internal(s: &Sym) -> bool {
    if s.kind.is_kernel() || s.name.starts_with('[') {
        return true;
    }
    let img = s.image.as_str();
    let libc = [
        "libc.so",
        "libc-",
        "libpthread",
        "ld-linux",
        "ld.so",
        "ld64.so",
    ];
    if libc.iter().any(|p| img.starts_with(p)) {
        return true;
    }
    // Methods are named `<Type>::method`: the type's path decides.
    let name = s.name.trim_start_matches('<');
    let std = [
        "std::sync::",
        "std::sys::",
        "core::ptr::drop_in_place<std::sync::",
    ];
    std.iter().any(|p| name.starts_with(p))
}

impl Stacks {
    /// The STACKS section's chains, with the mappings of it and of the SAMPLES section;
    /// None where the recording has neither.
    pub fn load(trace: &Trace) -> Result<Option<Stacks>, Error> {
        let stacks = read_section(trace, sections::ids::STACKS)?;
        let samples = read_section(trace, sections::ids::SAMPLES)?;
        if stacks.is_none() && samples.is_none() {
            return Ok(None);
        }
        let mut side: Vec<(u64, PerfRecord)> = Vec::new();
        for s in stacks.iter().chain(&samples) {
            side.extend(s.side.iter().cloned());
        }
        let mut sy = Symbolizer::new(trace, &mut side);
        let mut by_tid: HashMap<u32, Vec<(u64, u32)>> = HashMap::new();
        let mut st = Stacks {
            sy: Symbolizer::new(trace, &mut []),
            by_tid: HashMap::new(),
            event: None,
            chains: 0,
            lost: 0,
            unwound: ChainCounts::default(),
        };
        if let Some(sec) = &stacks {
            st.event = Some(sec.header.event.clone());
            st.chains = sec.samples.len() as u64;
            st.lost = sec.lost;
            st.unwound = sec.chains;
            let mut chain = Vec::new();
            for s in &sec.samples {
                frames(s, &mut sy, &mut chain);
                let caller = chain
                    .iter()
                    .copied()
                    .find(|&id| !is_lock_internal(sy.sym(id)))
                    .unwrap_or(NO_CALLER);
                by_tid.entry(s.tid).or_default().push((s.time, caller));
            }
        }
        for v in by_tid.values_mut() {
            v.sort_unstable();
        }
        st.sy = sy;
        st.by_tid = by_tid;
        Ok(Some(st))
    }

    /// `user chains at EVENT: N unwound by CFI, ...`, for output headers.
    pub fn describe_chains(&self) -> Option<String> {
        let e = self.event.as_ref()?;
        Some(format!("user chains at {e}: {}", self.unwound.describe()))
    }

    /// Whether call chains were recorded (not just mappings).
    pub fn has_chains(&self) -> bool {
        self.event.is_some()
    }

    /// The caller shown by thread `tid`'s chain nearest to `ts`: Some(None) where the
    /// chain was found but shows no caller, None where there is no chain for the event.
    pub fn caller_at(&self, tid: u32, ts: u64) -> Option<Option<&Sym>> {
        let v = self.by_tid.get(&tid)?;
        let n = v.partition_point(|c| c.0 < ts);
        let near = [n.checked_sub(1), Some(n)]
            .into_iter()
            .flatten()
            .filter_map(|i| v.get(i))
            .min_by_key(|c| c.0.abs_diff(ts))?;
        if near.0.abs_diff(ts) > JOIN_WINDOW_NS {
            return None;
        }
        Some((near.1 != NO_CALLER).then(|| self.sy.sym(near.1)))
    }

    /// The function at code address `addr` of process `pid` at time `ts`, as callers are
    /// shown; None where no mapping or symbol names it.
    pub fn code_name(&mut self, pid: u32, addr: u64, ts: u64) -> Option<String> {
        let id = self.sy.user(pid, addr, ts);
        let s = self.sy.sym(id);
        (!s.name.starts_with('[')).then(|| caller_label(s))
    }

    /// Names a data address of process `pid` (see [`super::data`]).
    pub fn data_name(&mut self, pid: u32, addr: u64) -> Option<DataName> {
        self.sy.data_name(pid, addr)
    }
}

/// How a caller is shown: the function, and for a shared library its file.
pub fn caller_label(s: &Sym) -> String {
    match s.kind {
        Kind::Library => format!("{} ({})", s.name, s.image),
        _ => s.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, image: &str, kind: Kind) -> Sym {
        Sym {
            name: name.into(),
            image: image.into(),
            path: None,
            kind,
        }
    }

    #[test]
    fn lock_machinery_is_skipped() {
        let internal = [
            sym("syscall", "libc.so.6", Kind::Library),
            sym("__lll_lock_wait", "libc.so.6", Kind::Library),
            sym("_dl_runtime_resolve", "ld-linux-x86-64.so.2", Kind::Library),
            sym(
                "std::sync::poison::mutex::Mutex<T>::lock",
                "app",
                Kind::Binary,
            ),
            sym(
                "std::sys::sync::mutex::futex::Mutex::lock_contended",
                "app",
                Kind::Binary,
            ),
            sym(
                "<std::sys::sync::mutex::futex::Mutex>::lock_contended",
                "app",
                Kind::Binary,
            ),
            sym(
                "core::ptr::drop_in_place<std::sync::poison::mutex::MutexGuard<u64>>",
                "app",
                Kind::Binary,
            ),
            sym("[unknown]", "[unknown]", Kind::Unknown),
            sym("do_syscall_64", "[kernel.kallsyms]", Kind::Kernel),
        ];
        for s in &internal {
            assert!(is_lock_internal(s), "{s:?}");
        }
        for s in [
            sym("app::worker", "app", Kind::Binary),
            sym("g_mutex_lock", "libglib-2.0.so.0", Kind::Library),
            sym("std::thread::sleep", "app", Kind::Binary),
        ] {
            assert!(!is_lock_internal(&s), "{s:?}");
        }
        assert_eq!(
            caller_label(&sym("g_mutex_lock", "libglib-2.0.so.0", Kind::Library)),
            "g_mutex_lock (libglib-2.0.so.0)"
        );
    }
}
