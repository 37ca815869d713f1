//! One CPU's events read straight from a container that holds events rather than
//! ring-buffer pages (perf.data), for the time-ordered merge: packing them into pages
//! only for the merge to unpack them again costs more than the rest of an analysis.

use std::path::Path;

use crate::error::Result;

/// What a CPU's event stream holds next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// An event at raw time `ts`, its record (common fields first) at
    /// `bytes()[start..start + len]` of the source until the next call to `next`.
    Event { ts: u64, start: usize, len: usize },
    /// `n` (> 0) events the kernel dropped on this CPU before its next event.
    Lost(u64),
}

/// One CPU's events in time order, the events a reader does not want already left out.
pub trait CpuEvents: Send {
    #[allow(clippy::should_implement_trait)]
    fn next(&mut self) -> Result<Option<Item>>;
    /// The bytes the last [`Item::Event`] points into.
    fn bytes(&self) -> &[u8];
    /// File offset of the record of the last [`Item::Event`], for messages and a time
    /// slice's seams: no two of a CPU's events share one.
    fn at(&self) -> u64;
    /// The file the events come from.
    fn path(&self) -> &Path;
}
