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
pub mod why;

use crate::error::Error;
use kstate_format::{OpenOptions, PerfReadWay, Trace};
use std::path::Path;

/// Opens a trace for a command (any kstate reads, Parquet directories included); the
/// error already names the file and offset.
pub fn open(path: &Path) -> Result<Trace, Error> {
    open_with(path, &OpenOptions::default())
}

/// [`open`] as `opts` choose.
pub fn open_with(path: &Path, opts: &OpenOptions) -> Result<Trace, Error> {
    Trace::open_with(path, opts).map_err(|mut e| {
        // The file the user named could not be read: bad input, not a system failure.
        if e.kind == kstate_format::ErrorKind::Io {
            e.kind = kstate_format::ErrorKind::Input;
        }
        Error::from(e)
    })
}

/// The threads a command may use (`--threads`; the free cores when not given), for its
/// analysis and for opening its files ([`open_options`]).
pub fn threads(asked: Option<usize>) -> Result<usize, Error> {
    Ok(kstate_analyze::slices::threads(asked)?)
}

/// How a command opens its files: on its `threads` (a perf.data's scan; None: the free
/// cores) and, where the hidden `--perf-read` asks, a perf.data's samples read an older way.
pub fn open_options(threads: Option<usize>, perf_read: Option<&str>) -> OpenOptions {
    OpenOptions {
        threads,
        perf_read: match perf_read {
            Some("pages") => PerfReadWay::Pages,
            Some("sorted") => PerfReadWay::Sorted,
            _ => PerfReadWay::Direct,
        },
        ..OpenOptions::default()
    }
}

/// Opens a recording for the engine, under the name the user gave it.
pub fn source(path: &Path) -> Result<kstate_analyze::Source, Error> {
    source_with(path, &OpenOptions::default())
}

/// [`source`] as `opts` choose.
pub fn source_with(path: &Path, opts: &OpenOptions) -> Result<kstate_analyze::Source, Error> {
    Ok(kstate_analyze::Source::new(
        open_with(path, opts)?,
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
