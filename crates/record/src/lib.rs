//! `kstate record`: kernel tracepoints into a trace-cmd-compatible trace.dat, through a
//! private tracefs instance.
//!
//! Flow: `tracefs` (find or mount it) -> `instance` (a private, owner-named instance,
//! always removed) -> `events` (presets and names resolved against the kernel) ->
//! `reader` (one thread per CPU splicing pages into `scratch_file`s) -> `assemble` (scratch
//! files into the trace.dat, counted) — driven by `session`, whose `record` runs the
//! steps check (`check`: arguments, free space), prepare (the instance, the output, the
//! `scratch_dir` capture), start (readers, samplers, the gated command), run (until
//! `end` says so), stop and assemble. A killed recorder's `leftovers` are what
//! `kstate recover` reads. Completions recorded beside a pid filter come from a second
//! instance and are interleaved at the end (`merge`).

pub mod assemble;
pub mod check;
pub mod cpu_time;
mod end;
pub mod error;
pub mod events;
pub mod flight;
pub mod instance;
pub mod leftovers;
mod merge;
mod names;
pub mod overload;
mod own;
pub mod reader;
pub mod sample_copy;
pub mod sampler;
mod scratch_dir;
pub mod scratch_file;
pub mod session;
pub mod signals;
pub mod system;
pub mod tracefs;
pub mod uprobes;
pub mod watch;
pub mod workload;

pub use error::{Error, Result};
pub use reader::Store;
pub use session::{
    default_subbuf_kib, record, record_watched, CpuSummary, Options, SampleSummary, Summary,
    DEFAULT_BUFFER_KIB,
};
