//! What kstate builds from analyses, for every front end to show: the survey of a
//! recording with its ranked findings ([`survey`], [`findings`], over the time axis of
//! [`timeline`]), the overview lanes ([`lanes`]), host and guest recordings side by side
//! ([`machines`]), the CPU-busy / I/O-bound / lock-contention verdict ([`classify`]), A/B
//! comparison ranked by impact ([`compare`]), fleet summaries ([`fleet`]), the lock views
//! ([`locks`]), what a recording holds ([`describe`]), CPU profiles ([`profile`]), a
//! thread's critical path ([`why`]), and the events themselves as lines of text
//! ([`dump`]).
//!
//! Views ask the engine (kstate-analyze's [`Source`](kstate_analyze::Source)) and name
//! code through kstate-symbols; they draw nothing and write nothing: the CLI, `kstate ui`,
//! `kstate watch` and the report print what they return. [`dump`] hands its lines to the
//! writer the caller gives (`kstate dump`'s standard output).
//!
//! ```
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/lisa-sched_load/trace.dat");
//! let source = kstate_analyze::Source::open(path.as_ref())?;
//! // Every analyzer that applies, with the findings ranked by the share of time explained.
//! let survey = kstate_views::survey::of(&source);
//! for f in survey.findings.iter().take(3) {
//!     println!("{:5.1}%  {}", f.share * 100.0, f.text);
//! }
//! # Ok::<(), kstate_analyze::Error>(())
//! ```

pub mod classify;
pub mod compare;
pub mod describe;
pub mod dump;
pub mod findings;
pub mod fleet;
pub mod hist_fit;
pub mod lanes;
pub mod locks;
pub mod machines;
pub mod profile;
pub mod survey;
pub mod timeline;
pub mod tracks;
pub mod why;
pub mod workload;
