//! Time-ordered merge of per-CPU streams.
