//! Which thread a path is asked of, when it is named by its command (`--comm`) or its
//! process (`--pid`): the threads the scheduler switched in the window that match.

use kstate_format::{FieldRef, Trace};

use crate::analyzer::Tasks;
use crate::analyzers::sched;
use crate::error::Error;
use crate::fxmap::FxMap;
use kstate_format::stream::merge::{IdFilter, Merger};

/// A thread that matches, with how often it was switched in the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub tid: i32,
    pub comm: String,
    /// Its process, where the recording tells.
    pub pid: Option<i32>,
    pub switches: u64,
}

/// Threads switched in `window` (trace-clock ns; `None`: the whole recording) whose
/// command is `comm` and whose process is `pid` (each where given), most switched first.
pub fn candidates(
    trace: &Trace,
    tgids: &FxMap<i32, i32>,
    comm: Option<&str>,
    pid: Option<i32>,
    window: Option<(u64, u64)>,
) -> Result<Vec<Candidate>, Error> {
    let mut missing = Vec::new();
    let Some(sw) = sched::switch(trace, &mut missing) else {
        return Err(Error::Query(format!(
            "{}: kstate why needs sched:sched_switch; record with `kstate record -e why ...`",
            trace.path.display()
        )));
    };
    let mut tasks = Tasks::new(trace, tgids);
    let newtask = trace.events.find("task:task_newtask").and_then(|e| {
        Some((
            e.id,
            FieldRef::from(e.field("pid")?),
            FieldRef::from(e.field("clone_flags")?),
        ))
    });
    let mut ids = vec![sw.id];
    ids.extend(newtask.map(|n| n.0));
    let (a, b) = window.unwrap_or((0, u64::MAX));
    let mut m = Merger::new(trace, None, IdFilter::only(ids))?;
    let mut seen: FxMap<i32, (String, u64)> = FxMap::default();
    loop {
        match m.step() {
            Ok(true) => {}
            Ok(false) => break,
            Err(_) => continue,
        }
        let ev = m.current();
        if ev.ts > b {
            break;
        }
        let (p, e) = (ev.payload, ev.endian);
        if let Some((id, child, flags)) = newtask {
            if ev.id == id {
                if let (Some(c), Some(f)) = (child.get_i64(p, e), flags.get_u64(p, e)) {
                    tasks.new_task(ev.pid(), c as i32, f);
                }
                continue;
            }
        }
        if ev.ts < a {
            continue;
        }
        for (f, c) in [(sw.prev_pid, sw.prev_comm), (sw.next_pid, sw.next_comm)] {
            let Some(tid) = f.get_i64(p, e).map(|t| t as i32).filter(|&t| t > 0) else {
                continue;
            };
            let name = sched::bytes(p, c);
            let n = name.iter().position(|&x| x == 0).unwrap_or(name.len());
            let entry = seen.entry(tid).or_insert_with(|| (String::new(), 0));
            if entry.0.as_bytes() != &name[..n] {
                entry.0 = String::from_utf8_lossy(&name[..n]).into_owned();
            }
            entry.1 += 1;
        }
    }
    let mut out: Vec<Candidate> = seen
        .into_iter()
        .map(|(tid, (comm, switches))| Candidate {
            tid,
            comm,
            pid: tasks.tgid(tid),
            switches,
        })
        .filter(|c| comm.is_none_or(|w| c.comm == w))
        .filter(|c| pid.is_none_or(|p| c.pid.unwrap_or(c.tid) == p))
        .collect();
    out.sort_by(|x, y| y.switches.cmp(&x.switches).then(x.tid.cmp(&y.tid)));
    Ok(out)
}
