//! Analysis over merged event streams.
pub mod merge;
