//! How the recorder learns that the recording is over: the command exits (its pidfd),
//! the last `-p` process exits, or the sleep ends for another reason (a signal, a reader
//! failure, the duration).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Child, ExitStatus};
use std::time::Duration;

use crate::reader::Control;

/// The command's status once it has exited, waiting a moment for it (it may still be
/// exiting when the recording ends for another reason).
pub(crate) fn wait_briefly(c: &mut Child) -> Option<ExitStatus> {
    for _ in 0..100 {
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Sleeps until something may have ended the recording: the command's exit (its pidfd),
/// the exit of the last `-p` process, a reader's failure or a stop, a signal, or the
/// longest sleep.
pub(crate) struct EndWaiter {
    pidfd: Option<OwnedFd>,
    /// The `-p` processes still running, with their pidfd where the kernel gives one.
    traced: Vec<(i32, Option<OwnedFd>)>,
    /// Whether there were `-p` processes to wait for.
    tracing_pids: bool,
    /// A signal delivered to another of the recorder's threads does not interrupt this
    /// one's sleep; without a pidfd (kernels before 5.3) an exit is only seen by looking
    /// often.
    longest: Duration,
}

fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether a `-p` process has ended: its pidfd is readable, or (without one) /proc no
/// longer shows it running.
fn has_exited(pid: i32, fd: Option<&OwnedFd>) -> bool {
    match fd {
        Some(fd) => {
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no wait.
            let ready = unsafe { libc::poll(&mut p, 1, 0) };
            ready != 0
        }
        None => match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(st) => st
                .rfind(')')
                .and_then(|i| st[i + 1..].split_whitespace().next())
                .is_some_and(|state| state == "Z" || state == "X"),
            Err(_) => true,
        },
    }
}

impl EndWaiter {
    pub(crate) fn new(child: Option<&Child>, pids: &[i32]) -> EndWaiter {
        let pidfd = child.and_then(|c| pidfd_open(c.id() as i32).ok());
        let mut traced = Vec::new();
        for &pid in pids {
            match pidfd_open(pid) {
                Ok(fd) => traced.push((pid, Some(fd))),
                // Gone already: nothing to wait for.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                // Not a thread group leader (a thread's id), or an old kernel.
                Err(_) => traced.push((pid, None)),
            }
        }
        let polled = (child.is_some() && pidfd.is_none()) || traced.iter().any(|t| t.1.is_none());
        let longest = match polled {
            true => Duration::from_millis(10),
            false => Duration::from_millis(200),
        };
        EndWaiter {
            pidfd,
            traced,
            tracing_pids: !pids.is_empty(),
            longest,
        }
    }

    pub(crate) fn wait(&self, ctl: &Control, left: Duration) {
        let fds: Vec<RawFd> = self
            .pidfd
            .iter()
            .chain(self.traced.iter().filter_map(|t| t.1.as_ref()))
            .map(|p| p.as_raw_fd())
            .collect();
        ctl.wait(&fds, left.min(self.longest));
    }

    /// True once every `-p` process has exited (never without `-p`).
    pub(crate) fn traced_gone(&mut self) -> bool {
        self.traced
            .retain(|(pid, fd)| !has_exited(*pid, fd.as_ref()));
        self.tracing_pids && self.traced.is_empty()
    }
}
