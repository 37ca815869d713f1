//! The recorder's own threads stay out of the recording, and only they do.
//!
//! The kernel's pid filter (`set_event_notrace_pid`) drops every event while one of the
//! listed tasks is current on a CPU, interrupts included: a timer that expired, a disk
//! request that completed or a packet that arrived while a reader thread happened to run
//! was lost, though it served another task (a `kstate why` of a 300 ms sleep found the
//! wake-up in hard-irq context with no timer before it, 3 to 10 times in 40 sleeps on a
//! busy 2-CPU machine; perf saw every one). So each event gets a filter instead:
//! - in task context, a task's own events (system calls, page faults, allocations...)
//!   are dropped when the task is one of the recorder's; in interrupt context (hard-irq,
//!   soft-irq or NMI in `common_flags`) they are kept whoever was interrupted;
//! - scheduler events about a task (`pid`: wake-ups, migrations, run-time statistics) are
//!   dropped when that task is the recorder's, as the pid filter did;
//! - `sched_switch` is kept: which task held a CPU, the recorder's included, is what the
//!   run-queue and critical-path analyses need (the pid filter kept it too).
//!
//! A user's `--filter` on an event is kept, and-ed with this one.

use std::collections::BTreeMap;

use crate::instance::Instance;
use crate::tracefs::{self, Tracefs};

/// `common_flags` bits of interrupt context: TRACE_FLAG_HARDIRQ, _SOFTIRQ and _NMI.
const IRQ_FLAGS: &str = "0x58";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Kept for every task.
    Switch,
    /// About the task in its `pid` field.
    AboutTask,
    /// About the current task, unless in interrupt context.
    Current,
}

pub(crate) struct OwnFilter {
    /// Per event: its filter file (relative to the instance), kind and the user's filter.
    targets: Vec<(String, Kind, Option<String>)>,
    /// The kernel refused a filter: the pid filter is used instead (it loses interrupts
    /// that land on the recorder, but keeps its own events out).
    fallback: bool,
}

impl OwnFilter {
    /// For `events` (system, event) of the instance; `user`: the `--filter` expressions
    /// written, by filter file.
    pub(crate) fn new<'a>(
        tfs: &Tracefs,
        events: impl IntoIterator<Item = &'a (String, String)>,
        user: &BTreeMap<String, String>,
    ) -> OwnFilter {
        let mut seen = std::collections::BTreeSet::new();
        let targets = events
            .into_iter()
            .filter(|e| seen.insert((*e).clone()))
            .map(|(s, e)| {
                let file = format!("events/{s}/{e}/filter");
                let kind = match (s.as_str(), e.as_str()) {
                    ("sched", "sched_switch") => Kind::Switch,
                    ("sched", _) if has_pid_field(tfs, s, e) => Kind::AboutTask,
                    _ => Kind::Current,
                };
                let mine = user.get(&file).cloned();
                (file, kind, mine)
            })
            .collect();
        OwnFilter {
            targets,
            fallback: false,
        }
    }

    /// Keeps the events of `own` (the recorder's thread ids) out from now on. Best effort:
    /// a recording with them in is still a recording.
    pub(crate) fn apply(&mut self, inst: &Instance, own: &[i32]) {
        if own.is_empty() {
            return;
        }
        if !self.fallback {
            for (file, kind, user) in &self.targets {
                let Some(expr) = expr(*kind, own, user.as_deref()) else {
                    continue;
                };
                if inst.write(file, &expr).is_err() {
                    self.fallback = true;
                    break;
                }
            }
        }
        if self.fallback {
            for (file, _, user) in &self.targets {
                let _ = inst.write(file, user.as_deref().unwrap_or("0"));
            }
            let list: Vec<String> = own.iter().map(i32::to_string).collect();
            let _ = inst.write("set_event_notrace_pid", &list.join(" "));
        }
    }
}

/// The filter of an event of `kind`, with the user's `user`; None: no filter to write.
fn expr(kind: Kind, own: &[i32], user: Option<&str>) -> Option<String> {
    let field = match kind {
        Kind::Switch => return None,
        Kind::AboutTask => "pid",
        Kind::Current => "common_pid",
    };
    let others = own
        .iter()
        .map(|t| format!("{field} != {t}"))
        .collect::<Vec<_>>()
        .join(" && ");
    let mine = match kind {
        Kind::Current => format!("({others}) || (common_flags & {IRQ_FLAGS})"),
        _ => others,
    };
    Some(match user {
        Some(u) => format!("({u}) && ({mine})"),
        None => mine,
    })
}

/// Whether the event's format has a `pid` field (the task the event is about).
fn has_pid_field(tfs: &Tracefs, system: &str, event: &str) -> bool {
    tracefs::read_string(&tfs.path(&format!("events/{system}/{event}/format")))
        .is_ok_and(|f| f.lines().any(|l| l.contains(" pid;")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_say_whose_events_go() {
        assert_eq!(expr(Kind::Switch, &[7], None), None);
        assert_eq!(
            expr(Kind::AboutTask, &[7, 8], None).unwrap(),
            "pid != 7 && pid != 8"
        );
        assert_eq!(
            expr(Kind::Current, &[7], Some("nr == 1")).unwrap(),
            "(nr == 1) && ((common_pid != 7) || (common_flags & 0x58))"
        );
    }
}
