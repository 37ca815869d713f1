//! kstate's analysis engine: open a recording, ask analyzers questions, get typed results.
//!
//! Every front end (the `kstate` CLI, the browser UI, the live dashboard, the fleet
//! summarizer) asks the same question the same way: a [`Source`] (a trace.dat, perf.data,
//! raw capture or Parquet directory) answers a [`Query`] (one analyzer with its keying,
//! mode, filters, sort and top) with an [`Outcome`] (per-key statistics and histograms,
//! losses, notes), or streams `--log` rows to a [`LogSink`]; [`Source::survey`] runs every
//! analyzer that applies and ranks the findings ([`survey::Survey`], [`findings`]);
//! [`classify`] sorts a recording into CPU-busy, I/O-bound or lock contention.
//!
//! ```
//! use kstate_analyze::{Mode, Query, Source};
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/external/lisa-sched_load/trace.dat");
//! let source = Source::open(path.as_ref())?;
//!
//! // Wake-up latency per task, the ten largest totals (kstate analyze runq --top 10).
//! let mut query = Query::new("runq")?;
//! query.top = Some(10);
//! let outcome = source.aggregate(&query)?;
//! for row in &outcome.rows {
//!     println!("{}: {} wake-ups, p99 {} ns", row.key, row.agg.count, row.agg.percentile(99.0));
//! }
//! assert!(outcome.rows.len() <= 10);
//!
//! // The same analyzer as a distribution.
//! query.mode = Mode::Dist(kstate_analyze::analyzer::Buckets::Log10);
//! let dist = source.aggregate(&query)?;
//! assert_eq!(dist.rows.len(), outcome.rows.len());
//!
//! // Every analyzer that applies, with the findings ranked by the share of time explained.
//! let survey = source.survey();
//! for f in survey.findings.iter().take(3) {
//!     println!("{:5.1}%  {}", f.share * 100.0, f.text);
//! }
//! # Ok::<(), kstate_analyze::Error>(())
//! ```
//!
//! A recording in progress is analysed the same way ([`live::Live`]): the same analyzers
//! over per-CPU page streams that grow, merged in time order behind a horizon every CPU
//! has reached, their results taken per interval; `kstate watch` checks alarm rules such as
//! `syscall.p99{name=write} > 100ms over 3s` on those intervals.
//!
//! Underneath: the time-ordered merge of per-CPU streams (`kstate_format::stream`), the framework every
//! analyzer shares ([`analyzer`]: trait, driver, filters, pairing with loss handling,
//! aggregation) and the analyzers themselves ([`analyzers`], one file each).
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

pub use analyzer::{Analyzer, Config, Info, LogRow, LogSink, Mode, Outcome, Traits};
pub use error::Error;
pub use source::{Query, Source};
