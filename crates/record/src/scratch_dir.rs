//! The scratch directory beside the output (`OUTPUT.kstate-PID.XXXXXX.scratch`, 0700):
//! the per-CPU page files, the memory snapshots and samples, the disk reserve — and, from
//! the start, everything else a capture directory holds (`kstate_format::rawdir`), so that
//! what a killed recorder moved stays readable (`kstate recover`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// An event's (system, name, format text).
pub(crate) type EventText = (String, String, Vec<u8>);

/// The scratch directory beside the output: per-CPU page files, the memory snapshots
/// and the disk reserve. Removed on drop, whatever happened.
pub(crate) struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Creates `OUTPUT.kstate-PID.XXXXXX.scratch`: a fresh private directory (0700) beside
    /// the output, under a name nobody could have planted anything at.
    pub(crate) fn create(output: &Path) -> Result<Scratch> {
        let parent = kstate_format::output::parent_dir(output);
        let base = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!("{base}.kstate-{}.", std::process::id());
        let dir = kstate_format::output::private_dir(parent, &prefix, ".scratch")
            .map_err(|e| Error::io("creating a scratch directory in", parent, e))?;
        Ok(Scratch { dir })
    }
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Where CPU N's pages go: `traces/cpuN`, a capture directory's spelling.
    pub(crate) const CPU_PREFIX: &'static str = "traces/cpu";

    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(name);
        if let Some(dir) = Path::new(name)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(self.path(&dir.to_string_lossy()))
                .map_err(|e| Error::io("creating", &self.path(&dir.to_string_lossy()), e))?;
        }
        let mut f = kstate_format::output::create_new(&path)
            .map_err(|e| Error::io("creating", &path, e))?;
        std::io::Write::write_all(&mut f, bytes).map_err(|e| Error::io("writing", &path, e))
    }

    /// Writes `name` (at the top of the directory) whole or not at all: a new file
    /// renamed over the old, so a reader (`kstate recover` of a recorder killed meanwhile)
    /// finds the previous version or this one.
    pub(crate) fn replace(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let tmp = format!(".{name}.new");
        let _ = std::fs::remove_file(self.path(&tmp));
        self.write(&tmp, bytes)?;
        std::fs::rename(self.path(&tmp), self.path(name))
            .map_err(|e| Error::io("renaming into place", &self.path(name), e))
    }

    /// Everything beside the pages that makes the directory a capture (see
    /// `kstate_format::rawdir`), and what `kstate recover` needs to finish the recording.
    pub(crate) fn write_capture(&self, c: &Capture) -> Result<()> {
        self.write("header_page", c.header_page)?;
        for (s, e, t) in c.formats {
            self.write(&format!("events/{s}/{e}/format"), t)?;
        }
        self.write("trace_clock", format!("[{}]\n", c.clock).as_bytes())?;
        self.write("kallsyms", c.kallsyms)?;
        self.write("printk_formats", c.printk)?;
        std::fs::create_dir_all(self.path("traces"))
            .map_err(|e| Error::io("creating", &self.path("traces"), e))?;
        let owner = format!(
            "{}\n{}\n{}\n",
            std::process::id(),
            c.output.display(),
            c.output_tmp.display()
        );
        self.write(RECORDER_FILE, owner.as_bytes())
    }
}

/// In a scratch directory: the recorder's pid, the output and its temporary file, one a
/// line (for `kstate recover`).
pub const RECORDER_FILE: &str = "kstate-recorder";

/// What a scratch directory holds besides the pages.
pub(crate) struct Capture<'a> {
    pub(crate) output: &'a Path,
    pub(crate) output_tmp: &'a Path,
    pub(crate) header_page: &'a [u8],
    pub(crate) formats: &'a [EventText],
    pub(crate) clock: &'a str,
    pub(crate) kallsyms: &'a [u8],
    pub(crate) printk: &'a [u8],
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
