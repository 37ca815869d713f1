//! The events a watch records besides `-e` so that a rule's `{comm=NAME}` sees a task's
//! name as it is now, not as it was at its last context switch.
//!
//! Analyzers whose own events carry no name (`syscall`, `futex`) name a task from the
//! events that do: switches, and exec and rename where recorded. With switches alone a
//! task that `sh -c` forked is named `sh` when it is first switched in, keeps that name
//! through its exec, and is named for what it runs only when it is next switched out:
//! a system-call storm with a CPU to itself may never be, and `{comm=kstate}` never
//! matched it (its key stayed `sh-TID`). An exec or a rename is one event per task.

use kstate_record::tracefs::Tracefs;

use crate::alarm::Rule;

/// The events that rename a task, each recorded where this kernel has it.
const RENAMING: &[(&str, &str)] = &[("sched", "sched_process_exec"), ("task", "task_rename")];

/// `system:event` to record besides `recorded` (the same form) for `rules`: the renaming
/// events, where a rule selects by `comm` and they are not recorded already.
pub fn events_for(rules: &[Rule], recorded: &[String]) -> Vec<String> {
    let by_comm = rules
        .iter()
        .any(|r| r.key().is_some_and(|(name, _)| name == "comm"));
    let Some(tfs) = Tracefs::open().ok().filter(|_| by_comm) else {
        return Vec::new();
    };
    RENAMING
        .iter()
        .filter(|(s, e)| tfs.path("events").join(s).join(e).is_dir())
        .map(|(s, e)| format!("{s}:{e}"))
        .filter(|ev| !recorded.contains(ev))
        .collect()
}
