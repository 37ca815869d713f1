//! How many cores a command uses when the user does not say: those no other task is
//! running on as it starts. On a busy machine a second thread does not make a reader
//! faster: it waits on a core another task holds, and the threads that wait for it (the
//! join of time slices, the merge fed by decoder threads) wait too. On a 2-core VM with
//! the other core running a busy loop, `analyze syscall --stat` of a 3.8 M-event perf.data
//! took 0.20 s on two threads and 0.16 s on one.

use std::sync::OnceLock;
use std::time::Duration;

/// The cores this process may run on (its CPU affinity and cgroup quota).
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The cores free as the process starts (at least one): those it may run on, less the
/// tasks the kernel has runnable besides the thread asking (`procs_running` in
/// /proc/stat; the least of a few readings 0.25 ms apart, so that a task that runs for an
/// instant does not count). Tasks running on cores this process may not use count too:
/// the answer errs towards fewer threads, which are never slower than one. Read once; every
/// core where /proc/stat cannot be read.
pub fn free_cores() -> usize {
    static FREE: OnceLock<usize> = OnceLock::new();
    *FREE.get_or_init(|| {
        let cores = all_cores();
        let mut others = None::<usize>;
        for k in 0..4 {
            if k > 0 {
                std::thread::sleep(Duration::from_micros(250));
            }
            let Some(n) = procs_running() else {
                return cores;
            };
            let n = n.saturating_sub(1);
            others = Some(others.map_or(n, |o| o.min(n)));
            if n == 0 {
                break;
            }
        }
        cores.saturating_sub(others.unwrap_or(0)).max(1)
    })
}

/// Tasks runnable now, this one included.
fn procs_running() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_running "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A busy loop on every core but one leaves one core free; the reading counts it.
    #[test]
    fn busy_cores_are_not_free() {
        let cores = all_cores();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        // Every core runs a spinner: besides this thread, at least `cores` tasks run.
        let n = procs_running().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        assert!(n > cores, "{n} tasks runnable beside {cores} spinners");
    }
}
