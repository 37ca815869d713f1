//! The watch as the recorder drives it: every tick the live analysis advances, each
//! finished interval is reported (dashboard or JSON line, metrics) and its alarms fire
//! (a line, the alarm log, --on-alarm, a flight-recorder save), the adaptation steps, and
//! the pages the analysis has read are given back (without -o nothing keeps them).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::alarm::{Alarms, Firing, Rule};
use kstate_analyze::live::{GrowingPages, Interval, Live};
use kstate_analyze::{analyzers, Info, Query};
use kstate_format::sections::{ids, Process};
use kstate_format::{sections::watch_log, PageSource, Trace};
use kstate_record::flight::Flight;
use kstate_record::watch::{Flow, Ongoing, Watcher};

use crate::adapt::Adapt;
use crate::hooks::Hooks;
use crate::json;
use crate::metrics;
use crate::saves::{self, Saves};
use crate::tty::Dashboard;
use crate::Options;

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

/// Without -o, the most of a CPU's pages that wait for the live analysis: one that cannot
/// keep up skips the oldest past it (and says so) rather than hold ever more memory.
const BACKLOG_PER_CPU: u64 = 128 << 20;

/// Pages skipped by an analysis that cannot keep up are logged at most this often (ns).
const SKIP_NOTE_EVERY: u64 = 10_000_000_000;

/// How the flight recorder is to be set up once the recording has started.
pub struct FlightPlan {
    pub policy: saves::Policy,
    /// A cap in bytes on the pages kept beside a time window (the memory they may take).
    pub memory_cap: Option<u64>,
}

pub struct Watch {
    interval: Duration,
    top: usize,
    rules: Vec<Rule>,
    alarms: Alarms,
    alarm_log: Option<std::fs::File>,
    hooks: Option<Hooks>,
    live: Option<Live>,
    /// When tracing started (intervals count from it).
    start: u64,
    buffer_bytes: u64,
    /// JSON lines, else the dashboard.
    json: bool,
    dashboard: Option<Dashboard>,
    plan: Option<FlightPlan>,
    saves: Option<Saves>,
    adapt: Adapt,
    /// Without -o: the page files are read back by the analysis only, which gives back
    /// what it has read (per CPU: the file, and up to where it was given back).
    give_back: Option<Vec<(std::fs::File, u64)>>,
    /// Per CPU, how far the analysis has read its page file.
    read: Vec<Arc<std::sync::atomic::AtomicU64>>,
    /// Per CPU, the bytes of pages the analysis skipped (it could not keep up), and how
    /// many were logged.
    skipped: Vec<(u32, Arc<std::sync::atomic::AtomicU64>, u64)>,
    /// When skipped pages were last logged.
    skip_noted: Option<u64>,
    /// What the saves say about the recording.
    ongoing_events: Vec<String>,
    clock: String,
    command: Vec<String>,
    pids: Vec<i32>,
    wall_offset: Option<i64>,
    processes: Vec<Process>,
    /// The live analysis is behind the recording (logged once until it catches up).
    behind: bool,
    metrics: Option<Arc<Mutex<metrics::State>>>,
    /// Lines held while the dashboard owns the terminal, printed after it.
    held: Vec<String>,
}

impl Watch {
    pub fn new(
        args: &Options,
        alarms: Alarms,
        rules: Vec<Rule>,
        alarm_log: Option<std::fs::File>,
        adapt: Adapt,
        plan: Option<FlightPlan>,
        metrics: Option<Arc<Mutex<metrics::State>>>,
    ) -> Watch {
        Watch {
            interval: args.interval,
            top: args.top,
            rules,
            alarms,
            alarm_log,
            hooks: args
                .on_alarm
                .clone()
                .map(|c| Hooks::new(c, args.on_alarm_timeout.unwrap_or(crate::ON_ALARM_TIMEOUT))),
            live: None,
            start: 0,
            buffer_bytes: args.buffer_kib * 1024,
            json: args.json || !std::io::IsTerminal::is_terminal(&std::io::stdout()),
            dashboard: None,
            plan,
            saves: None,
            adapt,
            give_back: None,
            read: Vec::new(),
            skipped: Vec::new(),
            skip_noted: None,
            ongoing_events: Vec::new(),
            clock: String::new(),
            command: args.command.clone(),
            pids: Vec::new(),
            wall_offset: None,
            processes: Vec::new(),
            behind: false,
            metrics,
            held: Vec::new(),
        }
    }

    /// After the recording: waits for the --on-alarm commands (each no longer than its
    /// timeout), and prints what the dashboard held back and what was never reported:
    /// firings held back by --alarm-every, saves not made.
    pub fn finish(&mut self) {
        if let Some(h) = &mut self.hooks {
            for o in h.finish() {
                eprintln!("kstate: {}", o.text);
            }
        }
        for l in self.held.iter().chain(self.adapt.log.held.iter().flatten()) {
            eprintln!("{l}");
        }
        for (rule, n, last) in self.alarms.held_back() {
            eprintln!(
                "kstate: ALARM {rule}: became true {n} more time{} after its last firing{}, \
                 held back by --alarm-every and not reported",
                if n == 1 { "" } else { "s" },
                last.map_or(String::new(), |t| format!(
                    " (at {:.3} s)",
                    t.saturating_sub(self.start) as f64 / 1e9
                ))
            );
        }
        if let Some(s) = &self.saves {
            if s.skipped_max + s.skipped_gap > 0 {
                eprintln!(
                    "kstate: flight recorder: {} save{} written; {} not made past --max-saves, \
                     {} within --save-gap",
                    s.written.len(),
                    if s.written.len() == 1 { "" } else { "s" },
                    s.skipped_max,
                    s.skipped_gap
                );
            }
        }
    }

    /// A line for the user: on standard error, or held for after the dashboard.
    fn say(&mut self, line: String) {
        match &self.dashboard {
            Some(d) => {
                d.status(line.trim_start_matches("kstate: ").to_string());
                self.held.push(line);
            }
            None => eprintln!("{line}"),
        }
    }

    fn report(&mut self, intervals: Vec<Interval>, now: u64) -> kstate_record::Result<()> {
        for iv in intervals {
            self.adapt.interval(&iv);
            let firings = self.alarms.check(&iv);
            for w in self.alarms.take_warnings() {
                self.say(format!("kstate: warning: {w}"));
            }
            for f in &firings {
                self.fire(f);
                self.adapt.alarm(f);
            }
            if let Some(m) = &self.metrics {
                let mut m = metrics::lock(m);
                m.interval(&iv, &firings);
                if !firings.is_empty() && now > iv.end {
                    m.alarm_latency((now - iv.end) as f64 / 1e9);
                }
            }
            if let (Some(s), false) = (&mut self.saves, iv.partial) {
                let bytes: u64 = iv.cpus.iter().map(|c| c.bytes).sum();
                let secs = (iv.end - iv.start) as f64 / 1e9;
                if let Some(w) = s.check_size(bytes as f64 / secs, self.interval.as_nanos() as u64)
                {
                    self.say(format!("kstate: warning: {w}"));
                }
            }
            if let Some(d) = &self.dashboard {
                d.update(iv, &firings, &own_threads());
                continue;
            }
            let mut out = std::io::stdout().lock();
            let mut line = json::interval(&iv, self.start, self.top, self.buffer_bytes, &firings);
            // What the watch did and saw since the last line (escalations, shedding,
            // losses), as in the recording's watch log.
            line["log"] = serde_json::json!(self
                .adapt
                .log
                .unsent()
                .iter()
                .map(|e| serde_json::json!({"ts": e.ts, "kind": e.kind, "text": e.text}))
                .collect::<Vec<_>>());
            // The flight recorder's pages after the last tick, and what it gave back so
            // far (a size bound can be checked against it).
            if let Some(s) = &self.saves {
                let fl = s.flight();
                line["flight"] = serde_json::json!({
                    "kept_bytes": fl.kept_bytes(),
                    "dropped_pages": fl.dropped_pages,
                    "dropped_bytes": fl.dropped_bytes,
                });
            }
            writeln!(out, "{line}")
                .and_then(|_| out.flush())
                .map_err(|e| {
                    kstate_record::Error::new(format!("writing to standard output: {e}"))
                })?;
        }
        Ok(())
    }

    fn fire(&mut self, f: &Firing) {
        let rel = |t: u64| (t.saturating_sub(self.start)) as f64 / 1e9;
        // On the dashboard, the alarm shows in its panel.
        if self.dashboard.is_none() {
            eprintln!(
                "kstate: ALARM {}: {}{} (threshold {}), {:.3}..{:.3} s{}",
                f.rule,
                f.value_text,
                f.key.as_ref().map_or(String::new(), |k| format!(" at {k}")),
                f.threshold_text,
                rel(f.start),
                rel(f.end),
                crate::held_back(f)
            );
        }
        if let Some(s) = &mut self.saves {
            if let Err(why) = s.ask(&f.rule, f.end, self.start, false) {
                let text = format!("{}: {why}", f.rule);
                self.adapt.log.add(f.end, watch_log::Kind::SAVE, text, true);
            }
        }
        if let Some(log) = &mut self.alarm_log {
            let _ = writeln!(log, "{}", json::firing(f, self.start));
        }
        if let Some(h) = &mut self.hooks {
            if let Some(o) = h.fire(f) {
                self.adapt
                    .log
                    .add(f.end, watch_log::Kind::HOOK, o.text, true);
            }
        }
    }

    /// The --on-alarm commands that ended badly since the last tick, into the log.
    fn poll_hooks(&mut self, now: u64) {
        let Some(h) = &mut self.hooks else {
            return;
        };
        for o in h.poll() {
            self.adapt.log.add(now, watch_log::Kind::HOOK, o.text, true);
        }
    }

    /// Logs the pages the analysis skipped, at most every [`SKIP_NOTE_EVERY`] (a storm
    /// it cannot keep up with skips at every tick).
    fn note_skipped(&mut self, now: u64) {
        if self
            .skip_noted
            .is_some_and(|t| now.saturating_sub(t) < SKIP_NOTE_EVERY)
        {
            return;
        }
        for (cpu, n, told) in &mut self.skipped {
            let n = n.load(std::sync::atomic::Ordering::Relaxed);
            if n > *told {
                self.skip_noted = Some(now);
                // In KiB below a MiB: "0 MiB skipped" read as nothing skipped.
                let size = |b: u64| match b < 1 << 20 {
                    true => format!("{} KiB", b.div_ceil(1024)),
                    false => format!("{} MiB", b >> 20),
                };
                let text = format!(
                    "the live analysis cannot keep up: {} of cpu {cpu}'s pages skipped \
                     unanalysed since the last note ({} in all); its figures miss those \
                     events",
                    size(n - *told),
                    size(n)
                );
                *told = n;
                self.adapt.log.add(now, watch_log::Kind::BEHIND, text, true);
            }
        }
    }

    /// What every save says about the recording besides its pages.
    fn save_context(&self) -> saves::Context<'_> {
        saves::Context {
            start: self.start,
            log: self.adapt.log.entries(),
            clock: &self.clock,
            events: &self.ongoing_events,
            command: &self.command,
            pids: &self.pids,
            buffer_kib: self.buffer_bytes / 1024,
            wall_offset: self.wall_offset,
            processes: &self.processes,
        }
    }

    /// Gives back the page-file space the analysis has read (without -o or --keep
    /// nothing else reads it): a few pages per CPU stay.
    fn give_back_read(&mut self) {
        let Some(files) = &mut self.give_back else {
            return;
        };
        for ((file, done), read) in files.iter_mut().zip(&self.read) {
            let read = read.load(std::sync::atomic::Ordering::Acquire);
            if read > *done {
                // SAFETY: fallocate on our own descriptor with a valid range.
                unsafe {
                    libc::fallocate(
                        file.as_raw_fd(),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        *done as libc::off_t,
                        (read - *done) as libc::off_t,
                    )
                };
                *done = read;
            }
        }
    }
}

/// kstate's own threads now (the readers, the guard, the dashboard's, ...).
fn own_threads() -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

impl Watcher for Watch {
    fn interval(&self) -> Option<Duration> {
        Some(self.interval)
    }

    fn started(&mut self, ongoing: &Ongoing) -> kstate_record::Result<()> {
        let err = |e: String| kstate_record::Error::new(e);
        let mut trace = Trace::open(&ongoing.dir).map_err(|e| err(e.to_string()))?;
        // The capture is being recorded on this machine, but says so (its uname) only in
        // the finished file: said now, block keys name the disk (`0000fe00-W(vda)`) as
        // `kstate analyze` of the file does, and rules' `dev=vda` filters match them.
        if trace.uname.is_none() {
            trace.uname = kstate_record::system::uname();
        }
        let mut queries: Vec<Query> = Vec::new();
        let mut add = |info: &'static Info, by: &str| {
            if queries
                .iter()
                .any(|q| q.analyzer.name == info.name && q.by() == by)
            {
                return;
            }
            queries.push(Query::of(info).keyed(Some(by)));
        };
        for (name, by) in SHOWN {
            let Some(info) = analyzers::find(name) else {
                continue;
            };
            let by = if by.is_empty() { info.by[0].0 } else { by };
            // Shown where this recording has its events.
            if Live::applies(&trace, &Query::of(info).keyed(Some(by))) {
                add(info, by);
            }
        }
        for r in &self.rules {
            if let Some((info, by)) = r.query() {
                add(info, by);
            }
        }
        // The flight recorder first: the analysis skips the pages it gives back.
        let flight = match &self.plan {
            Some(plan) => {
                let flight = Flight::new(ongoing, plan.policy.keep_ns.unwrap_or(u64::MAX))?;
                Some(match plan.policy.keep_bytes.or(plan.memory_cap) {
                    Some(b) => flight.bounded_by_bytes(b),
                    None => flight,
                })
            }
            None => None,
        };
        let mut sources = Vec::new();
        for c in &ongoing.cpus {
            let mut p = GrowingPages::open(&c.path, 0, ongoing.page_size, c.tap.written_handle())
                .map_err(|e| err(e.to_string()))?;
            // Without a file at the end, what waits for an analysis that cannot keep up
            // is bounded (in memory, or on disk with --keep-on-disk).
            if ongoing.no_output {
                p = p.with_backlog_limit(BACKLOG_PER_CPU);
            }
            if let Some(g) = flight.as_ref().and_then(|f| f.given_back(c.cpu)) {
                p = p.with_given_back(g);
            }
            if ongoing.no_output || flight.is_some() {
                self.skipped.push((c.cpu, p.skipped_handle(), 0));
            }
            self.read.push(p.read_handle());
            sources.push((c.cpu, Box::new(p) as Box<dyn PageSource>));
        }
        self.start = ongoing.start_ts;
        self.adapt.log.set_start(ongoing.start_ts);
        self.ongoing_events = ongoing.events.clone();
        self.clock = ongoing.clock.clone();
        self.pids = ongoing.pids.clone();
        self.wall_offset = ongoing.wall_offset;
        self.processes = ongoing.processes.clone();
        let live = Live::new(
            trace,
            sources,
            &queries,
            ongoing.start_ts,
            self.interval.as_nanos() as u64,
        )
        .map_err(|e| err(e.to_string()))?;
        self.live = Some(live);
        self.adapt.start(ongoing)?;
        match (self.plan.take(), flight) {
            (Some(plan), Some(flight)) => {
                self.saves = Some(Saves::new(flight, plan.policy, ongoing.dir.clone()));
            }
            _ if ongoing.no_output => {
                let files = ongoing
                    .cpus
                    .iter()
                    .map(|c| {
                        std::fs::OpenOptions::new()
                            .write(true)
                            .open(&c.path)
                            .map(|f| (f, 0))
                            .map_err(|e| err(format!("opening {}: {e}", c.path.display())))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                self.give_back = Some(files);
            }
            _ => {}
        }
        if !self.json {
            self.dashboard = Some(Dashboard::start(
                ongoing.start_ts,
                self.buffer_bytes,
                self.saves.is_some(),
            ));
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
        self.report(done, ongoing.now())?;
        self.give_back_read();
        self.note_skipped(horizon);
        // Horizon 0: a reader did not move its pages in time, so how far the recording
        // has got is not known this tick (taken as 0, the analysis looked caught up, and
        // the log said so at 0.000 s).
        if horizon > 0 {
            self.note_lag(horizon, position);
        }
        self.adapt.tick(ongoing, horizon)?;
        self.poll_hooks(horizon);
        if self.saves.is_some() {
            let manual = kstate_record::signals::save_requested()
                | self.dashboard.as_ref().is_some_and(|d| d.save_asked());
            if manual && horizon > 0 {
                let start = self.start;
                if let Some(Err(why)) = self
                    .saves
                    .as_mut()
                    .map(|s| s.ask("manual", horizon, start, true))
                {
                    self.adapt.log.add(
                        horizon,
                        watch_log::Kind::SAVE,
                        format!("manual: {why}"),
                        true,
                    );
                }
            }
            let mut saves = self.saves.take();
            let said = saves
                .as_mut()
                .map(|s| s.tick(ongoing, horizon, position, &self.save_context()))
                .unwrap_or_default();
            self.saves = saves;
            for (at, text) in said {
                self.adapt.log.add(at, watch_log::Kind::SAVE, text, true);
            }
        }
        if let Some(d) = &self.dashboard {
            // The alarms are on it already.
            for e in self.adapt.log.unsent() {
                if e.kind != watch_log::Kind::ALARM {
                    d.note(e.ts, &e.kind, &e.text);
                }
            }
        }
        if let Some(m) = &self.metrics {
            metrics::lock(m).ring(&ongoing.ring_stats(), self.buffer_bytes);
        }
        Ok(Flow::Go)
    }

    fn stopped(&mut self, ongoing: &Ongoing) -> kstate_record::Result<()> {
        self.adapt.stop();
        let Some(live) = self.live.take() else {
            return Ok(());
        };
        // Tracing is off: now is after every event, and where the last interval ends.
        let stop = ongoing.now();
        let done = live
            .finish(stop)
            .map_err(|e| kstate_record::Error::new(e.to_string()))?;
        // Behind until the end: the rest was analysed now, up to the last interval's end,
        // which is when it caught up on the trace clock.
        let reached = done.last().map(|iv| iv.end);
        let reported = self.report(done, stop);
        // What the last pass skipped is said too, however soon after the last note (it
        // skipped seconds of a storm that ended the recording, and nothing said so).
        self.skip_noted = None;
        self.note_skipped(reached.unwrap_or(stop));
        if let (true, Some(end)) = (self.behind, reached) {
            self.behind = false;
            self.adapt.log.add(
                end,
                watch_log::Kind::BEHIND,
                "the live analysis has caught up (at the end of the recording)".into(),
                true,
            );
        }
        // The terminal back as it was.
        self.dashboard = None;
        // Saves cut short by the end of the recording (its command ended, Ctrl-C,
        // SIGTERM) hold what there is, up to the end, and say so.
        let stop = match stop {
            0 => reached.unwrap_or(u64::MAX),
            now => now,
        };
        if self.saves.is_some() {
            let mut saves = self.saves.take();
            let said = saves
                .as_mut()
                .map(|s| s.finish(ongoing, stop, &self.save_context()))
                .unwrap_or_default();
            self.saves = saves;
            for (at, text) in said {
                self.adapt.log.add(at, watch_log::Kind::SAVE, text, true);
            }
        }
        reported
    }

    fn sections(&mut self) -> Vec<(u16, Vec<u8>)> {
        vec![(ids::WATCH_LOG, watch_log::encode(&self.adapt.log.all()))]
    }
}

impl Watch {
    /// Logs when the live analysis falls behind the recording by more than three
    /// intervals (or the flight recorder's window), and when it has caught up.
    fn note_lag(&mut self, horizon: u64, position: u64) {
        let every = self.interval.as_nanos() as u64;
        let behind = horizon.saturating_sub(position);
        let keep = self.saves.as_ref().map_or(0, |s| s.keep_ns().unwrap_or(0));
        let limit = (3 * every).max(keep);
        let text = match (self.behind, behind) {
            (false, b) if b > limit => format!(
                "the live analysis is {:.1} s behind the recording: its intervals and \
                 alarms come late{}",
                b as f64 / 1e9,
                match keep {
                    0 => "",
                    _ => "; the flight recorder keeps no more than twice its window and --after for them",
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
}
