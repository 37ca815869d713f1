//! One recording from start to finish: set up the instance, move pages while the workload
//! runs, stop, and write the trace.dat with kstate's extra sections.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstate_format::sections::{self, Recording, RingStats, SysinfoWriter};
use kstate_format::writer::{Compression, TraceWriter, WriterConfig};
use kstate_format::{Endian, PageLayout};

use crate::assemble::{self, CpuCount};
use crate::check;
use crate::end::{wait_briefly, EndWaiter};
use crate::error::{Error, Result};
use crate::events::{self, Selection};
use crate::instance::{self, Instance};
use crate::names::{self, TaskNames};
use crate::own::OwnFilter;
use crate::reader::{Control, CpuReader, Store};
use crate::sampler::{self, SampleSpec};
use crate::scratch_dir::{Capture, EventText, Scratch};
use crate::system;
use crate::tracefs::{self, Tracefs};
use crate::watch::{Flow, Ongoing, OngoingCpu, Unwatched, Watcher};
use crate::{signals, workload};

/// The default per-CPU buffer: room for a few hundred milliseconds of a system-call
/// storm, so the reader's wake-ups never have to be prompt.
pub const DEFAULT_BUFFER_KIB: u64 = 8192;

/// Sub-buffer ("page") size where the kernel lets it be chosen (Linux 6.8+), for a
/// per-CPU buffer of `buffer_kib`: the largest the kernel takes (512 KiB) while the buffer
/// still holds at least 16 of them. Larger pages cost the recorder less per byte: on a
/// system-call storm (`kstate bench record`) 512 KiB pages take about 30 % less recorder
/// CPU than 64 KiB ones and half that of 4 KiB ones; trace-cmd reads them all.
pub fn default_subbuf_kib(buffer_kib: u64) -> u64 {
    const MAX_KIB: u64 = 512;
    const MIN_KIB: u64 = 4;
    let fit = (buffer_kib / 16).clamp(MIN_KIB, MAX_KIB);
    1 << fit.ilog2()
}

/// The instance's wake-up watermark: readers are woken when a CPU's buffer is this full,
/// leaving the rest as headroom while they drain it.
const BUFFER_PERCENT: u32 = 20;

#[derive(Debug, Clone)]
pub struct Options {
    pub output: PathBuf,
    /// `-e` arguments: presets, systems, `system:event`.
    pub events: Vec<String>,
    /// Record only these processes (and their children).
    pub pids: Vec<i32>,
    /// With a command: record the whole system, not just the command.
    pub all: bool,
    pub command: Vec<String>,
    pub duration: Option<Duration>,
    pub buffer_kib: u64,
    /// Ring-buffer sub-buffer ("page") size in KiB; default [`default_subbuf_kib`] where
    /// the kernel allows it.
    pub subbuf_kib: Option<u64>,
    /// Trace clock; default `mono` (lines up with CLOCK_MONOTONIC and maps to wall time).
    pub clock: Option<String>,
    /// `EVENT:EXPR`, EVENT being `system:event`, `event` or `system`.
    pub filters: Vec<String>,
    /// 0 turns the memory snapshots off.
    pub sysinfo_interval_ms: u64,
    pub compression: Compression,
    /// The recorder's own command line, stored in the file.
    pub argv: Vec<String>,
    pub tool: String,
    /// CPU sampling next to the events (`--sample`).
    /// One entry per sampled event (empty: no sampling).
    pub sample: Vec<SampleSpec>,
    /// Where the sampled hardware event is missing, sample cpu-clock instead of failing.
    pub sample_fallback: bool,
    /// The user call chain at every futex() call (`--stacks`), for the callers of
    /// contended locks.
    pub stacks: bool,
    /// Events (specs as in `events`) whose formats go into the recording but which start
    /// off: a watcher turns them on and off while recording ([`Ongoing::set_enabled`]).
    pub standby: Vec<String>,
    /// User stack bytes copied with each sample and chain (`--stack-bytes`; 0: none, the
    /// chains are then the kernel's frame-pointer walk alone). None: each its default,
    /// [`sampler::DEFAULT_STACK_BYTES`] for samples and
    /// [`sampler::DEFAULT_CHAIN_STACK_BYTES`] for `--stacks` chains.
    pub stack_bytes: Option<u32>,
    /// User-lock hold times (`--holds`): uprobes on the C library's mutex lock and
    /// unlock ([`crate::uprobes`]).
    pub holds: bool,
    /// Where the readers put the pages while recording (a watcher reading them as they
    /// come can have them in memory).
    pub pages: Store,
    /// No trace.dat is written at the end: the pages were the watcher's to read and give
    /// back (`kstate watch` without `-o`). No disk is set aside for the file either.
    pub no_output: bool,
}

/// The tracepoint `--stacks` takes call chains at.
pub const STACKS_TRACEPOINT: &str = "syscalls:sys_enter_futex";

impl Options {
    pub fn new(output: PathBuf) -> Options {
        Options {
            output,
            events: vec!["perf".into()],
            pids: Vec::new(),
            all: false,
            command: Vec::new(),
            duration: None,
            buffer_kib: DEFAULT_BUFFER_KIB,
            subbuf_kib: None,
            clock: None,
            filters: Vec::new(),
            sysinfo_interval_ms: 1000,
            compression: Compression::None,
            argv: Vec::new(),
            tool: format!("kstate {}", env!("CARGO_PKG_VERSION")),
            sample: Vec::new(),
            sample_fallback: false,
            stacks: false,
            standby: Vec::new(),
            stack_bytes: None,
            holds: false,
            pages: Store::Disk,
            no_output: false,
        }
    }
}

/// Per CPU, what was recorded.
#[derive(Debug, Clone)]
pub struct CpuSummary {
    pub count: CpuCount,
    pub stats: Option<RingStats>,
}

#[derive(Debug)]
pub struct Summary {
    pub output: PathBuf,
    pub file_bytes: u64,
    pub duration_ns: u64,
    pub clock: String,
    pub buffer_kib: u64,
    pub cpus: Vec<CpuSummary>,
    pub events_enabled: Vec<String>,
    pub missing_events: Vec<String>,
    pub stale_instances_removed: Vec<String>,
    /// Why the recording ended early (a signal, a full disk), if it did.
    pub stopped_by: Option<String>,
    /// Set when the file is complete but shorter than the recording: the disk filled.
    pub disk_full: Option<String>,
    pub workload_status: Option<ExitStatus>,
    /// CPU time of the whole recorder run, setup and file writing included.
    pub recorder_cpu_ns: u64,
    /// CPU time the recorder used while tracing was on (all its threads).
    pub recording_cpu_ns: u64,
    pub sysinfo_snapshots: u64,
    pub spliced: bool,
    /// With `--sample`: what was sampled and how much.
    pub samples: Option<SampleSummary>,
    /// With `--stacks`: the call chains taken.
    pub stacks: Option<SampleSummary>,
}

#[derive(Debug, Clone)]
pub struct SampleSummary {
    /// What was sampled, e.g. `cpu-clock at 999 Hz`.
    pub what: String,
    pub samples: u64,
    /// Records the kernel dropped (PERF_RECORD_LOST).
    pub lost: u64,
    /// Times the kernel throttled sampling (too high a rate).
    pub throttled: u64,
    pub bytes: u64,
    /// Each sampled event's name and samples.
    pub per_event: Vec<(String, u64)>,
    /// The events asked for that were missing, when cpu-clock was sampled instead.
    pub fell_back_from: Option<String>,
}

impl Summary {
    pub fn events(&self) -> u64 {
        self.cpus.iter().map(|c| c.count.events).sum()
    }
    pub fn lost(&self) -> u64 {
        self.cpus.iter().map(|c| c.count.lost).sum()
    }
}

/// Messages for the user while recording (warnings, "recording..."); the CLI prints them.
pub type Notify<'a> = &'a mut dyn FnMut(&str);

/// Records as `opts` asks.
pub fn record(opts: &Options, notify: Notify<'_>) -> Result<Summary> {
    record_watched(opts, notify, &mut Unwatched)
}

/// [`record`], with `watcher` told about the recording while it is made (`kstate watch`):
/// the steps below, in order. Each step owns what it sets up, so an error at any point
/// tears down what exists (the readers before the instance, whose files they hold open;
/// the scratch directory and the unfinished output).
pub fn record_watched(
    opts: &Options,
    notify: Notify<'_>,
    watcher: &mut dyn Watcher,
) -> Result<Summary> {
    let plan = check(opts, notify)?;
    let mut out = prepare(opts, &plan)?;
    let mut live = start(opts, &plan, &out)?;
    let mut end = run(opts, &plan, &out, &mut live, watcher, notify)?;
    let data = stop(&plan, &mut out, &mut live, &mut end, watcher, notify)?;
    assemble(opts, plan, out, live, end, data, notify)
}

/// What `check` found out: the recording can be made, and how.
struct Plan {
    tfs: Tracefs,
    /// Instances of dead recorders that were removed.
    stale: Vec<String>,
    sel: Selection,
    /// `Options::standby` resolved, less the events `sel` enables anyway.
    standby: Vec<(String, String)>,
    clock: String,
    sample_specs: Vec<SampleSpec>,
    /// The hardware events replaced by cpu-clock (`--sample-fallback`).
    fell_back_from: Option<String>,
    kallsyms: Vec<u8>,
    /// Disk set aside for the metadata, should the disk fill.
    reserve_bytes: u64,
    /// `--holds`' probes; dropped (removed) after the instance that enables them.
    uprobes: Option<crate::uprobes::Uprobes>,
}

/// Everything that can be found out before the instance exists: root, the arguments,
/// tracefs, the events and clock this kernel offers, the sampled events this machine
/// has, the free space. Also removes dead recorders' instances and reports their pages.
fn check(opts: &Options, notify: Notify<'_>) -> Result<Plan> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::new(
            "kstate record needs root: it creates a tracefs instance and enables kernel events",
        ));
    }
    if let Some(a) = opts.command.first() {
        if a.is_empty() {
            return Err(Error::new("empty command"));
        }
    }
    check::arguments(opts)?;
    // From here on, Ctrl-C/SIGTERM end the recording through the normal path, so the
    // instance is always removed (a signal during setup gives a near-empty recording).
    signals::install();
    let tfs = Tracefs::open()?;
    let stale = instance::remove_stale(&tfs);
    for s in &stale {
        notify(&format!(
            "removed tracefs instance {s} left by a recorder that no longer runs"
        ));
    }
    // A killed recorder's pages are kept for `kstate recover`, never silently deleted.
    for l in crate::leftovers::find(&opts.output) {
        notify(&format!(
            "recorder {} was killed before it finished {}: what it recorded is in {}; \
             `kstate recover {}` makes a trace.dat of it (or remove the directory)",
            l.pid,
            opts.output.display(),
            l.dir.display(),
            opts.output.display()
        ));
    }

    for g in crate::uprobes::remove_stale(&tfs) {
        notify(&format!(
            "removed uprobes {g} left by a recorder that no longer runs"
        ));
    }
    let uprobes = match opts.holds {
        true => Some(crate::uprobes::Uprobes::create(&tfs)?),
        false => None,
    };
    let mut wanted = opts.events.clone();
    if let Some(u) = &uprobes {
        // New threads, to count each hold in its process (named through its mappings).
        wanted.extend([u.system().to_string(), "task:task_newtask".into()]);
    }
    let mut sel = events::resolve(&tfs.path("events"), &wanted)?;
    only_enableable(&tfs, &mut sel.events)?;
    if !sel.missing.is_empty() {
        notify(&format!(
            "warning: this kernel lacks {}; recording the rest",
            sel.missing.join(", ")
        ));
    }
    let standby = match opts.standby.is_empty() {
        true => Vec::new(),
        false => {
            let mut sb = events::resolve(&tfs.path("events"), &opts.standby)?;
            only_enableable(&tfs, &mut sb.events)?;
            if !sb.missing.is_empty() {
                notify(&format!(
                    "warning: this kernel lacks {}; they cannot be turned on",
                    sb.missing.join(", ")
                ));
            }
            sb.events
                .into_iter()
                .filter(|e| !sel.events.contains(e))
                .collect()
        }
    };
    let clock = choose_clock(&tfs, opts.clock.as_deref())?;
    let (sample_specs, fell_back_from) = sample_specs(opts, notify)?;
    let kallsyms = tracefs::read(Path::new("/proc/kallsyms")).unwrap_or_default();
    // Room for the metadata if the disk fills while recording.
    let reserve_bytes = kallsyms.len() as u64 + (8 << 20);
    // Before any event is enabled: a disk too full to hold even the metadata and a first
    // page per CPU would lose the whole recording.
    let first_pages = system::possible_cpus().len() as u64 * (1 << 20);
    check::free_space(&opts.output, reserve_bytes + first_pages)?;
    Ok(Plan {
        tfs,
        stale,
        sel,
        standby,
        clock,
        sample_specs,
        fell_back_from,
        kallsyms,
        reserve_bytes,
        uprobes,
    })
}

/// The `--sample` events to open, and the hardware events replaced by cpu-clock: a
/// hardware event this machine lacks is refused (or replaced) before any setup.
fn sample_specs(opts: &Options, notify: Notify<'_>) -> Result<(Vec<SampleSpec>, Option<String>)> {
    let mut specs: Vec<SampleSpec> = Vec::new();
    let mut fell_back: Vec<String> = Vec::new();
    for spec in &opts.sample {
        if opts.sample.iter().filter(|s| s.event == spec.event).count() > 1 {
            return Err(Error::new(format!(
                "--sample {} is given more than once",
                spec.event
            )));
        }
        let spec = match sampler::probe(spec) {
            Ok(()) => spec.clone(),
            Err(sampler::OpenError::NoPmu(msg)) if opts.sample_fallback => {
                notify(&format!(
                    "{msg}; sampling cpu-clock instead (--sample-fallback)"
                ));
                fell_back.push(spec.event.clone());
                SampleSpec::default()
            }
            Err(sampler::OpenError::NoPmu(msg)) => return Err(Error::new(msg)),
            Err(sampler::OpenError::Other(e)) => return Err(e),
        };
        if !specs.iter().any(|s| s.event == spec.event) {
            specs.push(spec);
        }
    }
    let fell_back_from = (!fell_back.is_empty()).then(|| fell_back.join(", "));
    Ok((specs, fell_back_from))
}

/// The instance set up (events enabled, tracing off) and the output started. Fields drop
/// in this order on an early return: the reserve, the scratch directory, the unfinished
/// output, `free_buffer`, and last the instance.
struct Output {
    reserve: Option<std::fs::File>,
    scratch: Scratch,
    writer: TraceWriter,
    /// Held open for the recording's life: when the recorder dies, however it dies, the
    /// kernel closes it, which stops the instance's tracing (disable_on_free) and frees
    /// its buffer, so a killed recorder costs the machine nothing until the next one
    /// removes the instance. Older kernels without it keep tracing until then.
    free_buffer: Option<std::fs::File>,
    /// Turns the instance's copy of applications' markers off if the recorder dies.
    marker_guard: Option<crate::instance::MarkerGuard>,
    inst: Instance,
    header_page: Vec<u8>,
    header_event: Vec<u8>,
    layout: PageLayout,
    formats: Vec<EventText>,
    printk: Vec<u8>,
    /// The CPUs the instance has a buffer for.
    cpus: Vec<u32>,
    /// Completions recorded beside a pid filter (see [`Side`]).
    side: Option<Side>,
    /// The `--filter` expressions written, by filter file of the main instance.
    user_filters: BTreeMap<String, String>,
}

/// Events that finish work the traced processes started but run in interrupt context of
/// whatever task is on the CPU then: a block request completes in the disk's interrupt
/// (or softirq) while the process that issued it sleeps. The kernel's pid filter
/// (`set_event_pid`) applies to every event of an instance and drops them, so with `-p`
/// or a command they are recorded in a second instance without it, and its pages are
/// merged into the main ones when the file is written (`merge`). They are not narrowed
/// to the traced processes' requests: an analysis pairs them with the issues it has.
const COMPLETIONS: &[(&str, &str)] = &[
    ("block", "block_rq_complete"),
    ("block", "block_rq_error"),
    ("block", "block_rq_requeue"),
    ("block", "block_bio_complete"),
];

/// Where the side instance's readers write, in the scratch directory (outside `traces/`,
/// which a capture reader takes for the main pages).
const SIDE_DIR: &str = "side";

/// The second instance, for [`COMPLETIONS`]: set up like the main one (clock, buffer and
/// page size, filters) but without the pid filter. Fields drop in this order.
struct Side {
    free_buffer: Option<std::fs::File>,
    inst: Instance,
    events: Vec<(String, String)>,
}

/// The side instance's buffer per CPU: completions are few beside what the main instance
/// records, so a quarter of its buffer (on a machine with many CPUs the buffers add up),
/// but at least four sub-buffers.
fn side_buffer_kib(opts: &Options) -> u64 {
    let subbuf = opts
        .subbuf_kib
        .unwrap_or_else(|| default_subbuf_kib(opts.buffer_kib));
    (opts.buffer_kib / 4).max(4 * subbuf).min(opts.buffer_kib)
}

/// The `events` that go to the side instance: with a pid filter, the completions.
fn side_events(opts: &Options, events: &[(String, String)]) -> Vec<(String, String)> {
    let pid_filtered = !opts.pids.is_empty() || (!opts.command.is_empty() && !opts.all);
    if !pid_filtered {
        return Vec::new();
    }
    events
        .iter()
        .filter(|(s, e)| COMPLETIONS.contains(&(s.as_str(), e.as_str())))
        .cloned()
        .collect()
}

/// Prepares the kernel's copy of what applications write to the top-level `trace_marker`
/// (the one they know, /sys/kernel/tracing/trace_marker) into `inst`, so their markers are
/// in the recording as `print` events; otherwise only writes to the instance's own
/// trace_marker would be. Only the main instance: the side one would record each marker
/// twice. The guard comes first (without it a killed recorder would break markers
/// machine-wide); the copy itself is switched with tracing ([`Instance::start_tracing`]).
/// Kernels without the option (it is recent) record only the instance's own markers.
fn copy_trace_marker(inst: &Instance) -> Option<crate::instance::MarkerGuard> {
    if !inst.path("options/copy_trace_marker").exists() {
        return None;
    }
    inst.guard_trace_marker()
}

/// Creates and sets up the instance, starts the output (an unwritable path fails before
/// anything is traced) and the scratch directory, a capture from the start.
fn prepare(opts: &Options, plan: &Plan) -> Result<Output> {
    let Plan {
        tfs, sel, clock, ..
    } = plan;
    let inst = Instance::create(tfs)?;
    let to_side = side_events(opts, &sel.events);
    // Completions on standby (a watcher may turn them on) are switched in the side
    // instance too.
    let standby_side = side_events(opts, &plan.standby);
    let main_events: Vec<(String, String)> = sel
        .events
        .iter()
        .filter(|e| !to_side.contains(e))
        .cloned()
        .collect();
    let user_filters = setup_instance(&inst, opts, sel, &main_events, opts.buffer_kib, clock)?;
    let marker_guard = copy_trace_marker(&inst);
    let free_buffer = inst.hold_free_buffer();
    // The instance's header_page describes its sub-buffer ("page") size.
    let header_page = inst.read("events/header_page")?;
    let side = match to_side.is_empty() && standby_side.is_empty() {
        true => None,
        false => {
            let side = Instance::create(tfs)?;
            setup_instance(&side, opts, sel, &to_side, side_buffer_kib(opts), clock)?;
            // Its pages are merged into the main ones, so they must be laid out alike.
            if side.read("events/header_page")? != header_page {
                return Err(Error::new(format!(
                    "the instance for completions ({}) has pages unlike the main one's",
                    side.name()
                )));
            }
            Some(Side {
                free_buffer: side.hold_free_buffer(),
                inst: side,
                events: to_side.into_iter().chain(standby_side).collect(),
            })
        }
    };
    let header_event = tracefs::read(&tfs.path("events/header_event"))?;
    let endian = if cfg!(target_endian = "big") {
        Endian::Big
    } else {
        Endian::Little
    };
    let layout = PageLayout::parse(&header_page, endian, None)?;
    let mut cfg = WriterConfig::new(layout.page_size);
    cfg.long_size = std::mem::size_of::<libc::c_long>();
    cfg.compression = opts.compression;
    cfg.clock = Some(clock.clone());
    cfg.uname = system::uname();
    cfg.version = Some(opts.tool.clone());
    let writer = TraceWriter::create(&opts.output, cfg)?;
    let scratch = Scratch::create(&opts.output)?;
    let reserve = match opts.no_output {
        true => None,
        false => assemble::reserve(&scratch.path("reserve"), plan.reserve_bytes),
    };
    let formats = event_formats(tfs, &inst, sel.events.iter().chain(&plan.standby))?;
    let printk = tracefs::read(&tfs.path("printk_formats")).unwrap_or_default();
    // The scratch directory is a capture `kstate info/dump/recover` read as it is, from
    // the start: if the recorder is killed, the pages it moved stay readable.
    scratch.write_capture(&Capture {
        output: &opts.output,
        output_tmp: writer.tmp_path(),
        header_page: &header_page,
        formats: &formats,
        clock,
        kallsyms: &plan.kallsyms,
        printk: &printk,
    })?;
    let cpus: Vec<u32> = system::possible_cpus()
        .into_iter()
        .filter(|c| inst.path(&format!("per_cpu/cpu{c}")).is_dir())
        .collect();
    Ok(Output {
        reserve,
        scratch,
        writer,
        free_buffer,
        marker_guard,
        inst,
        header_page,
        header_event,
        layout,
        formats,
        printk,
        cpus,
        side,
        user_filters,
    })
}

/// What runs beside the kernel while recording. Fields drop in this order on an early
/// return: the samplers, the command waiting at its gate, the sysinfo thread, then the
/// readers (stopped and joined) — all before the instance, whose files they hold open.
struct Live {
    stackers: Option<(sampler::Running, String)>,
    samplers: Option<(sampler::Running, String)>,
    gated: Option<workload::Gated>,
    sysinfo: Option<Sampler>,
    readers: ReaderSet,
    /// The side instance's readers (empty without one), writing `side/cpuN`.
    side_readers: ReaderSet,
    ctl: Arc<Control>,
    /// The pid filter (the `-p` processes' threads, or the command).
    pids: Vec<i32>,
    /// The process table at the start, and the traced tasks found since.
    names: TaskNames,
    user_clock: Option<libc::clockid_t>,
    wall_offset: Option<i64>,
}

/// Starts a reader per CPU, the memory snapshots, the command (stopped at its gate
/// between fork and exec), the pid filter and the samplers; tracing stays off.
fn start(opts: &Options, plan: &Plan, out: &Output) -> Result<Live> {
    let (tfs, inst, scratch, clock) = (&plan.tfs, &out.inst, &out.scratch, &plan.clock);
    let ctl = Control::new()?;
    let mut readers = ReaderSet {
        ctl: Arc::clone(&ctl),
        readers: Vec::new(),
    };
    for &cpu in &out.cpus {
        readers.readers.push(CpuReader::start(
            cpu,
            &inst.path(&format!("per_cpu/cpu{cpu}/trace_pipe_raw")),
            &scratch.path(&format!("{}{cpu}", Scratch::CPU_PREFIX)),
            out.layout.page_size,
            opts.pages,
            Arc::clone(&ctl),
        )?);
    }
    let mut side_readers = ReaderSet {
        ctl: Arc::clone(&ctl),
        readers: Vec::new(),
    };
    if let Some(side) = &out.side {
        std::fs::create_dir_all(scratch.path(SIDE_DIR))
            .map_err(|e| Error::io("creating", &scratch.path(SIDE_DIR), e))?;
        for &cpu in &out.cpus {
            side_readers.readers.push(CpuReader::start(
                cpu,
                &side.inst.path(&format!("per_cpu/cpu{cpu}/trace_pipe_raw")),
                &scratch.path(&format!("{SIDE_DIR}/cpu{cpu}")),
                out.layout.page_size,
                // Without a file at the end nobody reads them (the live analysis reads
                // the main pages).
                match opts.no_output {
                    true => Store::Discard,
                    false => opts.pages,
                },
                Arc::clone(&ctl),
            )?);
        }
    }

    let mut names = TaskNames::new(system::processes());
    let user_clock = system::user_clock(clock);
    let wall_offset = user_clock.map(system::wall_offset);
    let sysinfo = (opts.sysinfo_interval_ms > 0)
        .then(|| {
            Sampler::start(
                &scratch.path("sysinfo"),
                opts.sysinfo_interval_ms,
                user_clock.unwrap_or(libc::CLOCK_MONOTONIC),
                Arc::clone(&ctl),
            )
        })
        .transpose()?;

    // The recorder's own threads (polling, splicing, sampling) stay out of the recording.
    let mut own = workload::threads_of(std::process::id() as i32);
    let mut own_filter = OwnFilter::new(
        tfs,
        plan.sel.events.iter().chain(&plan.standby),
        &out.user_filters,
    );
    own_filter.apply(inst, &own);
    let gated = match opts.command.is_empty() {
        true => None,
        false => Some(workload::spawn_gated(&opts.command)?),
    };
    let mut pids: Vec<i32> = opts
        .pids
        .iter()
        .flat_map(|&p| workload::threads_of(p))
        .collect();
    if let Some(g) = &gated {
        if !opts.all {
            pids.push(g.pid);
        }
    }
    if !pids.is_empty() {
        inst.write("options/event-fork", "1")?;
        let list: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
        inst.write("set_event_pid", &list.join(" "))?;
    }
    // The names are in the capture before the command runs.
    if let Some(g) = &gated {
        names.command(g.pid, &opts.command[0]);
    }
    refresh_names(&mut names, tfs, inst, true);
    names.save(scratch)?;
    let mut live = Live {
        stackers: None,
        samplers: None,
        gated,
        sysinfo,
        readers,
        side_readers,
        ctl,
        pids,
        names,
        user_clock,
        wall_offset,
    };
    // Samplers follow the same processes; their copier thread stays out of the trace.
    let target = match live.pids.is_empty() {
        true => sampler::Target::System,
        false => sampler::Target::Pids(live.pids.clone()),
    };
    if !plan.sample_specs.is_empty() {
        let opened = sampler::Sampler::open(
            &plan.sample_specs,
            opts.stack_bytes.unwrap_or(sampler::DEFAULT_STACK_BYTES),
            &target,
            &out.cpus,
            user_clock,
            clock,
            &scratch.path("samples"),
        );
        let (running, tids, what) = start_sampler(opened, &live.ctl)?;
        own.extend(tids.iter().copied());
        own_filter.apply(inst, &own);
        live.samplers = Some((running, what));
    }
    // --holds names its locks and callers through the mappings these chains carry.
    if opts.stacks || opts.holds {
        let (sys, ev) = STACKS_TRACEPOINT.split_once(':').unwrap_or_default();
        let id = tracefs::read_string(&tfs.path(&format!("events/{sys}/{ev}/id")))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                Error::new(format!(
                    "--stacks: this kernel has no {STACKS_TRACEPOINT} tracepoint"
                ))
            })?;
        let opened = sampler::Sampler::open_tracepoint(
            (STACKS_TRACEPOINT, id),
            opts.stack_bytes
                .unwrap_or(sampler::DEFAULT_CHAIN_STACK_BYTES),
            &target,
            &out.cpus,
            user_clock,
            clock,
            &scratch.path("stacks"),
        );
        let (running, tids, what) = start_sampler(opened, &live.ctl)?;
        own.extend(tids.iter().copied());
        own_filter.apply(inst, &own);
        live.stackers = Some((running, what));
    }
    Ok(live)
}

/// How the traced part went.
struct End {
    /// Trace-clock ns when tracing started (0 where the clock has no user-space twin).
    start_ts: u64,
    started: Instant,
    /// The recorder's CPU time when tracing started.
    cpu_at_start: u64,
    workload_pid: Option<i32>,
    child: Option<Child>,
    workload_status: Option<ExitStatus>,
    /// Why the recording ended early (a signal, the `-p` processes' exit, the watcher),
    /// if it did.
    stopped_by: Option<String>,
    /// The capture as it grows, for the watcher.
    capture: Ongoing,
}

fn now_ns(user_clock: Option<libc::clockid_t>) -> u64 {
    user_clock.map_or(0, system::now_ns)
}

/// Turns tracing on, lets the command run, and waits for the end: the command exits,
/// the duration passes, a signal, every `-p` process exits, a reader fails, or the
/// watcher (told every interval what was traced) says to stop.
fn run(
    opts: &Options,
    plan: &Plan,
    out: &Output,
    live: &mut Live,
    watcher: &mut dyn Watcher,
    notify: Notify<'_>,
) -> Result<End> {
    let inst = &out.inst;
    let cpu_at_start = system::self_cpu_ns();
    inst.start_tracing(out.marker_guard.is_some())?;
    if let Some(side) = &out.side {
        side.inst.start_tracing(false)?;
    }
    for (s, _) in live.samplers.iter().chain(&live.stackers) {
        s.enable();
    }
    let start_ts = now_ns(live.user_clock);
    let capture = Ongoing {
        dir: out.scratch.dir().to_path_buf(),
        instance: inst.dir().to_path_buf(),
        side: out.side.as_ref().map(|s| {
            let evs = s.events.iter().map(|(s, e)| format!("{s}:{e}")).collect();
            (s.inst.dir().to_path_buf(), evs)
        }),
        standby: plan
            .standby
            .iter()
            .map(|(s, e)| format!("{s}:{e}"))
            .collect(),
        cpus: out
            .cpus
            .iter()
            .zip(&live.readers.readers)
            .map(|(&cpu, r)| OngoingCpu {
                cpu,
                path: r.path().to_path_buf(),
                tap: r.tap(),
            })
            .collect(),
        page_size: out.layout.page_size,
        start_ts,
        clock: plan.clock.clone(),
        buffer_kib: opts.buffer_kib,
        pids: live.pids.clone(),
        wall_offset: live.wall_offset,
        processes: live.names.processes(),
        no_output: opts.no_output,
        events: plan
            .sel
            .events
            .iter()
            .map(|(s, e)| format!("{s}:{e}"))
            .collect(),
    };
    let mut end = End {
        start_ts,
        started: Instant::now(),
        cpu_at_start,
        workload_pid: live.gated.as_ref().map(|g| g.pid),
        child: None,
        workload_status: None,
        stopped_by: None,
        capture,
    };
    save_capture(opts, plan, out, live, &end);
    let mut next_refresh = end.started + names::REFRESH_EVERY;
    let mut next_look = end.started + names::LOOK_EVERY;
    let tick_every = watcher.interval();
    if tick_every.is_some() && live.user_clock.is_none() {
        return Err(Error::new(format!(
            "watching needs a trace clock user space can read (mono, boot); {} is not one",
            plan.clock
        )));
    }
    watcher.started(&end.capture)?;
    // Each tick comes just after an interval's end plus the time events may take to be
    // committed, so that its horizon is past the end and the interval is reported (and
    // its alarms act) at that tick, not a whole interval later.
    let mut next_tick = tick_every.map(|d| end.started + d + crate::watch::TICK_LAG);
    let mut flushes = 0u64;
    match live.gated.take() {
        Some(g) => match g.release() {
            Ok(c) => end.child = Some(c),
            Err(e) => {
                live.ctl.stop();
                inst.stop_tracing();
                if let Some(side) = &out.side {
                    side.inst.stop_tracing();
                }
                return Err(e);
            }
        },
        None => notify(&match opts.duration {
            Some(d) => format!("recording for {:.3} s (Ctrl-C stops)", d.as_secs_f64()),
            None => "recording; Ctrl-C stops".to_string(),
        }),
    }

    let mut waiter = EndWaiter::new(end.child.as_ref(), &opts.pids);
    loop {
        if let Some(c) = end.child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                end.workload_status = Some(st);
                break;
            }
        }
        if let Some(sig) = signals::caught() {
            end.stopped_by = Some(format!("stopped by {}", signals::name(sig)));
            if let Some(c) = end.child.as_ref() {
                // Ctrl-C reaches the command through the terminal; SIGTERM does not.
                // SAFETY: kill with a pid we spawned and have not reaped.
                unsafe { libc::kill(c.id() as i32, sig) };
            }
            break;
        }
        if live.ctl.has_failed() {
            break;
        }
        if waiter.traced_gone() {
            let why = "every traced process has exited";
            notify(&format!("{why}; stopping"));
            end.stopped_by = Some(format!("stopped: {why}"));
            break;
        }
        if let (Some(at), Some(every)) = (next_tick, tick_every) {
            if Instant::now() >= at {
                flushes += 1;
                let horizon = end
                    .capture
                    .flush(flushes, now_ns(live.user_clock), &live.ctl);
                if let Flow::Stop(why) = watcher.tick(&end.capture, horizon)? {
                    end.stopped_by = Some(format!("stopped: {why}"));
                    break;
                }
                // Ticks keep to the interval's grid; a late one does not shift the rest.
                next_tick =
                    Some(at + every * ((at.elapsed().as_nanos() / every.as_nanos()) as u32 + 1));
            }
        }
        let now = Instant::now();
        if now >= next_refresh {
            refresh_names(&mut live.names, &plan.tfs, inst, true);
            save_capture(opts, plan, out, live, &end);
            (next_refresh, next_look) = (now + names::REFRESH_EVERY, now + names::LOOK_EVERY);
        } else if now >= next_look {
            if refresh_names(&mut live.names, &plan.tfs, inst, false) {
                // Best effort, as in save_capture.
                let _ = live.names.save(&out.scratch);
            }
            next_look = now + names::LOOK_EVERY;
        }
        // One reading of the clock: two could fall either side of the end.
        let elapsed = end.started.elapsed();
        let left = match opts.duration {
            Some(d) if elapsed >= d => break,
            Some(d) => d - elapsed,
            None => Duration::MAX,
        };
        let left = match next_tick {
            Some(at) => left.min(at.saturating_duration_since(Instant::now())),
            None => left,
        };
        waiter.wait(&live.ctl, left);
    }
    Ok(end)
}

/// Looks the traced tasks up again (see [`crate::names`]), the new ones or `all`: the
/// instance's pid filter and the kernel's saved_cmdlines. Whether anything changed.
fn refresh_names(names: &mut TaskNames, tfs: &Tracefs, inst: &Instance, all: bool) -> bool {
    let traced = inst.read("set_event_pid").unwrap_or_default();
    let saved = tracefs::read(&tfs.path("saved_cmdlines")).unwrap_or_default();
    names.refresh(&traced, saved, all)
}

/// Brings the scratch capture's names and RECORDING section (its stop time being now, the
/// last moment the recorder is known to have recorded) up to date, for `kstate recover`.
/// Best effort: a disk too full for them is the readers' to report.
fn save_capture(opts: &Options, plan: &Plan, out: &Output, live: &Live, end: &End) {
    let _ = live.names.save(&out.scratch);
    let rec = recording(opts, plan, live, end, now_ns(live.user_clock));
    let _ = out
        .scratch
        .replace(sections::CAPTURE_RECORDING, &rec.encode());
}

/// How the recording was made: its RECORDING section, stopped at `stop_ts`.
fn recording(opts: &Options, plan: &Plan, live: &Live, end: &End, stop_ts: u64) -> Recording {
    Recording {
        tool: opts.tool.clone(),
        command: opts.argv.clone(),
        workload: opts.command.clone(),
        hostname: system::hostname(),
        clock: plan.clock.clone(),
        wall_offset_ns: live.wall_offset,
        start_ts: end.start_ts,
        stop_ts,
        buffer_kib_per_cpu: opts.buffer_kib,
        events: plan
            .sel
            .events
            .iter()
            .map(|(s, e)| format!("{s}:{e}"))
            .collect(),
        missing_events: plan.sel.missing.clone(),
        filters: opts.filters.clone(),
        pids: live.pids.clone(),
        sysinfo_interval_ms: opts.sysinfo_interval_ms,
        workload_pid: end.workload_pid,
        cut_short: None,
    }
}

/// What stopping left to assemble.
struct Stopped {
    stop_ts: u64,
    elapsed: Duration,
    outcomes: Vec<crate::reader::CpuOutcome>,
    /// The side instance's, by CPU (empty without one).
    side_outcomes: Vec<crate::reader::CpuOutcome>,
    /// Memory snapshots taken and their scratch file.
    sysinfo: Option<(u64, PathBuf)>,
    samples: Option<(Result<PathBuf>, String)>,
    stacks: Option<(Result<PathBuf>, String)>,
    recording_cpu_ns: u64,
    stats: Vec<Option<RingStats>>,
    saved_cmdlines: Vec<u8>,
    /// Set when a reader found the disk full: the file holds what came before.
    disk_full: Option<String>,
    /// The watcher's own sections for the file.
    sections: Vec<(u16, Vec<u8>)>,
}

/// Turns tracing off, drains every reader and sampler, reads the ring-buffer statistics
/// and the kernel's command names, and removes the instance.
fn stop(
    plan: &Plan,
    out: &mut Output,
    live: &mut Live,
    end: &mut End,
    watcher: &mut dyn Watcher,
    notify: Notify<'_>,
) -> Result<Stopped> {
    out.inst.stop_tracing();
    if let Some(side) = &out.side {
        side.inst.stop_tracing();
    }
    for (s, _) in live.samplers.iter().chain(&live.stackers) {
        s.disable();
    }
    let stop_ts = now_ns(live.user_clock);
    let elapsed = end.started.elapsed();
    live.ctl.stop();

    let outcomes = live.readers.join()?;
    let side_outcomes = live.side_readers.join()?;
    if let Err(e) = watcher.stopped(&end.capture) {
        notify(&format!("warning: {e}"));
    }
    let sections = watcher.sections();
    for o in outcomes.iter().chain(&side_outcomes) {
        assemble::release_preallocation(&o.scratch);
    }
    // Snapshots that could not be written (a full disk) are left out, not half kept.
    let sysinfo = match live.sysinfo.take().map(Sampler::finish) {
        Some(Err(e)) => {
            notify(&format!("warning: memory snapshots left out: {e}"));
            None
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let samples = live.samplers.take().map(|(r, what)| (r.finish(), what));
    let stacks = live.stackers.take().map(|(r, what)| (r.finish(), what));
    let recording_cpu_ns = system::self_cpu_ns() - end.cpu_at_start;
    let stats: Vec<Option<RingStats>> = out
        .cpus
        .iter()
        .map(|&c| {
            out.inst
                .read(&format!("per_cpu/cpu{c}/stats"))
                .ok()
                .and_then(|t| sections::parse_ring_stats(c, &t).ok())
        })
        .collect();
    // The last look at the traced tasks, while the pid filter still lists them.
    refresh_names(&mut live.names, &plan.tfs, &out.inst, true);
    let saved_cmdlines = tracefs::read(&plan.tfs.path("saved_cmdlines")).unwrap_or_default();
    // Every page is read: the kernel may now free the buffer (closing it also stops
    // tracing, which is off already).
    out.free_buffer = None;
    out.inst.remove()?;
    if let Some(mut side) = out.side.take() {
        side.free_buffer = None;
        side.inst.remove()?;
    }
    if let Some(c) = end.child.as_mut() {
        if end.workload_status.is_none() {
            end.workload_status = wait_briefly(c);
        }
    }

    // A reader failure (a full disk) ends the recording; what was written is kept.
    let disk_full = match live.ctl.failure() {
        Some(e) if e.is_disk_full() => Some(e.to_string()),
        Some(e) => return Err(e),
        None => None,
    };
    out.reserve = None;
    let _ = std::fs::remove_file(out.scratch.path("reserve"));
    Ok(Stopped {
        stop_ts,
        elapsed,
        outcomes,
        side_outcomes,
        sysinfo,
        samples,
        stacks,
        recording_cpu_ns,
        stats,
        saved_cmdlines,
        disk_full,
        sections,
    })
}

/// Writes the trace.dat: metadata, each CPU's pages (counted on the way), kstate's own
/// sections; removes the scratch directory; and sums it all up.
fn assemble(
    opts: &Options,
    mut plan: Plan,
    out: Output,
    live: Live,
    end: End,
    data: Stopped,
    notify: Notify<'_>,
) -> Result<Summary> {
    // The instance that enabled them is gone: the probes can go too.
    if let Some(mut u) = plan.uprobes.take() {
        if let Err(e) = u.remove() {
            notify(&format!("warning: removing uprobes {}: {e}", u.system()));
        }
    }
    if opts.no_output {
        return Ok(unwritten(opts, plan, live, end, data));
    }
    let Output {
        mut writer,
        scratch,
        header_page,
        header_event,
        layout,
        formats,
        printk,
        ..
    } = out;
    writer.header_page(&header_page)?;
    writer.header_event(&header_event);
    for (s, _, t) in &formats {
        writer.event_format(s, t);
    }
    writer.kallsyms(&plan.kallsyms);
    writer.printk_formats(&printk);
    writer.cmdlines(&live.names.cmdlines(&data.saved_cmdlines));

    let mut cpu_summaries = Vec::new();
    for (o, st) in data.outcomes.iter().zip(data.stats) {
        let side = data.side_outcomes.iter().find(|s| s.cpu == o.cpu);
        // Merging re-encodes every record: only where the side has some.
        let count = match side.filter(|s| crate::merge::has_records(&s.scratch, &layout)) {
            Some(s) => {
                crate::merge::merge_cpu(&mut writer, o.cpu, &o.scratch, &s.scratch, &layout)?
            }
            None => assemble::copy_cpu(&mut writer, o.cpu, &o.scratch, &layout)?,
        };
        if let Some(s) = side {
            let _ = std::fs::remove_file(&s.scratch);
        }
        let _ = std::fs::remove_file(&o.scratch);
        cpu_summaries.push(CpuSummary { count, stats: st });
    }

    let mut rec = recording(opts, &plan, &live, &end, data.stop_ts);
    // Said in the file too: whoever reads it later learns what it lacks.
    rec.cut_short = data
        .disk_full
        .as_ref()
        .map(|e| format!("the disk filled: {e}"));
    writer.extra_option(sections::ids::RECORDING, &rec.encode())?;
    writer.extra_option(
        sections::ids::PROCESSES,
        &sections::encode_processes(&live.names.processes()),
    )?;
    let mut sysinfo_snapshots = 0;
    if let Some((n, path)) = &data.sysinfo {
        sysinfo_snapshots = *n;
        let bytes = std::fs::read(path).map_err(|e| Error::io("reading", path, e))?;
        writer.extra_option(sections::ids::SYSINFO, &bytes)?;
    }
    let ring: Vec<RingStats> = cpu_summaries
        .iter()
        .filter_map(|c| c.stats.clone())
        .collect();
    writer.extra_option(
        sections::ids::RING_STATS,
        &sections::encode_ring_stats(&ring),
    )?;
    let samples = embed_samples(
        &mut writer,
        sections::ids::SAMPLES,
        data.samples,
        plan.fell_back_from,
        notify,
    )?;
    let stacks = embed_samples(
        &mut writer,
        sections::ids::STACKS,
        data.stacks,
        None,
        notify,
    )?;
    for (id, payload) in &data.sections {
        writer.extra_option(*id, payload)?;
    }
    writer.finish()?;
    drop(scratch);

    let file_bytes = std::fs::metadata(&opts.output)
        .map(|m| m.len())
        .unwrap_or(0);
    let duration_ns = match (live.user_clock, data.stop_ts > end.start_ts) {
        (Some(_), true) => data.stop_ts - end.start_ts,
        _ => data.elapsed.as_nanos() as u64,
    };
    Ok(Summary {
        output: opts.output.clone(),
        file_bytes,
        duration_ns,
        clock: plan.clock,
        buffer_kib: opts.buffer_kib,
        cpus: cpu_summaries,
        events_enabled: rec.events,
        missing_events: plan.sel.missing,
        stale_instances_removed: plan.stale,
        stopped_by: end
            .stopped_by
            .or_else(|| data.disk_full.as_ref().map(|_| "stopped: disk full".into())),
        disk_full: data.disk_full,
        workload_status: end.workload_status,
        recorder_cpu_ns: system::self_cpu_ns(),
        recording_cpu_ns: data.recording_cpu_ns,
        sysinfo_snapshots,
        spliced: data.outcomes.iter().all(|o| o.spliced),
        samples,
        stacks,
    })
}

/// The summary of a recording whose pages went to a watcher and no file
/// ([`Options::no_output`]): the kernel's counts per CPU, no file.
fn unwritten(opts: &Options, plan: Plan, live: Live, end: End, data: Stopped) -> Summary {
    let cpus = data
        .outcomes
        .iter()
        .zip(data.stats)
        .map(|(o, stats)| CpuSummary {
            count: CpuCount {
                cpu: o.cpu,
                lost: stats.as_ref().map_or(0, |s| s.overrun),
                ..CpuCount::default()
            },
            stats,
        })
        .collect();
    let duration_ns = match (live.user_clock, data.stop_ts > end.start_ts) {
        (Some(_), true) => data.stop_ts - end.start_ts,
        _ => data.elapsed.as_nanos() as u64,
    };
    Summary {
        output: opts.output.clone(),
        file_bytes: 0,
        duration_ns,
        clock: plan.clock,
        buffer_kib: opts.buffer_kib,
        cpus,
        events_enabled: plan
            .sel
            .events
            .iter()
            .map(|(s, e)| format!("{s}:{e}"))
            .collect(),
        missing_events: plan.sel.missing,
        stale_instances_removed: plan.stale,
        stopped_by: end
            .stopped_by
            .or_else(|| data.disk_full.as_ref().map(|_| "stopped: disk full".into())),
        disk_full: data.disk_full,
        workload_status: end.workload_status,
        recorder_cpu_ns: system::self_cpu_ns(),
        recording_cpu_ns: data.recording_cpu_ns,
        sysinfo_snapshots: 0,
        spliced: data.outcomes.iter().all(|o| o.spliced),
        samples: None,
        stacks: None,
    }
}

/// Puts a sampler's records into the file as section `id`. A copier that failed (a full
/// disk) leaves the samples out, not half kept.
fn embed_samples(
    writer: &mut TraceWriter,
    id: u16,
    scratch: Option<(Result<PathBuf>, String)>,
    fell_back_from: Option<String>,
    notify: Notify<'_>,
) -> Result<Option<SampleSummary>> {
    let Some((path, what)) = scratch else {
        return Ok(None);
    };
    let data = path.and_then(|p| {
        let d = std::fs::read(&p).map_err(|e| Error::io("reading", &p, e))?;
        let _ = std::fs::remove_file(&p);
        let c = kstate_format::sections::samples::count(&d)?;
        Ok((d, c))
    });
    match data {
        Ok((data, c)) => {
            writer.extra_option(id, &data)?;
            Ok(Some(SampleSummary {
                what,
                samples: c.samples,
                lost: c.lost,
                throttled: c.throttled,
                bytes: c.bytes,
                per_event: c.per_event,
                fell_back_from,
            }))
        }
        Err(e) => {
            let name = sections::section_name(id).unwrap_or("samples");
            notify(&format!("warning: {name} left out: {e}"));
            Ok(None)
        }
    }
}

/// Each recorded event's format as (system, event, text), and ftrace's own events, which
/// are always on: trace markers (`print`), trace_printk (`bprint`, `bputs`); without their
/// formats a reader cannot name or print them.
fn event_formats<'a>(
    tfs: &Tracefs,
    inst: &Instance,
    events: impl Iterator<Item = &'a (String, String)>,
) -> Result<Vec<EventText>> {
    let mut formats: Vec<EventText> = events
        .map(|(s, e)| {
            tracefs::read(&inst.path(&format!("events/{s}/{e}/format")))
                .map(|t| (s.clone(), e.clone(), t))
        })
        .collect::<Result<_>>()?;
    for e in ALWAYS_RECORDED {
        if let Ok(t) = tracefs::read(&tfs.path(&format!("events/ftrace/{e}/format"))) {
            formats.push(("ftrace".to_string(), e.to_string(), t));
        }
    }
    Ok(formats)
}

/// ftrace's own events that are always in a recording: trace markers (`print`) and
/// trace_printk (`bprint`, `bputs`). The kernel writes them unasked; kstate saves their
/// formats in every file (see [`event_formats`]).
const ALWAYS_RECORDED: [&str; 3] = ["print", "bprint", "bputs"];

/// Takes out of `events` those that have no `enable` file, which are not events one
/// enables: ftrace's always-recorded ones are dropped (they come anyway), and the ones
/// the kernel's tracers write (`function`, `funcgraph_*`, `hwlat`, ...) are refused
/// with what they are, instead of failing later on the missing `enable` file.
fn only_enableable(tfs: &Tracefs, events: &mut Vec<(String, String)>) -> Result<()> {
    let enableable = |s: &str, e: &str| tfs.path(&format!("events/{s}/{e}/enable")).exists();
    let always = |s: &str, e: &str| s == "ftrace" && ALWAYS_RECORDED.contains(&e);
    if let Some((s, e)) = events
        .iter()
        .find(|(s, e)| !enableable(s, e) && !always(s, e))
    {
        let tracer = tracer_of(e);
        let instead = match tracer.starts_with("function") {
            true => {
                " (kernels can also refuse the function tracer outright); for a function, \
                 record the tracepoints near it (`kstate record --list-presets`) or a probe \
                 on it (`perf probe FUNC`, then -e probe:FUNC)"
            }
            false => "",
        };
        return Err(Error::bad_argument(format!(
            "-e {s}:{e}: not an event that can be enabled: the kernel's {tracer} tracer \
             (current_tracer) writes it, and kstate records events, not tracers{instead}"
        )));
    }
    let asked = events.first().map(|(s, e)| format!("{s}:{e}"));
    events.retain(|(s, e)| enableable(s, e));
    if let (true, Some(asked)) = (events.is_empty(), asked) {
        return Err(Error::bad_argument(format!(
            "-e {asked}: trace markers (print) and trace_printk (bprint, bputs) are in \
             every recording without asking; name an event to record beside them, e.g. -e sched"
        )));
    }
    Ok(())
}

/// The tracer that writes ftrace's event `e`, for the message about it.
fn tracer_of(e: &str) -> &str {
    match e {
        "function" | "func_repeats" | "kernel_stack" => "function",
        "funcgraph_entry" | "funcgraph_exit" => "function_graph",
        "context_switch" | "wakeup" => "wakeup",
        "mmiotrace_map" | "mmiotrace_rw" => "mmiotrace",
        other => other,
    }
}

/// The requested trace clock, or `mono` when the kernel has it (it maps to wall time and
/// to CLOCK_MONOTONIC in user space), else the kernel's current one.
fn choose_clock(tfs: &Tracefs, want: Option<&str>) -> Result<String> {
    let listing = tracefs::read_string(&tfs.path("trace_clock"))?;
    let names: Vec<&str> = listing
        .split_whitespace()
        .map(|s| s.trim_matches(|c| c == '[' || c == ']'))
        .collect();
    match want {
        Some(w) if names.contains(&w) => Ok(w.to_string()),
        Some(w) => Err(Error::bad_argument(format!(
            "trace clock '{w}' is not offered by this kernel (it has: {})",
            names.join(", ")
        ))),
        None if names.contains(&"mono") => Ok("mono".into()),
        None => {
            Ok(kstate_format::rawdir::selected_clock(&listing).unwrap_or_else(|| "local".into()))
        }
    }
}

/// Sets up an instance for `sel` and enables `enable` (of `sel`'s events) in it, with
/// `buffer_kib` per CPU (its sub-buffers are sized for `opts.buffer_kib` all the same, so
/// that every instance of the recording has the same pages).
fn setup_instance(
    inst: &Instance,
    opts: &Options,
    sel: &Selection,
    enable: &[(String, String)],
    buffer_kib: u64,
    clock: &str,
) -> Result<BTreeMap<String, String>> {
    inst.write("buffer_size_kb", &buffer_kib.to_string())
        .map_err(|e| {
            e.context(format_args!(
                "setting the buffer to {buffer_kib} KiB per CPU"
            ))
        })?;
    inst.write("trace_clock", clock)?;
    match opts.subbuf_kib {
        Some(kib) => inst
            .write("buffer_subbuf_size_kb", &kib.to_string())
            .map_err(|e| e.context(format_args!("setting {kib} KiB sub-buffers")))?,
        // Kernels before 6.8 have only system-page-sized sub-buffers.
        None => {
            let kib = default_subbuf_kib(opts.buffer_kib);
            let _ = inst.write("buffer_subbuf_size_kb", &kib.to_string());
        }
    }
    // Older kernels lack the watermark file; the readers' poll timeout covers them.
    let _ = inst.write("buffer_percent", &BUFFER_PERCENT.to_string());
    let mut written = BTreeMap::new();
    for f in &opts.filters {
        written.extend(apply_filter(inst, sel, f)?);
    }
    for (s, e) in enable {
        inst.write(&format!("events/{s}/{e}/enable"), "1")?;
    }
    Ok(written)
}

/// `EVENT:EXPR` into the kernel's filter file(s); the kernel's own complaint on error.
/// Returns the filter files written, with their expressions.
fn apply_filter(inst: &Instance, sel: &Selection, spec: &str) -> Result<Vec<(String, String)>> {
    let bad = || {
        Error::bad_argument(format!(
            "--filter '{spec}': expected EVENT:EXPR (EVENT is system:event, event or system)"
        ))
    };
    let (head, rest) = spec.split_once(':').ok_or_else(bad)?;
    // system:event:EXPR, or event:EXPR / system:EXPR.
    let targets: Vec<(String, String)> = match rest.split_once(':') {
        Some((ev, expr)) if sel.events.iter().any(|(s, e)| s == head && e == ev) => {
            vec![(head.to_string(), ev.to_string())]
                .into_iter()
                .map(|t| (format!("events/{}/{}/filter", t.0, t.1), expr.to_string()))
                .collect()
        }
        _ => sel
            .events
            .iter()
            .filter(|(s, e)| e == head || s == head)
            .map(|(s, e)| (format!("events/{s}/{e}/filter"), rest.to_string()))
            .collect(),
    };
    if targets.is_empty() {
        return Err(Error::bad_argument(format!(
            "--filter '{spec}': '{head}' is not among the events being recorded"
        )));
    }
    for (file, expr) in &targets {
        if let Err(e) = inst.write(file, expr.trim()) {
            let why = kernel_error(inst, file).unwrap_or_else(|| e.to_string());
            // The expression is the user's: a bad argument (exit 2), as `--help` says.
            return Err(Error::bad_argument(format!(
                "--filter '{spec}': the kernel refused it: {why}"
            )));
        }
    }
    Ok(targets
        .into_iter()
        .map(|(file, expr)| (file, expr.trim().to_string()))
        .collect())
}

/// The kernel's explanation of a refused write: the last entry of the instance's
/// `error_log` (the message, the command and a caret under the problem), or what older
/// kernels leave in the filter file itself.
fn kernel_error(inst: &Instance, file: &str) -> Option<String> {
    let from_log = inst.read("error_log").ok().and_then(|t| {
        let t = String::from_utf8_lossy(&t).into_owned();
        // Each entry starts with "[timestamp] "; keep the last one without it.
        let start = t.rfind("\n[").map_or(0, |i| i + 1);
        let entry = t[start..].trim_end();
        let (_, rest) = entry.split_once("] ")?;
        Some(rest.replacen("error: error: ", "error: ", 1))
    });
    from_log.or_else(|| {
        let t = inst.read(file).ok()?;
        let t = String::from_utf8_lossy(&t).trim().to_string();
        (!t.is_empty() && t != "none").then_some(t)
    })
}

/// The running per-CPU readers. Dropped without [`ReaderSet::join`] (an early error), it
/// stops and joins them.
struct ReaderSet {
    ctl: Arc<Control>,
    readers: Vec<CpuReader>,
}

impl ReaderSet {
    fn join(&mut self) -> Result<Vec<crate::reader::CpuOutcome>> {
        self.ctl.stop();
        std::mem::take(&mut self.readers)
            .into_iter()
            .map(CpuReader::join)
            .collect()
    }
}

impl Drop for ReaderSet {
    fn drop(&mut self) {
        if !self.readers.is_empty() {
            self.ctl.stop();
            for r in self.readers.drain(..) {
                let _ = r.join();
            }
        }
    }
}

/// Samples /proc/meminfo and /proc/vmstat every interval into a scratch file.
struct Sampler {
    handle: std::thread::JoinHandle<Result<(u64, PathBuf)>>,
}

impl Sampler {
    fn start(
        path: &Path,
        interval_ms: u64,
        clock: libc::clockid_t,
        ctl: Arc<Control>,
    ) -> Result<Sampler> {
        let file =
            kstate_format::output::create_new(path).map_err(|e| Error::io("creating", path, e))?;
        let path = path.to_path_buf();
        let handle = std::thread::Builder::new()
            .name("kstate-sysinfo".into())
            .spawn(move || {
                let mut w = SysinfoWriter::new(file);
                let interval = Duration::from_millis(interval_ms);
                let mut next = Instant::now();
                loop {
                    let last = ctl.stopping();
                    // A tick whose /proc text cannot be read or parsed is skipped; the
                    // recording itself must not fail over a memory snapshot.
                    let mem = tracefs::read(Path::new("/proc/meminfo"));
                    let vm = tracefs::read(Path::new("/proc/vmstat"));
                    if let (Ok(mem), Ok(vm)) = (mem, vm) {
                        match w.snapshot(system::now_ns(clock), &mem, &vm) {
                            Err(e) if e.kind() != std::io::ErrorKind::InvalidData => {
                                return Err(Error::io("writing", &path, e))
                            }
                            _ => {}
                        }
                    }
                    if last {
                        let n = w.snapshots();
                        w.into_inner().map_err(|e| Error::io("writing", &path, e))?;
                        return Ok((n, path));
                    }
                    next += interval;
                    // Sleep until the next tick or a stop (the stop eventfd wakes the poll),
                    // which then takes one last snapshot. Waking only for these keeps the
                    // thread out of what is recorded.
                    while Instant::now() < next && !ctl.stopping() {
                        ctl.wait(&[], next.saturating_duration_since(Instant::now()));
                    }
                }
            })
            .map_err(|e| Error::new(format!("starting the sysinfo thread: {e}")))?;
        Ok(Sampler { handle })
    }

    fn finish(self) -> Result<(u64, PathBuf)> {
        self.handle
            .join()
            .map_err(|_| Error::new("the sysinfo thread panicked"))?
    }
}

/// Starts an opened sampler's threads: the running sampler, the threads' ids (to keep
/// out of the trace) and what it samples, for the summary.
fn start_sampler(
    opened: std::result::Result<sampler::Sampler, sampler::OpenError>,
    ctl: &Arc<Control>,
) -> Result<(sampler::Running, Vec<i32>, String)> {
    let s = opened.map_err(|e| match e {
        sampler::OpenError::NoPmu(m) => Error::new(m),
        sampler::OpenError::Other(e) => e,
    })?;
    let what = s.what().to_string();
    s.start(Arc::clone(ctl)).map(|(r, tids)| (r, tids, what))
}

#[cfg(test)]
mod tests {
    use super::default_subbuf_kib;

    #[test]
    fn default_sub_buffers_are_large_but_leave_sixteen_per_buffer() {
        assert_eq!(default_subbuf_kib(super::DEFAULT_BUFFER_KIB), 512);
        assert_eq!(default_subbuf_kib(1 << 20), 512);
        assert_eq!(default_subbuf_kib(4096), 256);
        assert_eq!(default_subbuf_kib(1000), 32);
        assert_eq!(default_subbuf_kib(64), 4);
    }
}
