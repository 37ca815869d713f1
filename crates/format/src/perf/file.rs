//! perf.data's header in either layout perf writes, and its records as a
//! [`RecordSource`](super::decode::RecordSource):
//!
//! - a file (`perf record -o FILE`): a 104-byte header, the attributes, the data section,
//!   then the feature sections (host, perf version, command line, build ids, tracing data..);
//! - a pipe (`perf record -o - > FILE`): a 16-byte header, then everything as records in one
//!   stream: attributes (`PERF_RECORD_HEADER_ATTR`), tracing data, build ids and features
//!   (`PERF_RECORD_HEADER_FEATURE`, the same bytes a file's feature section holds) among
//!   the kernel's records.
//!
//! Both give the same [`PerfFile`]. Attributes of any size are read (perf_event_attr grows:
//! 128, 136, 144, 152 bytes are all seen): the fields kstate uses are in the first 64, the
//! rest is stepped over. Records are never collected; [`PerfFile::visit`] walks them.
//!
//! Only little-endian files are read (perf writes the recording machine's order; big-endian
//! ones are refused by name).

use crate::fxmap::FxMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::decode::{self as samples, flag, sample, Attr, Header, RawRec, RecordSource, Source};
use crate::error::{Error, ErrorKind, Result};
use crate::perf::records::Records;
use crate::Endian;

pub const MAGIC: &[u8; 8] = b"PERFILE2";
/// perf.data version 1 (perf before 2.6.33), never written since.
const MAGIC_V1: &[u8; 8] = b"PERFFILE";
const MAGIC_BIG_ENDIAN: &[u8; 8] = b"2ELIFREP";

const FILE_HEADER: u64 = 104;
const PIPE_HEADER: u64 = 16;

// Records perf writes itself (not the kernel), as pipe mode carries the header in them.
const HEADER_ATTR: u32 = 64;
const HEADER_TRACING_DATA: u32 = 66;
const HEADER_BUILD_ID: u32 = 67;
const HEADER_FEATURE: u32 = 80;
/// Types from here on are perf's own records, without a sample id trailer.
const USER_RECORDS: u32 = 64;

/// Sections bigger than this are not read into memory (the largest perf writes, the
/// tracing data with kallsyms, is a few MB).
const MAX_FEATURE: u64 = 256 << 20;
/// Attributes (events) in a file, and ids per attribute.
const MAX_ATTRS: u64 = 1 << 16;
const MAX_IDS: u64 = 1 << 20;

/// perf's feature bits (`HEADER_*` in tools/perf/util/header.h).
pub mod feature {
    pub const TRACING_DATA: u32 = 1;
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const VERSION: u32 = 5;
    pub const ARCH: u32 = 6;
    pub const NRCPUS: u32 = 7;
    pub const CPUDESC: u32 = 8;
    pub const CPUID: u32 = 9;
    pub const TOTAL_MEM: u32 = 10;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const SAMPLE_TIME: u32 = 21;
    pub const COMPRESSED: u32 = 27;

    /// The feature's name as `perf report --header` prints it.
    pub fn name(bit: u32) -> &'static str {
        const NAMES: [&str; 32] = [
            "reserved",
            "tracing_data",
            "build_id",
            "hostname",
            "osrelease",
            "version",
            "arch",
            "nrcpus",
            "cpudesc",
            "cpuid",
            "total_mem",
            "cmdline",
            "event_desc",
            "cpu_topology",
            "numa_topology",
            "branch_stack",
            "pmu_mappings",
            "group_desc",
            "auxtrace",
            "stat",
            "cache",
            "sample_time",
            "mem_topology",
            "clockid",
            "dir_format",
            "bpf_prog_info",
            "bpf_btf",
            "compressed",
            "cpu_pmu_caps",
            "clock_data",
            "hybrid_topology",
            "pmu_caps",
        ];
        NAMES.get(bit as usize).copied().unwrap_or("unknown")
    }
}

/// Where records name their event's id, when a file has more than one event.
#[derive(Debug, Clone, Copy)]
enum IdAt {
    /// One event, or ids that cannot be found: everything is the first event's.
    First,
    /// In a sample at this offset, and in other records this far from the end.
    At {
        sample: usize,
        from_end: Option<usize>,
    },
}

/// A build id the file records for a binary.
#[derive(Debug, Clone)]
pub struct BuildId {
    pub path: String,
    pub build_id: Vec<u8>,
    pub kernel: bool,
}

#[derive(Debug)]
pub struct PerfFile {
    pub path: PathBuf,
    /// Written to a pipe (`perf record -o -`).
    pub pipe: bool,
    /// Each event's attribute and name, in the file's order (never empty).
    pub events: Vec<Header>,
    /// The size of the attributes as the file stores them.
    pub attr_size: u64,
    /// Sample id to event: looked up once per record on this path (no SipHash).
    ids: FxMap<u64, usize>,
    id_at: IdAt,
    /// Feature sections (bit, bytes) in the file's order.
    pub features: Vec<(u32, Vec<u8>)>,
    /// The data's start and end in the file.
    pub data: (u64, u64),
    /// Set where the file ends early: what stopped the reading, with its offset. The data
    /// range ends at the last whole record before it.
    pub truncated: Option<Error>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A perf string: u32 length, then that many bytes (NUL-padded); the string and what
/// follows it.
fn perf_str(b: &[u8]) -> Option<(String, &[u8])> {
    let n = u32_at(b, 0)? as usize;
    let s = b.get(4..4usize.checked_add(n)?)?;
    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
    Some((String::from_utf8_lossy(&s[..end]).into_owned(), &b[4 + n..]))
}

impl PerfFile {
    /// Reads the header of the perf.data at `path`; errors name the file.
    pub fn open(path: &Path) -> Result<PerfFile> {
        Self::open_inner(path).map_err(|e| e.in_file(path))
    }

    fn open_inner(path: &Path) -> Result<PerfFile> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Err(Error::new(
                ErrorKind::Truncated,
                None,
                "the file is empty (0 bytes): nothing was recorded",
            ));
        }
        let mut h = [0u8; FILE_HEADER as usize];
        let n = read_upto(&f, &mut h, 0).map_err(|e| Error::io(path, e))?;
        let magic = &h[..8];
        if n >= 8 && magic == MAGIC_V1 {
            return Err(Error::unsupported(
                Some(0),
                "perf.data version 1 (magic PERFFILE, from perf before Linux 2.6.33) is not supported; `perf report` of that time reads it",
            ));
        }
        if n >= 8 && magic == MAGIC_BIG_ENDIAN {
            return Err(Error::unsupported(
                Some(0),
                "a big-endian perf.data (magic 2ELIFREP) is not supported",
            ));
        }
        if n < 16 || magic != MAGIC {
            return Err(Error::new(
                ErrorKind::BadMagic,
                Some(0),
                "not a perf.data file (no PERFILE2 magic)",
            ));
        }
        match u64_at(&h, 8).unwrap_or(0) {
            PIPE_HEADER => Self::open_pipe(path, len),
            FILE_HEADER if n == FILE_HEADER as usize => Self::open_file(path, &f, &h, len),
            FILE_HEADER => Err(Error::truncated(
                0,
                format!("perf.data: the file ({len} bytes) ends inside its {FILE_HEADER}-byte header"),
            )),
            s => Err(Error::corrupt(
                8,
                format!("perf.data: header size {s} is neither a file's ({FILE_HEADER}) nor a pipe's ({PIPE_HEADER})"),
            )),
        }
    }

    fn open_file(path: &Path, f: &File, h: &[u8], len: u64) -> Result<PerfFile> {
        let u = |at: usize| u64_at(h, at).unwrap_or(0);
        let io = |e| Error::io(path, e);
        let inside = |off: u64, size: u64, what: &str, at: u64| -> Result<()> {
            match off.checked_add(size) {
                Some(end) if end <= len => Ok(()),
                _ => Err(Error::truncated(
                    at,
                    format!("perf.data: the {what} ({size} bytes at offset {off}) run past the end of the {len}-byte file"),
                )),
            }
        };
        let attr_size = u(16);
        if !(64 + 16..=4096).contains(&attr_size) {
            return Err(Error::corrupt(
                16,
                format!("perf.data: attribute size {attr_size} is implausible"),
            ));
        }
        let (attrs_at, attrs_len) = (u(24), u(32));
        inside(attrs_at, attrs_len, "attributes", 24)?;
        let n = attrs_len / attr_size;
        if n == 0 || n > MAX_ATTRS {
            return Err(Error::corrupt(
                32,
                format!(
                    "perf.data: {n} attributes (sections of {attrs_len} bytes, {attr_size} each)"
                ),
            ));
        }
        let mut table = vec![0u8; (n * attr_size) as usize];
        f.read_exact_at(&mut table, attrs_at).map_err(io)?;
        let mut events = Vec::new();
        let mut id_lists = Vec::new();
        for (i, a) in table.chunks_exact(attr_size as usize).enumerate() {
            let at = attrs_at + i as u64 * attr_size;
            let attr_len = (attr_size - 16) as usize;
            let bytes = &a[..attr_len];
            let (ids_at, ids_len) = (
                u64_at(a, attr_len).unwrap(),
                u64_at(a, attr_len + 8).unwrap(),
            );
            inside(ids_at, ids_len, "event ids", at + attr_len as u64)?;
            if ids_len / 8 > MAX_IDS {
                return Err(Error::corrupt(
                    at + attr_len as u64,
                    format!("perf.data: {} ids for one event", ids_len / 8),
                ));
            }
            let mut ids = vec![0u8; (ids_len / 8 * 8) as usize];
            f.read_exact_at(&mut ids, ids_at).map_err(io)?;
            events.push(header_of(bytes, at)?);
            id_lists.push(ids.chunks_exact(8).map(|c| u64_at(c, 0).unwrap()).collect());
        }
        let (data_at, data_len) = (u(40), u(48));
        if data_at < FILE_HEADER || data_at > len {
            return Err(Error::corrupt(
                40,
                format!(
                    "perf.data: the data section starts at {data_at}, outside the {len}-byte file"
                ),
            ));
        }
        // (A damaged size may reach past the end of u64: checked, not added.)
        let data_end = data_at.checked_add(data_len).filter(|&e| e <= len);
        let mut pf = PerfFile {
            path: path.to_path_buf(),
            pipe: false,
            events,
            attr_size,
            ids: FxMap::default(),
            id_at: IdAt::First,
            features: Vec::new(),
            data: (data_at, data_end.unwrap_or(len)),
            truncated: None,
        };
        pf.index_ids(id_lists);
        if data_len == 0 || data_end.is_none() {
            // A `perf record` that did not finish leaves the data size 0 and no features;
            // a file that was cut has its data run past the end.
            let why = if data_len == 0 {
                "the header gives no data size (the perf record that wrote it did not finish)"
                    .to_string()
            } else {
                format!(
                    "the data section ({data_len} bytes at offset {data_at}) runs past the end of the {len}-byte file"
                )
            };
            pf.data = (data_at, len);
            pf.find_end(why)?;
        } else {
            pf.read_features(f, len)?;
        }
        pf.name_events();
        Ok(pf)
    }

    /// Reads the feature table after the data and the sections it points to.
    fn read_features(&mut self, f: &File, len: u64) -> Result<()> {
        let io = |e| Error::io(&self.path, e);
        let mut bits = [0u8; 32];
        f.read_exact_at(&mut bits, 72).map_err(io)?;
        let set: Vec<u32> = (0..256u32)
            .filter(|b| bits[(b / 8) as usize] & (1 << (b % 8)) != 0)
            .collect();
        let table_at = self.data.1;
        // A file cut after its data keeps its records: the sections it lost are named.
        let cut = |at: u64, what: String| {
            Error::truncated(
                at,
                format!("perf.data: {what} runs past the end of the {len}-byte file (the file was cut); its records are read"),
            )
        };
        if table_at + set.len() as u64 * 16 > len {
            self.truncated = Some(cut(
                table_at,
                format!("the table of {} feature sections", set.len()),
            ));
            return Ok(());
        }
        let mut table = vec![0u8; set.len() * 16];
        f.read_exact_at(&mut table, table_at).map_err(io)?;
        for (e, bit) in table.chunks_exact(16).zip(set) {
            let (off, size) = (u64_at(e, 0).unwrap(), u64_at(e, 8).unwrap());
            match off.checked_add(size) {
                Some(end) if end <= len && size <= MAX_FEATURE => {}
                _ => {
                    self.truncated = Some(cut(
                        off,
                        format!(
                            "feature section {} ({size} bytes at offset {off})",
                            feature::name(bit)
                        ),
                    ));
                    return Ok(());
                }
            }
            let mut body = vec![0u8; size as usize];
            f.read_exact_at(&mut body, off).map_err(io)?;
            self.features.push((bit, body));
        }
        Ok(())
    }

    /// Pipe mode: one pass over the records for the header ones.
    fn open_pipe(path: &Path, len: u64) -> Result<PerfFile> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut r = Records::open(path, PIPE_HEADER, len)?.raw();
        let mut events = Vec::new();
        let mut id_lists: Vec<Vec<u64>> = Vec::new();
        let mut features = Vec::new();
        let mut build_ids = Vec::new();
        let mut truncated = None;
        let mut end = len;
        loop {
            let here = r.position();
            let rec = match r.next_rec() {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                Err(e) if e.kind == ErrorKind::Truncated => {
                    truncated = Some(e);
                    end = here;
                    break;
                }
                Err(e) => return Err(e),
            };
            match rec.kind {
                HEADER_ATTR => {
                    let size = u32_at(rec.body, 4).unwrap_or(0) as usize;
                    if size < 64 || size > rec.body.len() {
                        return Err(Error::corrupt(
                            rec.at,
                            format!(
                                "perf.data: attribute record of {} bytes holds an attribute of {size}",
                                rec.body.len()
                            ),
                        ));
                    }
                    if events.len() as u64 >= MAX_ATTRS {
                        return Err(Error::corrupt(
                            rec.at,
                            "perf.data: too many attribute records",
                        ));
                    }
                    events.push(header_of(&rec.body[..size], rec.at + 8)?);
                    id_lists.push(
                        rec.body[size..]
                            .chunks_exact(8)
                            .map(|c| u64_at(c, 0).unwrap())
                            .collect(),
                    );
                }
                HEADER_TRACING_DATA => {
                    let n = u32_at(rec.body, 0).unwrap_or(0) as u64;
                    let mut b = vec![0u8; n.min(MAX_FEATURE) as usize];
                    f.read_exact_at(&mut b, rec.at + 8 + rec.body.len() as u64)
                        .map_err(|e| Error::io(path, e))?;
                    features.push((feature::TRACING_DATA, b));
                }
                HEADER_BUILD_ID => {
                    build_ids.extend_from_slice(&(rec.kind).to_le_bytes());
                    build_ids.extend_from_slice(&rec.misc.to_le_bytes());
                    build_ids.extend_from_slice(&((rec.body.len() + 8) as u16).to_le_bytes());
                    build_ids.extend_from_slice(rec.body);
                }
                // (The last, with no body, marks the end of the features.)
                HEADER_FEATURE if rec.body.len() > 8 => {
                    let bit = u64_at(rec.body, 0).unwrap();
                    if let Ok(bit) = u32::try_from(bit) {
                        features.push((bit, rec.body[8..].to_vec()));
                    }
                }
                _ => {}
            }
        }
        if events.is_empty() {
            return Err(Error::corrupt(
                PIPE_HEADER,
                "perf.data (pipe mode): no attribute records, so no event can be read",
            ));
        }
        if !build_ids.is_empty() {
            features.push((feature::BUILD_ID, build_ids));
        }
        let mut pf = PerfFile {
            path: path.to_path_buf(),
            pipe: true,
            events,
            attr_size: 0,
            ids: FxMap::default(),
            id_at: IdAt::First,
            features,
            data: (PIPE_HEADER, end),
            truncated,
        };
        pf.index_ids(id_lists);
        pf.name_events();
        Ok(pf)
    }

    /// For a file that ends early: the data ends at the last whole record, and why.
    fn find_end(&mut self, why: String) -> Result<()> {
        let mut r = Records::open(&self.path, self.data.0, self.data.1)?.raw();
        loop {
            let here = r.position();
            match r.next_rec() {
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.truncated = Some(Error::truncated(
                        self.data.0,
                        format!("perf.data: {why}; read to the end of its records"),
                    ));
                    return Ok(());
                }
                // Past the last record written, the bytes may be anything.
                Err(e) => {
                    self.data.1 = here;
                    self.truncated = Some(Error::truncated(
                        e.offset.unwrap_or(here),
                        format!(
                            "perf.data: {why}; {}; read what came before",
                            e.msg.trim_start_matches("perf.data: ")
                        ),
                    ));
                    return Ok(());
                }
            }
        }
    }

    fn index_ids(&mut self, lists: Vec<Vec<u64>>) {
        for (i, ids) in lists.into_iter().enumerate() {
            for id in ids {
                self.ids.entry(id).or_insert(i);
            }
        }
        if self.events.len() < 2 {
            return;
        }
        let all = |bit: u64| self.events.iter().all(|h| h.attr.sample_type & bit != 0);
        let st = self.events[0].attr.sample_type;
        let same = self.events.iter().all(|h| h.attr.sample_type == st);
        let id_all = self.events[0].attr.flags & flag::SAMPLE_ID_ALL != 0;
        self.id_at = if all(sample::IDENTIFIER) {
            IdAt::At {
                sample: 0,
                from_end: id_all.then_some(8),
            }
        } else if same && st & sample::ID != 0 {
            let count = |bits: &[u64]| 8 * bits.iter().filter(|&&b| st & b != 0).count();
            IdAt::At {
                sample: count(&[sample::IP, sample::TID, sample::TIME, sample::ADDR]),
                from_end: id_all
                    .then(|| 8 + count(&[sample::STREAM_ID, sample::CPU, sample::IDENTIFIER])),
            }
        } else {
            IdAt::First
        };
    }

    /// Names events from the event_desc feature where the file has it (perf's own names,
    /// with modifiers: `cpu-clock:u`), else from their type and config as perf does.
    fn name_events(&mut self) {
        let mut names: Vec<String> = Vec::new();
        if let Some(b) = self.feature(feature::EVENT_DESC) {
            let (n, size) = (
                u32_at(b, 0).unwrap_or(0),
                u32_at(b, 4).unwrap_or(0) as usize,
            );
            let mut rest = b.get(8..).unwrap_or_default();
            for _ in 0..n.min(self.events.len() as u32) {
                let Some(after) = rest.get(size..) else { break };
                let Some(nr_ids) = u32_at(after, 0) else {
                    break;
                };
                let Some((name, tail)) = perf_str(&after[4..]) else {
                    break;
                };
                names.push(name);
                let skip = (nr_ids as usize).saturating_mul(8);
                let Some(t) = tail.get(skip..) else { break };
                rest = t;
            }
        }
        for (i, h) in self.events.iter_mut().enumerate() {
            h.event = match names.get(i) {
                Some(n) if !n.is_empty() => n.clone(),
                _ => event_name(&h.attr),
            };
        }
    }

    /// Names tracepoint events (type 2) by their format, `system:name`.
    pub fn name_tracepoints(&mut self, name: impl Fn(u64) -> Option<String>) {
        for h in &mut self.events {
            if h.attr.type_ == samples::event_type::TRACEPOINT && h.event.starts_with("tracepoint:")
            {
                if let Some(n) = name(h.attr.config) {
                    h.event = n;
                }
            }
        }
    }

    /// A feature section's bytes.
    pub fn feature(&self, bit: u32) -> Option<&[u8]> {
        self.features
            .iter()
            .find(|(b, _)| *b == bit)
            .map(|(_, v)| v.as_slice())
    }

    /// A string feature (hostname, osrelease, version, arch, cpudesc, cpuid).
    pub fn string(&self, bit: u32) -> Option<String> {
        perf_str(self.feature(bit)?).map(|(s, _)| s)
    }

    /// The command line perf was run with.
    pub fn cmdline(&self) -> Option<Vec<String>> {
        let b = self.feature(feature::CMDLINE)?;
        let n = u32_at(b, 0)?;
        let mut rest = &b[4..];
        let mut v = Vec::new();
        for _ in 0..n.min(1 << 16) {
            let (s, tail) = perf_str(rest)?;
            v.push(s);
            rest = tail;
        }
        Some(v)
    }

    /// CPUs (available, online) on the recording machine.
    pub fn nr_cpus(&self) -> Option<(u32, u32)> {
        let b = self.feature(feature::NRCPUS)?;
        Some((u32_at(b, 0)?, u32_at(b, 4)?))
    }

    /// Memory of the recording machine, in KiB.
    pub fn total_mem_kib(&self) -> Option<u64> {
        u64_at(self.feature(feature::TOTAL_MEM)?, 0)
    }

    /// The first and last sample times perf wrote down.
    pub fn sample_time(&self) -> Option<(u64, u64)> {
        let b = self.feature(feature::SAMPLE_TIME)?;
        Some((u64_at(b, 0)?, u64_at(b, 8)?))
    }

    /// The build ids of the binaries samples were taken in (perf writes those it saw).
    pub fn build_ids(&self) -> Vec<BuildId> {
        let mut v = Vec::new();
        let Some(mut b) = self.feature(feature::BUILD_ID) else {
            return v;
        };
        const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
        while b.len() >= 8 + 4 + 24 {
            let misc = u16::from_le_bytes([b[4], b[5]]);
            let size = u16::from_le_bytes([b[6], b[7]]) as usize;
            if size < 36 || size > b.len() {
                break;
            }
            let id = &b[12..36];
            let n = if misc & MISC_BUILD_ID_SIZE != 0 {
                (id[20] as usize).min(20)
            } else {
                20
            };
            let name = &b[36..size];
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            v.push(BuildId {
                path: String::from_utf8_lossy(&name[..end]).into_owned(),
                build_id: id[..n].to_vec(),
                kernel: misc & samples::MISC_CPUMODE_MASK == samples::MISC_KERNEL,
            });
            b = &b[size..];
        }
        v
    }

    /// Every event id and the index of its event.
    pub fn ids(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.ids.iter().map(|(&id, &ev)| (id, ev))
    }

    /// The event a kernel record belongs to.
    fn event_of(&self, kind: u32, b: &[u8]) -> usize {
        let IdAt::At { sample, from_end } = self.id_at else {
            return 0;
        };
        let at = if kind == samples::record::SAMPLE {
            Some(sample)
        } else {
            from_end.and_then(|n| b.len().checked_sub(n))
        };
        at.and_then(|at| u64_at(b, at))
            .and_then(|id| self.ids.get(&id).copied())
            .unwrap_or(0)
    }
}

impl RecordSource for PerfFile {
    fn events(&self) -> &[Header] {
        &self.events
    }

    /// The kernel's records (perf's own, types 64 and up, are left out: they have no
    /// event and no sample id).
    fn visit(&self, f: &mut dyn FnMut(&RawRec<'_>) -> Result<()>) -> Result<()> {
        let mut r = Records::open(&self.path, self.data.0, self.data.1)?;
        while let Some(rec) = r.next_rec().map_err(|e| e.in_file(&self.path))? {
            if rec.kind >= USER_RECORDS {
                continue;
            }
            f(&RawRec {
                event: self.event_of(rec.kind, rec.body),
                source: Source::Cpu(0),
                at: rec.at,
                kind: rec.kind,
                misc: rec.misc,
                body: rec.body,
            })?;
        }
        Ok(())
    }
}

/// Reads what there is of `buf.len()` bytes at `at`.
fn read_upto(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], at + n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// An event's header from its stored attribute (`at`: its offset, for errors).
fn header_of(bytes: &[u8], at: u64) -> Result<Header> {
    let attr = Attr::from_bytes(bytes, Endian::Little).map_err(|e| {
        Error::corrupt(
            at,
            format!(
                "perf.data: {}",
                e.msg.trim_start_matches("samples section: ")
            ),
        )
    })?;
    let clock = if attr.flags & flag::USE_CLOCKID != 0 {
        match attr.clockid {
            0 => "realtime".to_string(),
            1 => "mono".to_string(),
            4 => "mono_raw".to_string(),
            7 => "boot".to_string(),
            11 => "tai".to_string(),
            c => format!("clockid {c}"),
        }
    } else {
        "perf".to_string()
    };
    Ok(Header {
        endian: Endian::Little,
        clock,
        event: String::new(),
        attr_bytes: bytes.to_vec(),
        attr,
    })
}

/// perf's name for an event without event_desc (pipe mode): `evsel__name`'s tables.
fn event_name(a: &Attr) -> String {
    use samples::event_type::{HARDWARE, HW_CACHE, SOFTWARE, TRACEPOINT};
    const HW: [&str; 10] = [
        "cycles",
        "instructions",
        "cache-references",
        "cache-misses",
        "branches",
        "branch-misses",
        "bus-cycles",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
        "ref-cycles",
    ];
    const SW: [&str; 12] = [
        "cpu-clock",
        "task-clock",
        "page-faults",
        "context-switches",
        "cpu-migrations",
        "minor-faults",
        "major-faults",
        "alignment-faults",
        "emulation-faults",
        "dummy",
        "bpf-output",
        "cgroup-switches",
    ];
    let named = |t: &[&str]| t.get(a.config as usize).map(|s| s.to_string());
    match a.type_ {
        HARDWARE => named(&HW),
        SOFTWARE => named(&SW),
        TRACEPOINT => Some(format!("tracepoint:{}", a.config)),
        HW_CACHE => Some(format!("hw-cache:{:#x}", a.config)),
        _ => None,
    }
    .unwrap_or_else(|| format!("{}:{:#x}", a.type_, a.config))
}
