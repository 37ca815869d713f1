//! `kstate watch`: the live front end. It records like `kstate record` while the same
//! analyzers run on the pages as they arrive, and reports every interval: a terminal
//! dashboard ([`tty`]) or one JSON object per line ([`json`]), with alarms checked on
//! each interval, the flight recorder's saves, escalations and load shedding ([`adapt`]).
//! Every number comes from kstate-analyze; this crate presents and steers.

mod adapt;
pub mod alarm;
mod alarm_log;
pub mod error;
pub mod escalate;
mod guard;
mod json;
mod tty;
mod watcher;

use std::path::PathBuf;
use std::time::Duration;

use crate::alarm::{Alarms, Rule};
use crate::escalate::Escalation;

use adapt::{Adapt, Escalate};
pub use error::Error;
use watcher::Watch;

/// What `kstate watch` was asked (its options, as the CLI parsed them).
pub struct Options {
    /// Event specs as -e takes them; empty: perf,syscall.
    pub events: Vec<String>,
    pub pids: Vec<i32>,
    pub all: bool,
    pub interval: Duration,
    pub duration: Option<Duration>,
    /// Keep the recording as this trace.dat.
    pub output: Option<PathBuf>,
    pub buffer_kib: u64,
    /// JSON lines even on a terminal.
    pub json: bool,
    /// Rows per analyzer in each interval's report.
    pub top: usize,
    /// Alarm rules, and a file of more (one a line, # comments).
    pub alarms: Vec<String>,
    pub alarm_file: Option<PathBuf>,
    pub alarm_log: Option<PathBuf>,
    pub on_alarm: Option<String>,
    pub alarm_every: Duration,
    /// The flight recorder's bound (a time or a size), how long a save goes on after its
    /// alarm, where saves go.
    pub keep: Option<Keep>,
    pub after: Duration,
    pub save_dir: PathBuf,
    /// `--escalate` rules and `--shed` event specs.
    pub escalations: Vec<String>,
    pub shed: Vec<String>,
    pub command: Vec<String>,
}

/// What the flight recorder keeps (`--keep`): the last stretch of time, or the newest
/// pages up to a size on disk (every CPU's together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Time(Duration),
    Bytes(u64),
}

impl Keep {
    /// The time window; none for a size bound.
    pub fn time(&self) -> Option<Duration> {
        match self {
            Keep::Time(d) => Some(*d),
            Keep::Bytes(_) => None,
        }
    }
}

impl std::fmt::Display for Keep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keep::Time(d) => write!(f, "{d:?}"),
            Keep::Bytes(b) if b % (1 << 30) == 0 => write!(f, "{}G", b >> 30),
            Keep::Bytes(b) if b % (1 << 20) == 0 => write!(f, "{}M", b >> 20),
            Keep::Bytes(b) => write!(f, "{}K", b >> 10),
        }
    }
}

/// How a watch ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The recording is complete; the command's status when kstate ran one (the CLI
    /// exits with it when it failed, as `kstate record` does).
    Complete(Option<std::process::ExitStatus>),
    /// The recording was cut short (a full disk); the reason was printed.
    CutShort,
}

pub fn run(args: Options) -> Result<Ended, Error> {
    let bad = Error::Arguments;
    let mut texts = args.alarms.clone();
    if let Some(f) = &args.alarm_file {
        let text =
            std::fs::read_to_string(f).map_err(|e| bad(format!("reading {}: {e}", f.display())))?;
        texts.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    let mut rules = texts
        .iter()
        .map(|t| Rule::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let escalations = args
        .escalations
        .iter()
        .map(|t| Escalation::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    for e in &escalations {
        if !rules.iter().any(|r| r.text == e.rule.text) {
            rules.push(e.rule.clone());
        }
    }
    if args.keep.is_some() && args.output.is_some() {
        return Err(bad(
            "--keep and -o: the flight recorder gives back the disk space of everything older \
             than its window as it goes, so no whole recording is left to write to -o; its \
             saves (one trace.dat per alarm) go to --save-dir. Drop --keep to keep it all."
                .into(),
        ));
    }

    // Recorded where asked, else in a private directory removed at the end.
    let tmp = match &args.output {
        Some(_) => None,
        None => {
            Some(tempfile_dir().map_err(|e| bad(format!("creating a temporary directory: {e}")))?)
        }
    };
    let output = match (&args.output, &tmp) {
        (Some(o), _) => o.clone(),
        (None, Some(t)) => t.path.join("watch.dat"),
        (None, None) => unreachable!(),
    };
    let mut opts = kstate_record::Options::new(output);
    opts.events = match args.events.is_empty() {
        true => vec!["perf,syscall".into()],
        false => args.events.clone(),
    };
    opts.pids = args.pids.clone();
    opts.all = args.all;
    opts.command = args.command.clone();
    opts.duration = args.duration;
    opts.buffer_kib = args.buffer_kib;
    opts.argv = std::env::args().collect();
    kstate_record::check::arguments(&opts).map_err(|e| bad(e.to_string()))?;
    check_rules_events(&rules, &opts.events)?;
    let recorded = resolve(&opts.events)?;
    let mut adapt_escalations = Vec::new();
    for e in escalations {
        let events: Vec<String> = resolve(&e.events)?
            .into_iter()
            .filter(|x| !recorded.contains(x))
            .collect();
        if events.is_empty() {
            return Err(bad(format!(
                "--escalate {:?}: {} are recorded anyway; escalate to events -e does not turn on",
                e.text,
                e.events.join(",")
            )));
        }
        opts.standby.extend(events.iter().cloned());
        adapt_escalations.push(Escalate::new(e, events));
    }
    let shed = resolve(&args.shed)?;
    if let Some(x) = shed.iter().find(|x| !recorded.contains(x)) {
        return Err(bad(format!(
            "--shed {}: {x} is not recorded (-e {})",
            args.shed.join(","),
            opts.events.join(",")
        )));
    }

    let alarm_log = match &args.alarm_log {
        Some(p) => Some(alarm_log::open(p).map_err(bad)?),
        None => None,
    };
    let mut w = Watch::new(
        &args,
        Alarms::new(rules.clone(), args.alarm_every.as_nanos() as u64),
        rules,
        alarm_log,
        Adapt::new(
            adapt_escalations,
            shed,
            args.buffer_kib * 1024,
            args.interval,
        ),
    );
    let mut notify = |m: &str| eprintln!("kstate: {m}");
    let summary =
        kstate_record::record_watched(&opts, &mut notify, &mut w).map_err(Error::Recording)?;
    w.finish();
    drop(tmp);
    if let Some(o) = &args.output {
        eprintln!(
            "kstate: {} events recorded in {}{}",
            summary.events(),
            o.display(),
            match summary.lost() {
                0 => String::new(),
                n => format!(", {n} lost"),
            }
        );
    }
    if let Some(why) = &summary.disk_full {
        eprintln!("kstate: recording cut short: {why}");
        return Ok(Ended::CutShort);
    }
    Ok(Ended::Complete(summary.workload_status))
}

/// What an alarm's line adds when --alarm-every held back the rule's earlier onsets.
fn held_back(f: &crate::alarm::Firing) -> String {
    match f.suppressed {
        0 => String::new(),
        n => format!(" ({n} more held back by --alarm-every since the last firing)"),
    }
}

/// Event specs (as -e takes them) as `system:event` names.
fn resolve(specs: &[String]) -> Result<Vec<String>, Error> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let tfs = kstate_record::tracefs::Tracefs::open().map_err(|e| Error::System(e.to_string()))?;
    let sel = kstate_record::events::resolve(&tfs.path("events"), specs)
        .map_err(|e| Error::Arguments(e.to_string()))?;
    Ok(sel.events.iter().map(|(s, e)| format!("{s}:{e}")).collect())
}

/// A rule on an analyzer whose events are not recorded is refused before recording.
fn check_rules_events(rules: &[Rule], events: &[String]) -> Result<(), Error> {
    let tfs = kstate_record::tracefs::Tracefs::open().map_err(|e| Error::System(e.to_string()))?;
    let sel = kstate_record::events::resolve(&tfs.path("events"), events)
        .map_err(|e| Error::Arguments(e.to_string()))?;
    for r in rules {
        let Some((info, _)) = r.query() else {
            continue;
        };
        let needed: Vec<&str> = info
            .preset
            .split(',')
            .filter_map(kstate_record::events::preset_events)
            .flatten()
            .collect();
        let recorded = needed.iter().any(|n| {
            n.split_once(':')
                .is_some_and(|(s, e)| sel.events.iter().any(|(a, b)| a == s && b == e))
        });
        if !needed.is_empty() && !recorded {
            return Err(Error::Arguments(format!(
                "alarm rule {:?}: analyzer {} needs {}, which -e {} does not record; add -e {}",
                r.text,
                info.name,
                info.needs,
                events.join(","),
                info.preset
            )));
        }
    }
    Ok(())
}

struct TempDir {
    path: PathBuf,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn tempfile_dir() -> std::io::Result<TempDir> {
    let base = std::env::temp_dir();
    let prefix = format!("kstate-watch-{}.", std::process::id());
    let path = kstate_format::output::private_dir(&base, &prefix, ".d")?;
    Ok(TempDir { path })
}
