//! When the readers fall behind the kernel: a watcher reads each CPU's ring-buffer
//! statistics often (kstate watch: every 100 ms), and before the buffer fills (which
//! loses events of every kind, or in overwrite mode the oldest pages whole) it turns off
//! the events marked sheddable; once every CPU has been calm for a while, it turns them
//! back on. The traced system is never held up: the kernel never waits for a reader.

use kstate_format::sections::RingStats;

/// Unread bytes on a CPU, in % of its buffer, that count as falling behind: the readers
/// are woken at `session::BUFFER_PERCENT` (20 %), so this much unread means they have
/// not kept up since.
pub const SHED_PERCENT: u64 = 50;
/// A CPU is calm below this much unread (the wake-up watermark)...
pub const CALM_PERCENT: u64 = 20;
/// ... and shed events come back after this many calm checks in a row.
pub const CALM_CHECKS: u32 = 5;

/// What to do after a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Turn the sheddable events off, for this reason.
    Shed(String),
    /// Turn them back on.
    Restore,
}

pub struct Overload {
    buffer_bytes: u64,
    /// Per CPU: events lost so far, at the last check.
    lost: Vec<(u32, u64)>,
    shed: bool,
    calm: u32,
    /// Calm checks in a row before a restore.
    calm_checks: u32,
}

impl Overload {
    pub fn new(buffer_bytes: u64) -> Overload {
        Overload {
            buffer_bytes: buffer_bytes.max(1),
            lost: Vec::new(),
            shed: false,
            calm: 0,
            calm_checks: CALM_CHECKS,
        }
    }

    /// Restores only after `n` calm checks in a row (checked more often than every
    /// interval, the calm asked for stays as long).
    pub fn calm_for(mut self, n: u32) -> Overload {
        self.calm_checks = n.max(1);
        self
    }

    pub fn is_shed(&self) -> bool {
        self.shed
    }

    /// Takes the statistics read now.
    pub fn check(&mut self, stats: &[RingStats]) -> Step {
        let mut why = Vec::new();
        let mut calm = true;
        for s in stats {
            let before = match self.lost.iter_mut().find(|(c, _)| *c == s.cpu) {
                Some((_, n)) => std::mem::replace(n, s.lost()),
                None => {
                    self.lost.push((s.cpu, s.lost()));
                    0
                }
            };
            let pct = s.bytes.saturating_mul(100) / self.buffer_bytes;
            if s.lost() > before {
                why.push(format!("cpu {}: {} events lost", s.cpu, s.lost() - before));
            } else if pct >= SHED_PERCENT {
                why.push(format!("cpu {}: {pct} % of its buffer unread", s.cpu));
            }
            calm &= s.lost() == before && pct < CALM_PERCENT;
        }
        self.calm = if calm { self.calm + 1 } else { 0 };
        match (self.shed, why.is_empty()) {
            (false, false) => {
                self.shed = true;
                Step::Shed(why.join(", "))
            }
            (true, _) if self.calm >= self.calm_checks => {
                self.shed = false;
                Step::Restore
            }
            _ => Step::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(cpu: u32, bytes: u64, overrun: u64) -> RingStats {
        RingStats {
            cpu,
            bytes,
            overrun,
            ..RingStats::default()
        }
    }

    #[test]
    fn sheds_when_behind_and_restores_after_calm() {
        let mut o = Overload::new(1000);
        assert_eq!(o.check(&[cpu(0, 100, 0), cpu(1, 490, 0)]), Step::Nothing);
        assert_eq!(
            o.check(&[cpu(0, 100, 0), cpu(1, 500, 0)]),
            Step::Shed("cpu 1: 50 % of its buffer unread".into())
        );
        // Still behind: shed already.
        assert_eq!(o.check(&[cpu(0, 900, 0), cpu(1, 0, 0)]), Step::Nothing);
        for _ in 0..CALM_CHECKS - 1 {
            assert_eq!(o.check(&[cpu(0, 199, 0), cpu(1, 0, 0)]), Step::Nothing);
        }
        assert_eq!(o.check(&[cpu(0, 0, 0), cpu(1, 0, 0)]), Step::Restore);
        assert!(!o.is_shed());
    }

    #[test]
    fn a_loss_sheds_and_holds_back_the_restore() {
        let mut o = Overload::new(1000);
        assert_eq!(
            o.check(&[cpu(0, 0, 7)]),
            Step::Shed("cpu 0: 7 events lost".into())
        );
        for _ in 0..CALM_CHECKS - 1 {
            o.check(&[cpu(0, 0, 7)]);
        }
        // A new loss starts the calm count again.
        assert_eq!(o.check(&[cpu(0, 0, 9)]), Step::Nothing);
        for _ in 0..CALM_CHECKS - 1 {
            assert_eq!(o.check(&[cpu(0, 0, 9)]), Step::Nothing);
        }
        assert_eq!(o.check(&[cpu(0, 0, 9)]), Step::Restore);
    }
}
