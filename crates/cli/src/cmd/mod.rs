pub mod analyze;
pub mod cachesim;
mod cachesim_sets;
pub mod classify;
pub mod compare;
pub mod convert;
pub mod damage;
pub mod dump;
pub mod exit_status;
pub mod fleet;
pub mod info;
pub mod plot;
pub mod profile;
pub mod record;
pub mod recover;
pub mod report;
pub mod run;
pub mod split;
pub mod summarize;
pub mod top_locks;
pub mod ui;
pub mod watch;

use crate::error::Error;
use kstate_format::Trace;
use std::path::Path;

/// Opens a trace for a command (any kstate reads, Parquet directories included); the
/// error already names the file and offset.
pub fn open(path: &Path) -> Result<Trace, Error> {
    Trace::open(path).map_err(|mut e| {
        // The file the user named could not be read: bad input, not a system failure.
        if e.kind == kstate_format::ErrorKind::Io {
            e.kind = kstate_format::ErrorKind::Input;
        }
        Error::from(e)
    })
}

/// The threads a command may use (`--threads`; every core when not given), for its
/// analysis and for opening its files (a perf.data's scan).
pub fn threads(asked: Option<usize>) -> Result<usize, Error> {
    let n = kstate_analyze::slices::threads(asked)?;
    kstate_format::set_open_threads(n);
    Ok(n)
}

/// Opens a recording for the engine, under the name the user gave it.
pub fn source(path: &Path) -> Result<kstate_analyze::Source, Error> {
    Ok(kstate_analyze::Source::new(
        open(path)?,
        path.display().to_string(),
    ))
}

#[cfg(feature = "parquet")]
/// The error's text, led by the file's path unless it already names it.
pub fn with_path(file: &Path, e: &dyn std::fmt::Display) -> String {
    let msg = e.to_string();
    let p = file.display().to_string();
    if msg.contains(&p) {
        msg
    } else {
        format!("{p}: {msg}")
    }
}
