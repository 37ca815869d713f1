//! Cache sets: the host's cache geometry ([`geometry`], from sysfs), a set-associative
//! simulation of an address stream ([`sim`]), seed 001's colouring model ([`model`]) and
//! the detector of accesses that pile into few sets ([`sets`], fed by valgrind lackey's
//! address trace).
//!
//! It reads no trace and may import only `kstate-format` (errors, maps) and
//! `kstate-symbols` (ELF symbols for the sites); `kstate cachesim` and the lab's colour
//! benchmark use it.

pub mod geometry;
pub mod model;
pub mod sets;
pub mod sim;
pub mod valgrind;

pub use geometry::{Geometry, Level};
