//! `kstate workload why-chain`: a chain of waits known by construction, for `kstate why`.
//!
//! Three threads, named `why-a`, `why-b` and `why-c`. Per request: A writes the
//! trace_marker line `why-request begin`, burns `--spin-ms` of CPU, sends the request on
//! a pipe and waits for the answer. B takes it and wakes C (a second pipe); C takes a
//! mutex, says so (a third pipe) and sleeps `--sleep-ms` holding it; B then blocks on
//! the mutex until C lets it go, writes `--write-mib` MiB to a file and fsyncs it, and
//! answers (B writes `why-fsync begin` and `why-fsync end` around the fsync). A writes
//! `why-request end`.
//!
//! So A's path over a request is: A running (its spin), B's path (C's sleep, then B's
//! write and the fsync's disk time), A running. Each request prints one JSON line of what
//! it timed: A's CPU time over the request (the scheduler's count, between the two
//! marker lines), C's sleep, the fsync's wall time and B's CPU time within it, and the
//! time the hypervisor ran something else on this machine's CPUs meanwhile (steal: a
//! trace counts it as the thread's running time, the scheduler's count leaves it out).

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::Error;

#[derive(clap::Args)]
pub struct ChainArgs {
    /// Requests A sends, one after another
    #[arg(long, default_value_t = 1, value_parser = kstate_args::int::<u64>(1..=1000))]
    requests: u64,
    /// How long C sleeps holding the mutex (ms)
    #[arg(long, default_value_t = 300, value_parser = kstate_args::int::<u64>(0..=60_000))]
    sleep_ms: u64,
    /// MiB B writes and fsyncs per request
    #[arg(long, default_value_t = 64, value_parser = kstate_args::int::<u64>(0..=4096))]
    write_mib: u64,
    /// CPU time A burns per request before sending it (ms)
    #[arg(long, default_value_t = 100, value_parser = kstate_args::int::<u64>(0..=60_000))]
    spin_ms: u64,
    /// Where B's file goes (removed afterwards)
    #[arg(long, default_value = ".")]
    dir: PathBuf,
}

/// A pipe's two ends as files.
fn pipe() -> Result<(std::fs::File, std::fs::File), Error> {
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for the two descriptors pipe() writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::failed(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((r.into(), w.into()))
}

fn name_thread(name: &str) {
    let c = std::ffi::CString::new(name).expect("no NUL");
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr(), 0, 0, 0) };
}

/// This thread's time on a CPU so far (ns): the scheduler's own count (the first field
/// of /proc's schedstat), up to date to the nanosecond (schedstat itself lags the
/// running thread by up to a tick).
fn thread_cpu_ns() -> u64 {
    crate::bench::colour::thread_cpu_ns()
}

/// Time the hypervisor took from all of this machine's CPUs so far (ns, in clock ticks:
/// /proc/stat's steal column), 0 where /proc/stat cannot say.
fn steal_ns() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let ticks: u64 = stat
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    ticks * tick_ns()
}

/// One clock tick, /proc/stat's unit (ns).
fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The trace_marker file, if this process may write it.
fn marker() -> Option<std::fs::File> {
    [
        "/sys/kernel/tracing/trace_marker",
        "/sys/kernel/debug/tracing/trace_marker",
    ]
    .iter()
    .find_map(|p| std::fs::OpenOptions::new().write(true).open(p).ok())
}

fn byte(f: &mut std::fs::File) -> bool {
    let mut b = [0u8; 1];
    f.read_exact(&mut b).is_ok()
}

fn send(f: &mut std::fs::File) {
    let _ = f.write_all(b"x");
}

/// Burns `ms` of this thread's CPU time.
fn spin(ms: u64) {
    let until = thread_cpu_ns() + ms * 1_000_000;
    let mut x = 1u64;
    while thread_cpu_ns() < until {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

pub fn run(a: &ChainArgs) -> Result<(), Error> {
    let file = a
        .dir
        .join(format!(".kstate-why-chain-{}", std::process::id()));
    let r = chain(a, &file);
    for i in 0..a.requests {
        let _ = std::fs::remove_file(request_file(&file, i));
    }
    r
}

/// B's file for request `i`: a new one each time, so that no request's fsync waits on
/// freeing (discarding) the blocks of the one before.
fn request_file(base: &Path, i: u64) -> PathBuf {
    let mut name = base.as_os_str().to_owned();
    name.push(format!(".{i}"));
    PathBuf::from(name)
}

fn chain(a: &ChainArgs, file: &Path) -> Result<(), Error> {
    let (mut b_in, mut a_out) = pipe()?; // A -> B: the request
    let (mut a_in, mut b_out) = pipe()?; // B -> A: the answer
    let (mut c_in, mut b_to_c) = pipe()?; // B -> C: take the mutex
    let (mut b_ack, mut c_out) = pipe()?; // C -> B: taken
    let lock = Arc::new(Mutex::new(()));
    let (tx, rx) = std::sync::mpsc::channel::<(u64, u64, u64, i32)>();
    let (ctx, crx) = std::sync::mpsc::channel::<(u64, i32)>();
    let (sleep_ms, mib, requests) = (a.sleep_ms, a.write_mib, a.requests);
    let c_lock = Arc::clone(&lock);
    let c = std::thread::spawn(move || {
        name_thread("why-c");
        for _ in 0..requests {
            if !byte(&mut c_in) {
                return;
            }
            let g = c_lock.lock().unwrap_or_else(|e| e.into_inner());
            send(&mut c_out);
            let t = Instant::now();
            std::thread::sleep(std::time::Duration::from_millis(sleep_ms));
            let slept = t.elapsed().as_nanos() as u64;
            drop(g);
            let _ = ctx.send((slept, tid()));
        }
    });
    let path = file.to_path_buf();
    let b = std::thread::spawn(move || -> Result<(), Error> {
        name_thread("why-b");
        let mut mark = marker();
        let buf = vec![0x6bu8; (mib as usize) << 20];
        for i in 0..requests {
            if !byte(&mut b_in) {
                return Ok(());
            }
            let path = request_file(&path, i);
            send(&mut b_to_c);
            byte(&mut b_ack);
            drop(lock.lock().unwrap_or_else(|e| e.into_inner()));
            let mut f = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            f.write_all(&buf).map_err(|e| Error::io(&path, e))?;
            if let Some(m) = mark.as_mut() {
                let _ = m.write_all(b"why-fsync begin\n");
            }
            let (cpu0, t) = (thread_cpu_ns(), Instant::now());
            f.sync_all().map_err(|e| Error::io(&path, e))?;
            let fsync = t.elapsed().as_nanos() as u64;
            let cpu = thread_cpu_ns() - cpu0;
            if let Some(m) = mark.as_mut() {
                let _ = m.write_all(b"why-fsync end\n");
            }
            let _ = tx.send((fsync, cpu, 0, tid()));
            send(&mut b_out);
        }
        Ok(())
    });
    name_thread("why-a");
    let mut mark = marker();
    for i in 0..a.requests {
        let t = Instant::now();
        let (cpu0, steal0) = (thread_cpu_ns(), steal_ns());
        if let Some(m) = mark.as_mut() {
            let _ = m.write_all(b"why-request begin\n");
        }
        spin(a.spin_ms);
        send(&mut a_out);
        byte(&mut a_in);
        if let Some(m) = mark.as_mut() {
            let _ = m.write_all(b"why-request end\n");
        }
        let cpu = thread_cpu_ns() - cpu0;
        let steal = steal_ns().saturating_sub(steal0);
        let wall = t.elapsed().as_nanos() as u64;
        let (fsync, fsync_cpu, _, b_tid) = rx
            .recv()
            .map_err(|_| Error::failed("thread why-b ended early"))?;
        let (slept, c_tid) = crx
            .recv()
            .map_err(|_| Error::failed("thread why-c ended early"))?;
        println!(
            r#"{{"request":{i},"a_tid":{},"b_tid":{b_tid},"c_tid":{c_tid},"wall_ns":{wall},"a_cpu_ns":{cpu},"sleep_ns":{slept},"fsync_ns":{fsync},"fsync_cpu_ns":{fsync_cpu},"steal_ns":{steal},"tick_ns":{},"marker":{}}}"#,
            tid(),
            tick_ns(),
            mark.is_some()
        );
        let _ = std::io::stdout().flush();
    }
    drop(a_out);
    let r = b
        .join()
        .map_err(|_| Error::failed("thread why-b panicked"))?;
    let _ = c.join();
    r
}
