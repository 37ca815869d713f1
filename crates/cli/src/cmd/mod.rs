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
pub mod numbers;
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

use kstate_analyze::fxmap::FxMap;
use kstate_format::{Error, Trace};
use std::path::Path;

/// Opens a trace for a command (any kstate reads, Parquet directories included); the
/// error already names the file and offset.
pub fn open(path: &Path) -> Result<Trace, Error> {
    kstate_export::open(path)
}

/// tid -> tgid where `file` is a raw capture with saved_tgids; empty otherwise.
pub fn saved_tgids_of(file: &Path) -> FxMap<i32, i32> {
    if file.is_dir() {
        saved_tgids(file)
    } else {
        FxMap::default()
    }
}

/// tid -> tgid from a raw capture's saved_tgids ("TID TGID" lines), if present.
pub fn saved_tgids(path: &Path) -> FxMap<i32, i32> {
    let mut m = FxMap::default();
    if let Ok(text) = std::fs::read_to_string(path.join("saved_tgids")) {
        for line in text.lines() {
            let mut w = line.split_whitespace();
            if let (Some(Ok(t)), Some(Ok(g))) = (w.next().map(str::parse), w.next().map(str::parse))
            {
                if g != 0 {
                    m.insert(t, g);
                }
            }
        }
    }
    m
}
