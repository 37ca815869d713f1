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
mod hooks;
mod json;
mod leftovers;
mod metrics;
mod naming;
mod saves;
mod tty;
mod watcher;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::alarm::{Alarms, Rule};
use crate::escalate::Escalation;

use adapt::{Adapt, Escalate};
pub use error::Error;
use watcher::{FlightPlan, Watch};

/// What `kstate watch` was asked (its options, as the CLI parsed them). Options that
/// default but only mean something beside others are `None` when not given, so that
/// they can be refused alone.
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
    /// How long an --on-alarm command may run (default 10 s).
    pub on_alarm_timeout: Option<Duration>,
    /// A rule fires at most this often (default 10 s).
    pub alarm_every: Option<Duration>,
    /// The flight recorder's bound (a time or a size), how long a save goes on after its
    /// alarm (default 2 s), where saves go (default .), how many a run makes at most
    /// (default 100) and how long after one the next may be (default none).
    pub keep: Option<Keep>,
    pub after: Option<Duration>,
    pub save_dir: Option<PathBuf>,
    pub max_saves: Option<usize>,
    pub save_gap: Option<Duration>,
    /// Keep the flight recorder's pages on disk (windows larger than memory).
    pub keep_on_disk: bool,
    /// `--escalate` rules and `--shed` event specs.
    pub escalations: Vec<String>,
    pub shed: Vec<String>,
    /// Serve the figures for Prometheus here.
    pub metrics: Option<SocketAddr>,
    pub command: Vec<String>,
}

/// What the flight recorder keeps (`--keep`): the last stretch of time, or the newest
/// pages up to a size (every CPU's together).
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

/// Defaults of the options that are `None` when not given.
const ALARM_EVERY: Duration = Duration::from_secs(10);
const ON_ALARM_TIMEOUT: Duration = Duration::from_secs(10);
const AFTER: Duration = Duration::from_secs(2);
const MAX_SAVES: usize = 100;

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
    check_companions(&args, !rules.is_empty())?;
    for r in &rules {
        if let Some(w) = unknown_call(r) {
            eprintln!("kstate: warning: {w}");
        }
    }
    if args.keep.is_some() && args.output.is_some() {
        return Err(bad(
            "--keep and -o: the flight recorder gives back the space of everything older \
             than its window as it goes, so no whole recording is left to write to -o; its \
             saves (one trace.dat per alarm) go to --save-dir. Drop --keep to keep it all."
                .into(),
        ));
    }
    let save_dir = args.save_dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let memory_cap = match args.keep {
        Some(k) => {
            check_save_dir(&save_dir)?;
            check_memory(k, args.keep_on_disk)?
        }
        None => None,
    };

    // A watch killed before it could clean up left its directory: named and removed.
    for l in leftovers::remove(&std::env::temp_dir()) {
        eprintln!("kstate: {l}");
    }
    // Recorded where asked, else in a private directory removed at the end, which holds
    // the capture's metadata (its pages are in memory, or on disk for --keep-on-disk).
    let tmp = match &args.output {
        Some(_) => None,
        None => Some(leftovers::create(&std::env::temp_dir()).map_err(|e| {
            bad(format!(
                "creating a temporary directory in {}: {e}",
                std::env::temp_dir().display()
            ))
        })?),
    };
    let output = match (&args.output, &tmp) {
        (Some(o), _) => o.clone(),
        (None, Some(t)) => t.path().join("watch.dat"),
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
    if args.output.is_none() {
        // Nothing is written at the end: the pages are the live analysis's (and the
        // flight recorder's) to read and give back, in memory unless --keep-on-disk.
        opts.no_output = true;
        opts.pages = match args.keep_on_disk {
            true => kstate_record::Store::Disk,
            false => kstate_record::Store::Memory,
        };
        // Memory snapshots go only into a file at the end (there is none).
        opts.sysinfo_interval_ms = 0;
    }
    kstate_record::check::arguments(&opts).map_err(|e| bad(e.to_string()))?;
    check_rules_events(&rules, &opts.events)?;
    let mut recorded = resolve(&opts.events)?;
    let renaming = naming::events_for(&rules, &recorded);
    opts.events.extend(renaming.iter().cloned());
    recorded.extend(renaming);
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
    // Started before the recording, so that its thread is among kstate's own that the
    // recording leaves out.
    let metrics_state = args
        .metrics
        .map(|_| Arc::new(Mutex::new(metrics::State::default())));
    let _server = match (args.metrics, &metrics_state) {
        (Some(addr), Some(state)) => {
            let s = metrics::Server::start(addr, Arc::clone(state)).map_err(bad)?;
            eprintln!("kstate: metrics at http://{}/metrics", s.addr());
            Some(s)
        }
        _ => None,
    };
    let plan = args.keep.map(|k| FlightPlan {
        policy: saves::Policy {
            keep_ns: k.time().map(|d| d.as_nanos() as u64),
            keep_bytes: match k {
                Keep::Bytes(b) => Some(b),
                Keep::Time(_) => None,
            },
            keep_text: k.to_string(),
            after_ns: args.after.unwrap_or(AFTER).as_nanos() as u64,
            dir: save_dir.clone(),
            max: args.max_saves.unwrap_or(MAX_SAVES),
            gap_ns: args.save_gap.unwrap_or_default().as_nanos() as u64,
        },
        memory_cap,
    });
    if let Some(k) = args.keep {
        kstate_record::signals::install_save_request();
        eprintln!(
            "kstate: flight recorder: the last {k} {}{}; saves into {} (SIGUSR1 or w: a save now)",
            match (args.keep_on_disk, memory_cap) {
                (true, _) => "on disk".to_string(),
                (false, Some(cap)) => format!("in memory (at most {} MiB)", cap >> 20),
                (false, None) => "in memory".to_string(),
            },
            match rules.is_empty() {
                true => ", no alarm rule: saves only when asked",
                false => "",
            },
            save_dir.display()
        );
    }
    let interval_ns = args.interval.as_nanos() as u64;
    let mut w = Watch::new(
        &args,
        Alarms::new(
            rules.clone(),
            args.alarm_every.unwrap_or(ALARM_EVERY).as_nanos() as u64,
            interval_ns,
        ),
        rules,
        alarm_log,
        Adapt::new(
            adapt_escalations,
            shed,
            args.buffer_kib * 1024,
            args.interval,
        ),
        plan,
        metrics_state,
    );
    let mut notify = |m: &str| eprintln!("kstate: {m}");
    let recorded = kstate_record::record_watched(&opts, &mut notify, &mut w);
    w.finish();
    let summary = recorded.map_err(not_run)?;
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

/// A warning for a rule on a system call this machine does not have, with the nearest
/// names.
fn unknown_call(rule: &Rule) -> Option<String> {
    let (name, calls) = rule.unknown_call()?;
    let mut near: Vec<(usize, &str)> = calls
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| (kstate_record::events::distance(name, c), *c))
        .filter(|(d, c)| *d <= 2 || (name.len() >= 3 && c.contains(name)))
        .collect();
    near.sort();
    near.truncate(5);
    Some(format!(
        "alarm rule {:?}: this machine has no system call {name:?}{}; the rule never fires",
        rule.text,
        match near.is_empty() {
            true => String::new(),
            false => format!(
                " (did you mean: {}?)",
                near.iter().map(|n| n.1).collect::<Vec<_>>().join(", ")
            ),
        }
    ))
}

/// A recording error, or the command that could not be run with the status a shell
/// gives (127 not found, 126 not executable).
fn not_run(e: kstate_record::Error) -> Error {
    let status = match &e {
        kstate_record::Error::Os { what, source } if what.starts_with("cannot run ") => {
            match source.raw_os_error() {
                Some(libc::ENOENT) => Some(127),
                Some(libc::EACCES | libc::ENOEXEC | libc::EISDIR) => Some(126),
                _ => None,
            }
        }
        _ => None,
    };
    match status {
        Some(status) => Error::CommandNotRun {
            status,
            message: e.to_string(),
        },
        None => Error::Recording(e),
    }
}

/// Options that mean something only beside others are refused alone: alarm options
/// without a rule, flight-recorder options without --keep.
fn check_companions(args: &Options, rules: bool) -> Result<(), Error> {
    let given = |set: bool, name: &str, needs: &str| match set {
        true => Err(Error::Arguments(format!("{name} {needs}"))),
        false => Ok(()),
    };
    let rule = "needs an alarm rule (--alarm, --alarm-file or --escalate): nothing would fire";
    given(!rules && args.on_alarm.is_some(), "--on-alarm", rule)?;
    given(
        !rules && args.on_alarm_timeout.is_some(),
        "--on-alarm-timeout",
        rule,
    )?;
    given(!rules && args.alarm_log.is_some(), "--alarm-log", rule)?;
    given(!rules && args.alarm_every.is_some(), "--alarm-every", rule)?;
    given(
        args.on_alarm.is_none() && args.on_alarm_timeout.is_some(),
        "--on-alarm-timeout",
        "needs --on-alarm",
    )?;
    let keep = "needs the flight recorder (--keep TIME or SIZE)";
    let no_keep = args.keep.is_none();
    given(no_keep && args.after.is_some(), "--after", keep)?;
    given(no_keep && args.save_dir.is_some(), "--save-dir", keep)?;
    given(no_keep && args.max_saves.is_some(), "--max-saves", keep)?;
    given(no_keep && args.save_gap.is_some(), "--save-gap", keep)?;
    given(no_keep && args.keep_on_disk, "--keep-on-disk", keep)
}

/// `--save-dir` must be a directory kstate can create files in, before anything is
/// recorded (an alarm an hour later is the wrong time to learn it is not).
fn check_save_dir(dir: &Path) -> Result<(), Error> {
    let bad = |why: String| Error::Arguments(format!("--save-dir {}: {why}", dir.display()));
    let meta = std::fs::metadata(dir).map_err(|e| bad(e.to_string()))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    let probe = kstate_format::output::private_dir(dir, ".kstate-save-check-", "")
        .map_err(|e| bad(format!("cannot create files there: {e}")))?;
    let _ = std::fs::remove_dir(probe);
    Ok(())
}

/// Memory for the flight recorder's pages: a size must fit in half the memory available
/// now (else --keep-on-disk); a time window is capped there (its saves say what it
/// lost). The cap for a time window, if any.
fn check_memory(keep: Keep, on_disk: bool) -> Result<Option<u64>, Error> {
    if on_disk {
        return Ok(None);
    }
    let half = kstate_record::system::mem_available().map(|b| b / 2);
    match (keep, half) {
        (Keep::Bytes(b), Some(half)) if b > half => Err(Error::Arguments(format!(
            "--keep {keep}: more than half the memory available now ({} MiB); keep the \
             window on disk with --keep-on-disk, or keep less",
            half >> 20
        ))),
        (Keep::Bytes(_), _) => Ok(None),
        (Keep::Time(_), half) => Ok(half),
    }
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
