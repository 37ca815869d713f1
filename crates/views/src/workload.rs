//! The recorded command's threads: the process `kstate record -- CMD` started and every
//! task it forked, followed through `sched:sched_process_fork`. Analyses that explain the
//! command's time (classification, findings) count only these threads.

use std::collections::HashSet;

use kstate_format::sections::{self, Recording};
use kstate_format::{FieldRef, Trace};

use kstate_format::stream::merge::{IdFilter, Merger};

/// `pid` and every task forked from it or from one of its descendants. Without fork events
/// (or with an unreadable one) the set holds what was found so far, at least `pid`.
pub fn workload_tids(trace: &Trace, pid: i32) -> HashSet<i32> {
    let mut set = HashSet::from([pid]);
    let Some(ev) = trace.events.find("sched:sched_process_fork") else {
        return set;
    };
    let (Some(pp), Some(cp)) = (ev.field("parent_pid"), ev.field("child_pid")) else {
        return set;
    };
    let (pp, cp) = (FieldRef::from(pp), FieldRef::from(cp));
    let Ok(mut m) = Merger::new(trace, None, IdFilter::only([ev.id])) else {
        return set;
    };
    while let Ok(Some(e)) = m.next() {
        let parent = pp.get_i64(e.payload, e.endian).unwrap_or(-1) as i32;
        let child = cp.get_i64(e.payload, e.endian).unwrap_or(-1) as i32;
        if set.contains(&parent) {
            set.insert(child);
        }
    }
    set
}

/// The recorded command's threads, where the file names the command's pid (its RECORDING
/// section); `None` for a system-wide recording or a file without that section.
pub fn workload_scope(trace: &Trace) -> Option<HashSet<i32>> {
    let rec = trace
        .extra(sections::ids::RECORDING)
        .and_then(|b| Recording::decode(b).ok())?;
    rec.workload_pid.map(|p| workload_tids(trace, p))
}
