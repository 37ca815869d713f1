//! CPU sampling next to the tracepoints (`kstate record --sample`): per sampled event, one
//! perf event per CPU (or per CPU and selected process), sampling IP, task, time, CPU,
//! period and the kernel and user call chains on the trace clock; the first event also
//! carries the MMAP2/COMM/FORK side-band records a profile needs to name user-space
//! addresses (once is enough for all events).
//!
//! One thread copies whatever the kernel wrote into each CPU's perf ring buffer, unparsed,
//! into a scratch file in the SAMPLES section's layout (`kstate_format::sections::samples`); the
//! recorder embeds that file whole when it assembles the trace.dat. Processes that already
//! run get their executable mappings from /proc/PID/maps at the start, as perf does.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use kstate_format::perf::decode::{self, event_type, flag, sample, Attr};
use kstate_format::sections::samples;

use crate::error::{Error, Result};
use crate::reader::Control;

/// Default sampling frequency: 999 Hz, like perf's `-F 999`, off the 1000 Hz tick.
pub const DEFAULT_HZ: u64 = 999;

/// Data pages per CPU ring (4 KiB each: 1 MiB), and the wake-up watermark.
const RING_PAGES: usize = 256;
const WATERMARK_BYTES: u32 = 256 << 10;
/// With user stack copies, whose samples are some KiB each: 16 MiB per CPU (a burst of
/// lock waits takes thousands of chains in a few ms).
const RING_PAGES_STACKS: usize = 4096;

/// User stack bytes copied with each sample by default (`--stack-bytes`), as perf's
/// `--call-graph dwarf`: enough for the frames above a lock call or a sampled leaf.
pub const DEFAULT_STACK_BYTES: u32 = 8192;
/// The kernel's limit: a sample record is at most 64 KiB, and the copy a multiple of 8.
pub const MAX_STACK_BYTES: u32 = 65528 - 512;

/// Sets the attr to carry the user registers and `stack_bytes` of user stack (0: none)
/// with each sample, so user chains can be unwound through code without frame pointers.
fn with_user_stack(mut a: Attr, stack_bytes: u32) -> Attr {
    // The register numbers are x86_64's (perf_event_x86_regs).
    if stack_bytes > 0 && cfg!(target_arch = "x86_64") {
        a.sample_type |= sample::REGS_USER | sample::STACK_USER;
        a.sample_regs_user = decode::regs::UNWIND_MASK;
        a.sample_stack_user = stack_bytes.min(MAX_STACK_BYTES).next_multiple_of(8);
    }
    a
}

/// The `--sample` argument: `HZ`, `EVENT` or `EVENT:PERIOD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleSpec {
    pub event: String,
    /// Samples per second (frequency mode), or
    pub hz: Option<u64>,
    /// one sample every PERIOD events.
    pub period: Option<u64>,
}

impl Default for SampleSpec {
    fn default() -> SampleSpec {
        SampleSpec {
            event: "cpu-clock".into(),
            hz: Some(DEFAULT_HZ),
            period: None,
        }
    }
}

impl std::fmt::Display for SampleSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.hz, self.period) {
            (_, Some(p)) => write!(f, "{} every {p} events", self.event),
            (Some(hz), _) => write!(f, "{} at {hz} Hz", self.event),
            _ => f.write_str(&self.event),
        }
    }
}

/// Events `--sample` knows: name, perf type, config, whether it needs a hardware PMU.
const EVENTS: &[(&str, u32, u64, bool)] = &[
    ("cpu-clock", event_type::SOFTWARE, 0, false),
    ("task-clock", event_type::SOFTWARE, 1, false),
    ("page-faults", event_type::SOFTWARE, 2, false),
    ("cycles", event_type::HARDWARE, 0, true),
    ("instructions", event_type::HARDWARE, 1, true),
    ("cache-references", event_type::HARDWARE, 2, true),
    ("cache-misses", event_type::HARDWARE, 3, true),
    ("branches", event_type::HARDWARE, 4, true),
    ("branch-misses", event_type::HARDWARE, 5, true),
    // PERF_COUNT_HW_CACHE_LL | OP_READ << 8 | RESULT_ACCESS/MISS << 16
    ("LLC-loads", event_type::HW_CACHE, 2, true),
    ("LLC-load-misses", event_type::HW_CACHE, 2 | 1 << 16, true),
    ("LLC-misses", event_type::HW_CACHE, 2 | 1 << 16, true),
];

pub fn event_names() -> Vec<&'static str> {
    EVENTS.iter().map(|e| e.0).collect()
}

/// The highest `--sample` frequency taken: the kernel's default limit
/// (`kernel.perf_event_max_sample_rate`).
pub const MAX_HZ: u64 = 100_000;
/// The largest `--sample EVENT:PERIOD` (perf_event_attr takes a u64; the kernel refuses
/// periods with the top bit set).
pub const MAX_PERIOD: u64 = 1 << 62;

pub fn parse_spec(s: &str) -> std::result::Result<SampleSpec, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(SampleSpec::default());
    }
    let positive = |t: &str, what: &str| -> std::result::Result<u64, String> {
        t.parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("--sample {s}: {what} {t:?} is not a positive integer"))
    };
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let hz = positive(s, "frequency")?;
        if hz > MAX_HZ {
            return Err(format!(
                "--sample {s}: a frequency from 1 to {MAX_HZ} Hz (the kernel's default \
                 perf_event_max_sample_rate)"
            ));
        }
        return Ok(SampleSpec {
            hz: Some(hz),
            ..SampleSpec::default()
        });
    }
    let (name, period) = match s.split_once(':') {
        Some((n, p)) => {
            let period = positive(p, "period")?;
            if period > MAX_PERIOD {
                return Err(format!(
                    "--sample {s}: a period from 1 to {MAX_PERIOD} events"
                ));
            }
            (n, Some(period))
        }
        None => (s, None),
    };
    let Some(e) = EVENTS.iter().find(|e| e.0.eq_ignore_ascii_case(name)) else {
        return Err(format!(
            "--sample {s}: unknown event {name:?}; known: {}",
            event_names().join(", ")
        ));
    };
    Ok(SampleSpec {
        event: e.0.into(),
        hz: period.is_none().then_some(DEFAULT_HZ),
        period,
    })
}

/// What to sample: every task on each CPU, or these processes (and what they start).
#[derive(Debug, Clone)]
pub enum Target {
    System,
    Pids(Vec<i32>),
}

/// The `perf_event_attr` for a spec; `clock`: the user clock of the trace clock, if any;
/// `sideband`: also report mappings, comms and forks.
fn attr_for(
    spec: &SampleSpec,
    clock: Option<libc::clockid_t>,
    inherit: bool,
    sideband: bool,
) -> Attr {
    let e = EVENTS
        .iter()
        .find(|e| e.0 == spec.event)
        .expect("spec from parse_spec");
    let mut flags = flag::DISABLED | flag::SAMPLE_ID_ALL | flag::WATERMARK;
    if sideband {
        flags |=
            flag::MMAP | flag::MMAP2 | flag::COMM | flag::COMM_EXEC | flag::TASK | flag::BUILD_ID;
    }
    if inherit {
        flags |= flag::INHERIT;
    }
    let period_or_freq = match (spec.period, spec.hz) {
        (Some(p), _) => p,
        (None, hz) => {
            flags |= flag::FREQ;
            hz.unwrap_or(DEFAULT_HZ)
        }
    };
    if clock.is_some() {
        flags |= flag::USE_CLOCKID;
    }
    Attr {
        type_: e.1,
        config: e.2,
        period_or_freq,
        sample_type: sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::PERIOD
            | sample::CALLCHAIN,
        flags,
        wakeup_watermark: WATERMARK_BYTES,
        clockid: clock.unwrap_or(0),
        ..Attr::default()
    }
}

fn perf_event_open(attr: &[u8], pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: attr points to ATTR_SIZE readable bytes laid out as perf_event_attr (its
    // size field says so); the kernel only reads them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            pid,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// The `perf_event_attr` for the user call chain at every hit of tracepoint `id`: period
/// 1, no kernel chain (it is the same system-call entry every time), thread and time to
/// join each chain to the trace's own event.
fn tracepoint_attr(id: u64, clock: Option<libc::clockid_t>, inherit: bool) -> Attr {
    let mut flags = flag::DISABLED
        | flag::MMAP
        | flag::MMAP2
        | flag::COMM
        | flag::COMM_EXEC
        | flag::TASK
        | flag::SAMPLE_ID_ALL
        | flag::WATERMARK
        | flag::BUILD_ID
        | flag::EXCLUDE_CALLCHAIN_KERNEL;
    if inherit {
        flags |= flag::INHERIT;
    }
    if clock.is_some() {
        flags |= flag::USE_CLOCKID;
    }
    Attr {
        type_: event_type::TRACEPOINT,
        config: id,
        period_or_freq: 1,
        sample_type: sample::IP | sample::TID | sample::TIME | sample::CPU | sample::CALLCHAIN,
        flags,
        wakeup_watermark: WATERMARK_BYTES,
        clockid: clock.unwrap_or(0),
        ..Attr::default()
    }
}

/// One event's ring on one CPU: the fd that owns the mapping (the event's others on the
/// CPU write into it).
struct Ring {
    /// Index of the event in the spec list (0 carries the side-band records).
    event: u32,
    cpu: u32,
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_size: u64,
}

// SAFETY: the mapping is only touched by the thread that owns the Ring (the copier), and
// is unmapped on drop.
unsafe impl Send for Ring {}

impl Ring {
    fn map(event: u32, cpu: u32, fd: OwnedFd, pages: usize) -> std::io::Result<Ring> {
        let page = 4096usize;
        let len = page * (1 + pages);
        // SAFETY: mapping a perf event fd as the kernel documents; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ring {
            event,
            cpu,
            fd,
            base: base.cast(),
            len,
            data_size: (page * pages) as u64,
        })
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is a naturally aligned u64 at offset 1024 of the control
        // page, which lives as long as the mapping.
        unsafe { &*(self.base.add(1024) as *const AtomicU64) }
    }
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for head; data_tail at offset 1032.
        unsafe { &*(self.base.add(1032) as *const AtomicU64) }
    }

    /// Appends what the kernel wrote since the last call to `out` as one 'R' record.
    fn drain(&self, out: &mut impl Write, buf: &mut Vec<u8>) -> std::io::Result<u64> {
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Relaxed);
        if head == tail {
            return Ok(0);
        }
        let n = head.wrapping_sub(tail).min(self.data_size);
        let start = tail.wrapping_add(head.wrapping_sub(tail) - n);
        let off = (start % self.data_size) as usize;
        let first = (n as usize).min(self.data_size as usize - off);
        buf.clear();
        // SAFETY: the data area follows the control page and is data_size bytes long;
        // off + first <= data_size and the wrapped rest starts at 0.
        unsafe {
            let data = self.base.add(4096);
            buf.extend_from_slice(std::slice::from_raw_parts(data.add(off), first));
            buf.extend_from_slice(std::slice::from_raw_parts(data, n as usize - first));
        }
        self.tail().store(head, Ordering::Release);
        out.write_all(&samples::ring_head(self.event, self.cpu, buf.len()))?;
        out.write_all(buf)?;
        Ok(n)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The open events before the copier thread runs.
pub struct Sampler {
    /// What is sampled, for the summary: `cpu-clock at 999 Hz, page-faults every 1`.
    what: String,
    rings: Vec<Ring>,
    /// Events that write into a ring they do not own (per process, per CPU).
    others: Vec<OwnedFd>,
    out: BufWriter<File>,
    path: PathBuf,
}

/// An event to open: its attr, its name in the section, and how a failure to open it
/// reads.
struct Planned {
    attr: Attr,
    event: String,
    on_error: Box<dyn Fn(u32, std::io::Error) -> OpenError>,
}

/// Why the event could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// A hardware event on a machine without a PMU for it.
    NoPmu(String),
    Other(Error),
}

impl From<Error> for OpenError {
    fn from(e: Error) -> OpenError {
        OpenError::Other(e)
    }
}

/// Tries the event on this process (disabled, closed at once), so a missing hardware
/// event is known before anything is set up.
pub fn probe(spec: &SampleSpec) -> std::result::Result<(), OpenError> {
    let mut attr = attr_for(spec, None, false, true);
    attr.flags &= !flag::BUILD_ID;
    perf_event_open(&attr.to_bytes(), 0, -1)
        .map(drop)
        .map_err(|e| match open_error(spec, 0, e) {
            OpenError::Other(e) => {
                OpenError::Other(Error::new(e.to_string().replace(" on CPU 0", "")))
            }
            x => x,
        })
}

impl Sampler {
    /// Opens each event on each CPU (and per process in `target`), disabled, maps their
    /// rings and writes the section header, the events and the existing processes' maps
    /// to `scratch`.
    pub fn open(
        specs: &[SampleSpec],
        stack_bytes: u32,
        target: &Target,
        cpus: &[u32],
        clock: Option<libc::clockid_t>,
        clock_name: &str,
        scratch: &Path,
    ) -> std::result::Result<Sampler, OpenError> {
        let inherit = !matches!(target, Target::System);
        let events = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let spec = spec.clone();
                Planned {
                    attr: with_user_stack(attr_for(&spec, clock, inherit, i == 0), stack_bytes),
                    event: spec.event.clone(),
                    on_error: Box::new(move |cpu, e| open_error(&spec, cpu, e)),
                }
            })
            .collect();
        let what = specs
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Sampler::open_planned(events, what, target, cpus, clock_name, scratch)
    }

    /// Like [`Sampler::open`], for the call chain at every hit of tracepoint `name`
    /// (`system:event`, whose tracefs id is `id`): `kstate record --stacks`.
    pub fn open_tracepoint(
        (name, id): (&str, u64),
        stack_bytes: u32,
        target: &Target,
        cpus: &[u32],
        clock: Option<libc::clockid_t>,
        clock_name: &str,
        scratch: &Path,
    ) -> std::result::Result<Sampler, OpenError> {
        let owned = name.to_string();
        let event = Planned {
            attr: with_user_stack(
                tracepoint_attr(id, clock, !matches!(target, Target::System)),
                stack_bytes,
            ),
            event: name.to_string(),
            on_error: Box::new(move |cpu, e| {
                OpenError::Other(Error::new(format!(
                    "call chains at {owned} on CPU {cpu}: perf_event_open: {e}"
                )))
            }),
        };
        let what = format!("call chains at every {name}");
        Sampler::open_planned(vec![event], what, target, cpus, clock_name, scratch)
    }

    fn open_planned(
        events: Vec<Planned>,
        what: String,
        target: &Target,
        cpus: &[u32],
        clock_name: &str,
        scratch: &Path,
    ) -> std::result::Result<Sampler, OpenError> {
        let pids: Vec<i32> = match target {
            Target::System => vec![-1],
            Target::Pids(p) => p.clone(),
        };
        let mut rings = Vec::new();
        let mut others = Vec::new();
        let mut attrs = Vec::new();
        let pages = match events
            .iter()
            .any(|p| p.attr.sample_type & sample::STACK_USER != 0)
        {
            true => RING_PAGES_STACKS,
            false => RING_PAGES,
        };
        for (ev, p) in events.iter().enumerate() {
            let mut attr = p.attr.clone();
            let before = rings.len();
            for &cpu in cpus {
                let mut owner: Option<Ring> = None;
                for &pid in &pids {
                    let fd = match perf_event_open(&attr.to_bytes(), pid, cpu as i32) {
                        Ok(fd) => fd,
                        // Kernels before 5.12 refuse the build_id bit: go without.
                        Err(e)
                            if e.raw_os_error() == Some(libc::EINVAL)
                                && attr.flags & flag::BUILD_ID != 0 =>
                        {
                            attr.flags &= !flag::BUILD_ID;
                            perf_event_open(&attr.to_bytes(), pid, cpu as i32)
                                .map_err(|e| (p.on_error)(cpu, e))?
                        }
                        // A CPU that is offline has no events: skip it.
                        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => break,
                        // A process that exited meanwhile.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) && pid > 0 => continue,
                        Err(e) => return Err((p.on_error)(cpu, e)),
                    };
                    match &owner {
                        None => {
                            owner = Some(Ring::map(ev as u32, cpu, fd, pages).map_err(|e| {
                                Error::new(format!(
                                    "mapping the CPU {cpu} sample buffer of {} ({} KiB): {e}",
                                    p.event,
                                    pages * 4
                                ))
                            })?)
                        }
                        Some(r) => {
                            // SAFETY: ioctl on two perf fds we own.
                            let rc = unsafe {
                                libc::ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT, r.fd.as_raw_fd())
                            };
                            if rc != 0 {
                                return Err(Error::new(format!(
                                    "redirecting samples on CPU {cpu}: {}",
                                    std::io::Error::last_os_error()
                                ))
                                .into());
                            }
                            others.push(fd);
                        }
                    }
                }
                rings.extend(owner);
            }
            if rings.len() == before {
                return Err(Error::new(format!(
                    "sampling {}: no CPU and process could be sampled",
                    p.event
                ))
                .into());
            }
            attrs.push(attr);
        }
        let file = kstate_format::output::create_new(scratch)
            .map_err(|e| Error::io("creating", scratch, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let io = |e| Error::io("writing", scratch, e);
        for (i, (p, attr)) in events.iter().zip(&attrs).enumerate() {
            let rec = match i {
                0 => samples::encode_header(clock_name, &p.event, &attr.to_bytes()),
                _ => samples::encode_event(&p.event, &attr.to_bytes()),
            };
            out.write_all(&rec).map_err(io)?;
        }
        let maps = existing_maps(attrs[0].sample_type, target);
        out.write_all(&samples::record_head(samples::TAG_MAPS, maps.len()))
            .and_then(|_| out.write_all(&maps))
            .map_err(io)?;
        Ok(Sampler {
            what,
            rings,
            others,
            out,
            path: scratch.to_path_buf(),
        })
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    /// Starts the copier thread; returns it with its thread id (to keep it out of the
    /// trace).
    pub fn start(self, ctl: Arc<Control>) -> Result<(Running, i32)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let fds: Vec<i32> = self
            .rings
            .iter()
            .map(|r| r.fd.as_raw_fd())
            .chain(self.others.iter().map(|f| f.as_raw_fd()))
            .collect();
        let handle = std::thread::Builder::new()
            .name("kstate-samples".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(unsafe { libc::gettid() });
                let mut s = self;
                let r = s.copy(&ctl);
                if let Err(e) = &r {
                    ctl.fail(e.clone());
                }
                r.map(|()| s.path.clone())
            })
            .map_err(|e| Error::new(format!("starting the sampling thread: {e}")))?;
        let tid = rx.recv().unwrap_or(0);
        Ok((Running { handle, fds }, tid))
    }

    fn copy(&mut self, ctl: &Control) -> Result<()> {
        let mut buf = Vec::new();
        let path = self.path.clone();
        let io = |e| Error::io("writing", &path, e);
        loop {
            for r in &self.rings {
                r.drain(&mut self.out, &mut buf).map_err(io)?;
            }
            if ctl.stopping() {
                break;
            }
            let fds: Vec<RawFd> = self.rings.iter().map(|r| r.fd.as_raw_fd()).collect();
            ctl.wait(&fds, Duration::from_millis(200));
        }
        // The events were disabled before the stop: this takes the last records.
        for r in &self.rings {
            r.drain(&mut self.out, &mut buf).map_err(io)?;
        }
        self.out.flush().map_err(io)
    }
}

fn open_error(spec: &SampleSpec, cpu: u32, e: std::io::Error) -> OpenError {
    let hw = EVENTS.iter().any(|x| x.0 == spec.event && x.3);
    let code = e.raw_os_error();
    if hw && matches!(code, Some(libc::ENOENT) | Some(libc::EOPNOTSUPP)) {
        return OpenError::NoPmu(format!(
            "this machine has no hardware PMU: {} is not available; use --sample cpu-clock or add --sample-fallback",
            spec.event
        ));
    }
    let why = match code {
        Some(libc::EINVAL) if spec.hz.is_some() => format!(
            "{e} (is {} Hz above kernel.perf_event_max_sample_rate, {}?)",
            spec.hz.unwrap_or(0),
            std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        ),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "{e} (kernel.perf_event_paranoid is {})",
            std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        ),
        Some(libc::ENOSYS) => format!("{e} (this kernel has no perf events)"),
        _ => e.to_string(),
    };
    OpenError::Other(Error::new(format!(
        "sampling {spec} on CPU {cpu}: perf_event_open: {why}"
    )))
}

/// The copier thread and the fds to enable and disable.
pub struct Running {
    handle: JoinHandle<Result<PathBuf>>,
    fds: Vec<i32>,
}

impl Running {
    fn ioctl_all(&self, req: libc::c_ulong) {
        for &fd in &self.fds {
            // SAFETY: the fds stay open while the thread (which owns them) runs; the
            // thread only ends after the recorder's stop, which comes after the disable.
            unsafe { libc::ioctl(fd, req, 0) };
        }
    }
    pub fn enable(&self) {
        self.ioctl_all(IOC_ENABLE);
    }
    pub fn disable(&self) {
        self.ioctl_all(IOC_DISABLE);
    }
    /// Waits for the thread (after [`Control::stop`]); the scratch file is complete.
    pub fn finish(self) -> Result<PathBuf> {
        self.handle
            .join()
            .map_err(|_| Error::new("the sampling thread panicked"))?
    }
}

/// MMAP2 (executable mappings, with build ids) and COMM records for the processes that
/// already run, from /proc: the kernel only reports mappings made from now on.
fn existing_maps(sample_type: u64, target: &Target) -> Vec<u8> {
    let pids: Vec<i32> = match target {
        Target::Pids(p) => p.clone(),
        Target::System => std::fs::read_dir("/proc")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut build_ids: HashMap<String, Option<Vec<u8>>> = HashMap::new();
    let mut out = Vec::new();
    for pid in pids {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        out.extend(decode::synth_comm(
            sample_type,
            pid as u32,
            pid as u32,
            comm.trim_end(),
        ));
        for line in maps.lines() {
            let Some(m) = parse_maps_line(line) else {
                continue;
            };
            if !m.perms.contains('x') {
                continue;
            }
            let id = if m.path.starts_with('/') {
                build_ids
                    .entry(m.path.to_string())
                    .or_insert_with(|| decode::elf_build_id(Path::new(m.path)))
                    .clone()
            } else {
                None
            };
            let prot = (m.perms.contains('r') as u32)
                | (m.perms.contains('w') as u32) << 1
                | (m.perms.contains('x') as u32) << 2;
            out.extend(decode::synth_mmap2(
                sample_type,
                pid as u32,
                m.start,
                m.end - m.start,
                m.pgoff,
                prot,
                id.as_deref(),
                m.path,
            ));
        }
    }
    out
}

struct MapsLine<'a> {
    start: u64,
    end: u64,
    perms: &'a str,
    pgoff: u64,
    path: &'a str,
}

/// `start-end perms offset dev inode   path`
fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut it = line.splitn(6, ' ');
    let (range, perms, off, _dev, _ino) =
        (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    let path = it.next().unwrap_or("").trim_start();
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    (end > start).then_some(MapsLine {
        start,
        end,
        perms,
        pgoff: u64::from_str_radix(off, 16).ok()?,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(parse_spec("").unwrap(), SampleSpec::default());
        let s = parse_spec("4000").unwrap();
        assert_eq!(
            (s.event.as_str(), s.hz, s.period),
            ("cpu-clock", Some(4000), None)
        );
        let s = parse_spec("cycles:100000").unwrap();
        assert_eq!(
            (s.event.as_str(), s.hz, s.period),
            ("cycles", None, Some(100000))
        );
        let s = parse_spec("LLC-misses").unwrap();
        assert_eq!(s.hz, Some(DEFAULT_HZ));
        assert!(parse_spec("0").is_err());
        assert!(parse_spec("cycles:x").is_err());
        assert!(parse_spec("nosuch").unwrap_err().contains("cpu-clock"));
    }

    #[test]
    fn maps_lines() {
        let m = parse_maps_line(
            "7f1c2a400000-7f1c2a428000 r-xp 00028000 fe:00 1234   /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            (m.start, m.end, m.pgoff),
            (0x7f1c2a400000, 0x7f1c2a428000, 0x28000)
        );
        assert_eq!(
            (m.perms, m.path),
            ("r-xp", "/usr/lib/x86_64-linux-gnu/libc.so.6")
        );
        let m = parse_maps_line("7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]").unwrap();
        assert_eq!(m.path, "[vdso]");
        let m = parse_maps_line("7ffd1000-7ffd3000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(m.path, "");
        assert!(parse_maps_line("garbage").is_none());
    }

    #[test]
    fn attr_layout() {
        let a = attr_for(
            &SampleSpec::default(),
            Some(libc::CLOCK_MONOTONIC),
            false,
            true,
        );
        let b = a.to_bytes();
        assert_eq!(b.len(), decode::ATTR_SIZE);
        let back = Attr::from_bytes(&b, kstate_format::Endian::Little).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.freq(), Some(DEFAULT_HZ));
        assert!(a.flags & flag::USE_CLOCKID != 0 && a.flags & flag::INHERIT == 0);
        assert!(a.flags & flag::EXCLUDE_CALLCHAIN_USER == 0);
        assert!(a.flags & flag::MMAP2 != 0 && a.flags & flag::TASK != 0);
        // A second event leaves the side-band records to the first.
        let b = attr_for(&SampleSpec::default(), None, false, false);
        assert!(b.flags & (flag::MMAP | flag::MMAP2 | flag::COMM | flag::TASK) == 0);
        assert_eq!(b.sample_type, a.sample_type);
    }
}
