//! `--alarm-log FILE`: kstate runs as root and appends to a path a user names, often in a
//! shared directory such as /tmp. A symbolic link or hard link planted there would make
//! root append to any file on the system, so the file is opened without following links
//! and kept only when it is a regular file of our own with a single name.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens (creating with mode 0600) `path` for appending, or says why it is refused.
pub fn open(path: &Path) -> Result<File, String> {
    let shown = path.display();
    // O_NONBLOCK: opening a FIFO with no reader fails at once instead of hanging before
    // the check below refuses it; it changes nothing for a regular file.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => format!(
                "--alarm-log {shown}: is a symbolic link; it is not followed (name a new file \
                 or a regular file of your own)"
            ),
            _ => format!("--alarm-log {shown}: opening it: {e}"),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("--alarm-log {shown}: reading its status: {e}"))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let refuse = |why: String| {
        Err(format!(
            "--alarm-log {shown}: {why}; refusing to append to it (name a new file or a \
             regular file of your own)"
        ))
    };
    if !meta.file_type().is_file() {
        return refuse("is not a regular file".into());
    }
    if meta.uid() != me {
        return refuse(format!(
            "is owned by uid {}, not by you (uid {me})",
            meta.uid()
        ));
    }
    if meta.nlink() != 1 {
        return refuse(format!(
            "has {} names (hard links): another name may be a file it must not change",
            meta.nlink()
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_refused_and_new_files_are_private() {
        let dir = std::env::temp_dir().join(format!("kstate-alarm-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();

        let sym = dir.join("sym");
        std::os::unix::fs::symlink(&victim, &sym).unwrap();
        let e = open(&sym).unwrap_err();
        assert!(e.contains("is a symbolic link"), "{e}");

        let hard = dir.join("hard");
        std::fs::hard_link(&victim, &hard).unwrap();
        let e = open(&hard).unwrap_err();
        assert!(e.contains("has 2 names"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");

        let e = open(Path::new("/dev/null")).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");

        let new = dir.join("new.log");
        open(&new).unwrap();
        let mode = std::fs::metadata(&new).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // An existing log of our own is appended to.
        open(&new).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
