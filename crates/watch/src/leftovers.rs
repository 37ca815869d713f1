//! A watch without `-o` records into a private directory of its own in `$TMPDIR`,
//! `kstate-watch-PID.XXXXXX.d` (the capture's metadata; its pages are in memory, or there
//! with --keep-on-disk), removed at the end. A watch killed with SIGKILL cannot remove
//! it: the next watch names what it finds of dead watches and removes it, as `kstate
//! record` does with a dead recorder's tracefs instance.

use std::path::{Path, PathBuf};

/// The prefix of a watch's directory; the pid and a random part follow.
const PREFIX: &str = "kstate-watch-";
const SUFFIX: &str = ".d";

/// A watch's private directory, removed when dropped.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Creates this watch's directory in `base`.
pub fn create(base: &Path) -> std::io::Result<TempDir> {
    let prefix = format!("{PREFIX}{}.", std::process::id());
    let path = kstate_format::output::private_dir(base, &prefix, SUFFIX)?;
    Ok(TempDir { path })
}

/// Removes the directories in `base` of watches no longer running; says what went.
pub fn remove(base: &Path) -> Vec<String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut told = Vec::new();
    for d in kstate_record::leftovers::dead_dirs(base, PREFIX, SUFFIX) {
        // Another user's directory is not touched.
        if std::os::unix::fs::MetadataExt::uid(&d.meta) != me {
            continue;
        }
        let bytes = kstate_record::system::disk_use(&d.path);
        match std::fs::remove_dir_all(&d.path) {
            Ok(()) => told.push(format!(
                "removed {} ({} KiB) left by watch {}, which no longer runs",
                d.path.display(),
                bytes >> 10,
                d.pid
            )),
            Err(e) => told.push(format!(
                "{} was left by watch {}, which no longer runs; removing it: {e}",
                d.path.display(),
                d.pid
            )),
        }
    }
    told
}
