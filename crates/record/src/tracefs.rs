//! Finding (or mounting) tracefs and reading and writing its control files.
//!
//! tracefs files report a size of 0 and some produce their whole content in one `read`
//! only when the buffer is large enough (an instance's `events/header_page` comes back
//! cut short through `std::fs::read`'s small first read), so every read here uses one
//! large buffer and loops to end of file.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where kstate mounts tracefs when nothing has.
pub const DEFAULT_MOUNT: &str = "/sys/kernel/tracing";

/// A mounted tracefs.
#[derive(Debug, Clone)]
pub struct Tracefs {
    root: PathBuf,
}

impl Tracefs {
    /// Finds tracefs through /proc/mounts, mounting it at [`DEFAULT_MOUNT`] if it is not
    /// mounted anywhere. Fails with what exactly is missing: root, the mount point, or
    /// tracefs support in the kernel.
    pub fn open() -> Result<Tracefs> {
        if let Some(root) = find_mount()? {
            return Ok(Tracefs { root });
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::new(
                "tracefs is not mounted and mounting it needs root; run kstate as root \
                 (or mount it: mount -t tracefs nodev /sys/kernel/tracing)",
            ));
        }
        mount_tracefs(Path::new(DEFAULT_MOUNT))?;
        Ok(Tracefs {
            root: PathBuf::from(DEFAULT_MOUNT),
        })
    }

    /// Uses tracefs at `root` as is (tests, or a non-standard mount).
    pub fn at(root: &Path) -> Tracefs {
        Tracefs {
            root: root.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

fn find_mount() -> Result<Option<PathBuf>> {
    let mounts = std::fs::read_to_string("/proc/mounts")
        .map_err(|e| Error::io("reading", Path::new("/proc/mounts"), e))?;
    Ok(mounts.lines().find_map(|l| {
        let mut f = l.split(' ');
        let (_, dir, kind) = (f.next()?, f.next()?, f.next()?);
        (kind == "tracefs").then(|| PathBuf::from(unescape_mount(dir)))
    }))
}

/// /proc/mounts writes spaces and a few other bytes as octal escapes (`\040`).
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn mount_tracefs(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(Error::new(format!(
            "tracefs is not mounted and {} does not exist (is sysfs mounted?)",
            dir.display()
        )));
    }
    let target = CString::new(dir.as_os_str().as_encoded_bytes()).expect("path without NUL");
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::ENODEV) => " (this kernel has no tracefs: CONFIG_TRACING is off)",
            Some(libc::EPERM) => " (mounting needs CAP_SYS_ADMIN)",
            _ => "",
        };
        return Err(Error::new(format!(
            "mounting tracefs at {}: {e}{hint}",
            dir.display()
        )));
    }
    Ok(())
}

/// Reads a whole tracefs (or /proc) file with large reads.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    let mut f = File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("reading", path, e)),
        }
    }
}

pub fn read_string(path: &Path) -> Result<String> {
    Ok(String::from_utf8_lossy(&read(path)?).into_owned())
}

/// Writes `value` to a control file in one write, as the kernel expects; the error names
/// the file and the value.
pub fn write(path: &Path, value: &str) -> Result<()> {
    write_mode(path, value, false)
}

/// Appends (`>>`): for files like `set_event_pid` where a plain write replaces the list.
pub fn append(path: &Path, value: &str) -> Result<()> {
    write_mode(path, value, true)
}

fn write_mode(path: &Path, value: &str, append: bool) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(!append)
        .append(append)
        .open(path)
        .map_err(|e| Error::io("opening", path, e))?;
    f.write_all(value.as_bytes())
        .map_err(|e| Error::io(&format!("writing '{}' to", value.trim_end()), path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_unescape() {
        assert_eq!(unescape_mount("/a\\040b"), "/a b");
        assert_eq!(unescape_mount("/plain"), "/plain");
        assert_eq!(unescape_mount("/end\\04"), "/end\\04");
    }
}
