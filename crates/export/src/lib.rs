//! kstate's traces in other tools' formats, one module per format:
//! - [`chrome`]: Chrome trace-event JSON (Perfetto UI, chrome://tracing, Speedscope);
//! - [`perfetto`]: Perfetto's protobuf trace, with native CPU scheduling tracks;
//! - `parquet`: a directory of Parquet tables (DuckDB, pandas, Spark), which kstate-format
//!   reads back as a trace, and the fleet summaries; needs the `parquet` cargo feature.
//!
//! Each exporter's `write(trace, path, analyzers)` reads the trace once, streaming, and adds
//! the `--log` rows of the named analyzers (every one that applies when none is named).
//! What the trace-viewer formats share (runs per CPU, analyzer rows laid out on tracks)
//! is in `common`. A new format is a new module here with its own `write`.
//!
//! This crate only writes: every trace, Parquet directories included, is opened by
//! kstate-format, whose column rules the Parquet writer follows.
//!
//! Errors: what the exporters write fails with [`Error`] (the trace could not be read, the
//! export cannot be made as asked, or the write failed).

pub mod chrome;
mod common;
pub mod error;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod perfetto;
#[cfg(test)]
mod writer_tests;

pub use error::Error;
