//! Event presets (what LKST's event sets measured) and resolving what the user asked for
//! against the events this kernel has.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};

pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    /// `system:event`, or `system:*` for a whole system.
    pub events: &'static [&'static str],
}

const SYSCALL: &[&str] = &["raw_syscalls:sys_enter", "raw_syscalls:sys_exit"];
const SOFTIRQ: &[&str] = &[
    "irq:softirq_raise",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "irq:irq_handler_entry",
    "irq:irq_handler_exit",
];
const MEM: &[&str] = &[
    "kmem:mm_page_alloc",
    "kmem:mm_page_free",
    "kmem:mm_page_free_batched",
    "kmem:kmalloc",
    "kmem:kfree",
    "kmem:kmem_cache_alloc",
    "kmem:kmem_cache_free",
    "vmscan:mm_vmscan_direct_reclaim_begin",
    "vmscan:mm_vmscan_direct_reclaim_end",
    "vmscan:mm_vmscan_kswapd_wake",
    "vmscan:mm_vmscan_kswapd_sleep",
    "vmscan:mm_vmscan_wakeup_kswapd",
    "vmscan:mm_vmscan_memcg_reclaim_begin",
    "vmscan:mm_vmscan_memcg_reclaim_end",
    "writeback:balance_dirty_pages",
    "writeback:writeback_start",
    "writeback:writeback_written",
];
const BIO: &[&str] = &[
    "block:block_rq_insert",
    "block:block_rq_issue",
    "block:block_rq_complete",
    "block:block_rq_requeue",
    "block:block_bio_queue",
];
const NET: &[&str] = &[
    "net:net_dev_queue",
    "net:net_dev_start_xmit",
    "net:net_dev_xmit",
    "net:netif_receive_skb",
    "net:netif_rx",
    "napi:napi_poll",
];
const LOCK: &[&str] = &["lock:contention_begin", "lock:contention_end"];
const SCHED: &[&str] = &[
    "sched:sched_switch",
    "sched:sched_wakeup",
    "sched:sched_wakeup_new",
    "sched:sched_waking",
    "sched:sched_migrate_task",
];
const PROC: &[&str] = &[
    "sched:sched_process_fork",
    "sched:sched_process_exec",
    "sched:sched_process_exit",
    "sched:sched_process_free",
    "task:task_rename",
];
/// task_newtask tells the futex analyzer which process a new thread belongs to.
const FUTEX: &[&str] = &[
    "syscalls:sys_enter_futex",
    "syscalls:sys_exit_futex",
    "task:task_newtask",
];

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "syscall",
        about: "every system call's entry and exit",
        events: SYSCALL,
    },
    Preset {
        name: "softirq",
        about: "soft-interrupt raise/entry/exit and hard-interrupt handlers",
        events: SOFTIRQ,
    },
    Preset {
        name: "mem",
        about: "page allocation/free, kmalloc, direct reclaim and kswapd, writeback",
        events: MEM,
    },
    Preset {
        name: "bio",
        about: "block requests: insert, issue, complete",
        events: BIO,
    },
    Preset {
        name: "net",
        about: "network transmit queue and xmit, receive",
        events: NET,
    },
    Preset {
        name: "lock",
        about: "kernel lock contention begin/end",
        events: LOCK,
    },
    Preset {
        name: "sched",
        about: "context switches, wake-ups, migrations",
        events: SCHED,
    },
    Preset {
        name: "proc",
        about: "process fork, exec, exit",
        events: PROC,
    },
    Preset {
        name: "futex",
        about: "user-space lock waits (futex system calls)",
        events: FUTEX,
    },
    Preset {
        name: "perf",
        about: "a general bottleneck hunt: sched, proc, softirq, bio, lock and reclaim",
        events: &[
            "sched:sched_switch",
            "sched:sched_wakeup",
            "sched:sched_wakeup_new",
            "sched:sched_waking",
            "sched:sched_migrate_task",
            "sched:sched_process_fork",
            "sched:sched_process_exec",
            "sched:sched_process_exit",
            "irq:softirq_raise",
            "irq:softirq_entry",
            "irq:softirq_exit",
            "irq:irq_handler_entry",
            "irq:irq_handler_exit",
            "block:block_rq_insert",
            "block:block_rq_issue",
            "block:block_rq_complete",
            "lock:contention_begin",
            "lock:contention_end",
            "vmscan:mm_vmscan_direct_reclaim_begin",
            "vmscan:mm_vmscan_direct_reclaim_end",
            "vmscan:mm_vmscan_kswapd_wake",
            "vmscan:mm_vmscan_kswapd_sleep",
        ],
    },
    Preset {
        name: "all",
        about: "every preset above together",
        events: &[],
    },
];

/// Names of the events of preset `name` (for `all`, the union of the others).
pub fn preset_events(name: &str) -> Option<Vec<&'static str>> {
    if name == "all" {
        let mut seen = BTreeSet::new();
        let mut v = Vec::new();
        for p in PRESETS.iter().filter(|p| p.name != "all") {
            for e in p.events {
                if seen.insert(*e) {
                    v.push(*e);
                }
            }
        }
        return Some(v);
    }
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .map(|p| p.events.to_vec())
}

/// What the user asked for, resolved against the kernel's `events/` directory.
#[derive(Debug, Default)]
pub struct Selection {
    /// `(system, event)` to enable, in request order, without duplicates.
    pub events: Vec<(String, String)>,
    /// Preset members this kernel lacks (warned about; the rest still records).
    pub missing: Vec<String>,
}

/// Resolves `-e` arguments: a preset name, `SYSTEM`, `SYSTEM:EVENT` or `SYSTEM:*`.
/// Something named explicitly that does not exist is an error listing near matches;
/// preset members this kernel lacks are only reported in `missing`.
pub fn resolve(events_dir: &Path, specs: &[String]) -> Result<Selection> {
    let available = list_events(events_dir)?;
    let mut sel = Selection::default();
    let mut seen = BTreeSet::new();
    let mut add = |sel: &mut Selection, s: &str, e: &str| {
        if seen.insert((s.to_string(), e.to_string())) {
            sel.events.push((s.to_string(), e.to_string()));
        }
    };
    for spec in specs {
        for spec in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some(members) = preset_events(spec) {
                for m in members {
                    let (s, e) = m.split_once(':').expect("presets name system:event");
                    if available.contains(&(s.to_string(), e.to_string())) {
                        add(&mut sel, s, e);
                    } else {
                        sel.missing.push(m.to_string());
                    }
                }
                continue;
            }
            let (sys, ev) = match spec.split_once(':') {
                Some((s, e)) => (s, e),
                None => (spec, "*"),
            };
            let matched: Vec<_> = available
                .iter()
                .filter(|(s, e)| s == sys && (ev == "*" || e == ev))
                .cloned()
                .collect();
            if matched.is_empty() {
                return Err(unknown(spec, &available));
            }
            for (s, e) in matched {
                add(&mut sel, &s, &e);
            }
        }
    }
    if sel.events.is_empty() {
        return Err(Error::new(
            "none of the requested events exists on this kernel; nothing to record",
        ));
    }
    Ok(sel)
}

fn unknown(spec: &str, available: &BTreeSet<(String, String)>) -> Error {
    let mut names: Vec<String> = PRESETS.iter().map(|p| p.name.to_string()).collect();
    let systems: BTreeSet<&String> = available.iter().map(|(s, _)| s).collect();
    names.extend(systems.iter().map(|s| s.to_string()));
    names.extend(available.iter().map(|(s, e)| format!("{s}:{e}")));
    let want = spec.to_ascii_lowercase();
    let mut near: Vec<(usize, &String)> = names
        .iter()
        .map(|n| (distance(&want, &n.to_ascii_lowercase()), n))
        .filter(|(d, n)| *d <= 2.max(want.len() / 4) || (want.len() >= 4 && n.contains(&want)))
        .collect();
    near.sort();
    // A preset and a system may share a name (sched): suggest it once.
    let mut shown = BTreeSet::new();
    near.retain(|(_, n)| shown.insert(n.as_str()));
    near.truncate(6);
    let near = if near.is_empty() {
        String::new()
    } else {
        format!(
            "did you mean: {}? ",
            near.iter()
                .map(|(_, n)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let presets: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
    // A naming mistake is the user's to fix (exit 2), so the message says what is valid.
    Error::bad_argument(format!(
        "unknown event, system or preset '{spec}': {near}-e takes a preset ({}), a SYSTEM, \
         SYSTEM:EVENT or SYSTEM:* of this kernel ({} systems, {} events: its available_events); \
         `kstate record --list-presets` lists each preset's events",
        presets.join(", "),
        systems.len(),
        available.len()
    ))
}

/// Levenshtein distance, for suggestions.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Every `(system, event)` under `events_dir` that has a format file.
pub fn list_events(events_dir: &Path) -> Result<BTreeSet<(String, String)>> {
    let rd =
        std::fs::read_dir(events_dir).map_err(|e| Error::io("listing events in", events_dir, e))?;
    let mut out = BTreeSet::new();
    for sys in rd.flatten() {
        if !sys.path().is_dir() {
            continue;
        }
        let sname = sys.file_name().to_string_lossy().into_owned();
        let Ok(evs) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in evs.flatten() {
            if ev.path().join("format").exists() {
                out.insert((sname.clone(), ev.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_the_union_without_duplicates() {
        let all = preset_events("all").unwrap();
        let set: BTreeSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len());
        for p in PRESETS.iter().filter(|p| p.name != "all") {
            for e in p.events {
                assert!(set.contains(e), "{e} of {} missing from all", p.name);
            }
        }
    }

    #[test]
    fn edit_distance() {
        assert_eq!(distance("sched", "sched"), 0);
        assert_eq!(distance("shced", "sched"), 2);
        assert_eq!(distance("", "abc"), 3);
    }
}
