//! What a recorder that was killed (SIGKILL, the OOM killer, a lost machine) left beside
//! its output: the scratch directory, a readable capture of every page it had moved (see
//! `scratch_dir`), and its unfinished temporary output. `kstate record` reports them
//! and leaves them alone; `kstate recover` turns them into a trace.dat and removes them.

use std::path::{Path, PathBuf};

use crate::scratch_dir::RECORDER_FILE;

/// One dead recorder's leftovers for an output.
#[derive(Debug, Clone)]
pub struct Leftover {
    /// The scratch directory (a capture `kstate info` reads).
    pub dir: PathBuf,
    pub pid: i32,
    /// The trace.dat it was writing, unfinished.
    pub output_tmp: Option<PathBuf>,
    pub modified: std::time::SystemTime,
}

/// Whether `pid` is a running kstate (a recycled pid running something else is not, nor
/// a killed one not yet reaped).
pub fn recorder_alive(pid: i32) -> bool {
    let kstate =
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "kstate");
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        st.rfind(')')
            .and_then(|i| st[i + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X")
    });
    kstate && !zombie
}

/// The same directory, however spelled (`.`, `/tmp/x/.`, `/tmp/x`).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// A directory a dead kstate left in a directory it shares with others.
pub struct DeadDir {
    pub path: PathBuf,
    pub pid: i32,
    pub meta: std::fs::Metadata,
}

/// The directories in `dir` named `PREFIX PID . ... SUFFIX` whose kstate process `PID` no
/// longer runs. Only real directories: a link planted at such a name is not followed.
pub fn dead_dirs(dir: &Path, prefix: &str, suffix: &str) -> Vec<DeadDir> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .filter(|r| r.ends_with(suffix))
            .and_then(|r| r.split('.').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(ent.path()) else {
            continue;
        };
        if meta.is_dir() && !recorder_alive(pid) {
            found.push(DeadDir {
                path: ent.path(),
                pid,
                meta,
            });
        }
    }
    found
}

/// The leftovers of dead recorders for `output` (`OUTPUT.kstate-PID.XXXXXX.scratch`),
/// oldest first.
pub fn find(output: &Path) -> Vec<Leftover> {
    let dir = kstate_format::output::parent_dir(output);
    let Some(base) = output.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let mut found: Vec<Leftover> = dead_dirs(dir, &format!("{base}.kstate-"), ".scratch")
        .into_iter()
        .map(|d| Leftover {
            output_tmp: std::fs::read_to_string(d.path.join(RECORDER_FILE))
                .ok()
                .and_then(|t| t.lines().nth(2).map(PathBuf::from))
                .filter(|t| same_dir(kstate_format::output::parent_dir(t), dir)),
            modified: d.meta.modified().unwrap_or(std::time::UNIX_EPOCH),
            dir: d.path,
            pid: d.pid,
        })
        .collect();
    found.sort_by_key(|l| l.modified);
    found
}

impl Leftover {
    /// Removes the scratch directory and the unfinished output.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(t) = &self.output_tmp {
            let _ = std::fs::remove_file(t);
        }
    }
}
