//! `kstate watch`: record like `kstate record` while the same analyzers run on the pages
//! as they arrive, and report every interval: one JSON object per line (not a terminal,
//! or --json), with alarms checked on each interval.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ExitCode};
use std::time::Duration;

use kstate_analyze::alarm::{Alarms, Firing, Rule};
use kstate_analyze::analyzer::{Config, Mode};
use kstate_analyze::escalate::Escalation;
use kstate_analyze::live::{GrowingPages, Interval, Live};
use kstate_analyze::{analyzers, Info};
use kstate_format::extras::{self, ids};
use kstate_format::{watch_log, Error, ErrorKind, PageSource, Trace};
use kstate_record::flight::Flight;
use kstate_record::watch::{Flow, Ongoing, Watcher};
use kstate_record::{Options, DEFAULT_BUFFER_KIB};

use super::watch_adapt::{Adapt, Escalate};
use super::watch_json;
use super::watch_tty::Dashboard;
use kstate_args as numbers;

#[derive(clap::Args)]
#[command(after_help = concat!("Alarm rules (--alarm, --alarm-file: one rule a line, # comments):\n  \
    RULE    = SUBJECT OP VALUE [over TIME | for TIME]\n  \
    SUBJECT = ANALYZER.STAT[{NAME=KEY}]  or  lost\n  \
    STAT    = count total avg min max p50 p90 p99 p999 rate level\n  \
    OP      = > >= < <= ==\n\
  The statistic covers the samples that completed in the window (every key, or the keys\n\
  NAME=KEY selects: NAME is one of the analyzer's --by keyings, or key, dev, comm; KEY\n\
  matches a key or the comm, id or device part of it). VALUE has a time unit (ns, us, ms,\n\
  s) for time statistics. 'over 3s': the statistic over the last 3 s; 'for 2s': the\n\
  condition held in every interval of the last 2 s; neither: the last interval. 'rate' is\n\
  per second, 'level' the highest value (e.g. blkqueue's requests in flight), 'lost' the\n\
  events the kernel dropped. A rule fires when it becomes true, and again at most every\n\
  --alarm-every while it stays true.\n\n\
Examples:\n  \
    kstate watch -a --json --duration 10\n  \
    kstate watch -e syscall --alarm 'syscall.max{name=clock_nanosleep} > 200ms' -- ./server\n  \
    kstate watch -e sched,bio -a --alarm 'runq.p99 > 5ms over 3s' --alarm 'blkqueue.level >= 32 for 2s'\n  \
    kstate watch -e syscall -a --escalate 'syscall.p99 > 50ms over 3s -> bio,lock for 20s' --shed bio\n\n\
Escalation (--escalate 'RULE -> EVENTS [for TIME]'): when the alarm RULE fires, EVENTS\n\
  (as -e takes them) are turned on for TIME (default 10 s; firing again extends it), then\n\
  off. Overload: when a CPU's ring buffer is half unread or loses events, the --shed\n\
  events and any escalated ones are turned off until every CPU has been calm for five\n\
  intervals. Alarms, escalations, shedding and losses are printed, and written into the\n\
  recording (-o) and the flight recorder's files: `kstate info` lists them.\n\n\
    Run as root. Like kstate record, events go into a private tracefs instance that is\n\
    removed on exit (Ctrl-C, SIGTERM too). With -o the recording is kept as a trace.dat.\n\n",
    super::exit_status::exit_status_help!()))]
pub struct Args {
    /// Events: a preset, SYSTEM, SYSTEM:EVENT; repeat or separate with commas
    /// [default: perf,syscall]
    #[arg(short, long = "event", value_name = "SPEC")]
    events: Vec<String>,
    /// Watch only these processes (all their threads, and children they start)
    #[arg(short, long = "pid", value_name = "PID", value_parser = numbers::int::<i32>(1..=numbers::PID_MAX))]
    pids: Vec<i32>,
    /// With a command: watch the whole system, not only the command and its children
    #[arg(short, long)]
    all: bool,
    /// Report every TIME: seconds (0.5) or a duration (250ms)
    #[arg(short, long, value_name = "TIME", default_value = "1", value_parser = numbers::duration)]
    interval: Duration,
    /// Stop after this long
    #[arg(short, long, value_name = "SECONDS", value_parser = numbers::duration)]
    duration: Option<Duration>,
    /// Keep the recording as this trace.dat
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Ring-buffer size per CPU, in KiB
    #[arg(short = 'b', long = "buffer", value_name = "KIB", default_value_t = DEFAULT_BUFFER_KIB,
          value_parser = numbers::int::<u64>(numbers::BUFFER_KIB))]
    buffer_kib: u64,
    /// One JSON object per interval on standard output (the default when it is not a
    /// terminal)
    #[arg(long)]
    json: bool,
    /// Rows per analyzer in each interval's report
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = numbers::int::<usize>(1..=10_000))]
    top: usize,
    /// An alarm rule (see below); repeatable
    #[arg(long = "alarm", value_name = "RULE")]
    alarms: Vec<String>,
    /// Alarm rules, one a line
    #[arg(long, value_name = "FILE")]
    alarm_file: Option<PathBuf>,
    /// Also append each firing as a JSON line to FILE
    #[arg(long, value_name = "FILE")]
    alarm_log: Option<PathBuf>,
    /// Run this shell command when an alarm fires, with KSTATE_ALARM_RULE, _VALUE,
    /// _THRESHOLD, _KEY, _START, _END (ns on the trace clock) in its environment
    #[arg(long, value_name = "CMD")]
    on_alarm: Option<String>,
    /// While its condition stays true, a rule fires again at most this often
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = numbers::duration)]
    alarm_every: Duration,
    /// Flight recorder: keep only the last TIME of the recording on disk, and when an
    /// alarm fires write a trace.dat from TIME before it to --after after it, named after
    /// the alarm, into --save-dir. Pages older than that are given back as it goes: the
    /// disk holds at most twice TIME and --after of them, however far the live analysis
    /// falls behind
    #[arg(long, value_name = "TIME", value_parser = numbers::duration)]
    keep: Option<Duration>,
    /// With --keep: how long after the alarm the saved recording goes on
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = numbers::duration)]
    after: Duration,
    /// With --keep: where the saved recordings go
    #[arg(long, value_name = "DIR", default_value = ".")]
    save_dir: PathBuf,
    /// When an alarm fires, turn more events on for a while: 'RULE -> EVENTS [for TIME]'
    /// (see below); repeatable
    #[arg(long = "escalate", value_name = "RULE")]
    escalations: Vec<String>,
    /// Events that may be turned off when the readers fall behind the kernel (escalated
    /// events always may); as -e takes them
    #[arg(long = "shed", value_name = "SPEC")]
    shed: Vec<String>,
    /// The command to run while watching
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// What the dashboard and the JSON stream show, where the events are recorded: analyzer
/// and keying.
const SHOWN: &[(&str, &str)] = &[
    ("syscall", "name"),
    ("runq", "pid"),
    ("offcpu", "state"),
    ("blkqueue", "queue"),
    ("biotime", "issue"),
    ("lockwait", ""),
    ("futex", ""),
    ("softirq", ""),
];

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let bad = |msg: String| Error::new(ErrorKind::Unsupported, None, msg);
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
    let mut opts = Options::new(output);
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

    let mut w = Watch {
        interval: args.interval,
        top: args.top,
        rules: rules.clone(),
        alarms: Alarms::new(rules, args.alarm_every.as_nanos() as u64),
        alarm_log: match &args.alarm_log {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| bad(format!("opening {}: {e}", p.display())))?,
            ),
            None => None,
        },
        on_alarm: args.on_alarm.clone(),
        children: Vec::new(),
        live: None,
        start: 0,
        buffer_bytes: args.buffer_kib * 1024,
        fired: 0,
        json: args.json || !std::io::IsTerminal::is_terminal(&std::io::stdout()),
        dashboard: None,
        fired_lines: Vec::new(),
        keep: args.keep.map(|k| k.as_nanos() as u64),
        after: args.after.as_nanos() as u64,
        save_dir: args.save_dir.clone(),
        flight: None,
        saves: Vec::new(),
        capture: PathBuf::new(),
        keep_text: args.keep.map(|k| format!("{k:?}")),
        adapt: Adapt::new(adapt_escalations, shed, args.buffer_kib * 1024),
        ongoing_events: Vec::new(),
        clock: String::new(),
        command: args.command.clone(),
        pids: Vec::new(),
        behind: false,
    };
    let mut notify = |m: &str| eprintln!("kstate: {m}");
    let summary = kstate_record::record_watched(&opts, &mut notify, &mut w)
        .map_err(|e| Error::new(ErrorKind::Io, None, e.to_string()))?;
    for mut c in w.children.drain(..) {
        let _ = c.wait();
    }
    for l in w
        .fired_lines
        .iter()
        .chain(w.adapt.log.held.iter().flatten())
    {
        eprintln!("{l}");
    }
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
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Event specs (as -e takes them) as `system:event` names.
fn resolve(specs: &[String]) -> Result<Vec<String>, Error> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let tfs = kstate_record::tracefs::Tracefs::open()
        .map_err(|e| Error::new(ErrorKind::Io, None, e.to_string()))?;
    let sel = kstate_record::events::resolve(&tfs.path("events"), specs)
        .map_err(|e| Error::new(ErrorKind::Unsupported, None, e.to_string()))?;
    Ok(sel.events.iter().map(|(s, e)| format!("{s}:{e}")).collect())
}

/// A rule on an analyzer whose events are not recorded is refused before recording.
fn check_rules_events(rules: &[Rule], events: &[String]) -> Result<(), Error> {
    let tfs = kstate_record::tracefs::Tracefs::open()
        .map_err(|e| Error::new(ErrorKind::Io, None, e.to_string()))?;
    let sel = kstate_record::events::resolve(&tfs.path("events"), events)
        .map_err(|e| Error::new(ErrorKind::Unsupported, None, e.to_string()))?;
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
            return Err(Error::new(
                ErrorKind::Unsupported,
                None,
                format!(
                    "alarm rule {:?}: analyzer {} needs {}, which -e {} does not record; add -e {}",
                    r.text,
                    info.name,
                    info.needs,
                    events.join(","),
                    info.preset
                ),
            ));
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

struct Watch {
    interval: Duration,
    top: usize,
    rules: Vec<Rule>,
    alarms: Alarms,
    alarm_log: Option<std::fs::File>,
    on_alarm: Option<String>,
    children: Vec<Child>,
    live: Option<Live>,
    /// When tracing started (intervals count from it).
    start: u64,
    buffer_bytes: u64,
    fired: u64,
    /// JSON lines, else the dashboard.
    json: bool,
    dashboard: Option<Dashboard>,
    /// The alarm lines the dashboard showed, printed when it is gone.
    fired_lines: Vec<String>,
    /// Flight recorder (--keep): the window kept, how long after an alarm a save goes
    /// on, where saves go, and the saves to come (file, from, to).
    keep: Option<u64>,
    after: u64,
    save_dir: PathBuf,
    flight: Option<Flight>,
    saves: Vec<(PathBuf, u64, u64)>,
    capture: PathBuf,
    /// --keep as the user reads it.
    keep_text: Option<String>,
    adapt: Adapt,
    /// The events recorded from the start and the trace clock, for the saves' RECORDING
    /// section.
    ongoing_events: Vec<String>,
    clock: String,
    /// The command watched and the processes traced, for the same.
    command: Vec<String>,
    pids: Vec<i32>,
    /// The live analysis is behind the recording (logged once until it catches up).
    behind: bool,
}

impl Watch {
    fn report(&mut self, intervals: Vec<Interval>) -> kstate_record::Result<()> {
        for iv in intervals {
            self.adapt.interval(&iv);
            let firings = self.alarms.check(&iv);
            for f in &firings {
                self.fire(f);
                self.adapt.alarm(f);
            }
            if let Some(d) = &self.dashboard {
                d.update(iv, &firings);
                continue;
            }
            let mut out = std::io::stdout().lock();
            let mut line =
                watch_json::interval(&iv, self.start, self.top, self.buffer_bytes, &firings);
            // What the watch did and saw since the last line (escalations, shedding,
            // losses), as in the recording's watch log.
            line["log"] = serde_json::json!(self
                .adapt
                .log
                .unsent()
                .iter()
                .map(|e| serde_json::json!({"ts": e.ts, "kind": e.kind, "text": e.text}))
                .collect::<Vec<_>>());
            writeln!(out, "{line}")
                .and_then(|_| out.flush())
                .map_err(|e| {
                    kstate_record::Error::new(format!("writing to standard output: {e}"))
                })?;
        }
        Ok(())
    }

    fn fire(&mut self, f: &Firing) {
        self.fired += 1;
        let rel = |t: u64| (t.saturating_sub(self.start)) as f64 / 1e9;
        // On the dashboard, the alarm shows in its panel.
        if self.dashboard.is_none() {
            eprintln!(
                "kstate: ALARM {}: {}{} (threshold {}), {:.3}..{:.3} s",
                f.rule,
                f.value_text,
                f.key.as_ref().map_or(String::new(), |k| format!(" at {k}")),
                f.threshold_text,
                rel(f.start),
                rel(f.end)
            );
        }
        if let Some(keep) = self.keep {
            let name: String = f
                .rule
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(60)
                .collect();
            let at = f.end.saturating_sub(self.start) / 1_000_000;
            let file = self
                .save_dir
                .join(format!("kstate-alarm-{name}-{at}ms.dat"));
            let from = f.end.saturating_sub(keep).max(self.start);
            self.saves.push((file, from, f.end + self.after));
        }
        if let Some(log) = &mut self.alarm_log {
            let _ = writeln!(log, "{}", watch_json::firing(f, self.start));
        }
        self.children
            .retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
        if let Some(cmd) = &self.on_alarm {
            let spawned = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(cmd)
                .env("KSTATE_ALARM_RULE", &f.rule)
                .env("KSTATE_ALARM_VALUE", f.value.to_string())
                .env("KSTATE_ALARM_THRESHOLD", f.threshold.to_string())
                .env("KSTATE_ALARM_KEY", f.key.clone().unwrap_or_default())
                .env("KSTATE_ALARM_START", f.start.to_string())
                .env("KSTATE_ALARM_END", f.end.to_string())
                .stdin(std::process::Stdio::null())
                .spawn();
            match spawned {
                Ok(c) => self.children.push(c),
                Err(e) => eprintln!("kstate: --on-alarm: {e}"),
            }
        }
    }
}

impl Watcher for Watch {
    fn interval(&self) -> Option<Duration> {
        Some(self.interval)
    }

    fn started(&mut self, ongoing: &Ongoing) -> kstate_record::Result<()> {
        let err = |e: String| kstate_record::Error::new(e);
        let trace = Trace::open(&ongoing.dir).map_err(|e| err(e.to_string()))?;
        let mut queries: Vec<(&'static Info, Config)> = Vec::new();
        let mut add = |info: &'static Info, by: &str| {
            if queries
                .iter()
                .any(|(i, c)| i.name == info.name && c.by.as_deref().unwrap_or(info.by[0].0) == by)
            {
                return;
            }
            let mut cfg = Config::new(Mode::Stat);
            cfg.by = Some(by.to_string());
            queries.push((info, cfg));
        };
        for (name, by) in SHOWN {
            let Some(info) = analyzers::find(name) else {
                continue;
            };
            let by = if by.is_empty() { info.by[0].0 } else { by };
            // Shown where this recording has its events.
            if info.live.is_some_and(|l| {
                let mut cfg = Config::new(Mode::Stat);
                cfg.by = Some(by.to_string());
                l(&trace, &cfg).is_ok()
            }) {
                add(info, by);
            }
        }
        for r in &self.rules {
            if let Some((info, by)) = r.query() {
                add(info, by);
            }
        }
        let sources = ongoing
            .cpus
            .iter()
            .map(|c| {
                GrowingPages::open(&c.path, 0, ongoing.page_size, c.tap.written_handle())
                    .map(|p| (c.cpu, Box::new(p) as Box<dyn PageSource>))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(e.to_string()))?;
        self.start = ongoing.start_ts;
        self.adapt.log.set_start(ongoing.start_ts);
        self.ongoing_events = ongoing.events.clone();
        self.clock = ongoing.clock.clone();
        self.pids = ongoing.pids.clone();
        let live = Live::new(
            trace,
            sources,
            &queries,
            ongoing.start_ts,
            self.interval.as_nanos() as u64,
        )
        .map_err(|e| err(e.to_string()))?;
        self.live = Some(live);
        self.capture = ongoing.dir.clone();
        if let Some(keep) = self.keep {
            self.flight = Some(Flight::new(ongoing, keep)?);
        }
        if !self.json {
            self.dashboard = Some(Dashboard::start(ongoing.start_ts, self.buffer_bytes));
            self.adapt.log.held = Some(Vec::new());
        }
        Ok(())
    }

    fn tick(&mut self, ongoing: &Ongoing, horizon: u64) -> kstate_record::Result<Flow> {
        let Some(live) = self.live.as_mut() else {
            return Ok(Flow::Go);
        };
        // Falling behind, analyse at most an interval's worth of time per tick, so that
        // the recorder still sees signals and its end in time.
        let deadline = std::time::Instant::now() + self.interval;
        let done = live
            .advance_until(horizon, Some(deadline))
            .map_err(|e| kstate_record::Error::new(e.to_string()))?;
        let position = live.position();
        self.report(done)?;
        self.note_lag(horizon, position);
        self.adapt.tick(ongoing, horizon)?;
        if let Some(d) = &self.dashboard {
            // The alarms are on it already.
            for e in self.adapt.log.unsent() {
                if e.kind != watch_log::Kind::ALARM {
                    d.note(e.ts, &e.kind, &e.text);
                }
            }
        }
        if self.flight.is_some() {
            // Pages a save to come may want stay: the pending saves', and the window
            // before any interval not yet analysed (its alarms are still to come).
            let keep = self.keep.unwrap_or(0);
            // An analysis far behind holds no more than twice the window and --after: the
            // disk bound holds, and a save that lost its start says so.
            let hold = self
                .saves
                .iter()
                .map(|s| s.1)
                .min()
                .unwrap_or(u64::MAX)
                .min(position.saturating_sub(keep))
                .max(horizon.saturating_sub(2 * keep + self.after));
            if let Some(fl) = &mut self.flight {
                fl.update(ongoing, horizon, Some(hold));
            }
            self.save_due(horizon);
        }
        Ok(Flow::Go)
    }

    fn stopped(&mut self, ongoing: &Ongoing) -> kstate_record::Result<()> {
        let Some(live) = self.live.take() else {
            return Ok(());
        };
        let done = live
            .finish()
            .map_err(|e| kstate_record::Error::new(e.to_string()))?;
        let reported = self.report(done);
        // The terminal back as it was.
        self.dashboard = None;
        // Saves cut short by the end of the recording hold what there is.
        if let Some(fl) = &mut self.flight {
            fl.update(ongoing, 0, Some(0));
        }
        self.save_due(u64::MAX);
        reported
    }

    fn sections(&mut self) -> Vec<(u16, Vec<u8>)> {
        vec![(ids::WATCH_LOG, watch_log::encode(&self.adapt.log.all()))]
    }
}

impl Watch {
    /// Writes the flight-recorder saves whose time has come.
    fn save_due(&mut self, horizon: u64) {
        let Some(fl) = &self.flight else {
            return;
        };
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.saves)
            .into_iter()
            .partition(|s| s.2 <= horizon);
        self.saves = rest;
        for (file, from, to) in due {
            let rel = |t: u64| t.saturating_sub(self.start) as f64 / 1e9;
            let kept_from = fl.oldest().unwrap_or(from).max(from);
            let sections = self.save_sections(fl, from, kept_from, to.min(horizon));
            match fl.save(&self.capture, from, to, &file, sections) {
                Ok(()) => eprintln!(
                    "kstate: saved {} ({:.3}..{:.3} s; {} older pages, {} MiB, were dropped before it)",
                    file.display(),
                    rel(kept_from),
                    rel(to.min(horizon)),
                    fl.dropped_pages,
                    fl.dropped_bytes >> 20
                ),
                Err(e) => eprintln!("kstate: saving {}: {e}", file.display()),
            }
        }
    }
}

impl Watch {
    /// Logs when the live analysis falls behind the recording by more than three
    /// intervals (or the flight recorder's window), and when it has caught up.
    fn note_lag(&mut self, horizon: u64, position: u64) {
        let every = self.interval.as_nanos() as u64;
        let behind = horizon.saturating_sub(position);
        let limit = (3 * every).max(self.keep.unwrap_or(0));
        let text = match (self.behind, behind) {
            (false, b) if b > limit => format!(
                "the live analysis is {:.1} s behind the recording: its intervals and \
                 alarms come late{}",
                b as f64 / 1e9,
                match self.keep {
                    Some(_) => "; the flight recorder keeps no more than twice its window and --after for them",
                    None => "",
                }
            ),
            (true, b) if b <= 2 * every => "the live analysis has caught up".to_string(),
            _ => return,
        };
        self.behind = !self.behind;
        self.adapt
            .log
            .add(horizon, watch_log::Kind::BEHIND, text, true);
    }

    /// A save's own sections: how it was made (RECORDING) and the watch log of its
    /// window, led by what the flight recorder had already given back.
    fn save_sections(
        &self,
        fl: &Flight,
        from: u64,
        kept_from: u64,
        to: u64,
    ) -> Vec<(u16, Vec<u8>)> {
        let keep = self.keep_text.as_deref().unwrap_or("?");
        let mut text = format!(
            "flight recorder (--keep {keep}): {} older pages ({} bytes) given back before this window",
            fl.dropped_pages, fl.dropped_bytes
        );
        if kept_from > from && fl.dropped_pages > 0 {
            text.push_str(&format!(
                "; its first {:.3} s were given back too (the watch fell behind)",
                (kept_from - from) as f64 / 1e9
            ));
        }
        let mut log = vec![watch_log::Entry {
            ts: kept_from,
            kind: watch_log::Kind::DROPPED.into(),
            text,
        }];
        log.extend(self.adapt.log.between(from, to));
        let rec = extras::Recording {
            workload: self.command.clone(),
            pids: self.pids.clone(),
            tool: format!("kstate {}", env!("CARGO_PKG_VERSION")),
            command: std::env::args().collect(),
            hostname: kstate_record::system::hostname(),
            clock: self.clock.clone(),
            start_ts: kept_from,
            stop_ts: to,
            buffer_kib_per_cpu: self.buffer_bytes / 1024,
            events: self.ongoing_events.clone(),
            ..extras::Recording::default()
        };
        vec![
            (ids::RECORDING, rec.encode()),
            (ids::WATCH_LOG, watch_log::encode(&log)),
        ]
    }
}
