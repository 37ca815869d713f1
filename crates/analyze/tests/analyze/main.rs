//! kstate-analyze's integration tests, in one test binary (one link instead of one per file):
//! each module was a test file of its own. Run one with a filter on the module path, e.g.
//! `cargo test -p kstate-analyze --test analyze -- live::`.

mod live;
mod schedviz;
