pub mod analyze;
pub mod bench;
pub mod bench_chat;
pub mod bench_io;
pub mod bench_malloc;
pub mod bench_overhead;
pub mod bench_record;
pub mod bench_sample;
pub mod cachesim;
pub mod classify;
pub mod convert;
pub mod dump;
pub mod exit_status;
pub mod info;
pub mod plot;
pub mod profile;
pub mod record;
pub mod report;
pub mod run;
pub mod scale;
pub mod scale_report;
pub mod split;
pub mod top_locks;
pub mod workload;

use kstate_format::{Error, Trace};
use std::path::Path;

/// Opens a trace for a command; the error already names the file and offset.
pub fn open(path: &Path) -> Result<Trace, Error> {
    Trace::open(path)
}
