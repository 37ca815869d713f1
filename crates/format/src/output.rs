//! How kstate creates every file and directory it writes.
//!
//! kstate runs as root, often in directories others can write (a shared /tmp, a project
//! tree). Opening a fixed name with `O_CREAT|O_TRUNC` there follows whatever another user
//! planted at that name: a symbolic link or a hard link to /etc/shadow, and root
//! overwrites it. So nothing here ever opens an existing name for writing:
//!
//! - a file that replaces `PATH` ([`NewFile`]) is created under a fresh random name in
//!   `PATH`'s directory with `O_CREAT|O_EXCL` (which never follows a link), and renamed
//!   onto `PATH` only when complete. rename(2) replaces the directory entry itself, so a
//!   link planted at `PATH` is replaced, never written through; a failed or abandoned
//!   file is removed;
//! - files inside a directory kstate has just created for itself ([`create_new`],
//!   [`private_dir`]) are created exclusively as well, so a name that exists is an error.
//!
//! - a `PATH` that is a character device or a FIFO (`-o /dev/null`, `-o /dev/stdout`, a
//!   named pipe) is written in place, never replaced: renaming over `/dev/null` as root
//!   would break the machine. A link to such a file is followed only when the link is
//!   the user's own (as `/dev/stdout` is root's); a link another user planted is replaced
//!   like any other. A block device is refused.
//!
//! Everything is created mode 0600 (directories 0700), as perf creates perf.data: a
//! recording holds every process's command line on the machine. Users who want to share
//! a file change its mode afterwards (`chmod 644 FILE`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of every file kstate creates.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory kstate creates for its own use.
pub const DIR_MODE: u32 = 0o700;

/// The directory a path's last component lives in (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A file being written to replace `path`: created under a fresh name beside it, moved
/// onto `path` by [`NewFile::persist`], removed if dropped before that.
pub struct NewFile {
    file: File,
    tmp: PathBuf,
    path: PathBuf,
    /// Renamed into place, or written in place from the start (a device or FIFO).
    placed: bool,
}

impl NewFile {
    /// Creates the temporary file for `path` (`NAME.XXXXXX.tmp` in `path`'s directory).
    pub fn create(path: &Path) -> io::Result<NewFile> {
        if let Some(file) = open_special(path)? {
            return Ok(NewFile {
                file,
                tmp: path.to_path_buf(),
                path: path.to_path_buf(),
                placed: true,
            });
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
        let (file, tmp) = tempfile::Builder::new()
            .prefix(&format!("{name}."))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .tempfile_in(parent_dir(path))?
            .into_parts();
        // The TempPath would delete the file on drop; this type does that itself, so that
        // the name stays available for messages after a failure.
        let tmp = tmp.keep().map_err(|e| e.error)?;
        Ok(NewFile {
            file,
            tmp,
            path: path.to_path_buf(),
            placed: false,
        })
    }

    /// Where the data is until [`NewFile::persist`].
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// The name the file will have.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Whether the output is written in place: a character device or FIFO, which has no
    /// temporary file and cannot be seeked back into in general.
    pub fn in_place(&self) -> bool {
        self.tmp == self.path
    }

    /// Moves the file onto its name, replacing whatever is there (a planted link
    /// included: the link is replaced, its target untouched).
    pub fn persist(&mut self) -> io::Result<()> {
        if self.in_place() {
            return Ok(());
        }
        std::fs::rename(&self.tmp, &self.path)?;
        self.placed = true;
        Ok(())
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Write for NewFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for NewFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file.seek(pos)
    }
}

impl Read for NewFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }
}

/// `path` opened for writing in place when it is a character device or FIFO (directly, or
/// through a link of the user's own); `None` for anything a [`NewFile`] replaces.
fn open_special(path: &Path) -> io::Result<Option<File>> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(link) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    let target = if link.file_type().is_symlink() {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if link.uid() != me {
            return Ok(None);
        }
        match std::fs::metadata(path) {
            Ok(m) => m,
            Err(_) => return Ok(None),
        }
    } else {
        link
    };
    let t = target.file_type();
    if t.is_block_device() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a block device; kstate writes files, not disks",
                path.display()
            ),
        ));
    }
    if !(t.is_char_device() || t.is_fifo()) {
        return Ok(None);
    }
    let mut o = OpenOptions::new();
    o.write(true).custom_flags(libc::O_CLOEXEC);
    o.open(path).map(Some)
}

/// Writes `path` whole, through a [`NewFile`].
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    write_with(path, |w| w.write_all(bytes.as_ref()))
}

/// Writes `path` through a buffered [`NewFile`] filled by `f`; the file appears under its
/// name only if `f` and the writes succeed.
pub fn write_with(path: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let mut w = io::BufWriter::new(NewFile::create(path)?);
    f(&mut w)?;
    let mut file = w.into_inner().map_err(|e| e.into_error())?;
    file.persist()
}

/// Options that create a new file exclusively (never following or reusing anything at
/// the name), mode 0600, for writing; `flags` are added to `O_NOFOLLOW|O_CLOEXEC`.
pub fn exclusive(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | flags);
    o
}

/// Creates a new file at `path` exclusively (see [`exclusive`]); for files in a
/// directory kstate created itself.
pub fn create_new(path: &Path) -> io::Result<File> {
    exclusive(0).open(path)
}

/// Creates a file with no name in `dir` (`O_TMPFILE|O_EXCL`: it can never be given one),
/// mode 0600, for reading and writing; the kernel frees it with its last descriptor, so a
/// process killed while using it leaves nothing. Where the file system has no
/// `O_TMPFILE`, a fresh name is created exclusively and removed at once.
pub fn unnamed(dir: &Path) -> io::Result<File> {
    let made = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_TMPFILE | libc::O_EXCL | libc::O_CLOEXEC)
        .open(dir);
    match made {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {
            tempfile::tempfile_in(dir)
        }
        r => r,
    }
}

/// Creates a new directory `PREFIXXXXXXXSUFFIX` in `parent`, mode 0700, under a name no
/// one else has used; it stays until the caller removes it.
pub fn private_dir(parent: &Path, prefix: &str, suffix: &str) -> io::Result<PathBuf> {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(suffix)
        .permissions(std::fs::Permissions::from_mode(DIR_MODE))
        .tempdir_in(parent)?;
    Ok(d.keep())
}

/// Creates the directory `path` (and missing parents) for outputs: an existing directory
/// is used as it is, anything else at the name is an error.
pub fn output_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).create(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn planted(dir: &Path, at: &Path, hard: bool) -> PathBuf {
        let victim = dir.join(format!("victim-{}", hard));
        std::fs::write(&victim, b"precious").unwrap();
        if hard {
            std::fs::hard_link(&victim, at).unwrap();
        } else {
            std::os::unix::fs::symlink(&victim, at).unwrap();
        }
        victim
    }

    #[test]
    fn a_link_planted_at_the_name_is_replaced_not_written_through() {
        for hard in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let out = tmp.path().join("out.dat");
            let victim = planted(tmp.path(), &out, hard);
            // The old fixed temporary name, planted too.
            let old_tmp = tmp.path().join("out.dat.tmp");
            let victim2 = planted(tmp.path(), &old_tmp, !hard);
            write(&out, b"new contents").unwrap();
            assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
            assert_eq!(std::fs::read(&victim2).unwrap(), b"precious");
            let m = std::fs::symlink_metadata(&out).unwrap();
            assert!(m.file_type().is_file(), "hard={hard}");
            assert_eq!(m.nlink(), 1);
            assert_eq!(m.mode() & 0o777, FILE_MODE);
            assert_eq!(std::fs::read(&out).unwrap(), b"new contents");
        }
    }

    #[test]
    fn a_failed_write_leaves_nothing_and_keeps_the_old_file() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out.csv");
        std::fs::write(&out, b"old").unwrap();
        let e = write_with(&out, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("stopped"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "stopped");
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "a temporary file was left behind");
    }

    #[test]
    fn exclusive_creation_refuses_planted_names() {
        let tmp = tempfile::tempdir().unwrap();
        for hard in [false, true] {
            let at = tmp.path().join(format!("page-{hard}"));
            let victim = planted(tmp.path(), &at, hard);
            let e = create_new(&at).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "hard={hard}");
            assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        }
        // A dangling symlink is not followed to create its target either.
        let at = tmp.path().join("dangling");
        let target = tmp.path().join("nothing-here");
        std::os::unix::fs::symlink(&target, &at).unwrap();
        assert!(create_new(&at).is_err());
        assert!(!target.exists());
        let f = create_new(&tmp.path().join("fresh")).unwrap();
        assert_eq!(f.metadata().unwrap().mode() & 0o777, FILE_MODE);
    }

    #[test]
    fn devices_and_fifos_are_written_in_place_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        // /dev/null itself, and through a link of the user's own (as /dev/stdout is).
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("null-link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        for p in [Path::new("/dev/null"), link.as_path()] {
            write(p, b"discarded").unwrap();
            assert!(std::fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device());
        }
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        // A FIFO gets the bytes, and stays a FIFO.
        let fifo = tmp.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }

    #[test]
    fn a_link_to_a_device_planted_by_another_user_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let link = tmp.path().join("out.csv");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let c = std::ffi::CString::new(link.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; the link is given to `nobody`.
        if unsafe { libc::lchown(c.as_ptr(), 65534, 65534) } != 0 {
            return; // not root: every link is then the user's own or refused by the OS
        }
        write(&link, b"mine").unwrap();
        let m = std::fs::symlink_metadata(&link).unwrap();
        assert!(m.file_type().is_file());
        assert_eq!(std::fs::read(&link).unwrap(), b"mine");
    }

    #[test]
    fn private_directories_are_fresh_and_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let a = private_dir(tmp.path(), "x.kstate-1.", ".scratch").unwrap();
        let b = private_dir(tmp.path(), "x.kstate-1.", ".scratch").unwrap();
        assert_ne!(a, b);
        let m = std::fs::metadata(&a).unwrap();
        assert_eq!(m.mode() & 0o777, DIR_MODE);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("x.kstate-1.") && name.ends_with(".scratch"));
    }

    #[test]
    fn unnamed_files_leave_no_name_and_are_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let mut f = unnamed(tmp.path()).unwrap();
        f.write_all(b"pages").unwrap();
        assert_eq!(f.metadata().unwrap().mode() & 0o777, FILE_MODE);
        assert_eq!(f.metadata().unwrap().len(), 5);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
