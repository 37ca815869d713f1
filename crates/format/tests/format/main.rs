//! kstate-format's integration tests, in one test binary (one link instead of one per file):
//! each module was a test file of its own. Run one with a filter on the module path, e.g.
//! `cargo test -p kstate-format --test format -- kernel_formats::`.

mod kernel_formats;
mod tracedat;
mod writer;
