//! kstate's lab (not published): what measures kstate rather than what kstate is for.
//! - [`bench`]: `kstate bench`, speed and memory next to peer tools (trace-cmd, perf,
//!   allocators) in the same run, reported as ratios;
//! - [`workload`]: `kstate workload`, small programs of known behaviour that tests,
//!   benchmarks and demos trace;
//! - [`scale`]: `kstate scale`, one command at each CPU count, recorded and classified.
//!
//! The `kstate` binary parses these subcommands' arguments (defined here with clap) and
//! calls their `run`; the product crates (format, record, analyze, render, export) do
//! not depend on this one.

pub mod bench;
pub mod cachegrind;
mod error;
pub mod scale;
pub mod workload;

pub use error::Error;
