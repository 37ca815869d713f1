//! kstate's traces in other tools' formats, one module per format:
//! - [`chrome`]: Chrome trace-event JSON (Perfetto UI, chrome://tracing, Speedscope);
//! - [`perfetto`]: Perfetto's protobuf trace, with native CPU scheduling tracks;
//! - [`parquet`]: a directory of Parquet tables (DuckDB, pandas, Spark), and the same
//!   directory read back as a [`Trace`]. Writing and reading need the
//!   `parquet` cargo feature; without it a directory is still recognised ([`parquet::locate`])
//!   and opening it says what is missing.
//!
//! Each exporter's `write(trace, path, analyzers)` reads the trace once, streaming, and adds
//! the `--log` rows of the named analyzers (every one that applies when none is named).
//! What the trace-viewer formats share (runs per CPU, analyzer rows laid out on tracks)
//! is in `common`. A new format is a new module here with its own `write`.
//!
//! Reading a Parquet directory back lives here, not in `kstate-format`, so that the
//! format's schema is written and read from one definition ([`parquet`]'s column rules);
//! a front end opens paths with [`open`], which knows this one container besides the
//! ones `Trace::open` reads.
//!
//! Errors: what the exporters write fails with [`Error`] (the trace could not be read, the
//! export cannot be made as asked, or the write failed); [`open`] and the Parquet reader
//! are readers like the others and fail with the readers' error, `kstate_format::Error`.

pub mod chrome;
mod common;
pub mod error;
pub mod parquet;
pub mod perfetto;
#[cfg(test)]
mod writer_tests;

pub use error::Error;

use std::path::Path;

use kstate_format::{Result, Trace};

/// Opens any trace kstate reads: a kstate Parquet directory (see [`parquet`]), else
/// whatever [`Trace::open`] reads (trace.dat, perf.data, a raw capture directory).
pub fn open(path: &Path) -> Result<Trace> {
    if let Some(dir) = parquet::locate(path)? {
        return parquet::open(&dir)?.checked();
    }
    Trace::open(path)
}
