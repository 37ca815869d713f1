//! Facts about the running system the recording keeps: the process table, uname, the
//! host name, and clocks that line user-space samples up with event timestamps.

use kstate_format::sections::Process;

/// Every thread in /proc: pid (the thread id), tgid, parent and comm.
pub fn processes() -> Vec<Process> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for ent in rd.flatten() {
        let Some(tgid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(tasks) = std::fs::read_dir(ent.path().join("task")) else {
            continue; // exited meanwhile
        };
        for t in tasks.flatten() {
            let Some(pid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some((comm, ppid)) = stat_comm_ppid(&t.path().join("stat")) {
                out.push(Process {
                    pid,
                    tgid,
                    ppid,
                    comm,
                });
            }
        }
    }
    out.sort_by_key(|p| p.pid);
    out
}

/// comm and parent pid from a /proc stat file: "pid (comm) state ppid ...".
fn stat_comm_ppid(path: &std::path::Path) -> Option<(String, i32)> {
    let s = std::fs::read(path).ok()?;
    let open = s.iter().position(|&b| b == b'(')?;
    let close = s.iter().rposition(|&b| b == b')')?;
    let comm = String::from_utf8_lossy(s.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(s.get(close + 2..)?).ok()?;
    let ppid = rest.split(' ').nth(1)?.parse().ok()?;
    Some((comm, ppid))
}

/// "sysname nodename release version machine", as trace-cmd stores it.
pub fn uname() -> Option<String> {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let f = |a: &[libc::c_char]| {
        let b: Vec<u8> = a
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    Some(format!(
        "{} {} {} {} {}",
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine)
    ))
}

pub fn hostname() -> String {
    uname()
        .and_then(|u| u.split(' ').nth(1).map(str::to_string))
        .unwrap_or_default()
}

/// The user-space clock that reads the same time base as a tracefs trace clock, so
/// samples taken in user space (memory snapshots) line up with events.
pub fn user_clock(trace_clock: &str) -> Option<libc::clockid_t> {
    match trace_clock {
        "mono" => Some(libc::CLOCK_MONOTONIC),
        "mono_raw" => Some(libc::CLOCK_MONOTONIC_RAW),
        "boot" => Some(libc::CLOCK_BOOTTIME),
        "tai" => Some(libc::CLOCK_TAI),
        _ => None,
    }
}

pub fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds to add to a `clock` time to get Unix time: the realtime clock read between
/// two reads of `clock`, keeping the tightest of a few tries.
pub fn wall_offset(clock: libc::clockid_t) -> i64 {
    let mut best = (u64::MAX, 0i64);
    for _ in 0..5 {
        let a = now_ns(clock);
        let wall = now_ns(libc::CLOCK_REALTIME);
        let b = now_ns(clock);
        let gap = b.saturating_sub(a);
        if gap < best.0 {
            best = (gap, wall as i64 - (a + gap / 2) as i64);
        }
    }
    best.1
}

/// CPU time this process (all its threads) has used, in nanoseconds.
pub fn self_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data that getrusage fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPUs the kernel may bring online (tracefs has a per_cpu directory for each).
pub fn possible_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let cpus = parse_cpu_list(text.trim());
    if cpus.is_empty() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32;
        return (0..n).collect();
    }
    cpus
}

/// "0-3,5" -> [0, 1, 2, 3, 5]
pub fn parse_cpu_list(s: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b.min(a + 4096));
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    v
}

/// MemAvailable of /proc/meminfo in bytes: what can be used without swapping.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Bytes the files under `dir` take on disk (links not followed).
pub fn disk_use(dir: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match std::fs::symlink_metadata(e.path()) {
            Ok(m) if m.is_dir() => disk_use(&e.path()),
            Ok(m) => std::os::unix::fs::MetadataExt::blocks(&m) * 512,
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5"), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
    }

    #[test]
    fn process_table_has_us_with_our_parent() {
        let me = std::process::id() as i32;
        let ps = processes();
        let p = ps
            .iter()
            .find(|p| p.pid == me)
            .expect("this process listed");
        assert_eq!(p.tgid, me);
        // SAFETY: getppid has no preconditions.
        assert_eq!(p.ppid, unsafe { libc::getppid() });
        assert!(!p.comm.is_empty());
        // Threads are listed with their process as tgid.
        assert!(ps.iter().all(|p| p.tgid > 0 && p.pid > 0));
    }

    #[test]
    fn wall_offset_maps_monotonic_to_now() {
        let off = wall_offset(libc::CLOCK_MONOTONIC);
        let wall = now_ns(libc::CLOCK_REALTIME) as i64;
        let mono = now_ns(libc::CLOCK_MONOTONIC) as i64;
        assert!(
            (mono + off - wall).abs() < 5_000_000,
            "off by more than 5 ms"
        );
    }
}
