//! `kstate workload`: small programs with known behaviour, for tests, benchmarks and the
//! demo. Each does exactly what its name says, a known number of times, so a recording
//! of it can be checked against that number.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use crate::Error;

// What the workloads' numbers take: enough for any test or benchmark, refused beyond (a
// typo must not run for days, fork a million processes or map all memory).

/// Repetitions of an operation.
pub(crate) const COUNT: std::ops::RangeInclusive<u64> = 0..=1_000_000_000;
/// Threads or processes at once.
const THREADS: std::ops::RangeInclusive<u64> = 1..=1024;
/// Milliseconds (at most an hour).
const MS: std::ops::RangeInclusive<u64> = 0..=3_600_000;
/// Pages touched (at most 256 MiB of 4 KiB pages).
const PAGES: std::ops::RangeInclusive<u64> = 0..=65_536;
/// Bytes per write (at most 64 MiB).
const WRITE: std::ops::RangeInclusive<u64> = 1..=64 << 20;
/// A UDP datagram's payload over IPv4.
const DATAGRAM: std::ops::RangeInclusive<u64> = 0..=65_507;
/// MiB of buffer streamed (at most 4 GiB).
const MIB: std::ops::RangeInclusive<u64> = 1..=4096;

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
    /// The micro-benchmarks of `kstate bench overhead` (null syscall, stat, open/close,
    /// pipe and unix-socket round trips, fork+exit, context switch), each a known number of
    /// operations (its default count times SCALE); prints ns per operation
    Micro {
        #[arg(long, default_value_t = 1.0, value_parser = kstate_args::float(0.0001..=1000.0))]
        scale: f64,
        /// Only these (comma-separated)
        #[arg(long, value_delimiter = ',')]
        bench: Vec<String>,
        /// One JSON line per benchmark: {"bench","ops","ns_per_op"}
        #[arg(long)]
        json: bool,
    },
    /// `kstate bench io`'s writer: COMMANDS copies of itself, each writing STREAMS files
    /// PREFIX.sI of SIZE bytes in RECORD-byte writes from forked processes (or threads);
    /// one JSON line per stream
    Iowrite(crate::bench::io::IoWriteArgs),
    /// Pin to CPUs 0..N-1 and run CMD in place of this process (used by `kstate scale`)
    Pin {
        #[arg(long, value_parser = kstate_args::int::<usize>(THREADS))]
        cpus: usize,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// N getppid() calls in a tight loop (the null system call); prints ns per call
    Getppid {
        #[arg(value_parser = kstate_args::int::<u64>(COUNT))]
        n: u64,
        /// Pin to this CPU first
        #[arg(long, value_parser = kstate_args::int::<usize>(crate::bench::CPU))]
        cpu: Option<usize>,
        /// Print {"calls","ns_per_call","cpu_ns"} as JSON
        #[arg(long)]
        json: bool,
    },
    /// N writes of SIZE bytes to FILE, each followed by fsync
    Fsync {
        #[arg(value_parser = kstate_args::int::<u64>(COUNT))]
        n: u64,
        file: PathBuf,
        #[arg(long, default_value_t = 4096, value_parser = kstate_args::int::<usize>(WRITE))]
        size: usize,
    },
    /// THREADS threads, each writing COUNT blocks of SIZE bytes with O_DIRECT to its own
    /// file FILE_PREFIX.I (I = 0..THREADS), so every write goes to the device; prints
    /// the slowest write
    DirectWriters {
        #[arg(long, default_value_t = 6, value_parser = kstate_args::int::<usize>(THREADS))]
        threads: usize,
        #[arg(long, value_parser = kstate_args::int::<u64>(COUNT))]
        count: u64,
        /// Bytes per write: a multiple of 4096
        #[arg(long, default_value_t = 1 << 20, value_parser = kstate_args::int::<usize>(WRITE))]
        size: usize,
        file_prefix: PathBuf,
    },
    /// N sleeps of MS milliseconds
    Sleep {
        #[arg(value_parser = kstate_args::int::<u64>(COUNT))]
        n: u64,
        #[arg(value_parser = kstate_args::int::<u64>(MS))]
        ms: u64,
        /// Pin to this CPU first
        #[arg(long, value_parser = kstate_args::int::<usize>(crate::bench::CPU))]
        cpu: Option<usize>,
    },
    /// THREADS threads each mapping and unmapping an anonymous page N times and touching
    /// it: they contend on the process's mmap_lock (a rwsem)
    Mmap {
        #[arg(value_parser = kstate_args::int::<usize>(THREADS))]
        threads: usize,
        #[arg(value_parser = kstate_args::int::<u64>(COUNT))]
        n: u64,
    },
    /// N UDP datagrams of SIZE payload bytes sent to 127.0.0.1 (over the loopback
    /// device); prints how many were sent
    Udp {
        #[arg(value_parser = kstate_args::int::<u64>(COUNT))]
        n: u64,
        #[arg(value_parser = kstate_args::int::<usize>(DATAGRAM))]
        size: usize,
    },
    /// Fork K children, one after another; each sleeps MS milliseconds and exits
    Fork {
        #[arg(value_parser = kstate_args::int::<u64>(COUNT))]
        k: u64,
        #[arg(long, default_value_t = 10, value_parser = kstate_args::int::<u64>(MS))]
        ms: u64,
    },
    /// Map N anonymous pages (no huge pages) and write one byte to each
    TouchPages {
        #[arg(value_parser = kstate_args::int::<usize>(PAGES))]
        n: usize,
    },
    /// THREADS threads each take one std::sync::Mutex (the static FIGHT_LOCK) ITERS times
    /// in `fight_take_lock` (futex contention); prints the mutex's address and size as
    /// `mutex 0x... size N`
    MutexFight {
        #[arg(long, default_value_t = 2, value_parser = kstate_args::int::<usize>(THREADS))]
        threads: usize,
        #[arg(long, default_value_t = 10000, value_parser = kstate_args::int::<u64>(COUNT))]
        iters: u64,
    },
    /// Burns MS milliseconds of CPU in `kstate_spin_hot_loop`, reached two thirds of the
    /// time through `kstate_spin_caller_a` and one third through `kstate_spin_caller_b`
    /// (all with frame pointers, so sampled call chains show the callers); prints calls
    /// per caller and the CPU time used
    Spin {
        #[arg(long, default_value_t = 1000, value_parser = kstate_args::int::<u64>(MS))]
        ms: u64,
        /// Pin to this CPU first
        #[arg(long, value_parser = kstate_args::int::<usize>(crate::bench::CPU))]
        cpu: Option<usize>,
    },
    /// The chat benchmark (`kstate bench chat`): rooms of users exchanging 100-byte
    /// messages over loopback TCP through a relay server, 4 threads per user
    Chat(crate::bench::chat::ChatArgs),
    /// As mutex-fight, the lock taken in `lock_caller_often` three times for each time in
    /// `lock_caller_seldom`
    LockCallers {
        #[arg(long, default_value_t = 4, value_parser = kstate_args::int::<usize>(THREADS))]
        threads: usize,
        #[arg(long, default_value_t = 8000, value_parser = kstate_args::int::<u64>(COUNT))]
        iters: u64,
    },
    /// THREADS threads each allocating and freeing ITERS blocks of 16..4096 bytes with
    /// glibc's malloc in `malloc_churn`; --arenas 1 makes them share main_arena's lock
    MallocFight {
        #[arg(long, default_value_t = 4, value_parser = kstate_args::int::<usize>(THREADS))]
        threads: usize,
        #[arg(long, default_value_t = 200000, value_parser = kstate_args::int::<u64>(COUNT))]
        iters: u64,
        /// glibc's arena limit (mallopt M_ARENA_MAX) before the threads start
        #[arg(long, value_parser = kstate_args::int::<i32>(1..=1024))]
        arenas: Option<i32>,
    },
    /// Cache pollution: `stream_once` reads one byte of each 64-byte line of a fresh
    /// MIB MiB buffer (every line a miss, every page a fault), then `hot_table` makes HOT
    /// reads of a 4 KiB table (all hits); prints both counts
    CachePollution {
        #[arg(long, default_value_t = 64, value_parser = kstate_args::int::<usize>(MIB))]
        mib: usize,
        #[arg(long, default_value_t = 20_000_000, value_parser = kstate_args::int::<u64>(COUNT))]
        hot: u64,
        /// Pin to this CPU first
        #[arg(long, value_parser = kstate_args::int::<usize>(crate::bench::CPU))]
        cpu: Option<usize>,
    },
    /// Seed 001's walk (`kstate bench colour`) for `kstate cachesim --sets`: NODES
    /// structures STRIDE bytes apart in a ring, 3 hot fields each, coloured COLOURS ways
    /// (1: not coloured) by the address bits above WAY bytes, walked PASSES times in
    /// `walk`; prints the sum it read
    ColourWalk {
        #[arg(long, default_value_t = 1024, value_parser = kstate_args::int::<u64>(1..=1 << 15))]
        nodes: u64,
        #[arg(long, default_value_t = 8192, value_parser = kstate_args::int::<u64>(4096..=1 << 20))]
        stride: u64,
        #[arg(long, default_value_t = 1, value_parser = kstate_args::int::<u64>(1..=64))]
        colours: u64,
        /// One way's span of the cache the colours target (bytes)
        #[arg(long, default_value_t = 128 << 10, value_parser = kstate_args::int::<u64>(4096..=1 << 30))]
        way: u64,
        #[arg(long, default_value_t = 2, value_parser = kstate_args::int::<u64>(1..=1_000_000))]
        passes: u64,
    },
    /// An ordinary program for `kstate cachesim --sets`: LOOKUPS reads at hashed slots of
    /// a table of SLOTS 8-byte slots in `hash_probe` (every set of the cache gets its
    /// share); prints the sum it read
    HashProbe {
        #[arg(long, default_value_t = 1 << 17, value_parser = kstate_args::int::<u64>(1..=1 << 24))]
        slots: u64,
        #[arg(long, default_value_t = 200_000, value_parser = kstate_args::int::<u64>(1..=1 << 32))]
        lookups: u64,
    },
}

pub fn run(w: Workload) -> Result<ExitCode, Error> {
    match w {
        Workload::Demo { dir } => demo(&dir)?,
        Workload::Pin { cpus, command } => crate::scale::pin_exec(cpus, &command)?,
        Workload::Iowrite(a) => crate::bench::io::iowrite(&a)?,
        Workload::Micro { scale, bench, json } => {
            crate::bench::overhead::micro(scale, &bench, json)?
        }
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
        Workload::DirectWriters {
            threads,
            count,
            size,
            file_prefix,
        } => direct_writers(threads, count, size, &file_prefix)?,
        Workload::Sleep { n, ms, cpu } => {
            if let Some(c) = cpu {
                pin(c);
            }
            for _ in 0..n {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
        Workload::Mmap { threads, n } => {
            let workers: Vec<_> = (0..threads)
                .map(|_| std::thread::spawn(move || mmap_loop(n)))
                .collect();
            for w in workers {
                w.join().expect("mmap worker");
            }
        }
        Workload::Spin { ms, cpu } => {
            if let Some(c) = cpu {
                pin(c);
            }
            spin::run(ms);
        }
        Workload::Udp { n, size } => {
            let io = |e| Error::io(std::path::Path::new("udp 127.0.0.1"), e);
            let rx = std::net::UdpSocket::bind("127.0.0.1:0").map_err(io)?;
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").map_err(io)?;
            let to = rx.local_addr().map_err(io)?;
            let buf = vec![0x6bu8; size];
            let mut back = vec![0u8; size.max(1)];
            for _ in 0..n {
                tx.send_to(&buf, to).map_err(io)?;
                // Receive each before sending the next: no datagram is dropped for a full
                // socket buffer.
                rx.recv_from(&mut back).map_err(io)?;
            }
            println!("{n} datagrams of {size} bytes sent");
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
                    return Err(Error::failed(format!(
                        "fork: {}",
                        std::io::Error::last_os_error()
                    )));
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
                    return Err(Error::failed(format!(
                        "mmap: {}",
                        std::io::Error::last_os_error()
                    )));
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
        Workload::Chat(a) => crate::bench::chat::workload(&a)?,
        Workload::LockCallers { threads, iters } => lock_callers(threads, iters),
        Workload::MallocFight {
            threads,
            iters,
            arenas,
        } => malloc_fight(threads, iters, arenas),
        Workload::CachePollution { mib, hot, cpu } => {
            if let Some(c) = cpu {
                pin(c);
            }
            cache_pollution::run(mib, hot)?
        }
        Workload::ColourWalk {
            nodes,
            stride,
            colours,
            way,
            passes,
        } => {
            use crate::bench::colour::layout::{walk, Layout, Region};
            let l = Layout::new(nodes, stride, 3, 64, way, colours)?;
            let mut r = Region::new(l.bytes() as usize)?;
            let head = r.link(&l);
            // SAFETY: head from link with this layout; the region lives and is not written.
            let sum = unsafe { walk(head, l.fields, l.spacing, passes * nodes) };
            println!("colour-walk: {nodes} structures, {colours} colour(s), sum {sum}");
        }
        Workload::HashProbe { slots, lookups } => {
            println!("hash-probe: sum {}", hash_probe(slots, lookups));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads `lookups` slots of a table of `slots`, each at a hash of the lookup's number.
#[inline(never)]
fn hash_probe(slots: u64, lookups: u64) -> u64 {
    let table: Vec<u64> = (0..slots).map(|i| i.wrapping_mul(31)).collect();
    let mut sum = 0u64;
    for k in 0..lookups {
        let h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20;
        sum = sum.wrapping_add(std::hint::black_box(table[(h % slots) as usize]));
    }
    sum
}

/// Maps, touches and unmaps one anonymous page `n` times (mmap_lock taken for writing
/// by mmap and munmap, for reading by the page fault).
fn mmap_loop(n: u64) {
    for _ in 0..n {
        // SAFETY: a fresh private anonymous mapping, written then unmapped by us alone.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert!(p != libc::MAP_FAILED, "mmap failed");
            std::ptr::write_volatile(p.cast::<u8>(), 1);
            libc::munmap(p, 4096);
        }
    }
}

/// A page-aligned buffer for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(size: usize, fill: u8) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(size, 4096).expect("valid layout");
        // SAFETY: size > 0 (checked by the caller); the memory is written before use.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null(), "out of memory");
        // SAFETY: ptr points to `size` writable bytes.
        unsafe { std::ptr::write_bytes(ptr, fill, size) };
        Aligned { ptr, layout }
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: allocated and initialised in `new` for layout.size() bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn direct_writers(
    threads: usize,
    count: u64,
    size: usize,
    prefix: &std::path::Path,
) -> Result<(), Error> {
    use std::os::unix::fs::OpenOptionsExt;
    if size == 0 || !size.is_multiple_of(4096) {
        return Err(Error::usage(format!(
            "--size {size}: O_DIRECT writes need a positive multiple of 4096 bytes"
        )));
    }
    let mut files = Vec::new();
    for i in 0..threads {
        let mut name = prefix.as_os_str().to_owned();
        name.push(format!(".{i}"));
        let path = PathBuf::from(name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        files.push((path, f));
    }
    let t0 = Instant::now();
    let results: Vec<Result<(u64, f64), Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .into_iter()
            .enumerate()
            .map(|(i, (path, mut f))| {
                s.spawn(move || {
                    let buf = Aligned::new(size, b'a' + (i % 26) as u8);
                    let mut slowest = (0u64, 0.0f64);
                    for _ in 0..count {
                        let t = Instant::now();
                        f.write_all(buf.bytes()).map_err(|e| Error::io(&path, e))?;
                        let ns = t.elapsed().as_nanos() as u64;
                        if ns > slowest.0 {
                            slowest = (ns, (t - t0).as_secs_f64());
                        }
                    }
                    Ok(slowest)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("writer thread panicked"))
            .collect()
    });
    let mut slowest = (0u64, 0.0f64);
    for r in results {
        let s = r?;
        if s.0 > slowest.0 {
            slowest = s;
        }
    }
    println!(
        "{threads} threads x {count} O_DIRECT writes of {size} bytes in {:.3} s; slowest write {:.3} ms at +{:.3} s",
        t0.elapsed().as_secs_f64(),
        slowest.0 as f64 / 1e6,
        slowest.1
    );
    Ok(())
}

/// The lock of `mutex-fight` and `lock-callers`: a named static, so a recording with the
/// mappings names it (`kstate_lab::workload::FIGHT_LOCK`).
static FIGHT_LOCK: std::sync::Mutex<u64> = std::sync::Mutex::new(0);

/// Takes FIGHT_LOCK and holds it a while: longer than the lock spins before it waits in
/// the kernel. Not inlined, so call chains show it as the lock's caller.
#[inline(never)]
fn fight_take_lock() {
    let mut g = FIGHT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..500 {
        *g = std::hint::black_box(*g + 1);
    }
}

/// `lock-callers`: the same lock taken from two places, three times from this one...
#[inline(never)]
fn lock_caller_often() {
    fight_hold(&FIGHT_LOCK);
}

/// ...for each time from this one.
#[inline(never)]
fn lock_caller_seldom() {
    fight_hold(&FIGHT_LOCK);
}

/// Inlined into each caller, so the caller is the function that takes the lock. Held
/// long enough (some 10 us) that most acquisitions find it taken, whatever the load.
#[inline(always)]
fn fight_hold(m: &std::sync::Mutex<u64>) {
    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..5000 {
        *g = std::hint::black_box(*g + 1);
    }
}

/// Workers lock one mutex in turn (`body` takes it once); the main thread waits for them
/// on a pipe (not a futex) and exits without joining, so every futex wait of the process
/// is on the mutex.
fn fight(threads: usize, iters: u64, body: fn(usize, u64)) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::sync::Arc;
    let mut fds = [0i32; 2];
    // SAFETY: fds has room for the two descriptors.
    unsafe { libc::pipe(fds.as_mut_ptr()) };
    let addr = &FIGHT_LOCK as *const _ as usize;
    // The futex word lies somewhere inside the Mutex (Rust does not fix field order).
    println!(
        "mutex {addr:#x} size {}",
        std::mem::size_of::<std::sync::Mutex<u64>>()
    );
    let _ = std::io::stdout().flush();
    // The workers start together (a spinning barrier: no futex), so they overlap.
    let ready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for t in 0..threads {
        let ready = Arc::clone(&ready);
        let w = fds[1];
        std::thread::spawn(move || {
            use std::sync::atomic::Ordering;
            ready.fetch_add(1, Ordering::SeqCst);
            while ready.load(Ordering::SeqCst) < threads {
                std::hint::spin_loop();
            }
            for i in 0..iters {
                body(t, i);
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

fn mutex_fight(threads: usize, iters: u64) {
    fight(threads, iters, |_, _| fight_take_lock());
}

/// Of each thread's iterations, a pseudo-random quarter through `lock_caller_seldom`, the
/// rest through `lock_caller_often` (not a fixed pattern: threads in step would meet in
/// the same caller). Prints the calls per caller over all threads.
fn lock_callers(threads: usize, iters: u64) {
    fight(threads, iters, |t, i| {
        if seldom(t, i) {
            lock_caller_seldom()
        } else {
            lock_caller_often()
        }
    });
    let n: u64 = (0..threads)
        .map(|t| (0..iters).filter(|&i| seldom(t, i)).count() as u64)
        .sum();
    println!(
        "lock_caller_often {} lock_caller_seldom {n}",
        threads as u64 * iters - n
    );
}

/// One in four, by a hash (splitmix64) of the thread and the iteration.
fn seldom(t: usize, i: u64) -> bool {
    crate::bench::colour::layout::splitmix((t as u64) << 40 ^ i) % 4 == 3
}

/// Threads allocating and freeing in `malloc_churn`; with `arenas` set, glibc's arena
/// limit (M_ARENA_MAX) first, so with 1 they all share `main_arena` and its lock.
fn malloc_fight(threads: usize, iters: u64, arenas: Option<i32>) {
    if let Some(n) = arenas {
        const M_ARENA_MAX: libc::c_int = -8;
        // SAFETY: mallopt only changes the allocator's tuning.
        unsafe { libc::mallopt(M_ARENA_MAX, n) };
    }
    let workers: Vec<_> = (0..threads)
        .map(|t| std::thread::spawn(move || malloc_churn(iters, t as u64)))
        .collect();
    for w in workers {
        let _ = w.join();
    }
}

/// Allocates and frees blocks of 16..4096 bytes, a few live at a time.
#[inline(never)]
fn malloc_churn(iters: u64, seed: u64) {
    let mut live = [std::ptr::null_mut::<libc::c_void>(); 8];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let slot = (i % 8) as usize;
        // SAFETY: every pointer in `live` came from malloc and is freed once.
        unsafe {
            libc::free(live[slot]);
            live[slot] = libc::malloc(16 + (x % 4080) as usize);
            if !live[slot].is_null() {
                std::ptr::write_volatile(live[slot].cast::<u8>(), 1);
            }
        }
    }
    for p in live {
        // SAFETY: as above.
        unsafe { libc::free(p) };
    }
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
        // Created exclusively: the run's directory may be writable by others.
        let mut f = kstate_format::output::create_new(&file).map_err(|e| Error::io(&file, e))?;
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
            st.map_err(|e| Error::failed(format!("running true: {e}")))?;
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

/// The CPU-bound workload with a known profile. The three functions are written in
/// assembly on x86_64 so they keep frame pointers whatever the compiler settings (Rust
/// omits them by default, and the kernel's user-space unwinder follows them), with CFI
/// directives like compiled code (unwinding from a stack copy reads them); elsewhere
/// they are plain Rust.
mod spin {
    use std::time::Instant;

    /// Iterations of the hot loop per call: about 0.1-1 ms.
    const ITERS: u64 = 200_000;

    #[cfg(target_arch = "x86_64")]
    std::arch::global_asm!(
        ".text",
        ".p2align 4",
        ".globl kstate_spin_hot_loop",
        ".type kstate_spin_hot_loop,@function",
        "kstate_spin_hot_loop:",
        ".cfi_startproc",
        "push rbp",
        ".cfi_def_cfa_offset 16",
        ".cfi_offset rbp, -16",
        "mov rbp, rsp",
        ".cfi_def_cfa_register rbp",
        "mov rax, rdi",
        "2:",
        "imul rax, rax, 3",
        "add rax, 1",
        "dec rdi",
        "jnz 2b",
        "pop rbp",
        ".cfi_def_cfa rsp, 8",
        "ret",
        ".cfi_endproc",
        ".size kstate_spin_hot_loop, .-kstate_spin_hot_loop",
        ".p2align 4",
        ".globl kstate_spin_caller_a",
        ".type kstate_spin_caller_a,@function",
        "kstate_spin_caller_a:",
        ".cfi_startproc",
        "push rbp",
        ".cfi_def_cfa_offset 16",
        ".cfi_offset rbp, -16",
        "mov rbp, rsp",
        ".cfi_def_cfa_register rbp",
        "call kstate_spin_hot_loop",
        "pop rbp",
        ".cfi_def_cfa rsp, 8",
        "ret",
        ".cfi_endproc",
        ".size kstate_spin_caller_a, .-kstate_spin_caller_a",
        ".p2align 4",
        ".globl kstate_spin_caller_b",
        ".type kstate_spin_caller_b,@function",
        "kstate_spin_caller_b:",
        ".cfi_startproc",
        "push rbp",
        ".cfi_def_cfa_offset 16",
        ".cfi_offset rbp, -16",
        "mov rbp, rsp",
        ".cfi_def_cfa_register rbp",
        "call kstate_spin_hot_loop",
        "pop rbp",
        ".cfi_def_cfa rsp, 8",
        "ret",
        ".cfi_endproc",
        ".size kstate_spin_caller_b, .-kstate_spin_caller_b",
    );

    #[cfg(target_arch = "x86_64")]
    extern "C" {
        fn kstate_spin_caller_a(n: u64) -> u64;
        fn kstate_spin_caller_b(n: u64) -> u64;
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(never)]
    #[no_mangle]
    extern "C" fn kstate_spin_hot_loop(mut n: u64) -> u64 {
        let mut x = n;
        while n > 0 {
            x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
            n -= 1;
        }
        x
    }
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(never)]
    #[no_mangle]
    extern "C" fn kstate_spin_caller_a(n: u64) -> u64 {
        std::hint::black_box(kstate_spin_hot_loop(n))
    }
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(never)]
    #[no_mangle]
    extern "C" fn kstate_spin_caller_b(n: u64) -> u64 {
        std::hint::black_box(kstate_spin_hot_loop(n))
    }

    pub fn run(ms: u64) {
        let cpu0 = super::cpu_ns();
        let t = Instant::now();
        let (mut a, mut b) = (0u64, 0u64);
        let mut acc = 0u64;
        let mut i = 0u64;
        while super::cpu_ns() - cpu0 < ms * 1_000_000 {
            // Two calls through A for each through B, in no fixed order: a repeating
            // pattern (A, A, B) has a period that sampling at a fixed rate can lock onto
            // and give one caller more than its share. The counts printed are the truth.
            #[allow(unused_unsafe)]
            // SAFETY: the callees only compute on their argument.
            unsafe {
                if crate::bench::colour::layout::splitmix(i) % 3 == 2 {
                    acc = acc.wrapping_add(kstate_spin_caller_b(ITERS));
                    b += 1;
                } else {
                    acc = acc.wrapping_add(kstate_spin_caller_a(ITERS));
                    a += 1;
                }
            }
            i += 1;
        }
        std::hint::black_box(acc);
        println!(
            "spin: {} calls via kstate_spin_caller_a, {} via kstate_spin_caller_b; cpu {:.3} s, wall {:.3} s",
            a,
            b,
            (super::cpu_ns() - cpu0) as f64 / 1e9,
            t.elapsed().as_secs_f64()
        );
    }
}

/// Two functions with opposite memory behaviour, for `kstate cachesim` and
/// `kstate profile --compare-events`: their names are what the tests look for.
mod cache_pollution {
    use crate::Error;

    const LINE: usize = 64;
    const PAGE: usize = 4096;

    // Both loops are plain address arithmetic and one load per step, so that even a debug
    // build (no inlining) counts one memory reference per step in these functions, not
    // in helpers, and runs fast enough under cachegrind.

    /// Reads one byte per cache line of `buf` once: non-temporal data.
    #[inline(never)]
    fn stream_once(buf: *const u8, len: usize) -> u64 {
        let mut sum = 0u64;
        let mut p = std::hint::black_box(buf) as usize;
        let end = p + len;
        while p < end {
            // SAFETY: p is inside the caller's mapping of len bytes.
            sum = sum.wrapping_add(unsafe { *(p as *const u8) } as u64);
            p += LINE;
        }
        sum
    }

    /// `n` reads spread over a 4 KiB table that stays in the L1 cache.
    #[inline(never)]
    fn hot_table(table: &[u8; PAGE], n: u64) -> u64 {
        let base = std::hint::black_box(table.as_ptr()) as usize;
        let mut sum = 0u64;
        let (mut i, mut k) = (0usize, 0u64);
        while k < n {
            // SAFETY: i < PAGE, inside the table.
            sum = sum.wrapping_add(unsafe { *((base + i) as *const u8) } as u64);
            i = (i + LINE + 8) & (PAGE - 1);
            k += 1;
        }
        sum
    }

    pub fn run(mib: usize, hot: u64) -> Result<(), Error> {
        let len = (mib << 20).max(PAGE);
        // SAFETY: a fresh private anonymous mapping, read only inside its length.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::failed(format!(
                "mmap of {mib} MiB: {}",
                std::io::Error::last_os_error()
            )));
        }
        // One fault per 4 KiB page (not one per 2 MiB huge zero page).
        // SAFETY: advice on our own mapping.
        unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
        let a = stream_once(p as *const u8, len);
        let mut table = [0u8; PAGE];
        for (i, b) in table.iter_mut().enumerate() {
            *b = i as u8;
        }
        let b = hot_table(&table, hot);
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(p, len) };
        println!(
            "cache-pollution: stream_once read {} lines ({} pages), hot_table {hot} reads; sums {a} {b}",
            len / LINE,
            len / PAGE
        );
        Ok(())
    }
}
