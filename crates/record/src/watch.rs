//! Watching a recording while it is made (`kstate watch`): the recorder hands a
//! [`Watcher`] the capture directory it writes (metadata and one growing page file per
//! CPU) and, every interval, has every reader move all it has traced so far, partly
//! filled pages too, so that the watcher can analyse up to that moment (the *horizon*)
//! knowing that no CPU will later deliver anything older.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstate_format::sections::RingStats;

use crate::error::{Error, Result};
use crate::reader::{Control, Tap};

/// What a recording tells its watcher, and when.
pub trait Watcher {
    /// How often [`Watcher::tick`] is called; `None` for a recording nobody watches.
    fn interval(&self) -> Option<Duration>;
    /// Tracing is on; nothing has been moved yet.
    fn started(&mut self, ongoing: &Ongoing) -> Result<()>;
    /// Every CPU's events up to `horizon` (ns on the trace clock) are in its page file.
    fn tick(&mut self, ongoing: &Ongoing, horizon: u64) -> Result<Flow>;
    /// Tracing is off and every page is in its file.
    fn stopped(&mut self, ongoing: &Ongoing) -> Result<()>;
    /// kstate sections (id, payload) to add to the recording's file, asked once after
    /// [`Watcher::stopped`].
    fn sections(&mut self) -> Vec<(u16, Vec<u8>)> {
        Vec::new()
    }
}

/// Whether the recording goes on after a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    Go,
    /// Stop, for this reason (e.g. "quit from the dashboard").
    Stop(String),
}

/// The recording nobody watches (`kstate record`).
pub struct Unwatched;

impl Watcher for Unwatched {
    fn interval(&self) -> Option<Duration> {
        None
    }
    fn started(&mut self, _: &Ongoing) -> Result<()> {
        Ok(())
    }
    fn tick(&mut self, _: &Ongoing, _: u64) -> Result<Flow> {
        Ok(Flow::Go)
    }
    fn stopped(&mut self, _: &Ongoing) -> Result<()> {
        Ok(())
    }
}

/// The recording as it is being made.
pub struct Ongoing {
    /// The capture directory (`Trace::open` reads its metadata; its CPU files grow).
    pub dir: PathBuf,
    /// The tracefs instance recording it.
    pub instance: PathBuf,
    /// The instance recording completions beside a pid filter (see `session`) and its
    /// events, `system:event`: these are switched there.
    pub side: Option<(PathBuf, Vec<String>)>,
    /// Events whose formats the capture holds but which started off (`Options::standby`),
    /// `system:event`.
    pub standby: Vec<String>,
    pub cpus: Vec<OngoingCpu>,
    pub page_size: usize,
    /// When tracing was turned on, on the trace clock.
    pub start_ts: u64,
    pub clock: String,
    pub buffer_kib: u64,
    /// The events enabled, `system:event`.
    pub events: Vec<String>,
    /// The processes traced (threads of `-p`, the command), empty for the whole system.
    pub pids: Vec<i32>,
    /// Add to a trace-clock time to get ns since the Unix epoch (where the clock has a
    /// user-space twin).
    pub wall_offset: Option<i64>,
    /// The process table when tracing started.
    pub processes: Vec<kstate_format::sections::Process>,
    /// No trace.dat will be written (`Options::no_output`): the watcher alone reads the
    /// page files and may give their space back as it goes.
    pub no_output: bool,
}

/// One CPU's page file and how far it is written.
pub struct OngoingCpu {
    pub cpu: u32,
    pub path: PathBuf,
    pub tap: Arc<Tap>,
}

/// Events are time-stamped when their space is reserved and readable once committed; an
/// event stamped just before a flush may still be being written as its reader reads.
/// Nothing stays uncommitted this long.
const COMMIT_MARGIN_NS: u64 = 1_000_000;

/// How long after an interval's end its tick comes: past [`COMMIT_MARGIN_NS`], so the
/// horizon the tick gets is past the end.
pub const TICK_LAG: Duration = Duration::from_millis(3);

/// How long a flush may take before the watcher is told what moved so far.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

impl Ongoing {
    /// What switches events and reads the ring buffers, for a thread of the watcher's
    /// own (overload checks between ticks).
    pub fn switch(&self) -> Switch {
        Switch {
            instance: self.instance.clone(),
            side: self.side.clone(),
            events: self.events.clone(),
            standby: self.standby.clone(),
            cpus: self.cpus.iter().map(|c| c.cpu).collect(),
            clock: self.clock.clone(),
        }
    }

    /// Now, on the trace clock (watching needs a clock user space can read).
    pub fn now(&self) -> u64 {
        crate::system::user_clock(&self.clock).map_or(0, crate::system::now_ns)
    }

    /// See [`Switch::set_enabled`].
    pub fn set_enabled(&self, events: &[String], on: bool) -> Result<()> {
        self.switch().set_enabled(events, on)
    }

    /// See [`Switch::ring_stats`].
    pub fn ring_stats(&self) -> Vec<RingStats> {
        self.switch().ring_stats()
    }

    /// Has every reader move what it has traced (flush number `n`, growing); returns the
    /// horizon: the time up to which every CPU's events are in their files.
    pub(crate) fn flush(&self, n: u64, now_ns: u64, ctl: &Control) -> u64 {
        for c in &self.cpus {
            c.tap.flush(n);
        }
        let asked = Instant::now();
        while !self.cpus.iter().all(|c| c.tap.flushed(n)) {
            if ctl.has_failed() || asked.elapsed() > FLUSH_WAIT {
                // A reader that cannot move its pages holds the horizon back; the next
                // flush tries again.
                return 0;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        now_ns.saturating_sub(COMMIT_MARGIN_NS)
    }
}

/// The recording's event switches and ring-buffer statistics, apart from the rest of
/// [`Ongoing`], so that a thread can check for overload between ticks.
#[derive(Clone)]
pub struct Switch {
    instance: PathBuf,
    side: Option<(PathBuf, Vec<String>)>,
    events: Vec<String>,
    standby: Vec<String>,
    cpus: Vec<u32>,
    clock: String,
}

impl Switch {
    /// Now, on the trace clock.
    pub fn now(&self) -> u64 {
        crate::system::user_clock(&self.clock).map_or(0, crate::system::now_ns)
    }

    /// Turns events (`system:event`, each enabled or on standby) on or off while
    /// recording; the first that cannot be switched ends it with the reason.
    pub fn set_enabled(&self, events: &[String], on: bool) -> Result<()> {
        for ev in events {
            let known = self.events.contains(ev) || self.standby.contains(ev);
            let Some((sys, name)) = ev.split_once(':').filter(|_| known) else {
                return Err(Error::new(format!(
                    "{ev} is neither recorded nor on standby: its format is not in the recording"
                )));
            };
            let dir = match &self.side {
                Some((side, evs)) if evs.contains(ev) => side,
                _ => &self.instance,
            };
            let path = dir.join(format!("events/{sys}/{name}/enable"));
            crate::tracefs::write(&path, if on { "1" } else { "0" })?;
        }
        Ok(())
    }

    /// Each CPU's ring-buffer statistics now (events waiting to be read, lost so far);
    /// a CPU whose statistics cannot be read is left out.
    pub fn ring_stats(&self) -> Vec<RingStats> {
        self.cpus
            .iter()
            .filter_map(|&cpu| {
                let path = self.instance.join(format!("per_cpu/cpu{cpu}/stats"));
                let text = crate::tracefs::read(&path).ok()?;
                kstate_format::sections::parse_ring_stats(cpu, &text).ok()
            })
            .collect()
    }
}
