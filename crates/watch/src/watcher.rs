//! The watch as the recorder drives it: every tick the live analysis advances, each
//! finished interval is reported (dashboard or JSON line) and its alarms fire (a line,
//! the alarm log, --on-alarm, a flight-recorder save to come), and the adaptation steps.

use std::io::Write;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use crate::alarm::{Alarms, Firing, Rule};
use kstate_analyze::analyzer::{Config, Mode};
use kstate_analyze::live::{GrowingPages, Interval, Live};
use kstate_analyze::{analyzers, Info};
use kstate_format::sections::{self, ids};
use kstate_format::{sections::watch_log, PageSource, Trace};
use kstate_record::flight::Flight;
use kstate_record::watch::{Flow, Ongoing, Watcher};

use crate::adapt::Adapt;
use crate::json;
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

pub struct Watch {
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
    /// `--keep SIZE`: the flight recorder's pages bounded in bytes instead (`keep` is
    /// then none: a save reaches back as far as the pages kept).
    keep_bytes: Option<u64>,
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
    pub fn new(
        args: &Options,
        alarms: Alarms,
        rules: Vec<Rule>,
        alarm_log: Option<std::fs::File>,
        adapt: Adapt,
    ) -> Watch {
        Watch {
            interval: args.interval,
            top: args.top,
            rules,
            alarms,
            alarm_log,
            on_alarm: args.on_alarm.clone(),
            children: Vec::new(),
            live: None,
            start: 0,
            buffer_bytes: args.buffer_kib * 1024,
            fired: 0,
            json: args.json || !std::io::IsTerminal::is_terminal(&std::io::stdout()),
            dashboard: None,
            fired_lines: Vec::new(),
            keep: args
                .keep
                .and_then(|k| k.time())
                .map(|k| k.as_nanos() as u64),
            keep_bytes: match args.keep {
                Some(crate::Keep::Bytes(b)) => Some(b),
                _ => None,
            },
            after: args.after.as_nanos() as u64,
            save_dir: args.save_dir.clone(),
            flight: None,
            saves: Vec::new(),
            capture: PathBuf::new(),
            keep_text: args.keep.map(|k| k.to_string()),
            adapt,
            ongoing_events: Vec::new(),
            clock: String::new(),
            command: args.command.clone(),
            pids: Vec::new(),
            behind: false,
        }
    }

    /// After the recording: waits for the --on-alarm commands, and prints the lines the
    /// dashboard held back.
    pub fn finish(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.wait();
        }
        for l in self
            .fired_lines
            .iter()
            .chain(self.adapt.log.held.iter().flatten())
        {
            eprintln!("{l}");
        }
    }

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
            // The flight recorder's pages on disk after the last tick, and what it gave
            // back so far (a size bound can be checked against it).
            if let Some(fl) = &self.flight {
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
        self.fired += 1;
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
        if self.keep.is_some() || self.keep_bytes.is_some() {
            // A size bound: from as far back as the pages kept reach.
            let keep = self.keep.unwrap_or(u64::MAX);
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
            let _ = writeln!(log, "{}", json::firing(f, self.start));
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
        let mut trace = Trace::open(&ongoing.dir).map_err(|e| err(e.to_string()))?;
        // The capture is being recorded on this machine, but says so (its uname) only in
        // the finished file: said now, block keys name the disk (`0000fe00-W(vda)`) as
        // `kstate analyze` of the file does, and rules' `dev=vda` filters match them.
        if trace.uname.is_none() {
            trace.uname = kstate_record::system::uname();
        }
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
        self.adapt.start(ongoing)?;
        self.flight = match (self.keep, self.keep_bytes) {
            (Some(keep), _) => Some(Flight::new(ongoing, keep)?),
            (None, Some(bytes)) => Some(Flight::new(ongoing, u64::MAX)?.bounded_by_bytes(bytes)),
            (None, None) => None,
        };
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
        // Horizon 0: a reader did not move its pages in time, so how far the recording
        // has got is not known this tick (taken as 0, the analysis looked caught up, and
        // the log said so at 0.000 s).
        if horizon > 0 {
            self.note_lag(horizon, position);
        }
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
            // A size bound (no window) holds nothing back: the flight recorder drops the
            // oldest pages past the size whatever a save wanted.
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
        self.adapt.stop();
        let Some(live) = self.live.take() else {
            return Ok(());
        };
        let done = live
            .finish()
            .map_err(|e| kstate_record::Error::new(e.to_string()))?;
        // Behind until the end: the rest was analysed now, up to the last interval's end,
        // which is when it caught up on the trace clock.
        let reached = done.last().map(|iv| iv.end);
        let reported = self.report(done);
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
        if let Some(fl) = &mut self.flight {
            fl.update(ongoing, 0, Some(0));
        }
        let stop = match ongoing.now() {
            0 => reached.unwrap_or(u64::MAX),
            now => now,
        };
        self.save_cut_short(stop);
        reported
    }

    fn sections(&mut self) -> Vec<(u16, Vec<u8>)> {
        vec![(ids::WATCH_LOG, watch_log::encode(&self.adapt.log.all()))]
    }
}

impl Watch {
    /// Writes the flight-recorder saves whose time has come.
    fn save_due(&mut self, horizon: u64) {
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.saves)
            .into_iter()
            .partition(|s| s.2 <= horizon);
        self.saves = rest;
        for (file, from, to) in due {
            self.save(file, from, to, false);
        }
    }

    /// At the end of the recording (`stop`, trace clock): writes the saves still to
    /// come, each up to `stop`, saying so where that is before its end.
    fn save_cut_short(&mut self, stop: u64) {
        for (file, from, to) in std::mem::take(&mut self.saves) {
            match to > stop {
                true => self.save(file, from, stop.max(from), true),
                false => self.save(file, from, to, false),
            }
        }
    }

    /// Writes one save of [from, to]; `cut_short`: the recording ended at `to`, before
    /// the --after the alarm asked for.
    fn save(&self, file: PathBuf, from: u64, to: u64, cut_short: bool) {
        let Some(fl) = &self.flight else {
            return;
        };
        let rel = |t: u64| t.saturating_sub(self.start) as f64 / 1e9;
        let kept_from = fl.oldest().unwrap_or(from).max(from);
        let sections = self.save_sections(fl, from, kept_from, to, cut_short);
        match fl.save(&self.capture, from, to, &file, sections) {
            Ok(()) => eprintln!(
                "kstate: saved {} ({:.3}..{:.3} s{}; {} older pages, {} MiB, were dropped before it)",
                file.display(),
                rel(kept_from),
                rel(to),
                match cut_short {
                    true => ", cut short: the recording ended before --after ran out",
                    false => "",
                },
                fl.dropped_pages,
                fl.dropped_bytes >> 20
            ),
            Err(e) => eprintln!("kstate: saving {}: {e}", file.display()),
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
        cut_short: bool,
    ) -> Vec<(u16, Vec<u8>)> {
        let keep = self.keep_text.as_deref().unwrap_or("?");
        let mut text = format!(
            "flight recorder (--keep {keep}): {} older pages ({} bytes) given back before this window",
            fl.dropped_pages, fl.dropped_bytes
        );
        if kept_from > from && self.keep_bytes.is_some() {
            text.push_str(&format!(
                "; the {} kept (every CPU's pages together, {} bytes now) reach back to {:.3} s",
                keep,
                fl.kept_bytes(),
                kept_from.saturating_sub(self.start) as f64 / 1e9
            ));
        } else if kept_from > from && fl.dropped_pages > 0 {
            text.push_str(&format!(
                "; its first {:.3} s were given back too (the watch fell behind)",
                (kept_from - from) as f64 / 1e9
            ));
        }
        if cut_short {
            text.push_str(&format!(
                "; cut short: the recording ended at {:.3} s, before the --after this save \
                 asked for, so it ends there",
                to.saturating_sub(self.start) as f64 / 1e9
            ));
        }
        let mut log = vec![watch_log::Entry {
            ts: kept_from,
            kind: watch_log::Kind::DROPPED.into(),
            text,
        }];
        log.extend(self.adapt.log.between(from, to));
        let rec = sections::Recording {
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
            ..sections::Recording::default()
        };
        vec![
            (ids::RECORDING, rec.encode()),
            (ids::WATCH_LOG, watch_log::encode(&log)),
        ]
    }
}
