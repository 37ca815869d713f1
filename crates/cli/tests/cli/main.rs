//! The kstate binary's integration tests, in one test binary: each module is one part of
//! the program under test (it was a test file of its own, each linking the whole program),
//! and `support` is what they share. Run one part with a filter on the module path, e.g.
//! `cargo test -p kstate --test cli -- record::`.

mod support;

mod analyze;
mod analyze_bio;
mod analyze_irq;
mod analyze_mem;
mod analyze_microstate;
mod bad_input;
mod bench_chat;
mod bench_colour;
mod bench_io;
mod bench_malloc;
mod bench_overhead;
mod bench_record;
mod bench_sample;
mod bench_stacks;
mod big_file;
mod cachesim;
mod cachesim_sets;
mod classify;
mod compare;
mod damage;
mod deep_formats;
mod docs;
mod dump_plugins;
mod dump_report;
mod dump_threads;
mod extras;
mod fleet;
mod host_guest;
mod host_guest_views;
mod idle_exit;
mod inputs;
mod interop;
mod lock_storm;
mod lockhold;
mod markers;
mod numeric_args;
mod oracle;
mod parquet_input;
mod perf_direct;
mod perf_layouts;
mod perf_samples;
mod perfdata;
mod profile;
mod profile_compare;
mod profile_details;
mod record;
mod recover_names;
mod report;
mod safe_output;
mod scale;
mod split;
mod threads;
mod top_locks;
mod ui_browser;
mod ui_lanes;
mod ui_server;
mod ui_timeline;
mod ui_why;
mod unwind;
mod watch;
mod why;
