//! kstate's private tracefs instance: created per recording, named for its owner, and
//! removed on every way out — including, for a recorder killed with SIGKILL, by the next
//! recorder, which removes instances whose owner no longer exists.
//!
//! Only the instance is ever written to; the top-level tracing state (the buffer other
//! tools and the kernel use) is never touched.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::tracefs::{self, Tracefs};

/// Instances kstate creates are named `kstate-PID-START`: START is the owner's start
/// time (clock ticks since boot, /proc/PID/stat field 22), so a recycled pid is not
/// mistaken for the recorder that created it.
const PREFIX: &str = "kstate-";

pub struct Instance {
    dir: PathBuf,
    name: String,
    removed: bool,
}

impl Instance {
    /// Creates this process's instance, with tracing off.
    pub fn create(tfs: &Tracefs) -> Result<Instance> {
        let pid = std::process::id() as i32;
        let start = start_time(pid).ok_or_else(|| Error::new("cannot read /proc/self/stat"))?;
        // Several recordings from one process (tests) get distinct names.
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{PREFIX}{pid}-{start}-{seq}");
        let instances = tfs.path("instances");
        if !instances.is_dir() {
            return Err(Error::new(format!(
                "{} is missing: this kernel's tracefs has no instances (Linux 3.10 or later needed)",
                instances.display()
            )));
        }
        let dir = instances.join(&name);
        std::fs::create_dir(&dir).map_err(|e| Error::io("creating tracefs instance", &dir, e))?;
        let inst = Instance {
            dir,
            name,
            removed: false,
        };
        // A new instance starts with tracing on; keep it off until everything is set up.
        inst.write("tracing_on", "0")?;
        Ok(inst)
    }

    /// Opens `free_buffer` with `options/disable_on_free` set, to be held open while
    /// recording: its close, when the recorder exits however it exits, stops tracing.
    /// None where the kernel lacks them.
    pub fn hold_free_buffer(&self) -> Option<std::fs::File> {
        self.write("options/disable_on_free", "1").ok()?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.path("free_buffer"))
            .ok()
    }

    /// Turns `options/copy_trace_marker` off again when the recorder dies however it dies.
    /// While an instance that copies the markers has its tracing off (disable_on_free did
    /// that to a killed recorder's), the kernel fails every write to the top-level
    /// trace_marker (EBADF): every application's markers on the machine, until the next
    /// recorder removes the instance. disable_on_free alone cannot undo that (it turns
    /// tracing off, which is what breaks the markers), so a watchdog is needed: a child
    /// forked here (no shell, no exec) in a process group of its own (a terminal's Ctrl-C
    /// or a kill of the recorder's group does not reach it), holding nothing open but the
    /// end of a pipe only the recorder holds; when that pipe closes it switches the
    /// option off.
    pub fn guard_trace_marker(&self) -> Option<MarkerGuard> {
        MarkerGuard::spawn(&self.path("options/copy_trace_marker"))
    }

    /// Starts tracing, and then (`copy_markers`) the copy of applications' markers: the
    /// kernel fails every write to the top-level trace_marker (EBADF) while an instance
    /// that copies them has its tracing off, so the copy is on only while tracing is.
    pub fn start_tracing(&self, copy_markers: bool) -> Result<()> {
        self.write("tracing_on", "1")?;
        if copy_markers {
            // Without the copy the recording still has the instance's own markers.
            let _ = self.write("options/copy_trace_marker", "1");
        }
        Ok(())
    }

    /// Stops the copy of applications' markers, then tracing (see [`Self::start_tracing`]).
    pub fn stop_tracing(&self) {
        stop_tracing(&self.dir);
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub fn write(&self, rel: &str, value: &str) -> Result<()> {
        tracefs::write(&self.dir.join(rel), value)
    }

    pub fn read(&self, rel: &str) -> Result<Vec<u8>> {
        tracefs::read(&self.dir.join(rel))
    }

    /// Stops tracing, disables every event and removes the instance. Readers of its
    /// per-CPU files must be closed first (the kernel refuses to remove a busy instance).
    pub fn remove(&mut self) -> Result<()> {
        self.removed = true;
        teardown(&self.dir)
    }
}

/// See [`Instance::guard_trace_marker`]. Dropped, it lets the watchdog finish (the
/// option of a removed instance is gone by then, and the write fails quietly) and reaps it.
pub struct MarkerGuard {
    pid: libc::pid_t,
    pipe: Option<std::os::fd::OwnedFd>,
}

impl MarkerGuard {
    fn spawn(option: &Path) -> Option<MarkerGuard> {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        // Everything the child needs is made before the fork: after it, in a copy of a
        // process with other threads, only async-signal-safe calls are allowed.
        let path = std::ffi::CString::new(option.as_os_str().as_bytes()).ok()?;
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: fork is followed in the child by async-signal-safe calls only, and it
        // never returns from `watch_pipe`.
        match unsafe { libc::fork() } {
            -1 => {
                // SAFETY: both descriptors are ours and open.
                unsafe {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                }
                None
            }
            0 => unsafe { watch_pipe(fds[0], &path) },
            pid => {
                // SAFETY: the read end is the child's now; the write end is ours alone.
                unsafe { libc::close(fds[0]) };
                let pipe = Some(unsafe { OwnedFd::from_raw_fd(fds[1]) });
                Some(MarkerGuard { pid, pipe })
            }
        }
    }
}

/// The watchdog's life: its own process group, nothing open but the pipe's read end,
/// then wait for the pipe to close and write 0 to `option`.
///
/// # Safety
/// Called in a freshly forked child only; it never returns.
unsafe fn watch_pipe(read_end: libc::c_int, option: &std::ffi::CStr) -> ! {
    libc::setpgid(0, 0);
    libc::dup2(read_end, 0);
    // Nothing of the recorder stays open here (free_buffer above all: its close is what
    // stops tracing when the recorder dies). close_range is Linux 5.9+; else one by one.
    if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
        for fd in 1..4096 {
            libc::close(fd);
        }
    }
    let mut b = [0u8; 64];
    loop {
        let n = libc::read(0, b.as_mut_ptr().cast(), b.len());
        if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
            break;
        }
    }
    let fd = libc::open(option.as_ptr(), libc::O_WRONLY);
    if fd >= 0 {
        libc::write(fd, b"0\n".as_ptr().cast(), 2);
    }
    libc::_exit(0)
}

impl Drop for MarkerGuard {
    fn drop(&mut self) {
        drop(self.pipe.take());
        let mut status = 0;
        // SAFETY: the child is ours and not yet reaped.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !self.removed {
            let _ = teardown(&self.dir);
        }
    }
}

fn teardown(dir: &Path) -> Result<()> {
    // Each step is attempted even if an earlier one failed; the rmdir is what matters
    // (removing an instance also frees its events and buffers).
    stop_tracing(dir);
    let _ = tracefs::write(&dir.join("events/enable"), "0");
    let _ = tracefs::write(&dir.join("set_event_pid"), "");
    let _ = tracefs::write(&dir.join("set_event_notrace_pid"), "");
    let mut last = None;
    // The kernel returns EBUSY while a reader of the instance is still closing.
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(Error::io(
        "removing tracefs instance",
        dir,
        last.expect("loop ran"),
    ))
}

fn stop_tracing(dir: &Path) {
    let copy = dir.join("options/copy_trace_marker");
    if copy.exists() {
        let _ = tracefs::write(&copy, "0");
    }
    let _ = tracefs::write(&dir.join("tracing_on"), "0");
}

/// Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// The owner (pid, start time) encoded in one of kstate's instance names.
fn owner(name: &str) -> Option<(i32, u64)> {
    let mut f = name.strip_prefix(PREFIX)?.split('-');
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Removes instances left by kstate recorders that no longer run (killed with SIGKILL,
/// or by a crash). Instances of live recorders, and anything not named by kstate, are
/// left alone. Returns the names removed.
pub fn remove_stale(tfs: &Tracefs) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(tfs.path("instances")) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some((pid, start)) = owner(&name) else {
            continue;
        };
        if start_time(pid) == Some(start) {
            continue; // its recorder is alive
        }
        if teardown(&ent.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_from_name() {
        assert_eq!(owner("kstate-123-456-0"), Some((123, 456)));
        assert_eq!(owner("kstate-bench-99"), None);
        assert_eq!(owner("other-1-2"), None);
    }

    #[test]
    fn own_start_time_is_readable() {
        let me = std::process::id() as i32;
        assert!(start_time(me).is_some());
        assert_eq!(start_time(me), start_time(me));
        assert_eq!(start_time(-5), None);
    }
}
