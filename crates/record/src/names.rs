//! The names and thread groups of the tasks a recording sees, kept in the scratch capture
//! from its first second: a recorder that is killed (SIGKILL, the OOM killer) leaves a
//! capture `kstate recover` finishes with the same names a finished recording has, so
//! `--comm` and `--by pid` find the command's tasks in it.
//!
//! Three sources, later ones winning for a pid named twice (pids are reused):
//! 1. the process table read at the start;
//! 2. the tasks the recording follows, found while it runs: the command (named as its
//!    exec will name it the moment it is started, before it runs), and every task in the
//!    instance's pid filter (with `event-fork` the kernel adds each child and thread of a
//!    traced task as it is created, and removes it when it exits) and every thread of the
//!    command, read from /proc: the new ones every [`LOOK_EVERY`], all of them (a name
//!    changes at exec) every [`REFRESH_EVERY`];
//! 3. the kernel's saved_cmdlines, which names tasks that ran while events were recorded
//!    (it keeps only the latest few hundred).
//!
//! The scratch directory's `saved_cmdlines` and `kstate-processes` (the PROCESSES section's
//! text, see `kstate_format::sections`) are rewritten with each refresh, each by a rename,
//! so a reader never sees half of one.

use std::collections::BTreeMap;
use std::time::Duration;

use kstate_format::sections::{self, Process};

use crate::error::Result;
use crate::scratch_dir::Scratch;
use crate::system;

/// How often the traced tasks are looked up again while recording, the RECORDING section
/// brought up to date, and everything saved.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// How often the pid filter is read for tasks not seen yet: a task that lives at least
/// this long is named even if the kernel's saved_cmdlines has no room left for it.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(200);

/// The kernel's limit on a task name (`TASK_COMM_LEN` less its NUL).
const COMM_MAX: usize = 15;

pub(crate) struct TaskNames {
    /// The process table at the start, by pid.
    start: Vec<Process>,
    /// Tasks the recording follows that were not in it (or changed since), by pid.
    later: BTreeMap<i32, Process>,
    /// The kernel's saved_cmdlines, as last read.
    kernel: Vec<u8>,
    /// The command kstate started, whose threads are looked up with the pid filter's.
    command: Option<i32>,
}

impl TaskNames {
    pub(crate) fn new(start: Vec<Process>) -> TaskNames {
        TaskNames {
            start,
            later: BTreeMap::new(),
            kernel: Vec::new(),
            command: None,
        }
    }

    /// The command kstate forked as `pid`, waiting at its gate to exec `argv0`: it still
    /// carries the recorder's name, and is named as the kernel will name it at exec (the
    /// last component of the path, cut to 15 bytes) until /proc says otherwise.
    pub(crate) fn command(&mut self, pid: i32, argv0: &str) {
        let base = argv0.rsplit('/').find(|s| !s.is_empty()).unwrap_or(argv0);
        let mut end = base.len().min(COMM_MAX);
        while !base.is_char_boundary(end) {
            end -= 1;
        }
        self.command = Some(pid);
        self.later.insert(
            pid,
            Process {
                pid,
                tgid: pid,
                ppid: std::process::id() as i32,
                comm: base[..end].to_string(),
            },
        );
    }

    /// Looks up the tasks in `traced` (the pid filter's text, pids separated by white
    /// space) and the command's threads, those not seen yet or (`all`) every one, and
    /// keeps the kernel's `saved_cmdlines`. Tasks that are gone keep the names they had.
    /// Whether anything changed.
    pub(crate) fn refresh(&mut self, traced: &[u8], saved_cmdlines: Vec<u8>, all: bool) -> bool {
        let mut tids: Vec<i32> = String::from_utf8_lossy(traced)
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .filter(|&p: &i32| p > 0)
            .collect();
        if let Some(c) = self.command {
            tids.extend(crate::workload::threads_of(c));
        }
        tids.sort_unstable();
        tids.dedup();
        let mut changed = false;
        for tid in tids {
            if !all && self.later.contains_key(&tid) {
                continue;
            }
            if let Some(p) = system::task(tid) {
                if self.later.get(&tid) != Some(&p) {
                    self.later.insert(tid, p);
                    changed = true;
                }
            }
        }
        if !saved_cmdlines.is_empty() && saved_cmdlines != self.kernel {
            self.kernel = saved_cmdlines;
            changed = true;
        }
        changed
    }

    /// The process table at the start with the tasks found since: the PROCESSES section.
    pub(crate) fn processes(&self) -> Vec<Process> {
        let mut all: BTreeMap<i32, &Process> = self.start.iter().map(|p| (p.pid, p)).collect();
        all.extend(self.later.iter().map(|(&pid, p)| (pid, p)));
        all.into_values().cloned().collect()
    }

    /// `pid comm` lines for trace-cmd's cmdlines: every source, the kernel's `saved`
    /// (read at the end, when there is an end) last.
    pub(crate) fn cmdlines(&self, saved: &[u8]) -> Vec<u8> {
        let mut map: BTreeMap<i32, String> = self
            .processes()
            .into_iter()
            .map(|p| (p.pid, p.comm))
            .collect();
        for (pid, comm) in kstate_format::rawdir::parse_cmdlines(saved) {
            map.insert(pid, comm);
        }
        map.iter()
            .filter(|(pid, _)| **pid > 0)
            .map(|(pid, c)| format!("{pid} {c}\n"))
            .collect::<String>()
            .into_bytes()
    }

    /// Writes what is known into the scratch capture.
    pub(crate) fn save(&self, scratch: &Scratch) -> Result<()> {
        scratch.replace("saved_cmdlines", &self.cmdlines(&self.kernel))?;
        scratch.replace(
            sections::CAPTURE_PROCESSES,
            &sections::encode_processes(&self.processes()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, tgid: i32, comm: &str) -> Process {
        Process {
            pid,
            tgid,
            ppid: 1,
            comm: comm.into(),
        }
    }

    #[test]
    fn the_command_is_named_as_exec_will_name_it() {
        let mut n = TaskNames::new(vec![p(1, 1, "init")]);
        n.command(99_999_999, "/usr/local/bin/a-very-long-program-name");
        n.command(99_999_998, "./sub/dd/");
        let text = String::from_utf8(n.cmdlines(b"")).unwrap();
        assert!(text.contains("99999999 a-very-long-pro\n"), "{text}");
        assert!(text.contains("99999998 dd\n"), "{text}");
        assert!(text.starts_with("1 init\n"), "{text}");
    }

    /// Later sources win: the kernel's names over the table at the start (a reused pid),
    /// and a task found while recording joins the process table.
    #[test]
    fn later_sources_win_and_found_tasks_join_the_table() {
        let me = std::process::id() as i32;
        let mut n = TaskNames::new(vec![p(1, 1, "init"), p(me, me, "stale-name")]);
        assert!(n.refresh(format!("{me}\n").as_bytes(), b"1 systemd\n".to_vec(), false));
        let procs = n.processes();
        let found = procs.iter().find(|x| x.pid == me).unwrap();
        assert_eq!(found.tgid, me);
        assert_ne!(found.comm, "stale-name");
        let text = String::from_utf8(n.cmdlines(&n.kernel)).unwrap();
        assert!(text.starts_with("1 systemd\n"), "{text}");
        // A pid that is gone keeps what was known of it.
        assert!(!n.refresh(b"2147483646", Vec::new(), true));
        assert_eq!(n.processes().len(), 2);
        assert!(String::from_utf8(n.cmdlines(&n.kernel))
            .unwrap()
            .starts_with("1 systemd\n"));
    }
}
