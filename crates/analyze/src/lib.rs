//! Analysis over merged event streams: the time-ordered merge (`merge`), the framework
//! every analyzer shares (`analyzer`: trait, driver, filters, pairing with loss handling,
//! aggregation) and the analyzers themselves (`analyzers`, one file each).
pub mod analyzer;
pub mod analyzers;
pub mod cachegrind;
pub mod classify;
pub mod filter;
pub mod findings;
pub mod fxmap;
pub mod hist;
pub mod ksyms;
pub mod merge;
pub mod pair;
pub mod profile;
pub mod stats;
pub mod survey;
pub mod timeline;
pub mod workload;

pub use analyzer::{Analyzer, Config, Info, LogRow, LogSink, Mode, Outcome};
