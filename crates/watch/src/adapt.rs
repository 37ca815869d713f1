//! What `kstate watch` changes while it records, and its log: escalations (`--escalate`:
//! heavier events on for a while after an alarm), load shedding (sheddable events off
//! while the readers are behind the kernel), and every alarm, escalation, shed and loss
//! as an entry of the recording's WATCH_LOG section.

use crate::alarm::Firing;
use crate::escalate::Escalation;
use kstate_analyze::live::Interval;
use kstate_format::sections::watch_log::{Entry, Kind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstate_record::overload::{Overload, CALM_CHECKS};
use kstate_record::watch::Ongoing;

use crate::guard::{self, Guard, Shared, CHECK_EVERY};

/// Entries kept at most; past it they are counted (memory stays bounded on a long watch).
const LOG_MAX: usize = 100_000;

/// The watch's log: kept for the file, and told to the user as it happens.
pub struct Log {
    entries: Vec<Entry>,
    /// Entries before this one went out with a JSON line.
    sent: usize,
    left_out: u64,
    start: u64,
    /// While the dashboard owns the terminal, lines wait here for its end (at most
    /// `HELD_MAX`; the rest counted).
    pub held: Option<Vec<String>>,
    pub held_out: u64,
}

/// Lines held for after the dashboard at most.
const HELD_MAX: usize = 1000;

impl Log {
    pub fn new(start: u64) -> Log {
        Log {
            entries: Vec::new(),
            sent: 0,
            left_out: 0,
            start,
            held: None,
            held_out: 0,
        }
    }

    pub fn set_start(&mut self, start: u64) {
        self.start = start;
    }

    /// Adds an entry; `tell` also prints it (alarms print their own line).
    pub fn add(&mut self, ts: u64, kind: &str, text: String, tell: bool) {
        if tell {
            let line = format!(
                "kstate: {} at {:.3} s: {text}",
                kind.to_uppercase(),
                ts.saturating_sub(self.start) as f64 / 1e9
            );
            match &mut self.held {
                // Bounded: a long watch that loses events every interval would hold
                // hours of lines.
                Some(h) if h.len() < HELD_MAX => h.push(line),
                Some(_) => self.held_out += 1,
                None => eprintln!("{line}"),
            }
        }
        if self.entries.len() < LOG_MAX {
            self.entries.push(Entry {
                ts,
                kind: kind.to_string(),
                text,
            });
        } else {
            self.left_out += 1;
        }
    }

    /// The entries not yet returned by this call.
    pub fn unsent(&mut self) -> &[Entry] {
        let from = std::mem::replace(&mut self.sent, self.entries.len());
        &self.entries[from..]
    }

    /// Every entry kept.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Every entry, and one saying how many were left out, if any.
    pub fn all(&self) -> Vec<Entry> {
        let mut v = self.entries.clone();
        if self.left_out > 0 {
            v.push(Entry {
                ts: v.last().map_or(self.start, |e| e.ts),
                kind: "truncated".into(),
                text: format!(
                    "{} later entries left out (at most {LOG_MAX})",
                    self.left_out
                ),
            });
        }
        v
    }
}

/// One `--escalate` rule, its events resolved (`system:event`, the ones not recorded
/// anyway) and, while they are on, until when.
pub struct Escalate {
    pub esc: Escalation,
    pub events: Vec<String>,
    until: Option<u64>,
}

impl Escalate {
    pub fn new(esc: Escalation, events: Vec<String>) -> Escalate {
        Escalate {
            esc,
            events,
            until: None,
        }
    }
}

pub struct Adapt {
    pub escalations: Vec<Escalate>,
    /// `--shed`: recorded events that may be turned off under overload.
    shed_base: Vec<String>,
    /// Overload, checked between ticks by the guard's thread.
    shared: Arc<Mutex<Shared>>,
    guard: Option<Guard>,
    /// Alarms fired since the last tick.
    fired: Vec<String>,
    pub log: Log,
}

impl Adapt {
    pub fn new(
        escalations: Vec<Escalate>,
        shed_base: Vec<String>,
        buffer_bytes: u64,
        interval: Duration,
    ) -> Adapt {
        // Checked every 100 ms, shed events still come back after five calm intervals.
        let per_interval = (interval.as_nanos() / CHECK_EVERY.as_nanos()).max(1) as u32;
        let overload = Overload::new(buffer_bytes).calm_for(CALM_CHECKS * per_interval);
        let shared = Arc::new(Mutex::new(Shared::new(overload)));
        guard::lock(&shared).sheddable = shed_base.clone();
        Adapt {
            escalations,
            shed_base,
            shared,
            guard: None,
            fired: Vec::new(),
            log: Log::new(0),
        }
    }

    /// Tracing is on: overload is checked from now on.
    pub fn start(&mut self, ongoing: &Ongoing) -> kstate_record::Result<()> {
        let g = Guard::start(self.shared.clone(), ongoing.switch())
            .map_err(|e| kstate_record::Error::new(format!("starting the overload checks: {e}")))?;
        self.guard = Some(g);
        Ok(())
    }

    /// Tracing is off: no more checks (the instance is about to go).
    pub fn stop(&mut self) {
        self.guard = None;
        self.take_entries();
    }

    /// The guard's entries into the log (told now; stamped when they happened).
    fn take_entries(&mut self) {
        let entries = std::mem::take(&mut guard::lock(&self.shared).entries);
        for (ts, kind, text) in entries {
            self.log.add(ts, kind, text, true);
        }
    }

    /// An alarm fired (its line is printed elsewhere).
    pub fn alarm(&mut self, f: &Firing) {
        let text = format!(
            "{}: {}{} (threshold {})",
            f.rule,
            f.value_text,
            f.key.as_ref().map_or(String::new(), |k| format!(" at {k}")),
            f.threshold_text
        );
        self.log.add(f.end, Kind::ALARM, text, false);
        self.fired.push(f.rule.clone());
    }

    /// The events an interval says the kernel lost.
    pub fn interval(&mut self, iv: &Interval) {
        for c in &iv.cpus {
            let text = match c.lost {
                Some(0) => continue,
                Some(n) => format!("cpu {}: {n} events lost", c.cpu),
                None => format!("cpu {}: events lost (the kernel did not count them)", c.cpu),
            };
            self.log.add(iv.end, Kind::LOST, text, true);
        }
    }

    /// Every tick: escalations the alarms asked for start, those whose time is over end,
    /// and the guard learns what it may shed. `now` is the time the tick is for;
    /// an entry that turns events on is stamped before the switch, one that turns them
    /// off after it: the file has none of them on the wrong side of its entry.
    pub fn tick(&mut self, ongoing: &Ongoing, now: u64) -> kstate_record::Result<()> {
        let fired = std::mem::take(&mut self.fired);
        self.take_entries();
        // Held to the end: the guard does not switch while escalations do.
        let shared = self.shared.clone();
        let mut sh = guard::lock(&shared);
        if let Some(e) = sh.error.take() {
            return Err(kstate_record::Error::new(format!(
                "shedding under overload: {e}"
            )));
        }
        let shedding = sh.overload.is_shed();
        for i in 0..self.escalations.len() {
            let e = &mut self.escalations[i];
            let mut stamp = now;
            if fired.contains(&e.esc.rule.text) {
                let on = e.until.is_some();
                e.until = Some(now + e.esc.for_ns);
                let (events, secs) = (e.events.join(","), e.esc.for_ns as f64 / 1e9);
                let text = match (on, shedding) {
                    (true, _) => {
                        format!("{}: fired again, on until {secs} s from now", e.esc.text)
                    }
                    (false, true) => {
                        format!(
                            "{}: held back, the readers are behind ({events})",
                            e.esc.text
                        )
                    }
                    (false, false) => {
                        stamp = ongoing.now();
                        ongoing.set_enabled(&e.events, true)?;
                        format!("{}: on ({events})", e.esc.text)
                    }
                };
                self.log.add(stamp, Kind::ESCALATE, text, true);
            } else if e.until.is_some_and(|u| now >= u) {
                e.until = None;
                let events = e.events.clone();
                let still = self.wanted_by_others(i);
                let off: Vec<String> = events.into_iter().filter(|x| !still.contains(x)).collect();
                if !shedding {
                    ongoing.set_enabled(&off, false)?;
                }
                let text = format!("{}: {} off", self.escalations[i].esc.text, off.join(","));
                self.log.add(ongoing.now(), Kind::RELAX, text, true);
            }
        }
        sh.sheddable = self.sheddable();
        Ok(())
    }

    /// The events shedding turns off: the `--shed` ones and those of escalations on.
    fn sheddable(&self) -> Vec<String> {
        let mut v = self.shed_base.clone();
        for e in self.escalations.iter().filter(|e| e.until.is_some()) {
            v.extend(e.events.iter().cloned());
        }
        v.sort();
        v.dedup();
        v
    }

    /// Events that escalations other than `i`, still on, keep on.
    fn wanted_by_others(&self, i: usize) -> Vec<String> {
        self.escalations
            .iter()
            .enumerate()
            .filter(|(j, e)| *j != i && e.until.is_some())
            .flat_map(|(_, e)| e.events.iter().cloned())
            .collect()
    }
}
