//! The analysis framework. Every analyzer has the same shape: which events it needs
//! ([`Analyzer::bind`] resolves them and their fields once per file), how it pairs them
//! ([`Analyzer::event`], usually with a [`crate::pair::Pairs`] table), and what key and value
//! it emits ([`Out::pair`] / [`Out::emit`] with a [`Sample`]). The driver ([`drive`]) does
//! the rest the same way for all of them: one time-ordered pass over only the events the
//! analyzer asked for, lost-event accounting per CPU within the selected time, dropping
//! pairs that span a loss, filters, per-key aggregation (`stats`, `hist`) or streaming
//! log rows to a [`LogSink`].
//!
//! Adding an analyzer: one file under `analyzers/` with a type implementing [`Analyzer`]
//! and its `INFO`, plus one line in `analyzers::ALL`.

mod config;
mod out;
mod outcome;
mod pass;

pub(crate) use config::Config;
pub use config::{Buckets, Mode};
// The comm and process of each thread as a pass learns them: the views that follow
// threads over a trace (lanes, timeline tracks) keep the same table.
pub use config::Tasks;
pub use out::{Counts, Kind, LogRow, LogSink, NoLog, Out, Sample};
pub use outcome::{sort_rows, Cell, Outcome, Row, Table, SORT_COLUMNS};
pub(crate) use pass::trace_start;
pub use pass::AnyPass;
pub(crate) use pass::Pass;
pub(crate) use pass::{drive, live, LiveFn};

use kstate_format::stream::merge::Event;
use kstate_format::{Error, EventFormat, Trace};

/// What `kstate analyze --list` shows, and how to run the analyzer.
#[derive(Clone, Copy)]
pub struct Info {
    pub name: &'static str,
    pub about: &'static str,
    /// The events it needs, as users would enable them.
    pub needs: &'static str,
    /// The `kstate record -e PRESET` that records them.
    pub preset: &'static str,
    /// Keyings offered by `--by` (name, meaning); the first is the default.
    pub by: &'static [(&'static str, &'static str)],
    /// Name of the column counting flagged values (e.g. "errors"), if the analyzer flags any.
    pub flag_column: Option<&'static str>,
    /// What the value is, for headers ("duration", "latency", ...).
    pub value: &'static str,
    /// What the value is measured in: names the value columns (`total_ns`, `avg_bytes`,
    /// `max_pages`) and how text output prints it.
    pub unit: Unit,
    /// What callers need to know about its results beyond their unit.
    pub traits: Traits,
    pub(crate) run: RunFn,
    /// Runs it on a recording in progress ([`crate::live`]); `None` for analyzers that
    /// read no events.
    pub(crate) live: Option<LiveFn>,
}

/// Facts about an analyzer's results that front ends and findings act on, declared by the
/// analyzer so that no caller matches analyzer names.
#[derive(Debug, Clone, Copy)]
pub struct Traits {
    /// Its durations are time spent on something (a call, a wait). False for lifetimes
    /// (`proc`): a process being alive explains no time, so findings skip them.
    pub time_spent: bool,
    /// What its level series (`Kind::Level` rows) measure, as findings name it.
    pub level: &'static str,
    /// It can report per time interval (`Config::interval`, `--interval`).
    pub per_interval: bool,
    /// Its values come from the recording's memory snapshots, not from events; charts draw
    /// them as memory over time.
    pub snapshots: bool,
    /// Each sample is a pair of events at or after its start, and nothing from earlier
    /// events changes it (its key, task or value): given a page index, a window query
    /// starts reading at the window and stops once no pair started in it is open
    /// ([`Analyzer::open_in`]).
    pub window_local: bool,
}

impl Traits {
    /// Durations are time spent, levels are named "level", one result for the whole
    /// selected time, values from events.
    pub const DEFAULT: Traits = Traits {
        time_spent: true,
        level: "level",
        per_interval: false,
        snapshots: false,
        window_local: false,
    };
}

/// The unit of an analyzer's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds (durations, latencies): printed as 1.234ms.
    Ns,
    /// Bytes: printed as a plain number.
    Bytes,
    /// A count of the things named (e.g. "pages", "len"): printed as a plain number.
    Count(&'static str),
}

impl Unit {
    /// Suffix of value column names: `total_ns`, `avg_bytes`, `max_len`.
    pub fn suffix(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Bytes => "bytes",
            Unit::Count(what) => what,
        }
    }

    /// A value for humans.
    pub fn fmt(self, v: u64) -> String {
        match self {
            Unit::Ns => crate::filter::fmt_dur(v),
            Unit::Bytes | Unit::Count(_) => v.to_string(),
        }
    }
}

pub(crate) type RunFn = fn(&Trace, &Config, &mut dyn LogSink) -> Result<Outcome, Error>;

/// One analyzer bound to one file.
pub(crate) trait Analyzer: Sized {
    const INFO: Info;

    /// Finds the events and fields this analyzer reads in `trace`, keyed `by` (one of
    /// `INFO.by`). Returns the analyzer and the event ids to deliver, or the names of the
    /// missing events.
    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing>;

    /// Handles one event (only the ids `bind` returned are delivered).
    fn event(&mut self, ev: &Event<'_>, out: &mut Out);

    /// Whether events of `id` are what this analyzer measures, not helpers it also reads
    /// (those that name tasks): a trace with none of its own has nothing for it.
    fn measures(&self, _id: u32) -> bool {
        true
    }

    /// Called after the last event; returns how many pairs were still open.
    fn finish(&mut self, out: &mut Out) -> u64;

    /// Whether a pair that started in [from, to] (ns) is still open. Asked only of
    /// `window_local` analyzers, after the window.
    fn open_in(&self, _from: u64, _to: u64) -> bool {
        true
    }

    /// The key as printed.
    fn key_name(&self, key: u64, tasks: &Tasks) -> String;

    /// Extra tables for `--stat` (e.g. run-queue length per CPU).
    fn tables(&mut self, _out: &Out) -> Vec<Table> {
        Vec::new()
    }

    /// Facts about this run for the report's notes (e.g. events it did without).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Live analysis: the tables of the interval that ends at `end` (no event after it
    /// has been seen), after which what they accumulate starts again from empty, so that
    /// each interval's tables cover only it. Analyzers whose tables hold only
    /// per-interval facts need not override it.
    fn interval_tables(&mut self, out: &Out, _end: u64) -> Vec<Table> {
        self.tables(out)
    }
}

/// Events an analyzer needs and the file lacks, in words (`system:name` where it is an
/// event), and whether what it lacks is call chains (`kstate record --stacks`), which a
/// caller may do without by asking for another key.
#[derive(Debug, Clone)]
pub struct Missing {
    pub what: Vec<String>,
    pub stacks: bool,
}

impl Missing {
    /// Lacks the events (or fields) named in `what`.
    pub fn events(what: Vec<String>) -> Missing {
        Missing {
            what,
            stacks: false,
        }
    }
    /// Lacks call chains: `what` says which and how to record them.
    pub fn stacks(what: &str) -> Missing {
        Missing {
            what: vec![what.to_string()],
            stacks: true,
        }
    }
}

/// Looks up `system:name` (or `name`); records the name in `missing` when absent.
pub fn need<'t>(
    trace: &'t Trace,
    spec: &str,
    missing: &mut Vec<String>,
) -> Option<&'t EventFormat> {
    let ev = trace.events.find(spec);
    if ev.is_none() {
        missing.push(spec.to_string());
    }
    ev
}

impl Info {
    /// Whether the analyzer reads events, so that it can share a pass over one read of
    /// the file ([`crate::Source::start`]) or run on a recording being made
    /// ([`crate::live::Live`]).
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }
}

impl std::fmt::Debug for Info {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}
