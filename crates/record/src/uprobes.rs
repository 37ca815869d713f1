//! User-lock hold times (`kstate record --holds`): uprobes on the C library's
//! `pthread_mutex_lock` (entry: the mutex and the caller's return address; return: the
//! result) and `pthread_mutex_unlock` (entry: the mutex), in a group of this recorder's
//! own, `kstate_PID_START`, enabled only in its tracefs instance.
//!
//! The probe definitions are the kernel's global list (`uprobe_events`); they are removed
//! on every way out: the normal end, Ctrl-C and SIGTERM (which end through the normal path)
//! and errors (on drop, after the instance, which holds them enabled, is gone); those of a
//! recorder killed with SIGKILL by the next recorder, as for its instance.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment, ObjectSymbol};

use crate::error::{Error, Result};
use crate::instance::start_time;
use crate::tracefs::{self, Tracefs};

const PREFIX: &str = "kstate_";

/// The probes: (event name, kind and symbol, fetch arguments).
const PROBES: &[(&str, &str, &str, &str)] = &[
    (
        "kstate_mutex_lock",
        "p",
        "pthread_mutex_lock",
        "mutex=%di:x64 caller=+0(%sp):x64",
    ),
    (
        "kstate_mutex_locked",
        "r",
        "pthread_mutex_lock",
        "ret=$retval:s32",
    ),
    (
        "kstate_mutex_unlock",
        "p",
        "pthread_mutex_unlock",
        "mutex=%di:x64",
    ),
];

/// This recorder's probes, removed on drop.
pub struct Uprobes {
    events_file: PathBuf,
    group: String,
    /// The C library probed.
    pub libc: String,
    removed: bool,
}

impl Uprobes {
    /// Defines the probes on the C library kstate itself runs with (the one programs
    /// started from the same system use).
    pub fn create(tfs: &Tracefs) -> Result<Uprobes> {
        let events_file = tfs.path("uprobe_events");
        if !events_file.exists() {
            return Err(Error::new(format!(
                "--holds: {} is missing: this kernel has no uprobes (CONFIG_UPROBE_EVENTS)",
                events_file.display()
            )));
        }
        let libc = own_libc().ok_or_else(|| {
            Error::new("--holds: cannot find the C library in /proc/self/maps".to_string())
        })?;
        let offsets = symbol_offsets(&libc, &["pthread_mutex_lock", "pthread_mutex_unlock"])
            .map_err(|e| Error::new(format!("--holds: {libc}: {e}")))?;
        let pid = std::process::id() as i32;
        let start = start_time(pid).ok_or_else(|| Error::new("cannot read /proc/self/stat"))?;
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut u = Uprobes {
            events_file,
            group: format!("{PREFIX}{pid}_{start}_{seq}"),
            libc: libc.clone(),
            removed: false,
        };
        for &(name, kind, sym, args) in PROBES {
            let off = offsets
                .iter()
                .find(|o| o.0 == sym)
                .map(|o| o.1)
                .unwrap_or(0);
            let def = format!("{kind}:{}/{name} {libc}:{off:#x} {args}", u.group);
            if let Err(e) = tracefs::append(&u.events_file, &def) {
                let _ = u.remove();
                return Err(Error::new(format!("--holds: defining {def:?}: {e}")));
            }
        }
        Ok(u)
    }

    /// The tracefs event system of the probes (an `-e` argument).
    pub fn system(&self) -> &str {
        &self.group
    }

    /// Removes the probes; the instance must no longer have them enabled.
    pub fn remove(&mut self) -> Result<()> {
        self.removed = true;
        remove_group(&self.events_file, &self.group)
    }
}

impl Drop for Uprobes {
    fn drop(&mut self) {
        if !self.removed {
            let _ = self.remove();
        }
    }
}

fn remove_group(events_file: &Path, group: &str) -> Result<()> {
    let mut last = Ok(());
    for &(name, ..) in PROBES {
        // The kernel refuses (EBUSY) while an instance still closes its use of the event.
        for attempt in 0..50 {
            match tracefs::append(events_file, &format!("-:{group}/{name}")) {
                Ok(()) => break,
                Err(e) => {
                    let defined = std::fs::read_to_string(events_file)
                        .is_ok_and(|t| t.contains(&format!(":{group}/{name} ")));
                    if !defined {
                        break;
                    }
                    if attempt == 49 {
                        last = Err(e);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }
    last
}

/// Removes the probes of kstate recorders that no longer run; returns their groups.
pub fn remove_stale(tfs: &Tracefs) -> Vec<String> {
    let file = tfs.path("uprobe_events");
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Vec::new();
    };
    let mut groups: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.split_once(':'))
        .filter_map(|(_, ev)| Some(ev.split_once('/')?.0.to_string()))
        .filter(|g| g.starts_with(PREFIX))
        .collect();
    groups.sort();
    groups.dedup();
    groups.retain(|g| {
        let mut f = g[PREFIX.len()..].split('_');
        let owner = (|| {
            Some((
                f.next()?.parse::<i32>().ok()?,
                f.next()?.parse::<u64>().ok()?,
            ))
        })();
        matches!(owner, Some((pid, start)) if start_time(pid) != Some(start))
    });
    groups.retain(|g| remove_group(&file, g).is_ok());
    groups
}

/// The C library this process is linked with, from its mappings.
fn own_libc() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            let base = p.rsplit('/').next().unwrap_or(p);
            base.starts_with("libc.so") || base.starts_with("libc-")
        })
        .map(str::to_string)
}

/// File offsets of the named functions (what a uprobe is placed at).
fn symbol_offsets(path: &str, names: &[&str]) -> std::result::Result<Vec<(String, u64)>, String> {
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    let f = object::File::parse(&*data).map_err(|e| format!("not an ELF file ({e})"))?;
    let mut out = Vec::new();
    for &want in names {
        let addr = f
            .dynamic_symbols()
            .chain(f.symbols())
            .find(|s| s.name() == Ok(want) && s.address() != 0)
            .map(|s| s.address())
            .ok_or_else(|| format!("no symbol {want}"))?;
        let off = f
            .segments()
            .find_map(|s| {
                let (o, size) = s.file_range();
                (addr >= s.address() && addr < s.address() + size).then(|| addr - s.address() + o)
            })
            .ok_or_else(|| format!("{want} at {addr:#x} is in no loaded segment"))?;
        out.push((want.to_string(), off));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's libc has the functions, at offsets inside the file.
    #[test]
    fn libc_offsets() {
        let libc = own_libc().expect("a dynamically linked test binary");
        let offs = symbol_offsets(&libc, &["pthread_mutex_lock", "pthread_mutex_unlock"]).unwrap();
        let len = std::fs::metadata(&libc).unwrap().len();
        assert!(offs.iter().all(|o| o.1 > 0 && o.1 < len), "{offs:?}");
        assert_ne!(offs[0].1, offs[1].1);
        assert!(symbol_offsets(&libc, &["no_such_function_here"]).is_err());
    }
}
