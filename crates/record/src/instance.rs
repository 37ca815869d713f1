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
    /// recorder removes the instance. A shell in a process group of its own (a terminal's
    /// Ctrl-C or a kill of the recorder's group does not reach it) waits for the end of
    /// a pipe only the recorder holds (kstate's files are close-on-exec, so the shell
    /// holds nothing of the instance open) and then switches the option off.
    pub fn guard_trace_marker(&self) -> Option<MarkerGuard> {
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let child = Command::new("/bin/sh")
            .args([
                "-c",
                "read x; echo 0 > \"$0\"",
                self.path("options/copy_trace_marker").to_str()?,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        Some(MarkerGuard { child })
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

/// See [`Instance::guard_trace_marker`]. Dropped, it lets the shell finish (the option of
/// a removed instance is gone by then, and the write fails quietly) and reaps it.
pub struct MarkerGuard {
    child: std::process::Child,
}

impl Drop for MarkerGuard {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
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
