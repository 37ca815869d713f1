//! Task names from the events that carry them, for analyzers whose own events carry none
//! (`syscall`, `futex`): a task that started after the recording's process table and
//! saved cmdlines were taken is named where the trace recorded its birth or a switch.
//!
//! Events, each where recorded: sched:sched_process_fork (the child's comm, its parent's
//! at the fork), sched:sched_process_exec (the kernel names the task after the file's last
//! component, cut to 15 bytes), task:task_newtask (the new task's comm), task:task_rename
//! (the new comm), and sched:sched_switch (prev_comm and next_comm). Each sets the name
//! it carries, so a task is named as it was last seen: the same whether the trace is read
//! in one pass or in time slices (a later slice's names overlay the earlier's), which a
//! switch naming only tasks not named yet was not (a slice starts knowing none).

use kstate_format::{Field, FieldRef, Trace};

use crate::analyzer::Out;
use kstate_format::stream::merge::Event;

/// The kernel's limit on a task name (`TASK_COMM_LEN` less its NUL).
const COMM_MAX: usize = 15;

/// One event that names a task: which task (a pid field), and its name.
struct Naming {
    id: u32,
    pid: FieldRef,
    comm: Field,
    /// The name is a path whose last component the kernel takes (exec).
    path: bool,
}

pub(crate) struct TaskNames {
    births: Vec<Naming>,
    /// sched_switch: (id, prev_pid, prev_comm, next_pid, next_comm).
    switch: Option<(u32, FieldRef, Field, FieldRef, Field)>,
}

impl TaskNames {
    pub(crate) fn bind(trace: &Trace) -> TaskNames {
        let naming = |event: &str, pid: &str, comm: &str, path: bool| {
            let e = trace.events.find(event)?;
            Some(Naming {
                id: e.id,
                pid: e.field(pid)?.into(),
                comm: e.field(comm)?.clone(),
                path,
            })
        };
        let births = [
            naming("sched:sched_process_fork", "child_pid", "child_comm", false),
            naming("sched:sched_process_exec", "pid", "filename", true),
            naming("task:task_newtask", "pid", "comm", false),
            naming("task:task_rename", "pid", "newcomm", false),
        ]
        .into_iter()
        .flatten()
        .collect();
        let switch = trace.events.find("sched:sched_switch").and_then(|e| {
            Some((
                e.id,
                e.field("prev_pid")?.into(),
                e.field("prev_comm")?.clone(),
                e.field("next_pid")?.into(),
                e.field("next_comm")?.clone(),
            ))
        });
        TaskNames { births, switch }
    }

    /// The events to deliver to [`TaskNames::event`].
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.births
            .iter()
            .map(|n| n.id)
            .chain(self.switch.as_ref().map(|s| s.0))
    }

    /// Learns what `ev` (one of [`TaskNames::ids`]) says of a task's name.
    pub(crate) fn event(&self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        if let Some((_, prev, prev_comm, next, next_comm)) =
            self.switch.as_ref().filter(|s| s.0 == ev.id)
        {
            for (pid, comm) in [(prev, prev_comm), (next, next_comm)] {
                let pid = pid.get_i64(p, e).unwrap_or(0) as i32;
                if let Some(c) = comm.str(p, e) {
                    out.tasks.set_comm(pid, c.as_bytes());
                }
            }
            return;
        }
        let Some(n) = self.births.iter().find(|n| n.id == ev.id) else {
            return;
        };
        let pid = n.pid.get_i64(p, e).unwrap_or(0) as i32;
        let Some(name) = n.comm.str(p, e) else {
            return;
        };
        if pid <= 0 {
            return;
        }
        let name = match n.path {
            true => name.rsplit('/').next().unwrap_or_default().to_string(),
            false => name.into_owned(),
        };
        let b = name.as_bytes();
        out.tasks.set_comm(pid, &b[..b.len().min(COMM_MAX)]);
    }
}
