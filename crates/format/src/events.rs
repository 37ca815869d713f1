//! One CPU's events read straight from a container that holds events rather than
//! ring-buffer pages (perf.data), for the time-ordered merge: packing them into pages
//! only for the merge to unpack them again costs more than the rest of an analysis.

use std::path::Path;

use crate::error::Result;

/// What a CPU's event stream holds next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// An event at raw time `ts`, its record (common fields first) at
    /// `bytes()[start..start + len]` of the source until the next call to `fill`, and
    /// `at` the file offset of that record (for messages and a time slice's seams: no two
    /// of a CPU's events share one).
    Event {
        ts: u64,
        start: usize,
        len: usize,
        at: u64,
    },
    /// `n` (> 0) events the kernel dropped on this CPU before its next event.
    Lost(u64),
}

/// One CPU's events in time order, the events a reader does not want already left out.
///
/// Handed out in batches: a call per event (through a `dyn`, with its `Result<Option>`
/// to unpack) cost the merge more than decoding a perf.data sample does.
pub trait CpuEvents: Send {
    /// Replaces `out` with the next items, in order; `out` empty means the end. An error
    /// comes after the items read before it: the call that meets it returns those, and
    /// the next call the error.
    fn fill(&mut self, out: &mut Vec<Item>) -> Result<()>;
    /// The bytes the [`Item::Event`]s of the last `fill` point into. They must stay
    /// where they are, unchanged, until the next `fill` (or the source is dropped): the
    /// merger keeps a pointer to them for the batch's events.
    fn bytes(&self) -> &[u8];
    /// The file the events come from.
    fn path(&self) -> &Path;
}
