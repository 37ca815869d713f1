//! `proc`: task lifetimes, from the fork that creates a task to its exit, and how many
//! forks, execs, exits (and frees) each command did.
//!
//! Events: sched:sched_process_fork and sched:sched_process_exit (sched_process_exec and
//! sched_process_free are counted where recorded). Pairs: the fork of child C (its
//! `child_pid`) with the next exit of C. Threads are tasks too: a thread's clone emits
//! sched_process_fork and its end sched_process_exit, like a process's.
//!
//! Key: the command at exit (`--by comm`, default; after an exec that is the new
//! program's name) or the task (`--by pid`, comm-pid). Value: the lifetime.
//! `--stat` adds a table per command of forks (counted for the parent), execs (for the
//! new command), exits and frees, within the selected time and tasks. `--log` is the
//! timeline: a row per lifetime, plus a level row per fork (value: the child's pid),
//! exec (key `exec FILENAME`, value: the pid), exit and free (value: the pid).

use kstate_format::{Field, FieldRef, Trace};

use super::sched;
use crate::analyzer::{
    need, Analyzer, Cell, Info, Kind, Missing, Out, Sample, Table, Tasks, Traits, Unit,
};
use crate::fxmap::FxMap;
use crate::pair::Pairs;
use kstate_format::stream::merge::Event;

struct Fork {
    id: u32,
    parent_pid: FieldRef,
    child_pid: FieldRef,
    child_comm: Field,
}

struct Exit {
    id: u32,
    pid: FieldRef,
    comm: (usize, usize),
}

struct Exec {
    id: u32,
    pid: FieldRef,
    filename: Field,
}

struct Free {
    id: u32,
    pid: FieldRef,
    comm: Field,
}

/// Level rows of the timeline: family in bits 40.., detail below.
const FORK: u64 = 1 << 40;
const EXEC: u64 = 2 << 40;
const EXIT: u64 = 3 << 40;
const FREE: u64 = 4 << 40;
const FAMILY: u64 = 0xff << 40;

#[derive(Default)]
struct Names {
    index: FxMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.index.insert(s.to_string(), i);
        self.names.push(s.to_string());
        i
    }
}

pub struct Proc {
    by_pid: bool,
    fork: Fork,
    exit: Exit,
    exec: Option<Exec>,
    free: Option<Free>,
    pairs: Pairs<i32, ()>,
    comms: Names,
    files: Names,
    /// Per interned comm: forks, execs, exits, frees.
    counts: FxMap<u32, [u64; 4]>,
}

impl Proc {
    fn count(&mut self, comm: &str, what: usize, tid: i32, cpu: u32, out: &Out) {
        if out.selects(tid, cpu) {
            let c = self.comms.intern(comm);
            self.counts.entry(c).or_default()[what] += 1;
        }
    }
}

fn mark(out: &mut Out, key: u64, value: u64, tid: i32, cpu: u32) {
    if out.is_log() {
        out.emit(Sample {
            start: out.now(),
            value,
            key,
            tid,
            cpu,
            flag: false,
            kind: Kind::Mark,
        });
    }
}

impl Analyzer for Proc {
    const INFO: Info = Info {
        name: "proc",
        about: "task lifetimes (fork to exit); forks, execs, exits per command",
        needs: "sched:sched_process_fork + sched:sched_process_exit (sched_process_exec, sched_process_free counted if present)",
        preset: "proc",
        by: &[
            ("comm", "command at exit"),
            ("pid", "the task (comm-pid)"),
        ],
        flag_column: None,
        value: "lifetime",
        unit: Unit::Ns,
        traits: Traits {
            time_spent: false,
            ..Traits::DEFAULT
        },
        run: crate::piped::drive_piped::<Proc>,
        live: Some(crate::analyzer::live::<Proc>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let fork = need(trace, "sched:sched_process_fork", &mut missing);
        let exit = need(trace, "sched:sched_process_exit", &mut missing);
        let (Some(fork), Some(exit)) = (fork, exit) else {
            return Err(Missing::events(missing));
        };
        let fork = (|| {
            Some(Fork {
                id: fork.id,
                parent_pid: fork.field("parent_pid")?.into(),
                child_pid: fork.field("child_pid")?.into(),
                child_comm: fork.field("child_comm")?.clone(),
            })
        })();
        let exit = (|| {
            let c = exit.field("comm")?;
            Some(Exit {
                id: exit.id,
                pid: exit.field("pid")?.into(),
                comm: (c.offset, c.size),
            })
        })();
        let (Some(fork), Some(exit)) = (fork, exit) else {
            return Err(Missing::events(vec![
                "sched:sched_process_fork/exit with the fields this analyzer reads".into(),
            ]));
        };
        let exec = trace.events.find("sched:sched_process_exec").and_then(|e| {
            Some(Exec {
                id: e.id,
                pid: e.field("pid")?.into(),
                filename: e.field("filename")?.clone(),
            })
        });
        let free = trace.events.find("sched:sched_process_free").and_then(|e| {
            Some(Free {
                id: e.id,
                pid: e.field("pid")?.into(),
                comm: e.field("comm")?.clone(),
            })
        });
        let mut ids = vec![fork.id, exit.id];
        ids.extend(exec.as_ref().map(|e| e.id));
        ids.extend(free.as_ref().map(|e| e.id));
        Ok((
            Proc {
                by_pid: by == "pid",
                fork,
                exit,
                exec,
                free,
                pairs: Pairs::default(),
                comms: Names::default(),
                files: Names::default(),
                counts: FxMap::default(),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (p, e) = (ev.payload, ev.endian);
        if ev.id == self.fork.id {
            let parent = self.fork.parent_pid.get_i64(p, e).unwrap_or(0) as i32;
            let child = self.fork.child_pid.get_i64(p, e).unwrap_or(0) as i32;
            if let Some(c) = self.fork.child_comm.str(p, e) {
                out.tasks.set_comm(child, c.as_bytes());
            }
            let parent_comm = out.tasks.comm(parent);
            self.count(&parent_comm, 0, parent, ev.cpu, out);
            mark(out, FORK, child as u32 as u64, parent, ev.cpu);
            self.pairs.begin(child, ev.cpu, (), out);
        } else if ev.id == self.exit.id {
            let pid = self.exit.pid.get_i64(p, e).unwrap_or(0) as i32;
            out.tasks.set_comm(pid, sched::bytes(p, self.exit.comm));
            let comm = out.tasks.comm(pid);
            self.count(&comm, 2, pid, ev.cpu, out);
            mark(out, EXIT, pid as u32 as u64, pid, ev.cpu);
            if let Some(o) = self.pairs.end(pid) {
                let key = if self.by_pid {
                    pid as u32 as u64
                } else {
                    self.comms.intern(&comm) as u64
                };
                out.pair(
                    o.mark,
                    Sample {
                        start: o.start,
                        value: ev.ts.saturating_sub(o.start),
                        key,
                        tid: pid,
                        cpu: ev.cpu,
                        flag: false,
                        kind: Kind::Dur,
                    },
                );
            }
        } else if let Some(x) = self.exec.as_ref().filter(|x| x.id == ev.id) {
            let pid = x.pid.get_i64(p, e).unwrap_or(0) as i32;
            let file = x.filename.str(p, e).unwrap_or_default().into_owned();
            // The kernel names the task after the file's last component (16 bytes).
            let base = file.rsplit('/').next().unwrap_or(&file);
            out.tasks
                .set_comm(pid, &base.as_bytes()[..base.len().min(15)]);
            let comm = out.tasks.comm(pid);
            self.count(&comm, 1, pid, ev.cpu, out);
            if out.is_log() {
                let f = self.files.intern(&file) as u64;
                mark(out, EXEC | f, pid as u32 as u64, pid, ev.cpu);
            }
        } else if let Some(x) = self.free.as_ref().filter(|x| x.id == ev.id) {
            let pid = x.pid.get_i64(p, e).unwrap_or(0) as i32;
            let comm = x.comm.str(p, e).unwrap_or_default().into_owned();
            self.count(&comm, 3, ev.pid(), ev.cpu, out);
            mark(out, FREE, pid as u32 as u64, ev.pid(), ev.cpu);
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.pairs.len() as u64
    }

    fn key_name(&self, key: u64, tasks: &Tasks) -> String {
        match key & FAMILY {
            FORK => "fork".into(),
            EXEC => format!("exec {}", self.files.names[(key & !FAMILY) as usize]),
            EXIT => "exit".into(),
            FREE => "free".into(),
            _ if self.by_pid => tasks.label(key as u32 as i32),
            _ => self.comms.names[key as usize].clone(),
        }
    }

    fn tables(&mut self, _out: &Out) -> Vec<Table> {
        let mut rows: Vec<(&String, [u64; 4])> = self
            .counts
            .iter()
            .map(|(c, n)| (&self.comms.names[*c as usize], *n))
            .collect();
        rows.sort();
        let mut total = [0u64; 4];
        let mut out: Vec<Vec<Cell>> = Vec::new();
        for (comm, n) in rows {
            for (t, v) in total.iter_mut().zip(n) {
                *t += v;
            }
            let mut r = vec![Cell::Text(comm.clone())];
            r.extend(n.iter().map(|v| Cell::Int(*v)));
            out.push(r);
        }
        let mut r = vec![Cell::Text("(all)".into())];
        r.extend(total.iter().map(|v| Cell::Int(*v)));
        out.push(r);
        vec![Table {
            name: "events",
            title: "process events per command (forks counted for the parent)".into(),
            columns: vec!["comm", "forks", "execs", "exits", "frees"],
            rows: out,
        }]
    }
}
