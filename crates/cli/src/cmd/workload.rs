//! `kstate workload`: small programs with known behaviour, for tests, benchmarks and the
//! demo. Each does exactly what its name says, a known number of times, so a recording
//! of it can be checked against that number.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use kstate_format::Error;

#[derive(clap::Subcommand)]
pub enum Workload {
    /// N getppid() calls in a tight loop (the null system call); prints ns per call
    Getppid {
        n: u64,
        /// Pin to this CPU first
        #[arg(long)]
        cpu: Option<usize>,
        /// Print {"calls","ns_per_call","cpu_ns"} as JSON
        #[arg(long)]
        json: bool,
    },
    /// N writes of SIZE bytes to FILE, each followed by fsync
    Fsync {
        n: u64,
        file: PathBuf,
        #[arg(long, default_value_t = 4096)]
        size: usize,
    },
    /// N sleeps of MS milliseconds
    Sleep {
        n: u64,
        ms: u64,
        /// Pin to this CPU first
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// Fork K children, one after another; each sleeps MS milliseconds and exits
    Fork {
        k: u64,
        #[arg(long, default_value_t = 10)]
        ms: u64,
    },
    /// Map N anonymous pages (no huge pages) and write one byte to each
    TouchPages { n: usize },
    /// THREADS threads each take one std::sync::Mutex ITERS times (futex contention);
    /// prints the mutex's address and size as `mutex 0x... size N`
    MutexFight {
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 10000)]
        iters: u64,
    },
}

pub fn run(w: Workload) -> Result<ExitCode, Error> {
    match w {
        Workload::Getppid { n, cpu, json } => {
            if let Some(c) = cpu {
                pin(c);
            }
            let cpu0 = cpu_ns();
            let t = Instant::now();
            for _ in 0..n {
                // SAFETY: getppid has no preconditions.
                std::hint::black_box(unsafe { libc::getppid() });
            }
            let ns = t.elapsed().as_nanos() as f64;
            let per = if n > 0 { ns / n as f64 } else { 0.0 };
            let used = cpu_ns() - cpu0;
            if json {
                println!(r#"{{"calls":{n},"ns_per_call":{per:.2},"cpu_ns":{used}}}"#);
            } else {
                println!("{n} getppid calls, {per:.1} ns per call");
            }
        }
        Workload::Fsync { n, file, size } => {
            let mut f = std::fs::File::create(&file).map_err(|e| Error::io(&file, e))?;
            let buf = vec![0x6bu8; size];
            for _ in 0..n {
                f.write_all(&buf).map_err(|e| Error::io(&file, e))?;
                f.sync_all().map_err(|e| Error::io(&file, e))?;
            }
        }
        Workload::Sleep { n, ms, cpu } => {
            if let Some(c) = cpu {
                pin(c);
            }
            for _ in 0..n {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
        Workload::Fork { k, ms } => {
            for _ in 0..k {
                // SAFETY: the child only calls async-signal-safe functions and _exit.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    let ts = libc::timespec {
                        tv_sec: (ms / 1000) as libc::time_t,
                        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
                    };
                    // SAFETY: plain system calls in the child.
                    unsafe {
                        libc::nanosleep(&ts, std::ptr::null_mut());
                        libc::_exit(0);
                    }
                }
                if pid < 0 {
                    return Err(Error::new(
                        kstate_format::ErrorKind::Io,
                        None,
                        format!("fork: {}", std::io::Error::last_os_error()),
                    ));
                }
                let mut status = 0;
                // SAFETY: waits for the child just forked.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            }
        }
        Workload::TouchPages { n } => {
            let page = 4096usize;
            let len = n * page;
            // SAFETY: a fresh private anonymous mapping, written only inside its length.
            unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    len.max(page),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p == libc::MAP_FAILED {
                    return Err(Error::new(
                        kstate_format::ErrorKind::Io,
                        None,
                        format!("mmap: {}", std::io::Error::last_os_error()),
                    ));
                }
                libc::madvise(p, len.max(page), libc::MADV_NOHUGEPAGE);
                let b = p as *mut u8;
                for i in 0..n {
                    std::ptr::write_volatile(b.add(i * page), 1);
                }
                libc::munmap(p, len.max(page));
            }
        }
        Workload::MutexFight { threads, iters } => mutex_fight(threads, iters),
    }
    Ok(ExitCode::SUCCESS)
}

/// Workers lock one mutex in turn; the main thread waits for them on a pipe (not a
/// futex) and exits without joining, so every futex wait of the process is on the mutex.
fn mutex_fight(threads: usize, iters: u64) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::sync::{Arc, Mutex};
    let m = Arc::new(Mutex::new(0u64));
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for the two descriptors.
    unsafe { libc::pipe(fds.as_mut_ptr()) };
    let addr = Arc::as_ptr(&m) as usize;
    // The futex word lies somewhere inside the Mutex (Rust does not fix field order).
    println!("mutex {addr:#x} size {}", std::mem::size_of::<Mutex<u64>>());
    let _ = std::io::stdout().flush();
    // The workers start together (a spinning barrier: no futex), so they overlap.
    let ready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..threads {
        let m = Arc::clone(&m);
        let ready = Arc::clone(&ready);
        let w = fds[1];
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering;
            ready.fetch_add(1, Ordering::SeqCst);
            while ready.load(Ordering::SeqCst) < threads {
                std::hint::spin_loop();
            }
            for _ in 0..iters {
                let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                // Held longer than the lock spins before it waits in the kernel.
                for _ in 0..500 {
                    *g = std::hint::black_box(*g + 1);
                }
            }
            // SAFETY: writes one byte from a valid buffer.
            unsafe { libc::write(w, b"x".as_ptr().cast(), 1) };
        });
    }
    // SAFETY: fds[0] is the pipe's read end, owned here from now on.
    let mut r = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let mut buf = vec![0u8; threads];
    let _ = r.read_exact(&mut buf);
}

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPU time of this process so far.
fn cpu_ns() -> u64 {
    // SAFETY: rusage is plain data that getrusage fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid and writable.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
