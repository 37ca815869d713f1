//! Overload checks between ticks. A CPU's ring buffer can fill in well under an interval
//! (a getppid storm fills 256 KiB in milliseconds, 1 MiB in about half a second), so deciding once per interval shed events only after the kernel had lost
//! some. A thread of its own reads every CPU's unread fill every [`CHECK_EVERY`] and sheds
//! as soon as one is half unread; the tick hands it what may be shed and takes its log
//! entries. One lock serialises its switching with the tick's escalations, so an event is
//! never turned on by one while the other turns it off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use kstate_format::sections::watch_log::Kind;
use kstate_record::overload::{Overload, Step};
use kstate_record::watch::Switch;

/// How often the fill is checked: a 1 MiB buffer of a busy CPU fills in about half a
/// second (the default 8 MiB in a few), so a check every 100 ms sees it half unread
/// before it is full.
pub const CHECK_EVERY: Duration = Duration::from_millis(100);

/// What the guard and the tick share.
pub struct Shared {
    pub overload: Overload,
    /// The events shedding turns off now (the --shed ones, escalations on), set by the
    /// tick.
    pub sheddable: Vec<String>,
    /// Log entries made since the tick took them: time, kind, text.
    pub entries: Vec<(u64, &'static str, String)>,
    /// Why the guard stopped (an event that could not be switched): ends the recording.
    pub error: Option<String>,
}

impl Shared {
    pub fn new(overload: Overload) -> Shared {
        Shared {
            overload,
            sheddable: Vec::new(),
            entries: Vec::new(),
            error: None,
        }
    }

    /// One check of the ring buffers: sheds or restores as they say.
    fn check(&mut self, sw: &Switch) -> kstate_record::Result<()> {
        match self.overload.check(&sw.ring_stats()) {
            Step::Nothing => {}
            Step::Shed(why) => {
                sw.set_enabled(&self.sheddable, false)?;
                // Stamped after the switch: nothing shed is recorded after its entry.
                let text = match self.sheddable.is_empty() {
                    true => format!("{why}; nothing to shed (mark events with --shed)"),
                    false => format!("{why}; {} off", self.sheddable.join(",")),
                };
                self.entries.push((sw.now(), Kind::SHED, text));
            }
            Step::Restore => {
                // Stamped before the switch, for the same reason.
                let stamp = sw.now();
                sw.set_enabled(&self.sheddable, true)?;
                let text = match self.sheddable.is_empty() {
                    true => "the readers caught up".to_string(),
                    false => format!(
                        "the readers caught up; {} on again",
                        self.sheddable.join(",")
                    ),
                };
                self.entries.push((stamp, Kind::RESTORE, text));
            }
        }
        Ok(())
    }
}

/// Locks `shared`; a thread that panicked holding it left the state as it was.
pub fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The checking thread; stopped and joined when dropped.
pub struct Guard {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Guard {
    pub fn start(shared: Arc<Mutex<Shared>>, sw: Switch) -> std::io::Result<Guard> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kstate-shed".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(CHECK_EVERY);
                    let mut sh = lock(&shared);
                    if let Err(e) = sh.check(&sw) {
                        sh.error = Some(e.to_string());
                        return;
                    }
                }
            })?;
        Ok(Guard {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
