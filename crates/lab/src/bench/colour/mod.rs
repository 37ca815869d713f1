//! `kstate bench colour`: seed 001's cache-colouring study in user space. P worker threads
//! each walk one shared list of N structures laid `stride` bytes apart (the shape of the
//! 2.4 scheduler scanning the run queue's task_structs, each in an 8 KiB kernel stack),
//! reading a few hot fields at the same in-page offsets; the structures are uncoloured
//! (c = 1) or shifted by one of c multiples of the line size. Per (P, c): median ns per
//! structure visited and the speed-up over c = 1, beside the model's threshold
//! `c >= p / (s / stride)` for the chosen cache level, read from sysfs. The misses behind
//! it come from a set-associative simulation of the walk's own addresses with the host's
//! geometry (this machine has no PMU to count them).

pub mod layout;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use crate::Error;
use kstate_cachesim::sim::Hierarchy;
use kstate_cachesim::{model, Geometry, Level};
use serde_json::{json, Value};

use layout::{Layout, Region};

const AFTER_HELP: &str = "\
Each worker follows the ring of structures in a fixed pseudo-random order (dependent
loads: no prefetcher helps), reading the hot fields of each; ns/visit is a worker's CPU
time per structure (its thread's own clock, so time spent off the CPU on a loaded machine
is not counted), averaged over the workers of a run, median of --runs runs; the colour
counts are interleaved within each run. on-CPU is CPU time over wall time, the lowest of
a cell's runs' workers: a cell marked '!' had a worker off the CPU for more than a tenth
of its walk, and other programs' use of the shared caches meanwhile may have cost it.
The memory is a 2 MiB-aligned mapping advised to use huge pages: when the kernel grants
them, virtual addresses give the guest-physical set index below 2 MiB (in a virtual
machine the host may still back them with 4 KiB pages, which no guest can see); with
4 KiB pages the bits above 4 KiB come from scattered physical pages and the real
conflicts are weaker than the model's (the header says which).

The simulated columns replay one pass of the walk's addresses (after a warm-up pass)
through the host's data caches as LRU set-associative caches, each level fed by the
misses of the one before: misses per visit and the sets of each level the hot fields
touch. They are deterministic; the timings are not.

Examples:
  kstate bench colour
  kstate bench colour --workers 1,2 --colours 1,2,4,8 --chart colour.svg
  kstate bench colour --nodes 2048 --stride 16384 --level 2 --json";

#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// Workers walking the list at the same time (threads); a list sweeps
    #[arg(short = 'p', long, value_delimiter = ',', default_value = "1,2",
          value_parser = kstate_args::int::<usize>(1..=1024))]
    workers: Vec<usize>,
    /// Structures in the list (the seed's p processes); default: as many as make the hot
    /// fields fill half the target level when spread (a power of two, at least 4 times
    /// what one colour holds), so the coloured walk fits and the uncoloured one cannot
    #[arg(short = 'n', long, value_parser = kstate_args::int::<u64>(1..=1 << 20))]
    nodes: Option<u64>,
    /// Bytes from one structure to the next (a multiple of 4096; the seed's 8 KiB stack)
    #[arg(long, default_value_t = 8192, value_parser = kstate_args::int::<u64>(4096..=1 << 24))]
    stride: u64,
    /// Hot fields per structure (the first links to the next structure)
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<u64>(1..=16))]
    fields: u64,
    /// Colour counts to measure, 1 being no colouring; default 1, 2, ... past twice the
    /// model's threshold
    #[arg(short = 'c', long, value_delimiter = ',', value_parser = kstate_args::int::<u64>(1..=4096))]
    colours: Vec<u64>,
    /// Runs of each (workers, colours) cell; the median is reported
    #[arg(long, default_value_t = 7, value_parser = kstate_args::int::<u32>(crate::bench::RUNS))]
    runs: u32,
    /// Passes over the list per worker and run (default: about 20 ms of walking)
    #[arg(long, value_parser = kstate_args::int::<u64>(1..=1_000_000))]
    passes: Option<u64>,
    /// The cache level the model and the defaults target
    #[arg(long, default_value_t = 2, value_parser = kstate_args::int::<u32>(1..=4))]
    level: u32,
    /// The sysfs root the cache geometry is read from (ROOT/devices/system/cpu/cpu0/cache)
    #[arg(long, value_name = "ROOT", default_value = "/sys")]
    sysfs: PathBuf,
    /// Only the simulation and the model: no timed walks
    #[arg(long)]
    simulate_only: bool,
    /// Write the chart of speed-up against colours here (.svg or .png)
    #[arg(long, value_name = "FILE")]
    chart: Option<PathBuf>,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

/// The most memory the walked structures may take (the machine is shared).
const MAX_REGION: u64 = 256 << 20;

fn bad(msg: impl Into<String>) -> Error {
    Error::usage(msg)
}

/// One colour count's simulated pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulated {
    pub colours: u64,
    /// Per level: (misses, sets the walk's lines touched).
    pub levels: Vec<(u64, u64)>,
}

/// Replays one pass of `l`'s walk at `base` through `levels` (after a warm-up pass).
pub fn simulate(l: &Layout, base: u64, levels: &[Level]) -> Simulated {
    let mut h = Hierarchy::new(levels);
    for a in l.pass_addresses() {
        h.access(base + a);
    }
    h.reset_counts();
    for a in l.pass_addresses() {
        h.access(base + a);
    }
    Simulated {
        colours: l.colours,
        levels: h
            .levels
            .iter()
            .map(|c| (c.misses, c.sets_touched()))
            .collect(),
    }
}

/// The calling thread's CPU time, ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to fill; it cannot fail for this thread.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// A hardware counter of the calling thread's last-level cache misses (user space only),
/// counting from its opening; None where the machine has no PMU (`pmu()` says why).
struct MissCounter(std::os::fd::OwnedFd);

/// perf_event_open's flag for a close-on-exec descriptor (uapi perf_event.h).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

impl MissCounter {
    fn open() -> Option<MissCounter> {
        use std::os::fd::FromRawFd;
        // perf_event_attr, version 5 (112 bytes): type HARDWARE (0), config
        // PERF_COUNT_HW_CACHE_MISSES (3), flags exclude_kernel (bit 5) | exclude_hv (bit 6).
        let mut attr = [0u8; 112];
        attr[4..8].copy_from_slice(&112u32.to_ne_bytes());
        attr[8..16].copy_from_slice(&3u64.to_ne_bytes());
        attr[40..48].copy_from_slice(&((1u64 << 5) | (1u64 << 6)).to_ne_bytes());
        // SAFETY: a valid attr of the size it states; this thread, any CPU, no group.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        // SAFETY: a descriptor the kernel just returned, owned from here on.
        (fd >= 0).then(|| MissCounter(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }))
    }

    fn read(&self) -> Option<u64> {
        use std::os::fd::AsRawFd;
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into v from a counting event's descriptor.
        let n = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        (n == 8).then_some(v)
    }
}

/// One timed run's result.
#[derive(Debug, Clone, Copy)]
struct Timed {
    /// CPU ns per visit, averaged over the workers.
    ns: f64,
    /// The lowest worker's CPU time over its wall time.
    on_cpu: f64,
    /// Counted cache misses per visit, averaged over the workers (with a PMU).
    misses: Option<f64>,
}

/// One timed run: `workers` threads each walk `passes` laps, timed by their own CPU
/// clocks: a loaded machine's other threads then cost a worker only what they do to the
/// caches, not the time it waits for a CPU (wall time had 0.375 s of CPU in 2.7 s).
fn timed_run(head: *const u8, l: &Layout, workers: usize, passes: u64, count: bool) -> Timed {
    let visits = passes * l.nodes;
    let barrier = Arc::new(Barrier::new(workers));
    let head = head as usize;
    let (fields, spacing, nodes) = (l.fields, l.spacing, l.nodes);
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let b = Arc::clone(&barrier);
            std::thread::spawn(move || {
                // SAFETY: head came from Region::link with this layout; the region
                // outlives the threads (joined below) and nobody writes it meanwhile.
                unsafe { layout::walk(head as *const u8, fields, spacing, nodes) };
                let counter = count.then(MissCounter::open).flatten();
                b.wait();
                let before = counter.as_ref().and_then(MissCounter::read);
                let (t, cpu) = (Instant::now(), thread_cpu_ns());
                // SAFETY: as above.
                std::hint::black_box(unsafe {
                    layout::walk(head as *const u8, fields, spacing, visits)
                });
                let cpu = thread_cpu_ns().saturating_sub(cpu) as f64;
                let wall = t.elapsed().as_nanos() as f64;
                let after = counter.as_ref().and_then(MissCounter::read);
                let misses = before
                    .zip(after)
                    .map(|(b, a)| a.saturating_sub(b) as f64 / visits as f64);
                (
                    cpu / visits as f64,
                    if wall > 0.0 { cpu / wall } else { 1.0 },
                    misses,
                )
            })
        })
        .collect();
    let got: Vec<(f64, f64, Option<f64>)> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or((0.0, 0.0, None)))
        .collect();
    let counted: Option<Vec<f64>> = got.iter().map(|g| g.2).collect();
    Timed {
        ns: got.iter().map(|g| g.0).sum::<f64>() / got.len().max(1) as f64,
        on_cpu: got.iter().map(|g| g.1).fold(f64::INFINITY, f64::min),
        misses: counted.map(|m| m.iter().sum::<f64>() / m.len().max(1) as f64),
    }
}

/// Below this share of its wall time on a CPU, a cell's worker is flagged.
const ON_CPU_FLAG: f64 = 0.9;

/// The default structure count: the largest power of two whose hot lines fill at most
/// half the target level when spread over its sets, so that the coloured walk fits and
/// the uncoloured one (`fit` structures per colour) cannot; at least 4 x `fit` (512 here
/// filled 1/16 of the 1 MiB L2 and the L3 hid the conflicts); the memory capped.
fn default_nodes(target: &Level, stride: u64, fields: u64, fit: u64) -> u64 {
    let half = target.size / 2 / (fields * target.line).max(1);
    let pow2 = if half == 0 {
        1
    } else {
        1 << (63 - half.leading_zeros())
    };
    pow2.max(4 * fit).min(MAX_REGION / stride).max(1)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Whether perf can count cache misses here, and if not why.
fn pmu() -> Result<(), String> {
    use kstate_record::sampler::{parse_spec, probe, OpenError};
    let spec = parse_spec("cache-misses")?;
    match probe(&spec) {
        Ok(()) => Ok(()),
        Err(OpenError::NoPmu(m)) => Err(m),
        Err(OpenError::Other(e)) => Err(e.to_string()),
    }
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let geo = Geometry::read(&a.sysfs)?;
    let target = geo.require(a.level)?;
    let fit = model::fit_per_colour(&target, a.stride);
    let nodes = a
        .nodes
        .unwrap_or_else(|| default_nodes(&target, a.stride, a.fields, fit));
    let threshold = model::threshold(nodes, &target, a.stride);
    if nodes.saturating_mul(a.stride) > MAX_REGION {
        return Err(bad(format!(
            "{nodes} structures {} bytes apart need {} MiB: at most {} MiB (fewer --nodes or a smaller --stride)",
            a.stride,
            nodes.saturating_mul(a.stride) >> 20,
            MAX_REGION >> 20
        )));
    }
    let base_layout = Layout::new(nodes, a.stride, a.fields, target.line, target.way_size(), 1)?;
    let colours: Vec<u64> = if a.colours.is_empty() {
        let top = (2 * threshold).min(base_layout.max_colours());
        let mut v: Vec<u64> = (1..=top.min(8)).collect();
        let mut c = 8;
        while c < top {
            c = (c * 2).min(top);
            v.push(c);
        }
        v
    } else {
        let mut v = a.colours.clone();
        if !v.contains(&1) {
            v.insert(0, 1);
        }
        v.sort_unstable();
        v.dedup();
        v
    };
    let layouts: Vec<Layout> = colours
        .iter()
        .map(|&c| Layout::new(nodes, a.stride, a.fields, target.line, target.way_size(), c))
        .collect::<Result<_, _>>()?;
    let mut region = Region::new(base_layout.bytes() as usize)?;
    // The pages exist once written.
    region.link(&base_layout);
    let huge = region.huge_bytes();
    let sims: Vec<Simulated> = layouts
        .iter()
        .map(|l| simulate(l, region.base(), &geo.levels))
        .collect();
    let pmu = pmu();

    // Timed walks: every run measures every cell, the colourings interleaved.
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); colours.len()]; a.workers.len()];
    let mut on_cpu: Vec<Vec<f64>> = vec![vec![f64::INFINITY; colours.len()]; a.workers.len()];
    // Counted misses per visit (median over runs), where the PMU counts them.
    let mut counted: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); colours.len()]; a.workers.len()];
    let mut passes = a.passes.unwrap_or(1);
    if !a.simulate_only {
        if a.passes.is_none() {
            let head = region.link(&layouts[0]);
            let ns = timed_run(head, &layouts[0], 1, 3, false).ns;
            passes = ((20e6 / (ns * nodes as f64)) as u64).clamp(3, 100_000);
        }
        for _ in 0..a.runs {
            for (ci, l) in layouts.iter().enumerate() {
                let head = region.link(l);
                for (wi, &w) in a.workers.iter().enumerate() {
                    let t = timed_run(head, l, w, passes, pmu.is_ok());
                    times[wi][ci].push(t.ns);
                    counted[wi][ci].extend(t.misses);
                    on_cpu[wi][ci] = on_cpu[wi][ci].min(t.on_cpu);
                }
            }
        }
    }
    let med: Vec<Vec<f64>> = times
        .iter_mut()
        .map(|row| row.iter_mut().map(|v| median(v)).collect())
        .collect();
    let misses: Vec<Vec<Option<f64>>> = counted
        .iter_mut()
        .map(|row| {
            row.iter_mut()
                .map(|v| (!v.is_empty()).then(|| median(v)))
                .collect()
        })
        .collect();
    let ti = geo
        .levels
        .iter()
        .position(|l| l.level == target.level)
        .unwrap_or(0);
    let visits = nodes as f64;

    if let Some(path) = &a.chart {
        let chart = kstate_render::colour::ColourChart {
            title: format!(
                "cache colouring: {nodes} structures {} B apart, L{} model threshold c >= {threshold}",
                a.stride, target.level
            ),
            speedups: if a.simulate_only {
                Vec::new()
            } else {
                a.workers
                    .iter()
                    .enumerate()
                    .map(|(wi, w)| {
                        (
                            format!("{w} worker{}", if *w == 1 { "" } else { "s" }),
                            colours
                                .iter()
                                .enumerate()
                                .map(|(ci, &c)| (c as f64, med[wi][0] / med[wi][ci]))
                                .collect(),
                        )
                    })
                    .collect()
            },
            misses: vec![(
                format!("L{} misses/visit (simulated)", target.level),
                sims.iter()
                    .map(|s| (s.colours as f64, s.levels[ti].0 as f64 / visits))
                    .collect(),
            )],
            threshold: threshold as f64,
        };
        kstate_render::rundir::write_chart(&kstate_render::colour::plot(&chart), path)?;
    }

    if a.json {
        let v = json!({
            "geometry": geo.levels.iter().map(|l| json!({
                "level": l.level, "size": l.size, "ways": l.ways, "line": l.line, "sets": l.sets,
            })).collect::<Vec<_>>(),
            "sysfs": geo.source.display().to_string(),
            "nodes": nodes, "stride": a.stride, "fields": a.fields, "field_spacing": base_layout.spacing,
            "region_bytes": base_layout.bytes(), "huge_page_bytes": huge,
            "model": {
                "level": target.level, "fit_per_colour": fit, "threshold": threshold,
                "seed_formula": model::seed_formula(nodes, &target, a.stride),
            },
            "pmu": match &pmu { Ok(()) => Value::Null, Err(m) => json!({"available": false, "why": m}) },
            "passes": passes, "runs": a.runs, "timed": !a.simulate_only,
            "cells": a.workers.iter().enumerate().flat_map(|(wi, &w)| {
                let (times, med, on_cpu, misses) = (&times, &med, &on_cpu, &misses);
                colours.iter().enumerate().map(move |(ci, &c)| json!({
                    "workers": w, "colours": c,
                    "ns_per_visit": med[wi][ci].is_finite().then_some(med[wi][ci]),
                    "runs_ns_per_visit": times[wi][ci],
                    "on_cpu": on_cpu[wi][ci].is_finite().then_some(on_cpu[wi][ci]),
                    "counted_misses_per_visit": misses[wi][ci],
                    "contended": on_cpu[wi][ci] < ON_CPU_FLAG,
                    "speedup": (med[wi][0] / med[wi][ci]).is_finite().then_some(med[wi][0] / med[wi][ci]),
                    "at_or_above_threshold": c >= threshold,
                }))
            }).collect::<Vec<_>>(),
            "simulated": sims.iter().map(|s| json!({
                "colours": s.colours,
                "levels": geo.levels.iter().zip(&s.levels).map(|(l, (m, sets))| json!({
                    "level": l.level, "misses": m, "misses_per_visit": *m as f64 / visits,
                    "sets_touched": sets,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }

    println!(
        "cache colouring (seed 001): {nodes} structures {} B apart, {} hot field{} {} B apart, walked in a fixed random order",
        a.stride,
        a.fields,
        if a.fields == 1 { "" } else { "s" },
        base_layout.spacing
    );
    println!("caches ({}):", geo.source.display());
    for l in &geo.levels {
        println!("  {}", l.describe());
    }
    let bytes = base_layout.bytes();
    println!(
        "memory: {} MiB; {}",
        bytes >> 20,
        match huge {
            Some(h) if h >= bytes => "all in huge pages as this kernel sees them (the simulated set indices are the \
                 guest-physical ones below 2 MiB; a hypervisor may still back them with 4 KiB pages)".to_string(),
            Some(h) => format!(
                "{} MiB of it in huge pages; the rest in 4 KiB pages, whose set bits above 4 KiB come from scattered physical pages (real conflicts weaker than the model's)",
                h >> 20
            ),
            None => "huge pages unknown (no /proc/self/smaps)".into(),
        }
    );
    println!(
        "model (L{}): one colour keeps {fit} structures' hot field ({} ways x {} sets the stride reaches); \
         threshold c >= ceil({nodes} / {fit}) = {threshold} (seed's p / (s / stride) = {:.2})",
        target.level,
        target.ways,
        fit / target.ways,
        model::seed_formula(nodes, &target, a.stride)
    );
    match &pmu {
        Ok(()) => println!(
            "hardware counters: cache misses COUNTED per worker (user space) in the timed table; the misses after it are SIMULATED"
        ),
        Err(m) => println!(
            "hardware counters: NONE ({m}); the misses below are SIMULATED, not counted"
        ),
    }
    if !a.simulate_only {
        println!(
            "\ntimed (thread CPU time): median of {} runs, {passes} passes of {nodes} visits per worker and run",
            a.runs
        );
        println!(
            "{:>8} {:>8} {:>10} {:>9} {:>7} {:>12}  model",
            "workers", "colours", "ns/visit", "speed-up", "on-CPU", "misses/visit"
        );
        for (wi, &w) in a.workers.iter().enumerate() {
            for (ci, &c) in colours.iter().enumerate() {
                let busy = on_cpu[wi][ci];
                println!(
                    "{w:>8} {:>8} {:>10.2} {:>9.3} {:>6.0}%{} {:>12}  {}",
                    if c == 1 {
                        "1 (off)".to_string()
                    } else {
                        c.to_string()
                    },
                    med[wi][ci],
                    med[wi][0] / med[wi][ci],
                    busy * 100.0,
                    if busy < ON_CPU_FLAG { "!" } else { " " },
                    misses[wi][ci].map_or("-".to_string(), |m| format!("{m:.3}")),
                    if c >= threshold {
                        "c >= threshold"
                    } else {
                        "below"
                    }
                );
            }
        }
    }
    if !a.simulate_only && on_cpu.iter().flatten().any(|&b| b < ON_CPU_FLAG) {
        println!(
            "! a worker was off the CPU for more than {:.0} % of its walk (the machine is busy): \
             its CPU time excludes the wait, not what other programs did to the caches",
            (1.0 - ON_CPU_FLAG) * 100.0
        );
    }
    println!("\nsimulated (one pass after a warm-up; per visit = per structure):");
    print!("{:>8}", "colours");
    for l in &geo.levels {
        print!(" {:>12} {:>8}", format!("L{} miss/vis", l.level), "sets");
    }
    println!();
    for s in &sims {
        print!("{:>8}", s.colours);
        for (m, sets) in &s.levels {
            print!(" {:>12.3} {:>8}", *m as f64 / visits, sets);
        }
        println!();
    }
    if let Some(p) = &a.chart {
        println!("\nchart: {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_fall_until_the_threshold_then_stay() {
        // The seed's 512 KB 4-way L2 with 32 B lines and 8 KB stacks, 1,024 processes:
        // the model's threshold is 16 colours. Below it every set the hot fields use
        // holds more lines than it has ways, and the LRU cycle misses every time.
        let l2 = Level::new(2, 512 << 10, 4, 32).unwrap();
        let run = |c| {
            let l = Layout::new(1024, 8192, 3, 32, l2.way_size(), c).unwrap();
            simulate(&l, 0, &[l2])
        };
        let visits = 1024 * 3;
        let got: Vec<(u64, u64)> = [1, 2, 4, 8, 15, 16, 24, 32]
            .iter()
            .map(|&c| run(c).levels[0])
            .collect();
        // No colouring: each field's 1,024 lines in 16 sets (128 KB ways / 8 KB), all miss.
        assert_eq!(got[0], (visits, 3 * 16));
        for w in got.windows(2) {
            assert!(w[1].0 <= w[0].0, "misses rose with colours: {got:?}");
        }
        assert_eq!(
            got[3].0, visits,
            "8 colours: 8 lines per 4-way set: {got:?}"
        );
        // 15 colours: the 64 runs of 16 structures get colours 0..14 in turn, so 4 colours
        // have 5 runs (5 lines per set: all miss) and 11 have 4 (they fit).
        assert_eq!(got[4].0, 4 * 16 * 3 * 5, "{got:?}");
        assert_eq!(got[5], (0, 3 * 16 * 16), "16 colours fit: {got:?}");
        assert_eq!((got[6].0, got[7].0), (0, 0));
        assert_eq!(model::threshold(1024, &l2, 8192), 16);
    }
}
