//! Readers for kernel trace data, and a writer of trace-cmd's trace.dat (`writer`).
//!
//! Layers, lowest first: `bytes` (endian reads) -> `layout` (page header description) ->
//! `page` (records inside one ring-buffer page) and `event_format` (field layouts) ->
//! containers (`tracedat`, `rawdir`, `perf`) -> `trace` (what every container yields);
//! `open` picks the container a path holds; `pages` reads pages whatever their container;
//! `built_pages` holds the pages kstate builds for containers that have none, in unnamed
//! files.

pub mod built_pages;
pub mod bytes;
pub mod cores;
pub mod damage;
pub mod error;
pub mod event_format;
pub mod events;
pub mod fxmap;
pub mod layout;
mod mapped;
mod open;
pub mod open_options;
pub mod output;
pub mod page;
pub mod page_builder;
pub mod pages;
pub mod parquet;
pub mod perf;
pub mod prefetch;
pub mod print_fmt;
pub mod rawdir;
pub mod sections;
pub mod sniff;
mod spool;
pub mod stream;
pub mod timeshift;
pub mod trace;
pub mod tracedat;
pub mod value;
pub mod varint;
pub mod writer;

pub use bytes::Endian;
pub use error::{Error, ErrorKind, LostPart, Result};
pub use event_format::{EventFormat, Field, FieldKind, FormatAt};
pub use events::{CpuEvents, Item};
pub use layout::PageLayout;
pub use open_options::{OpenOptions, PerfReadWay};
pub use page::{Lost, PageCursor, PageHeader, Record};
pub use pages::{PageSource, SharedPage};
pub use perf::scan::scans_in_parts;
pub use spool::Spool;
pub use timeshift::TimeShift;
pub use trace::{BuildPages, ClockMap, Container, CpuData, DataLoc, EventTable, Trace};
pub use value::{FieldRef, PrintSpec, Value};
