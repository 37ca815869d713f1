//! Addresses to names, for every view that shows code or data: the kernel's symbols
//! ([`ksyms`]), user files' ELF symbol tables ([`elf`]), user call chains unwound through
//! DWARF CFI ([`unwind`], checked by `cover`), the symbolizer that puts them together per
//! process and time ([`Symbolizer`]), data addresses named by the objects that hold them
//! ([`data`]), the perf records a recording holds ([`samples`]), and the call chains taken
//! at futex() entries joined to the trace's own events ([`stacks`]).
//!
//! It reads recordings through kstate-format and knows nothing of analyses: the engine's
//! lock analyzers and the profile views above it ask it for names.

mod cover;
pub mod data;
pub mod elf;
mod entry_exit;
pub mod ksyms;
pub mod samples;
pub mod stacks;
pub mod symbolizer;
pub mod unwind;

pub use elf::ElfImage;
pub use ksyms::{Ksyms, LazyKsyms};
pub use samples::Comms;
pub use symbolizer::{frames, leaf, Kind, Sym, Symbolizer};
