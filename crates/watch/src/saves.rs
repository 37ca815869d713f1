//! The flight recorder's saves (`--keep`): when an alarm fires (or on SIGUSR1 and the
//! dashboard's `w`), a trace.dat of the window around it goes into `--save-dir`, named
//! after the rule and the wall-clock time (`kstate-alarm-RULE-2026-11-28T14:03:07Z.dat`,
//! never overwriting), with the recording's wall-clock offset, the process table of the
//! window and the watch log. At most `--max-saves` per run, none sooner than `--save-gap`
//! after the last (Perfetto's `max_per_24_h` for the same reason: a flapping rule must
//! not fill the disk).

use std::path::{Path, PathBuf};

use kstate_format::sections::watch_log::{self, Entry, Kind};
use kstate_format::sections::{self as extras, ids, Process};
use kstate_record::flight::Flight;
use kstate_record::watch::Ongoing;

/// How the flight recorder keeps its window, and what a save takes.
pub struct Policy {
    /// `--keep TIME` (None: a size).
    pub keep_ns: Option<u64>,
    /// `--keep SIZE` (None: a time).
    pub keep_bytes: Option<u64>,
    /// `--keep` as the user wrote it.
    pub keep_text: String,
    pub after_ns: u64,
    pub dir: PathBuf,
    pub max: usize,
    pub gap_ns: u64,
}

/// A save asked for, written once its `--after` has been recorded.
struct Pending {
    /// The rule, or "manual".
    what: String,
    /// The alarm's end (or when a manual save was asked), trace clock.
    at: u64,
    from: u64,
    to: u64,
}

/// What every save says about the recording besides its pages.
pub struct Context<'a> {
    pub start: u64,
    pub log: &'a [Entry],
    pub clock: &'a str,
    pub events: &'a [String],
    pub command: &'a [String],
    pub pids: &'a [i32],
    pub buffer_kib: u64,
    pub wall_offset: Option<i64>,
    pub processes: &'a [Process],
}

pub struct Saves {
    flight: Flight,
    policy: Policy,
    capture: PathBuf,
    pending: Vec<Pending>,
    /// Saves asked for and accepted (written or pending).
    accepted: usize,
    last_at: Option<u64>,
    /// Saves not made: past --max-saves, within --save-gap.
    pub skipped_max: u64,
    pub skipped_gap: u64,
    pub written: Vec<PathBuf>,
    /// The size bound was found too small for --after once (said once).
    small_said: bool,
}

impl Saves {
    pub fn new(flight: Flight, policy: Policy, capture: PathBuf) -> Saves {
        Saves {
            flight,
            policy,
            capture,
            pending: Vec::new(),
            accepted: 0,
            last_at: None,
            skipped_max: 0,
            skipped_gap: 0,
            written: Vec::new(),
            small_said: false,
        }
    }

    pub fn flight(&self) -> &Flight {
        &self.flight
    }

    /// The time window (None for a size bound).
    pub fn keep_ns(&self) -> Option<u64> {
        self.policy.keep_ns
    }

    /// Asks for a save of the window around `at` (an alarm's end, or now for a manual
    /// save, which takes no --after and no gap); the reason when it is not made.
    pub fn ask(&mut self, what: &str, at: u64, start: u64, manual: bool) -> Result<(), String> {
        if self.accepted >= self.policy.max {
            self.skipped_max += 1;
            return Err(format!(
                "not saved: --max-saves {} reached for this run",
                self.policy.max
            ));
        }
        if let (false, Some(last)) = (manual, self.last_at) {
            if at.saturating_sub(last) < self.policy.gap_ns {
                self.skipped_gap += 1;
                return Err(format!(
                    "not saved: the last save was {:.3} s before, within --save-gap {:.3} s",
                    at.saturating_sub(last) as f64 / 1e9,
                    self.policy.gap_ns as f64 / 1e9
                ));
            }
        }
        // A size bound reaches back as far as the pages kept now.
        let from = match self.policy.keep_ns {
            Some(k) => at.saturating_sub(k),
            None => self.flight.oldest().unwrap_or(start),
        }
        .max(start);
        let to = match manual {
            true => at,
            false => at.saturating_add(self.policy.after_ns),
        };
        self.accepted += 1;
        self.last_at = Some(at);
        self.pending.push(Pending {
            what: what.to_string(),
            at,
            from,
            to,
        });
        Ok(())
    }

    /// Under a size bound, once the rate is known: whether SIZE holds --after and an
    /// interval at that rate (bytes per second); said once.
    pub fn check_size(&mut self, bytes_per_s: f64, interval_ns: u64) -> Option<String> {
        let size = self.policy.keep_bytes?;
        let need = bytes_per_s * (self.policy.after_ns + interval_ns) as f64 / 1e9;
        if self.small_said || bytes_per_s <= 0.0 || (size as f64) >= need {
            return None;
        }
        self.small_said = true;
        Some(format!(
            "--keep {} holds {:.1} s at the rate seen ({:.1} MiB/s), less than --after \
             ({:.3} s) and an interval: a save keeps the pages it needs up to twice {} and \
             loses its start beyond that",
            self.policy.keep_text,
            size as f64 / bytes_per_s,
            bytes_per_s / (1 << 20) as f64,
            self.policy.after_ns as f64 / 1e9,
            self.policy.keep_text
        ))
    }

    /// Every tick: indexes the new pages, gives back those no save needs, and writes the
    /// saves whose --after has been recorded (up to `horizon`). `position`: where the
    /// live analysis stands (alarms of later intervals are still to come, so the window
    /// before it stays). Messages for the user, each with its time.
    pub fn tick(
        &mut self,
        ongoing: &Ongoing,
        horizon: u64,
        position: u64,
        cx: &Context,
    ) -> Vec<(u64, String)> {
        let pending_from = self.pending.iter().map(|s| s.from).min();
        let hold = match self.policy.keep_ns {
            // The window before any interval not yet analysed; an analysis far behind
            // holds no more than twice the window and --after, so the bound holds (a
            // save that lost its start says so).
            Some(keep) => pending_from
                .unwrap_or(u64::MAX)
                .min(position.saturating_sub(keep))
                .max(horizon.saturating_sub(2 * keep + self.policy.after_ns)),
            // A size: a pending save's pages stay until the pages kept reach twice the
            // size.
            None => pending_from.unwrap_or(u64::MAX),
        };
        // Nothing the analysis has yet to read goes (its alarms are still to come).
        self.flight
            .update(ongoing, horizon, Some(hold), Some(position));
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|s| s.to <= horizon);
        self.pending = rest;
        due.into_iter()
            .map(|p| (p.at, self.write(p, false, cx)))
            .collect()
    }

    /// The recording ended at `stop`: the saves still to come hold what there is, up to
    /// the end, and say so.
    pub fn finish(&mut self, ongoing: &Ongoing, stop: u64, cx: &Context) -> Vec<(u64, String)> {
        self.flight.update(ongoing, 0, Some(0), None);
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|mut p| {
                let cut = p.to > stop;
                if cut {
                    p.to = stop.max(p.from);
                }
                (p.at, self.write(p, cut, cx))
            })
            .collect()
    }

    /// Writes one save; what happened, for the user.
    fn write(&mut self, p: Pending, cut_short: bool, cx: &Context) -> String {
        let rel = |t: u64| t.saturating_sub(cx.start) as f64 / 1e9;
        let fl = &self.flight;
        let kept_from = fl.oldest().unwrap_or(p.from).max(p.from);
        if kept_from >= p.to {
            return format!(
                "save for {} at {:.3} s not written: its window ({:.3}..{:.3} s) was given \
                 back before it could be (the watch fell behind, or --keep is too small)",
                p.what,
                rel(p.at),
                rel(p.from),
                rel(p.to)
            );
        }
        let file = match unique_name(&self.policy.dir, &p.what, p.at, cx.wall_offset) {
            Ok(f) => f,
            Err(e) => return format!("save for {}: {e}", p.what),
        };
        let (processes, comms) = process_table(cx.processes);
        let sections = self.sections(&p, kept_from, cut_short, cx, &processes);
        match fl.save(&self.capture, p.from, p.to, &file, sections, &comms) {
            Ok(()) => {
                self.written.push(file.clone());
                format!(
                    "saved {} ({:.3}..{:.3} s{}; {} older pages, {} MiB, were given back \
                     before it)",
                    file.display(),
                    rel(kept_from),
                    rel(p.to),
                    match cut_short {
                        true => ", cut short: the recording ended before --after ran out",
                        false => "",
                    },
                    fl.dropped_pages,
                    fl.dropped_bytes >> 20
                )
            }
            Err(e) => {
                let _ = std::fs::remove_file(&file);
                format!("saving {}: {e}", file.display())
            }
        }
    }

    /// A save's own sections: how it was made (RECORDING, with the wall-clock offset),
    /// the processes of its window, and the watch log of its window, led by what the
    /// flight recorder had already given back.
    fn sections(
        &self,
        p: &Pending,
        kept_from: u64,
        cut_short: bool,
        cx: &Context,
        processes: &[Process],
    ) -> Vec<(u16, Vec<u8>)> {
        let fl = &self.flight;
        let keep = &self.policy.keep_text;
        let mut text = format!(
            "flight recorder (--keep {keep}): {} older pages ({} bytes) given back before \
             this window",
            fl.dropped_pages, fl.dropped_bytes
        );
        if kept_from > p.from && self.policy.keep_bytes.is_some() {
            text.push_str(&format!(
                "; the {keep} kept (every CPU's pages together, {} bytes now) reach back to \
                 {:.3} s",
                fl.kept_bytes(),
                kept_from.saturating_sub(cx.start) as f64 / 1e9
            ));
        } else if kept_from > p.from && fl.dropped_pages > 0 {
            text.push_str(&format!(
                "; its first {:.3} s were given back too (the watch fell behind)",
                (kept_from - p.from) as f64 / 1e9
            ));
        }
        if cut_short {
            text.push_str(&format!(
                "; cut short: the recording ended at {:.3} s, before the --after this save \
                 asked for, so it ends there",
                p.to.saturating_sub(cx.start) as f64 / 1e9
            ));
        }
        let mut log = vec![Entry {
            ts: kept_from,
            kind: Kind::DROPPED.into(),
            text,
        }];
        log.extend(
            cx.log
                .iter()
                .filter(|e| (p.from..=p.to).contains(&e.ts))
                .cloned(),
        );
        let rec = extras::Recording {
            workload: cx.command.to_vec(),
            pids: cx.pids.to_vec(),
            tool: format!("kstate {}", env!("CARGO_PKG_VERSION")),
            command: std::env::args().collect(),
            hostname: kstate_record::system::hostname(),
            clock: cx.clock.to_string(),
            wall_offset_ns: cx.wall_offset,
            start_ts: kept_from,
            stop_ts: p.to,
            buffer_kib_per_cpu: cx.buffer_kib,
            events: cx.events.to_vec(),
            ..extras::Recording::default()
        };
        vec![
            (ids::RECORDING, rec.encode()),
            (ids::PROCESSES, extras::encode_processes(processes)),
            (ids::WATCH_LOG, watch_log::encode(&log)),
        ]
    }
}

/// The tasks a save names: those at the start, those alive now (from /proc) and those
/// the kernel saw switch lately (its saved_cmdlines), the newest name of each; as a
/// process table and as the pid -> name list of the file's cmdlines.
fn process_table(at_start: &[Process]) -> (Vec<Process>, Vec<(i32, String)>) {
    let mut by_pid: std::collections::BTreeMap<i32, Process> =
        at_start.iter().map(|p| (p.pid, p.clone())).collect();
    let saved = kstate_record::tracefs::Tracefs::open()
        .ok()
        .and_then(|t| kstate_record::tracefs::read(&t.path("saved_cmdlines")).ok())
        .unwrap_or_default();
    for (pid, comm) in kstate_format::rawdir::parse_cmdlines(&saved) {
        by_pid
            .entry(pid)
            .and_modify(|p| p.comm.clone_from(&comm))
            .or_insert(Process {
                pid,
                tgid: pid,
                ppid: 0,
                comm,
            });
    }
    for p in kstate_record::system::processes() {
        by_pid.insert(p.pid, p);
    }
    let comms = by_pid
        .values()
        .filter(|p| p.pid > 0)
        .map(|p| (p.pid, p.comm.clone()))
        .collect();
    (by_pid.into_values().collect(), comms)
}

/// `DIR/kstate-alarm-RULE-2026-11-28T14:03:07Z.dat` (`kstate-save-manual-...` for a
/// manual save), created empty and exclusively so that nothing is overwritten: a name
/// taken (a second save in the same second, an earlier run's file) gets `-2`, `-3`, ...
fn unique_name(
    dir: &Path,
    what: &str,
    at: u64,
    wall_offset: Option<i64>,
) -> Result<PathBuf, String> {
    let rule: String = what
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(60)
        .collect();
    let kind = match what {
        "manual" => "save",
        _ => "alarm",
    };
    let when = match wall_offset {
        Some(off) => kstate_render::utc::fmt_utc(at as i128 + off as i128)
            .map(|t| format!("{}Z", &t[..19]))
            .unwrap_or_else(|| format!("{at}ns")),
        // No wall clock: the trace clock's time, still unique within the run.
        None => format!("{at}ns"),
    };
    for n in 1..1000 {
        let name = match n {
            1 => format!("kstate-{kind}-{rule}-{when}.dat"),
            n => format!("kstate-{kind}-{rule}-{when}-{n}.dat"),
        };
        let path = dir.join(name);
        match kstate_format::output::create_new(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating {}: {e}", path.display())),
        }
    }
    Err(format!(
        "{}: a thousand saves named after {what} in the same second",
        dir.display()
    ))
}
