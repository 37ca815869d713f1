//! What is checked before anything is traced: a recording that can only fail at the end
//! (an output that is a directory, a process that does not exist, a disk with no room)
//! is refused before any event is enabled, so the user loses nothing but the mistake.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::session::Options;

/// The largest sub-buffer the kernel takes (`buffer_subbuf_size_kb`, Linux 6.8+).
pub const MAX_SUBBUF_KIB: u64 = 512;

/// The arguments alone: the output path, the processes, the sub-buffer size. Errors here
/// are the user's to fix (the CLI exits 2 on them).
pub fn arguments(opts: &Options) -> Result<()> {
    output_path(&opts.output)?;
    if !opts.pids.is_empty() && !opts.command.is_empty() {
        return Err(Error::bad_argument(
            "-p and a command exclude each other: record the running processes (-p) or the \
             command, not both",
        ));
    }
    for &pid in &opts.pids {
        if pid <= 0 {
            return Err(Error::bad_argument(format!("-p {pid}: not a process id")));
        }
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return Err(Error::bad_argument(format!("-p {pid}: no process {pid}")));
        }
    }
    if let Some(kib) = opts.subbuf_kib {
        let min = (page_size() / 1024).max(1);
        if !kib.is_power_of_two() || kib < min || kib > MAX_SUBBUF_KIB {
            return Err(Error::bad_argument(format!(
                "--subbuf {kib}: the sub-buffer size must be a power of two from {min} to \
                 {MAX_SUBBUF_KIB} KiB"
            )));
        }
        if kib > opts.buffer_kib {
            return Err(Error::bad_argument(format!(
                "--subbuf {kib}: larger than the whole buffer (--buffer {} KiB)",
                opts.buffer_kib
            )));
        }
    }
    Ok(())
}

/// The `-e` names against this kernel's events: one it does not have is the user's mistake
/// (a bad argument), found before a front end announces the recording.
pub fn event_names(specs: &[String]) -> Result<()> {
    let tfs = crate::tracefs::Tracefs::open()?;
    crate::events::resolve(&tfs.path("events"), specs).map(|_| ())
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// The output can be created: not a directory, in a directory that exists and takes new
/// files (tried with a temporary file, which is removed).
fn output_path(output: &Path) -> Result<()> {
    if output.is_dir() {
        return Err(Error::bad_argument(format!(
            "-o {}: is a directory; name a file in it",
            output.display()
        )));
    }
    let dir = kstate_format::output::parent_dir(output);
    if !dir.is_dir() {
        return Err(Error::bad_argument(format!(
            "-o {}: the directory {} does not exist",
            output.display(),
            dir.display()
        )));
    }
    let file = kstate_format::output::NewFile::create(output).map_err(|e| {
        Error::bad_argument(format!(
            "-o {}: cannot create files in {}: {e}",
            output.display(),
            dir.display()
        ))
    })?;
    // A recording keeps its scratch pages beside the output and seeks back into it.
    if file.in_place() {
        return Err(Error::bad_argument(format!(
            "-o {}: is a device or pipe; a recording is a trace.dat file, name one",
            output.display()
        )));
    }
    Ok(())
}

/// Bytes free for the recorder on the filesystem holding `path`.
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string and a zeroed statvfs for the kernel to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Where the filesystem holding `dir` is mounted: the highest ancestor on the same device.
fn mount_point(dir: &Path) -> std::path::PathBuf {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let Ok(dev) = std::fs::metadata(&dir).map(|m| m.dev()) else {
        return dir;
    };
    let mut top = dir.clone();
    for a in dir.ancestors().skip(1) {
        match std::fs::metadata(a) {
            Ok(m) if m.dev() == dev => top = a.to_path_buf(),
            _ => break,
        }
    }
    top
}

/// Refuses to start when the output's filesystem cannot hold `needed` bytes (the
/// metadata reserve and the first pages): a recording started there would keep nothing.
pub fn free_space(output: &Path, needed: u64) -> Result<()> {
    let dir = kstate_format::output::parent_dir(output);
    let Some(free) = free_bytes(dir) else {
        return Ok(());
    };
    if free >= needed {
        return Ok(());
    }
    let mb = |b: u64| b.div_ceil(1 << 20);
    Err(Error::NoSpace(format!(
        "only {} MB free on {} (for {}): a recording needs at least {} MB there to start \
         (its metadata and first pages); free some space or record elsewhere with -o",
        free >> 20,
        mount_point(dir).display(),
        output.display(),
        mb(needed)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(out: &Path) -> Options {
        Options::new(out.to_path_buf())
    }

    #[test]
    fn bad_outputs_are_refused_with_the_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let e = arguments(&opts(tmp.path())).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = arguments(&opts(&tmp.path().join("no/such/x.dat")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        arguments(&opts(&tmp.path().join("x.dat"))).unwrap();
        let e = arguments(&opts(Path::new("/dev/null")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a device or pipe"), "{e}");
        // The probe leaves nothing behind.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn processes_and_sub_buffers_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let mut o = opts(&tmp.path().join("x.dat"));
        o.pids = vec![i32::MAX];
        let e = arguments(&o).unwrap_err().to_string();
        assert!(e.contains(&format!("no process {}", i32::MAX)), "{e}");
        o.pids = vec![std::process::id() as i32];
        arguments(&o).unwrap();
        o.command = vec!["true".into()];
        assert!(arguments(&o)
            .unwrap_err()
            .to_string()
            .contains("-p and a command"));
        o.command.clear();
        for bad in [3, 0, 1024, 768] {
            o.subbuf_kib = Some(bad);
            let e = arguments(&o).unwrap_err().to_string();
            assert!(e.contains("power of two from"), "{bad}: {e}");
        }
        o.subbuf_kib = Some(64);
        arguments(&o).unwrap();
    }

    #[test]
    fn the_free_space_names_the_filesystem() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("x.dat");
        free_space(&out, 1).unwrap();
        let e = free_space(&out, u64::MAX).unwrap_err();
        assert!(e.is_disk_full());
        let e = e.to_string();
        assert!(e.starts_with("only ") && e.contains("MB free on /"), "{e}");
    }
}
