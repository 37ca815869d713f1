//! kstate's analysis engine: analyzers over a recording's events, asked one way.
//!
//! Every front end (the `kstate` CLI, the browser UI, the live dashboard, the fleet
//! summarizer, the views above this crate) asks the same question the same way: a
//! [`Source`] (a recording opened by `kstate_format`: trace.dat, perf.data, raw capture or
//! Parquet directory) answers a [`Query`] (one analyzer with its keying, mode, filters,
//! sort and top) with an [`Outcome`] (per-key statistics and histograms, losses, notes),
//! or streams `--log` rows to a [`LogSink`]. [`Source::run`] is the only way to run an
//! analysis on a file, and [`live::Live`] the way on a recording being made: the
//! analyzers' configuration is private to this crate.
//!
//! ```no_run
//! use kstate_analyze::{Mode, Query, Source};
//! let source = Source::open("trace.dat".as_ref())?;
//!
//! // Wake-up latency per task, the ten largest totals (kstate analyze runq --top 10).
//! let mut query = Query::new("runq")?;
//! query.top = Some(10);
//! let outcome = source.aggregate(&query)?;
//! for row in &outcome.rows {
//!     println!("{}: {} wake-ups, p99 {} ns", row.key, row.agg.count, row.agg.percentile(99.0));
//! }
//!
//! // The same analyzer as a distribution.
//! let dist = source.aggregate(&query.mode(Mode::Dist(kstate_analyze::analyzer::Buckets::Log10)))?;
//! # Ok::<(), kstate_analyze::Error>(())
//! ```
//!
//! What is here: the framework every analyzer shares ([`analyzer`]: the trait, its
//! configuration, what it emits, the driver with loss accounting; [`filter`], [`pair`],
//! [`stats`], [`hist`]), the analyzers themselves ([`analyzers`], one file each), the
//! threads that split a pass by time ([`slices`]) and the live runner ([`live`]).
//!
//! What it may import: `kstate_format` (reading, the time-ordered merge) and
//! `kstate_symbols` (names for addresses). Views (surveys, findings, comparisons),
//! drawing and front ends live in the crates above (`kstate_views`, `kstate_render`,
//! `kstate_export`, `kstate_ui`, `kstate_watch`, the CLI).
pub mod analyzer;
pub mod analyzers;
mod error;
pub mod filter;
pub use kstate_format::fxmap;
pub mod hist;
pub mod live;
pub mod pair;
pub mod piped;
pub mod slices;
mod source;
pub mod stats;

pub use analyzer::{Info, LogRow, LogSink, Mode, Outcome, Traits};
pub use error::Error;
pub use source::{Query, Source};
