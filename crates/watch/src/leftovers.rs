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
    let Ok(rd) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut told = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .filter(|r| r.ends_with(SUFFIX))
            .and_then(|r| r.split('.').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // Only real directories of our own: a link planted at such a name is not
        // followed, another user's directory not touched.
        let Ok(meta) = std::fs::symlink_metadata(ent.path()) else {
            continue;
        };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir()
            || std::os::unix::fs::MetadataExt::uid(&meta) != me
            || kstate_record::leftovers::recorder_alive(pid)
        {
            continue;
        }
        let bytes = kstate_record::system::disk_use(&ent.path());
        match std::fs::remove_dir_all(ent.path()) {
            Ok(()) => told.push(format!(
                "removed {} ({} KiB) left by watch {pid}, which no longer runs",
                ent.path().display(),
                bytes >> 10
            )),
            Err(e) => told.push(format!(
                "{} was left by watch {pid}, which no longer runs; removing it: {e}",
                ent.path().display()
            )),
        }
    }
    told
}
