//! `perf.data` files recorded with tracepoint events (`perf record -e 'sched:*' ...`).
//!
//! The header, attributes and feature sections are parsed with the `linux-perf-data` crate.
//! The event formats come from perf's TRACING_DATA feature section, which holds the same
//! header_page / formats / kallsyms / printk / cmdlines blocks as the start of a trace.dat
//! v6, and is read by the same code. Each sample's raw tracepoint payload is the record the
//! kernel's ring buffer would have held. The time-ordered merge of the analyses takes each
//! CPU's payloads in place from the file (`direct`, over the stretches the scan at
//! open found); a reader that needs pages (`convert`, page indexes) gets them packed from
//! the samples as it asks (`page_builder`, `stream`). Either way nothing is copied to
//! disk, and memory is bounded by a window (and a page) per CPU. perf's lost-event records
//! become losses on the CPU they name. Compressed records (`perf record -z`) are read
//! through pages only.
//!
//! Where one CPU's records are not in time order in the file, the crate's sorting reader
//! is used instead and the pages go to unnamed temporary files (`built_pages`) for the life of
//! the `Trace`.

pub mod decode;
pub(crate) mod direct;
pub mod file;
pub(crate) mod records;
pub(crate) mod reorder;
pub mod scan;
pub(crate) mod stream;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use linux_perf_data::linux_perf_event_reader::{EventRecord, RecordType};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

use crate::built_pages::{CpuStream, SpooledPages};
use crate::bytes::{Endian, Reader};
use crate::error::{Error, ErrorKind, Result};
use crate::layout::PageLayout;
use crate::perf::file::{feature, PerfFile};
use crate::perf::stream::{ById, Layouts, PerfPages, SampleLayout};
use crate::trace::{Container, CpuData, DataLoc, Trace};
use crate::tracedat::meta::Meta;

pub use crate::perf::file::MAGIC;

/// Set (to anything) in the environment, a perf.data's events are read through the pages
/// built from them, as before the direct decoder (`direct`), instead of straight; set
/// to `sorted`, through the sorting reader's spooled pages, as for a file whose records are
/// far out of time order. Both older paths stay selectable for comparing them with the
/// direct one (tests, `bench analyze`).
pub const PAGES_ENV: &str = "KSTATE_PERF_PAGES";

/// Page size of the synthesized pages (perf records no ring-buffer pages of its own).
const PAGE_SIZE: usize = 4096;

pub fn open(path: &Path) -> Result<Trace> {
    let pf = PerfFile::open(path)?;
    let trace = match pf.feature(feature::TRACING_DATA) {
        None => samples_only(pf),
        Some(_) => with_tracepoints(pf),
    };
    trace.map_err(|e| e.in_file(path))
}

/// What the feature sections say about the recording machine and tool.
fn fill_meta(meta: &mut Meta, pf: &PerfFile) {
    meta.uname = match (
        pf.string(feature::HOSTNAME),
        pf.string(feature::OSRELEASE),
        pf.string(feature::ARCH),
    ) {
        (Some(h), Some(r), Some(a)) => Some(format!("Linux {h} {r} {a}")),
        _ => None,
    };
    meta.tool_version = pf.string(feature::VERSION).map(|v| format!("perf {v}"));
    // perf's sample time is the kernel's perf clock (local_clock) in ns.
    meta.clock = Some(pf.events[0].clock.clone());
}

/// A perf.data of samples without tracepoints (`perf record -g`, `-e cpu-clock`): no
/// pages; its records are read by `kstate profile`, `info` and `dump` through `Trace::perf`.
fn samples_only(pf: PerfFile) -> Result<Trace> {
    let mut meta = Meta::new(Endian::Little, 8, PAGE_SIZE);
    fill_meta(&mut meta, &pf);
    let cpus = pf.nr_cpus().map_or(0, |n| n.0).min(crate::trace::MAX_CPUS);
    let path = pf.path.clone();
    let mut trace = meta.finish(
        &path,
        Container::PerfData,
        cpus,
        Vec::new(),
        pf.truncated.clone(),
    );
    trace.perf = Some(Arc::new(pf));
    Ok(trace)
}

fn with_tracepoints(mut pf: PerfFile) -> Result<Trace> {
    let path = pf.path.clone();
    let mut meta = tracing_data(pf.feature(feature::TRACING_DATA).unwrap_or_default())?;
    fill_meta(&mut meta, &pf);
    let nr_cpus = pf.nr_cpus().map(|n| n.0);
    let layout = PageLayout::default_for(meta.endian, meta.long_size, PAGE_SIZE);
    let cpu_limit = nr_cpus.unwrap_or(crate::trace::MAX_CPUS);
    let mut in_order = None;
    if let Some(layouts) = layouts_of(&pf) {
        let scan = scan::scan(&path, pf.data, &layouts, cpu_limit)?;
        let sort = std::env::var_os(PAGES_ENV).is_some_and(|v| v == "sorted");
        if scan.in_order && !sort {
            in_order = Some((layouts, scan));
        }
    }
    let mut trace = match in_order {
        Some((layouts, scan)) => {
            let src = Arc::new(PerfPages {
                path: path.clone(),
                data: pf.data,
                layouts,
                layout,
                places: scan
                    .places
                    .filter(|_| std::env::var_os(PAGES_ENV).is_none()),
                stretches: scan.stretches,
            });
            let cpu_data: Vec<CpuData> = scan
                .cpus
                .iter()
                .map(|&(cpu, bytes)| CpuData {
                    cpu,
                    file_bytes: bytes,
                    loc: DataLoc::Built(src.clone()),
                })
                .collect();
            let max_cpu = cpu_data.last().map_or(0, |c| c.cpu + 1);
            let header_cpus = nr_cpus.unwrap_or(max_cpu).max(max_cpu);
            let mut trace = meta.finish(
                &path,
                Container::PerfData,
                header_cpus,
                cpu_data,
                pf.truncated.clone(),
            );
            trace.layout = layout;
            trace.comms.extend(scan.comms);
            trace
        }
        None if pf.pipe || pf.truncated.is_some() => {
            return Err(Error::unsupported(
                None,
                "perf.data: one CPU's records are out of time order, which kstate sorts only in a whole perf.data written to a file (not a pipe-mode or cut one)",
            ));
        }
        None => {
            check_sections(&path)?;
            // The parsing crate is not hardened against every malformed file; a panic in
            // it must still come out as an error naming the file.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                sorted(&path, meta, layout, nr_cpus, cpu_limit)
            })) {
                Ok(r) => r?,
                Err(_) => {
                    return Err(Error::corrupt(
                        0,
                        "perf.data: malformed records (the parser gave up)",
                    ))
                }
            }
        }
    };
    pf.name_tracepoints(|id| {
        trace
            .events
            .get(id as u32)
            .filter(|_| id <= u16::MAX as u64)
            .map(|e| format!("{}:{}", e.system, e.name))
    });
    trace.perf = Some(Arc::new(pf));
    Ok(trace)
}

/// Checks that the header's sections and the feature-section table lie inside the file
/// before the parsing crate allocates buffers of the sizes they claim.
fn check_sections(path: &Path) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut h = [0u8; 104];
    f.read_exact(&mut h)
        .map_err(|_| Error::truncated(0, "perf.data: file shorter than its 104-byte header"))?;
    let u = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    let inside = |off: u64, size: u64, what: &str, at: u64| -> Result<()> {
        match off.checked_add(size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(Error::truncated(
                at,
                format!("perf.data: {what} section ({size} bytes at offset {off}) runs past the end of the {len}-byte file"),
            )),
        }
    };
    if u(8) < 104 || u(8) > len {
        return Err(Error::corrupt(
            8,
            format!("perf.data: header size {} is implausible", u(8)),
        ));
    }
    // The parsing crate divides the attributes section by the attribute size (no
    // perf_event_attr was ever under 64 bytes, plus 16 for its ids section).
    if u(16) < 80 {
        return Err(Error::corrupt(
            16,
            format!("perf.data: attribute size {} is implausible", u(16)),
        ));
    }
    inside(u(24), u(32), "attributes", 24)?;
    inside(u(56), u(64), "event types", 56)?;
    inside(u(40), u(48), "data", 40)?;
    // The feature table follows the data: one (offset, size) pair per feature bit set.
    let features: u32 = h[72..104].iter().map(|b| b.count_ones()).sum();
    let table = u(40) + u(48);
    inside(table, features as u64 * 16, "feature table", table)?;
    f.seek(SeekFrom::Start(table))
        .map_err(|e| Error::io(path, e))?;
    let mut t = vec![0u8; features as usize * 16];
    f.read_exact(&mut t).map_err(|e| Error::io(path, e))?;
    // Feature bits in order; the table has one entry per set bit.
    let bits = (0..256usize).filter(|b| h[72 + b / 8] & (1 << (b % 8)) != 0);
    for (e, bit) in t.chunks_exact(16).zip(bits) {
        let off = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
        let size = u64::from_le_bytes(e[8..].try_into().expect("8 bytes"));
        inside(off, size, "feature", off)?;
        if matches!(bit, 3..=6 | 8 | 9 | 11 | 12) && size <= 1 << 24 {
            f.seek(SeekFrom::Start(off))
                .map_err(|e| Error::io(path, e))?;
            let mut body = vec![0u8; size as usize];
            f.read_exact(&mut body).map_err(|e| Error::io(path, e))?;
            check_feature_strings(bit, &body)
                .map_err(|msg| Error::corrupt(off, format!("perf.data: feature {bit}: {msg}")))?;
        }
    }
    Ok(())
}

/// The string-bearing feature sections (hostname .. cpuid, cmdline, event_desc): every
/// length they hold must fit in the section, before the parser allocates by it.
fn check_feature_strings(bit: usize, b: &[u8]) -> std::result::Result<(), String> {
    let mut at = 0usize;
    let u32_at = |at: &mut usize| -> std::result::Result<usize, String> {
        let v = b
            .get(*at..*at + 4)
            .map(|x| u32::from_le_bytes(x.try_into().expect("4 bytes")) as usize)
            .ok_or("ends inside a length")?;
        *at += 4;
        Ok(v)
    };
    let skip = |at: &mut usize, n: usize| -> std::result::Result<(), String> {
        match at.checked_add(n) {
            Some(end) if end <= b.len() => {
                *at = end;
                Ok(())
            }
            _ => Err(format!("a length of {n} bytes runs past the section")),
        }
    };
    match bit {
        11 => {
            let n = u32_at(&mut at)?;
            for _ in 0..n {
                let len = u32_at(&mut at)?;
                skip(&mut at, len)?;
            }
        }
        12 => {
            let n = u32_at(&mut at)?;
            let attr = u32_at(&mut at)?;
            for _ in 0..n {
                skip(&mut at, attr)?;
                let ids = u32_at(&mut at)?;
                let len = u32_at(&mut at)?;
                skip(&mut at, len)?;
                skip(&mut at, ids.saturating_mul(8))?;
            }
        }
        _ => {
            let len = u32_at(&mut at)?;
            skip(&mut at, len)?;
        }
    }
    Ok(())
}

fn perf_err(e: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Corrupt, None, format!("perf.data: {e}"))
}

/// Reads a file whose CPUs' records are out of time order: the parsing crate sorts them,
/// round by round, and each CPU's pages go to an unnamed temporary file.
fn sorted(
    path: &Path,
    meta: Meta,
    layout: PageLayout,
    nr_cpus: Option<u32>,
    cpu_limit: u32,
) -> Result<Trace> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(BufReader::new(file)).map_err(perf_err)?;
    // Some CPU's records are out of time order in the file: sort them (the parsing crate
    // does, round by round) and keep each CPU's pages in an unnamed temporary file.
    let mut cpus: BTreeMap<u32, CpuStream> = BTreeMap::new();
    let mut comms: HashMap<i32, String> = HashMap::new();
    let mut samples_without_raw = 0u64;

    // CPU numbers size per-CPU tables downstream: bound them by the file's own CPU count.
    let mut index = 0u64;
    let check_cpu = |cpu: u32, index: u64, what: &str| -> Result<u32> {
        if cpu < cpu_limit {
            return Ok(cpu);
        }
        Err(Error::new(ErrorKind::Corrupt, None, format!(
            "perf.data: {what} record #{index} names CPU {cpu}, but the file records {cpu_limit} CPUs"
        )))
    };
    while let Some(rec) = record_iter.next_record(&mut perf_file).map_err(perf_err)? {
        index += 1;
        let PerfFileRecord::EventRecord { record, .. } = rec else {
            continue;
        };
        let cpu_of = |r: &linux_perf_data::linux_perf_event_reader::RawEventRecord| {
            r.common_data().ok().and_then(|c| c.cpu).unwrap_or(0)
        };
        match record.record_type {
            RecordType::SAMPLE => {
                let EventRecord::Sample(s) = record.parse().map_err(perf_err)? else {
                    continue;
                };
                let Some(raw) = s.raw else {
                    samples_without_raw += 1;
                    continue;
                };
                let cpu = check_cpu(s.cpu.unwrap_or(0), index, "sample")?;
                let payload = raw.as_slice();
                let stream = match cpus.get_mut(&cpu) {
                    Some(s) => s,
                    None => {
                        let st = CpuStream::create(layout)?;
                        cpus.entry(cpu).or_insert(st)
                    }
                };
                stream.push(s.timestamp.unwrap_or(0), &payload)?;
            }
            // PERF_RECORD_LOST: events a CPU's buffer dropped, with the CPU in its sample
            // id. (LOST_SAMPLES records repeat the same losses per event at the end of the
            // recording, without a place in time; counting both would count twice.)
            RecordType::LOST => {
                let cpu = check_cpu(cpu_of(&record), index, "lost-events")?;
                let n = match record.parse().map_err(perf_err)? {
                    EventRecord::Lost(l) => l.count,
                    _ => 0,
                };
                if n > 0 {
                    let stream = match cpus.get_mut(&cpu) {
                        Some(s) => s,
                        None => {
                            let st = CpuStream::create(layout)?;
                            cpus.entry(cpu).or_insert(st)
                        }
                    };
                    stream.builder.lost(n);
                }
            }
            RecordType::COMM => {
                if let Ok(EventRecord::Comm(c)) = record.parse() {
                    comms.insert(
                        c.tid,
                        String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                    );
                }
            }
            _ => {}
        }
    }
    let _ = samples_without_raw;

    let mut spooled = BTreeMap::new();
    for (cpu, stream) in cpus {
        let pages = stream.finish()?;
        if pages.size() > 0 {
            spooled.insert(cpu, pages);
        }
    }
    let sizes: Vec<(u32, u64)> = spooled.iter().map(|(&c, p)| (c, p.size())).collect();
    let src = Arc::new(SpooledPages::new(path, layout.page_size, spooled));
    let cpu_data: Vec<CpuData> = sizes
        .into_iter()
        .map(|(cpu, file_bytes)| CpuData {
            cpu,
            file_bytes,
            loc: DataLoc::Built(src.clone()),
        })
        .collect();
    let max_cpu = cpu_data.last().map_or(0, |c| c.cpu + 1);
    let header_cpus = nr_cpus.unwrap_or(max_cpu).max(max_cpu);
    let mut trace = meta.finish(path, Container::PerfData, header_cpus, cpu_data, None);
    trace.layout = layout;
    for (tid, comm) in comms {
        trace.comms.insert(tid, comm);
    }
    Ok(trace)
}

/// How this file's records find their attribute's sample layout; None where the direct
/// reader cannot tell (attributes that differ without an IDENTIFIER to tell them apart).
fn layouts_of(pf: &PerfFile) -> Option<Layouts> {
    use self::decode::{flag, sample};
    let of = |h: &self::decode::Header| {
        let read_format = h
            .attr_bytes
            .get(32..40)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        SampleLayout::new(
            h.attr.sample_type,
            read_format,
            h.attr.flags & flag::SAMPLE_ID_ALL != 0,
        )
    };
    let first = of(pf.events.first()?);
    if pf.events.iter().all(|h| of(h) == first) {
        return Some(Layouts::One(first));
    }
    if pf
        .events
        .iter()
        .any(|h| h.attr.sample_type & sample::IDENTIFIER == 0)
    {
        return None;
    }
    Some(Layouts::ById(ById::new(
        pf.ids().map(|(id, ev)| (id, of(&pf.events[ev]))),
    )))
}

/// Parses perf's TRACING_DATA: `\x17\x08\x44tracing`, a version string ("0.5", "0.6"),
/// endianness, long size, page size, then the blocks a trace.dat v6 starts with.
fn tracing_data(b: &[u8]) -> Result<Meta> {
    const TAG: &[u8; 10] = b"\x17\x08\x44tracing";
    let mut r = Reader::new(b, 0, Endian::Little);
    if r.bytes(TAG.len(), "tracing data magic")? != TAG {
        return Err(Error::corrupt(0, "perf.data tracing data: bad magic"));
    }
    let version = r.cstr("tracing data version")?.to_string();
    r.endian = match r.u8("endianness")? {
        0 => Endian::Little,
        _ => Endian::Big,
    };
    let long_size = match r.u8("long size")? {
        b @ (4 | 8) => b as usize,
        b => return Err(Error::corrupt(r.offset(), format!("long size {b}"))),
    };
    let page_size = r.u32("page size")? as usize;
    let mut meta = Meta::new(r.endian, long_size, page_size);
    meta.read_headers(&mut r)?;
    meta.read_ftrace_formats(&mut r)?;
    meta.read_event_formats(&mut r)?;
    meta.read_kallsyms(&mut r)?;
    meta.read_printk(&mut r)?;
    // Version 0.6 adds the saved cmdlines.
    if version.as_str() >= "0.6" && !r.is_empty() {
        meta.read_cmdlines(&mut r)?;
    }
    Ok(meta)
}
