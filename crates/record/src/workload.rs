//! Starting the traced command so that not one of its events is missed: the child stops
//! between fork and exec until the recorder has put its pid in the instance's pid filter
//! and turned tracing on.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::thread::JoinHandle;

use crate::error::{Error, Result};

/// A forked command waiting at the gate.
pub struct Gated {
    pub pid: i32,
    release: OwnedFd,
    spawner: JoinHandle<std::io::Result<Child>>,
    argv0: String,
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::os("pipe", std::io::Error::last_os_error()));
    }
    // SAFETY: fresh descriptors owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks `argv`; the child reports its pid and waits for [`Gated::release`] before exec.
pub fn spawn_gated(argv: &[String]) -> Result<Gated> {
    let (pid_r, pid_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    let (pid_w_fd, go_r_fd, go_w_fd) = (pid_w.as_raw_fd(), go_r.as_raw_fd(), go_w.as_raw_fd());
    // SAFETY: the closure only calls async-signal-safe functions (close, getpid, write, read).
    unsafe {
        cmd.pre_exec(move || {
            // Our copy of the write end would keep the gate open if the recorder died.
            libc::close(go_w_fd);
            let pid = libc::getpid();
            let b = pid.to_ne_bytes();
            if libc::write(pid_w_fd, b.as_ptr().cast(), b.len()) != b.len() as isize {
                return Err(std::io::Error::last_os_error());
            }
            let mut go = [0u8; 1];
            loop {
                let n = libc::read(go_r_fd, go.as_mut_ptr().cast(), 1);
                if n == 1 {
                    return Ok(());
                }
                if n == 0 {
                    // The recorder went away before starting us: do not run untraced.
                    return Err(std::io::Error::from_raw_os_error(libc::ECANCELED));
                }
                if *libc::__errno_location() != libc::EINTR {
                    return Err(std::io::Error::last_os_error());
                }
            }
        });
    }
    // Command::spawn returns only after the exec, which waits for the gate: spawn on a
    // thread and learn the pid from the child itself.
    let spawner = std::thread::spawn(move || {
        let r = cmd.spawn();
        drop(pid_w);
        drop(go_r);
        r
    });
    let mut f = std::fs::File::from(pid_r);
    let mut b = [0u8; 4];
    if f.read_exact(&mut b).is_err() {
        // The fork itself failed; the spawner has the reason.
        let why = match spawner.join() {
            Ok(Err(e)) => e.to_string(),
            _ => "the child did not start".into(),
        };
        return Err(Error::new(format!("cannot run {}: {why}", argv[0])));
    }
    Ok(Gated {
        pid: i32::from_ne_bytes(b),
        release: go_w,
        spawner,
        argv0: argv[0].clone(),
    })
}

impl Gated {
    /// Lets the child exec; returns it once exec succeeded, or why it failed.
    pub fn release(self) -> Result<Child> {
        let one = [1u8];
        // SAFETY: writes one byte from a valid buffer to our pipe.
        unsafe { libc::write(self.release.as_raw_fd(), one.as_ptr().cast(), 1) };
        drop(self.release);
        match self.spawner.join() {
            Ok(Ok(child)) => Ok(child),
            // The system's reason kept whole: a command not found or not executable is
            // told apart (shells exit 127 and 126 for them).
            Ok(Err(e)) => Err(Error::os(format!("cannot run {}", self.argv0), e)),
            Err(_) => Err(Error::new("the thread starting the command panicked")),
        }
    }
}

/// Every thread of process `pid` (its tgid), for the pid filter.
pub fn threads_of(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    if v.is_empty() {
        v.push(pid);
    }
    v.sort();
    v
}
