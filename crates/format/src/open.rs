//! Which reader a path needs: a directory is a raw capture; a file is told by its magic
//! (perf.data's `PERFILE2`, else trace.dat, whose reader names a wrong magic).

use std::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::trace::{Trace, MAX_CPUS};

impl Trace {
    /// Opens a trace.dat file, a perf.data file or a raw capture directory (kstate's
    /// Parquet directories are opened by `kstate_export::open`).
    pub fn open(path: &Path) -> Result<Trace> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            return crate::rawdir::open(path)?.checked();
        }
        let mut magic = [0u8; 8];
        let n = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut magic))
            .map_err(|e| Error::io(path, e))?;
        if n == 8 && &magic == crate::perfdata::MAGIC {
            return crate::perfdata::open(path)?.checked();
        }
        crate::tracedat::open(path)?.checked()
    }

    /// Refuses CPU numbers that would size per-CPU tables beyond [`MAX_CPUS`] (each reader
    /// checks where it reads them, naming the offset; this holds for every container).
    /// Readers outside this crate (kstate's Parquet tables) call it too.
    pub fn checked(self) -> Result<Trace> {
        let worst = self
            .cpu_data
            .iter()
            .map(|c| c.cpu)
            .chain([self.cpu_count.saturating_sub(1)])
            .max();
        match worst {
            Some(cpu) if cpu >= MAX_CPUS => Err(Error::new(
                ErrorKind::Corrupt,
                None,
                format!("CPU number {cpu} is implausible (Linux builds for at most 8192 CPUs)"),
            )
            .in_file(&self.path)),
            _ => Ok(self),
        }
    }
}
