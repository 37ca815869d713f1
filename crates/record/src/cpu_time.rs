//! CPU time from /proc/stat: what the machine's CPUs did over a run (`kstate run`'s report,
//! the lab's I/O and scaling benches), read in one place so every report splits it alike.

/// Jiffies by kind, from /proc/stat's `user nice system idle iowait irq softirq steal`.
/// guest and guest_nice are already counted in user and nice, so they are left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Jiffies {
    /// user + nice
    pub user: u64,
    /// system + irq + softirq
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    /// steal
    pub other: u64,
}

/// Shares of CPU time (0..1): user, system, idle, iowait and everything else, which add up
/// to 1.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSplit {
    pub user: f64,
    pub system: f64,
    pub idle: f64,
    pub iowait: f64,
    /// Everything else (steal, guest), so the four above plus this make 1.
    pub other: f64,
}

/// The machine's CPU time so far: all CPUs (the aggregate `cpu` line) with `None`, else
/// the sum over CPUs 0..n. None when /proc/stat cannot be read.
pub fn read(cpus: Option<usize>) -> Option<Jiffies> {
    Some(parse(&std::fs::read_to_string("/proc/stat").ok()?, cpus))
}

/// [`read`] of /proc/stat's text `s`.
pub fn parse(s: &str, cpus: Option<usize>) -> Jiffies {
    let mut t = Jiffies::default();
    for l in s.lines() {
        let mut it = l.split_whitespace();
        let Some(name) = it.next().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        let wanted = match (cpus, name.parse::<usize>()) {
            (None, _) => name.is_empty(),
            (Some(n), Ok(c)) => c < n,
            (Some(_), Err(_)) => false,
        };
        if !wanted {
            continue;
        }
        let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
        let g = |i: usize| v.get(i).copied().unwrap_or(0);
        t.user += g(0) + g(1);
        t.system += g(2) + g(5) + g(6);
        t.idle += g(3);
        t.iowait += g(4);
        t.other += g(7);
    }
    t
}

impl Jiffies {
    /// The time spent between `earlier` and this reading.
    pub fn since(&self, earlier: &Jiffies) -> Jiffies {
        Jiffies {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            other: self.other.saturating_sub(earlier.other),
        }
    }

    /// Each kind's share of the total; None when no time passed.
    pub fn split(&self) -> Option<CpuSplit> {
        let total = (self.user + self.system + self.idle + self.iowait + self.other) as f64;
        if total <= 0.0 {
            return None;
        }
        let share = |n: u64| n as f64 / total;
        let (user, system, idle, iowait) = (
            share(self.user),
            share(self.system),
            share(self.idle),
            share(self.iowait),
        );
        Some(CpuSplit {
            user,
            system,
            idle,
            iowait,
            other: (1.0 - user - system - idle - iowait).max(0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  100 0 50 800 50 0 0 0 0 0\n\
                          cpu0 60 0 30 400 20 0 0 0 0 0\n\
                          cpu1 40 0 20 400 30 0 0 0 0 0\nintr 5\n";
    const AFTER: &str = "cpu  200 0 100 1000 100 0 0 0 0 0\n\
                         cpu0 150 0 60 420 30 0 0 0 0 0\n\
                         cpu1 50 0 40 580 70 0 0 0 0 0\nintr 9\n";

    #[test]
    fn split_of_all_cpus() {
        let c = parse(AFTER, None)
            .since(&parse(BEFORE, None))
            .split()
            .unwrap();
        assert!((c.user - 0.25).abs() < 1e-9);
        assert!((c.system - 0.125).abs() < 1e-9);
        assert!((c.idle - 0.5).abs() < 1e-9);
        assert!((c.iowait - 0.125).abs() < 1e-9);
        assert_eq!(c.other, 0.0);
    }

    #[test]
    fn sum_of_the_first_cpus() {
        let d = parse(AFTER, Some(1)).since(&parse(BEFORE, Some(1)));
        let want = Jiffies {
            user: 90,
            system: 30,
            idle: 20,
            iowait: 10,
            other: 0,
        };
        assert_eq!(d, want);
        assert_eq!(parse(AFTER, Some(2)).user, 200);
        // Time does not run backwards: no split.
        let back = parse(BEFORE, None).since(&parse(AFTER, None));
        assert!(back.split().is_none());
    }
}
