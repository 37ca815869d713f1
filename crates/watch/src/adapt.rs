//! What `kstate watch` changes while it records, and its log: escalations (`--escalate`:
//! heavier events on for a while after an alarm), load shedding (sheddable events off
//! while the readers are behind the kernel), and every alarm, escalation, shed and loss
//! as an entry of the recording's WATCH_LOG section.

use kstate_analyze::alarm::Firing;
use kstate_analyze::escalate::Escalation;
use kstate_analyze::live::Interval;
use kstate_format::watch_log::{Entry, Kind};
use kstate_record::overload::{Overload, Step};
use kstate_record::watch::Ongoing;

/// Entries kept at most; past it they are counted (memory stays bounded on a long watch).
const LOG_MAX: usize = 100_000;

/// The watch's log: kept for the file, and told to the user as it happens.
pub struct Log {
    entries: Vec<Entry>,
    /// Entries before this one went out with a JSON line.
    sent: usize,
    left_out: u64,
    start: u64,
    /// While the dashboard owns the terminal, lines wait here for its end.
    pub held: Option<Vec<String>>,
}

impl Log {
    pub fn new(start: u64) -> Log {
        Log {
            entries: Vec::new(),
            sent: 0,
            left_out: 0,
            start,
            held: None,
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
                Some(h) => h.push(line),
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

    /// Entries in [from, to].
    pub fn between(&self, from: u64, to: u64) -> Vec<Entry> {
        self.entries
            .iter()
            .filter(|e| (from..=to).contains(&e.ts))
            .cloned()
            .collect()
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
    overload: Overload,
    /// Alarms fired since the last tick.
    fired: Vec<String>,
    pub log: Log,
}

impl Adapt {
    pub fn new(escalations: Vec<Escalate>, shed_base: Vec<String>, buffer_bytes: u64) -> Adapt {
        Adapt {
            escalations,
            shed_base,
            overload: Overload::new(buffer_bytes),
            fired: Vec::new(),
            log: Log::new(0),
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
    /// and the ring buffers are checked for overload. `now` is the time the tick is for;
    /// an entry that turns events on is stamped before the switch, one that turns them
    /// off after it: the file has none of them on the wrong side of its entry.
    pub fn tick(&mut self, ongoing: &Ongoing, now: u64) -> kstate_record::Result<()> {
        let fired = std::mem::take(&mut self.fired);
        let shedding = self.overload.is_shed();
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
        match self.overload.check(&ongoing.ring_stats()) {
            Step::Nothing => {}
            Step::Shed(why) => {
                let off = self.sheddable();
                ongoing.set_enabled(&off, false)?;
                let text = match off.is_empty() {
                    true => format!("{why}; nothing to shed (mark events with --shed)"),
                    false => format!("{why}; {} off", off.join(",")),
                };
                self.log.add(ongoing.now(), Kind::SHED, text, true);
            }
            Step::Restore => {
                let on = self.sheddable();
                let stamp = ongoing.now();
                ongoing.set_enabled(&on, true)?;
                let text = match on.is_empty() {
                    true => "the readers caught up".to_string(),
                    false => format!("the readers caught up; {} on again", on.join(",")),
                };
                self.log.add(stamp, Kind::RESTORE, text, true);
            }
        }
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
