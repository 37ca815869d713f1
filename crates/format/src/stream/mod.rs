//! A recording as one time-ordered stream of events, and the maps that let a reader start
//! it anywhere: the merge of the per-CPU page streams ([`merge`]), an index of every page's
//! first time and event ids for window queries ([`page_index`]), and where to cut the
//! stream into time slices that threads read apart ([`slice_plan`]).
//!
//! They know pages and event ids, never what an event means: that is the engine's.

pub mod merge;
pub mod page_index;
pub mod slice_plan;

pub use merge::{Event, IdFilter, Merger};
pub use page_index::PageIndex;
