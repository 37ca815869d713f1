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
    /// A little of everything, for the quick start: fsync'd writes, short sleeps, a
    /// burst of null system calls, a contended lock, more runnable threads than CPUs,
    /// and a few child processes
    Demo {
        /// Where the scratch file goes (removed afterwards)
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
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
}

pub fn run(w: Workload) -> Result<ExitCode, Error> {
    match w {
        Workload::Demo { dir } => demo(&dir)?,
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
    }
    Ok(ExitCode::SUCCESS)
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

/// The quick start's workload: each part exercises one analyzer.
fn demo(dir: &std::path::Path) -> Result<(), Error> {
    let file = dir.join(format!(".kstate-demo-{}", std::process::id()));
    let r = (|| {
        let mut f = std::fs::File::create(&file).map_err(|e| Error::io(&file, e))?;
        let buf = vec![0x6bu8; 64 * 1024];
        for _ in 0..20 {
            f.write_all(&buf).map_err(|e| Error::io(&file, e))?;
            f.sync_all().map_err(|e| Error::io(&file, e))?;
        }
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for _ in 0..100_000 {
            // SAFETY: getppid has no preconditions.
            std::hint::black_box(unsafe { libc::getppid() });
        }
        contended_lock(8, 300);
        runnable_threads(std::time::Duration::from_millis(300));
        for _ in 0..5 {
            let st = std::process::Command::new("true").status();
            st.map_err(|e| {
                Error::new(
                    kstate_format::ErrorKind::Io,
                    None,
                    format!("running true: {e}"),
                )
            })?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&file);
    r
}

/// `threads` threads each take one `std::sync::Mutex` `rounds` times and hold it for about
/// 50 us of work: most of them wait for it most of the time (futex waits, wake-ups).
fn contended_lock(threads: usize, rounds: usize) {
    let lock = std::sync::Arc::new(std::sync::Mutex::new(0u64));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let lock = std::sync::Arc::clone(&lock);
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
                    let t = Instant::now();
                    while t.elapsed() < std::time::Duration::from_micros(50) {
                        *g = std::hint::black_box(g.wrapping_add(1));
                    }
                }
            })
        })
        .collect();
    for h in hs {
        let _ = h.join();
    }
}

/// Four threads per CPU spin for `d`: each CPU's run queue holds several runnable tasks.
fn runnable_threads(d: std::time::Duration) {
    let n = std::thread::available_parallelism().map_or(2, |n| n.get()) * 4;
    let hs: Vec<_> = (0..n)
        .map(|_| {
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed() < d {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        })
        .collect();
    for h in hs {
        let _ = h.join();
    }
}
