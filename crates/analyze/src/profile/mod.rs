//! CPU profiles from a recording's SAMPLES section (`kstate record --sample`): where the
//! samples fell, per symbol, like `perf report --no-children`, and the call-graph views
//! around one symbol (who calls it, what it calls), cut by the analyzers' filters.
//!
//! Symbols: kernel addresses through the kallsyms the recording carries (modules named
//! by their `[module]` tag); user addresses through the MMAP2 records (the kernel's, and
//! those the recorder made from /proc at the start) to a file and offset, then that
//! file's ELF symbols ([`elf`]). A file whose build id differs from the one recorded
//! gives no names (its samples count as `[build-id mismatch]`), not wrong ones.
//!
//! Shares are by period (a sample's weight, as perf weighs them); with cpu-clock every
//! period is the same, so shares and sample counts agree.

pub mod annotate;
pub mod compare;
mod cover;
pub mod data;
pub mod elf;
pub mod flame;
pub mod stacks;
pub mod tree;
pub mod unwind;

use std::collections::{BTreeMap, HashMap};

use kstate_format::samples::{
    self, PerfRecord, RecordSource, SampleRec, Source, CONTEXT_MAX, CONTEXT_USER,
};
use kstate_format::{extras, Error, ErrorKind, Trace};

use crate::filter::{Filters, TimeSel};
use crate::ksyms::Ksyms;
use crate::merge::{IdFilter, Merger};

use elf::ElfImage;

/// What an image is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Kernel,
    Module,
    Binary,
    Library,
    Vdso,
    /// Anonymous executable memory (JIT code) or a mapping without a file.
    Anon,
    /// No mapping known for the address.
    Unknown,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Module => "module",
            Kind::Binary => "binary",
            Kind::Library => "library",
            Kind::Vdso => "vdso",
            Kind::Anon => "anon",
            Kind::Unknown => "unknown",
        }
    }
    pub fn is_kernel(self) -> bool {
        matches!(self, Kind::Kernel | Kind::Module)
    }
}

/// A symbol in an image: what rows are keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sym {
    pub name: String,
    /// The image as shown: `[kernel.kallsyms]`, `[ext4]`, a file's base name, `[vdso]`.
    pub image: String,
    /// The file's path for user images.
    pub path: Option<String>,
    pub kind: Kind,
}

/// One row of the per-symbol report.
#[derive(Debug, Clone)]
pub struct Row {
    pub sym: Sym,
    pub samples: u64,
    pub period: u64,
}

/// Who calls a symbol, or what it calls.
#[derive(Debug, Clone)]
pub struct CallView {
    pub symbol: String,
    /// Selected samples with the symbol anywhere in their chain / as the leaf.
    pub samples: u64,
    pub self_samples: u64,
    /// Callers (or callees), most samples first; `[self]` (callees: the symbol itself was
    /// running) and `[no caller]` (the chain ends at the symbol) included.
    pub rows: Vec<(Sym, u64)>,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub filters: Filters,
    pub callers: Option<String>,
    pub callees: Option<String>,
    /// The sampled event to report (default: the file's first).
    pub event: Option<String>,
    /// Also collect folded stacks (for flame graphs): root first, `;`-separated.
    pub folded: bool,
    /// Collect the sampled addresses inside this symbol (`--details`).
    pub details: Option<String>,
}

/// Where the samples fell inside one symbol (`--details`). Addresses are the image's
/// own: the running kernel address for kernel code, the ELF symbol address (as in the
/// file's symbol table and `objdump -d`) for user code.
#[derive(Debug, Clone)]
pub struct SymbolHits {
    pub sym: Sym,
    pub samples: u64,
    pub period: u64,
    /// Image address -> samples there. Addresses that could not be placed in the file
    /// (outside its loaded segments) are not here but in `unplaced`.
    pub addrs: BTreeMap<u64, u64>,
    pub unplaced: u64,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub event: String,
    /// Every event sampled in the file, in file order.
    pub events: Vec<String>,
    pub freq: Option<u64>,
    pub period: Option<u64>,
    pub clock: String,
    /// Every sample in the file, and the records the kernel lost.
    pub total_samples: u64,
    pub lost: u64,
    /// The samples the filters selected, and their summed period.
    pub samples: u64,
    pub total_period: u64,
    pub kernel_samples: u64,
    pub user_samples: u64,
    /// Per symbol (of the sampled instruction), largest share first.
    pub rows: Vec<Row>,
    pub callers: Option<CallView>,
    pub callees: Option<CallView>,
    /// Stacks root first, with their sample counts (`--flame`).
    pub folded: Vec<(String, u64)>,
    /// `--details`: one entry per image with a symbol of that name, most samples first.
    pub details: Vec<SymbolHits>,
    /// Time of the first event of the trace (windows are relative to it), and the range
    /// of the selected samples.
    pub trace_start: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
    /// Things the user should know: files that could not be read, build-id mismatches.
    pub warnings: Vec<String>,
    /// How the user chains of all the file's samples of this event were found.
    pub chains: unwind::ChainCounts,
}

impl Profile {
    pub fn share(&self, period: u64) -> f64 {
        if self.total_period == 0 {
            0.0
        } else {
            period as f64 * 100.0 / self.total_period as f64
        }
    }
}

/// One executable mapping of a process, valid from `time` until `until`.
#[derive(Debug, Clone)]
pub(crate) struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    path: String,
    build_id: Option<Vec<u8>>,
    time: u64,
    until: u64,
}

/// The kernel half: kallsyms plus which symbol addresses belong to modules.
struct Kernel {
    syms: Ksyms,
    modules: HashMap<u64, String>,
}

impl Kernel {
    fn new(text: &[u8]) -> Kernel {
        let mut modules = HashMap::new();
        for line in text.split(|&b| b == b'\n') {
            let Some(open) = line.iter().position(|&b| b == b'[') else {
                continue;
            };
            let Some(close) = line.iter().rposition(|&b| b == b']') else {
                continue;
            };
            let addr = line
                .split(|&b| b == b' ')
                .next()
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|a| u64::from_str_radix(a, 16).ok());
            if let (Some(a), true) = (addr, close > open) {
                modules.insert(
                    a,
                    String::from_utf8_lossy(&line[open + 1..close]).into_owned(),
                );
            }
        }
        Kernel {
            syms: Ksyms::parse(text),
            modules,
        }
    }

    fn sym(&self, addr: u64) -> Sym {
        match self.syms.lookup(addr) {
            Some((name, off)) => {
                let base = addr - off;
                match self.modules.get(&base) {
                    Some(m) => Sym {
                        name: name.to_string(),
                        image: format!("[{m}]"),
                        path: None,
                        kind: Kind::Module,
                    },
                    None => Sym {
                        name: name.to_string(),
                        image: "[kernel.kallsyms]".into(),
                        path: None,
                        kind: Kind::Kernel,
                    },
                }
            }
            None => Sym {
                name: format!("{addr:#x}"),
                image: "[kernel.kallsyms]".into(),
                path: None,
                kind: Kind::Kernel,
            },
        }
    }
}

/// Resolves addresses to interned symbols.
pub(crate) struct Symbolizer {
    kernel: Kernel,
    /// Whether there are kernel symbols (the recording's, or this machine's for a perf.data).
    kernel_named: bool,
    maps: HashMap<u32, Vec<Map>>,
    /// (pid, ip) -> indices into the pid's maps that hold ip, whatever their time.
    candidates: HashMap<(u32, u64), Vec<usize>>,
    images: HashMap<String, ElfImage>,
    /// Paths whose recorded build id differs from the file's.
    mismatched: HashMap<String, (String, String)>,
    syms: Vec<Sym>,
    index: HashMap<Sym, u32>,
    /// (pid, map index, ip) and kernel ip -> symbol.
    user_cache: HashMap<(u32, usize, u64), u32>,
    kernel_cache: HashMap<u64, u32>,
    unreadable: Vec<String>,
}

impl Symbolizer {
    /// For a recording's kernel symbols and the side-band records of one of its sample
    /// sections (sorted here).
    pub(crate) fn new(trace: &Trace, side: &mut [(u64, PerfRecord)]) -> Symbolizer {
        let mut maps = build_maps(side);
        let machine = machine_kallsyms(trace);
        let kallsyms = match trace.kallsyms.as_deref() {
            Some(k) if !k.is_empty() => k,
            _ => machine.as_deref().unwrap_or_default(),
        };
        if let Some(pf) = &trace.perf {
            // perf.data keeps the build ids of the binaries hit in a feature section, not
            // in its maps: give them to the maps, so a binary changed since is not misread.
            let ids: HashMap<String, Vec<u8>> = pf
                .build_ids()
                .into_iter()
                .filter(|b| !b.kernel)
                .map(|b| (b.path, b.build_id))
                .collect();
            for m in maps.values_mut().flatten() {
                if m.build_id.is_none() {
                    m.build_id = ids.get(&m.path).cloned();
                }
            }
        }
        Symbolizer {
            kernel: Kernel::new(kallsyms),
            kernel_named: !kallsyms.is_empty(),
            maps,
            candidates: HashMap::new(),
            images: HashMap::new(),
            mismatched: HashMap::new(),
            syms: Vec::new(),
            index: HashMap::new(),
            user_cache: HashMap::new(),
            kernel_cache: HashMap::new(),
            unreadable: Vec::new(),
        }
    }

    pub(crate) fn sym(&self, id: u32) -> &Sym {
        &self.syms[id as usize]
    }

    /// The ELF image of a path, loaded once.
    pub(crate) fn image(&mut self, path: &str) -> &ElfImage {
        if !self.images.contains_key(path) {
            let img = ElfImage::load(path);
            if let Some(p) = &img.problem {
                self.unreadable.push(p.clone());
            }
            self.images.insert(path.to_string(), img);
        }
        &self.images[path]
    }

    fn intern(&mut self, s: Sym) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.syms.len() as u32;
        self.index.insert(s.clone(), i);
        self.syms.push(s);
        i
    }

    fn kernel(&mut self, addr: u64) -> u32 {
        if let Some(&i) = self.kernel_cache.get(&addr) {
            return i;
        }
        let s = self.kernel.sym(addr);
        let i = self.intern(s);
        self.kernel_cache.insert(addr, i);
        i
    }

    /// The index (into the pid's maps) of the mapping holding `addr` at `time`.
    fn map_for(&mut self, pid: u32, addr: u64, time: u64) -> Option<usize> {
        let maps = self.maps.get(&pid).map(Vec::as_slice).unwrap_or_default();
        let cands = self.candidates.entry((pid, addr)).or_insert_with(|| {
            maps.iter()
                .enumerate()
                .filter(|(_, m)| addr >= m.start && addr < m.end)
                .map(|(i, _)| i)
                .collect()
        });
        // Of the mappings live at `time`, the latest.
        cands
            .iter()
            .copied()
            .filter(|&i| maps[i].time <= time && time < maps[i].until)
            .max_by_key(|&i| maps[i].time)
            .or_else(|| cands.iter().copied().max_by_key(|&i| maps[i].time))
    }

    /// A user address as the ELF file's symbol address (what `--details` counts by).
    fn user_image_addr(&mut self, pid: u32, addr: u64, time: u64) -> Option<u64> {
        let mi = self.map_for(pid, addr, time)?;
        let m = &self.maps[&pid][mi];
        let off = addr - m.start + m.pgoff;
        self.images.get(&m.path)?.offset_to_addr(off)
    }

    fn user(&mut self, pid: u32, addr: u64, time: u64) -> u32 {
        let Some(mi) = self.map_for(pid, addr, time) else {
            return self.intern(Sym {
                name: "[unknown]".into(),
                image: "[unknown]".into(),
                path: None,
                kind: Kind::Unknown,
            });
        };
        if let Some(&i) = self.user_cache.get(&(pid, mi, addr)) {
            return i;
        }
        let m = self.maps[&pid][mi].clone();
        let s = self.user_sym(&m, addr);
        let i = self.intern(s);
        self.user_cache.insert((pid, mi, addr), i);
        i
    }

    /// The binary mapped from `path` with this build id in perf's build-id cache, loaded:
    /// its key in `images`.
    fn cached(&mut self, path: &str, want: &[u8]) -> Option<String> {
        let c = build_id_cache(path, want)?;
        if !self.images.contains_key(&c) {
            self.images.insert(c.clone(), ElfImage::load(&c));
        }
        (self.images[&c].build_id.as_deref() == Some(want)).then_some(c)
    }

    fn user_sym(&mut self, m: &Map, addr: u64) -> Sym {
        let base = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
        let unknown = |image: String, kind: Kind, path: Option<String>| Sym {
            name: "[unknown]".into(),
            image,
            path,
            kind,
        };
        if m.path == "[vdso]" || m.path == "[vsyscall]" {
            return unknown(m.path.clone(), Kind::Vdso, None);
        }
        if !m.path.starts_with('/') || m.path.starts_with("/memfd:") {
            let image = if m.path.is_empty() {
                "[anon]".into()
            } else {
                m.path.clone()
            };
            return unknown(image, Kind::Anon, None);
        }
        let kind = if base.contains(".so") {
            Kind::Library
        } else {
            Kind::Binary
        };
        let path = Some(m.path.clone());
        // A file gone since the recording: perf's build-id cache may hold it (perf record
        // puts every binary hit there).
        let gone = match self.images.get(&m.path) {
            Some(img) => img.problem.is_some(),
            None => !std::path::Path::new(&m.path).is_file(),
        };
        let from_cache = m
            .build_id
            .as_deref()
            .filter(|_| gone)
            .and_then(|want| self.cached(&m.path, want));
        if let Some(c) = from_cache {
            return self.sym_in(&c, m, addr, base, path, kind);
        }
        self.image(&m.path);
        let mut key = m.path.clone();
        let have = self.images[&m.path].build_id.clone();
        if let (Some(want), Some(have)) = (&m.build_id, &have) {
            if want != have {
                // perf's build-id cache may hold the binary as it was.
                match self.cached(&m.path, want) {
                    Some(c) => key = c,
                    None => {
                        self.mismatched
                            .entry(m.path.clone())
                            .or_insert_with(|| (samples::hex(want), samples::hex(have)));
                        return Sym {
                            name: "[build-id mismatch]".into(),
                            image: base,
                            path,
                            kind,
                        };
                    }
                }
            }
        }
        self.sym_in(&key, m, addr, base, path, kind)
    }

    /// The symbol at `addr` of mapping `m`, read from the loaded image `key` (the mapped
    /// file, or its copy in perf's build-id cache).
    fn sym_in(
        &self,
        key: &str,
        m: &Map,
        addr: u64,
        image: String,
        path: Option<String>,
        kind: Kind,
    ) -> Sym {
        let img = &self.images[key];
        let off = addr - m.start + m.pgoff;
        let at = img.offset_to_addr(off);
        // Code of a file without a symbol for it (stripped, or the file unreadable) is
        // named by where it is, as perf does (`[.] 0x12ba` in app2): the address objdump
        // and addr2line take, or the file offset when the file cannot be read.
        let name = match at.and_then(|a| img.lookup(a)) {
            Some(n) => n.to_string(),
            None => format!("{image}+{:#x}", at.unwrap_or(off)),
        };
        Sym {
            name,
            image,
            path,
            kind,
        }
    }
}

/// Where perf's build-id cache (`~/.debug`, filled by `perf record` and `perf buildid-cache`)
/// keeps the binary mapped from `path` with this build id.
fn build_id_cache(path: &str, id: &[u8]) -> Option<String> {
    let home = std::env::var_os("HOME")?;
    let hex = samples::hex(id);
    if hex.len() < 3 {
        return None;
    }
    let debug = std::path::Path::new(&home).join(".debug");
    let link = debug.join(".build-id").join(&hex[..2]).join(&hex[2..]);
    // Newer perf links a directory holding `elf`; older ones link the file; the link
    // points into ~/.debug/<path>/<build id>/, which may be there without it.
    let by_path = debug.join(path.trim_start_matches('/')).join(&hex);
    [link.join("elf"), link, by_path.join("elf")]
        .into_iter()
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

/// This machine's kernel symbols for a perf.data recorded on this kernel (its build id,
/// or without one its release and host, are this machine's): perf.data carries none.
fn machine_kallsyms(trace: &Trace) -> Option<Vec<u8>> {
    let pf = trace.perf.as_ref()?;
    use kstate_format::perf_file::feature;
    let recorded = pf
        .build_ids()
        .into_iter()
        .find(|b| b.kernel && b.path == "[kernel.kallsyms]");
    let running = std::fs::read("/sys/kernel/notes")
        .ok()
        .and_then(|n| samples::find_build_id(&n, kstate_format::Endian::Little));
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let same = match (recorded, running) {
        (Some(r), Some(k)) => r.build_id == k,
        _ => {
            pf.string(feature::OSRELEASE).is_some()
                && pf.string(feature::OSRELEASE) == read("/proc/sys/kernel/osrelease")
                && pf.string(feature::HOSTNAME) == read("/proc/sys/kernel/hostname")
        }
    };
    if !same {
        return None;
    }
    std::fs::read("/proc/kallsyms").ok()
}

/// Builds the per-process mappings from the side-band records, in time order.
fn build_maps(events: &mut [(u64, PerfRecord)]) -> HashMap<u32, Vec<Map>> {
    events.sort_by_key(|e| e.0);
    let mut maps: HashMap<u32, Vec<Map>> = HashMap::new();
    for (t, r) in events.iter() {
        let t = *t;
        match r {
            PerfRecord::Mmap2(m) if m.prot & 4 != 0 || m.path == "[vdso]" => {
                let v = maps.entry(m.pid).or_default();
                let (start, end) = (m.start, m.start.saturating_add(m.len));
                for old in v.iter_mut() {
                    if old.until > t && old.start < end && start < old.end {
                        old.until = t;
                    }
                }
                v.push(Map {
                    start,
                    end,
                    pgoff: m.pgoff,
                    path: m.path.clone(),
                    build_id: m.build_id.clone(),
                    time: t,
                    until: u64::MAX,
                });
            }
            PerfRecord::Comm {
                pid, exec: true, ..
            } => {
                for old in maps.entry(*pid).or_default().iter_mut() {
                    if old.until > t {
                        old.until = t;
                    }
                }
            }
            PerfRecord::Fork { pid, ppid, .. } if pid != ppid => {
                let inherited: Vec<Map> = maps
                    .get(ppid)
                    .map(|v| {
                        v.iter()
                            .filter(|m| m.time <= t && t < m.until)
                            .map(|m| Map {
                                time: t,
                                ..m.clone()
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                maps.entry(*pid).or_default().extend(inherited);
            }
            _ => {}
        }
    }
    maps
}

/// Comm of a thread at a time: the COMM records, then the process table at start and
/// the trace's saved cmdlines.
pub struct Comms {
    changes: HashMap<u32, Vec<(u64, String)>>,
    start: HashMap<u32, String>,
}

impl Comms {
    /// The thread names over time of a recording's sampled records (kstate's SAMPLES
    /// section or a perf.data), from one pass over their side-band records; None where it
    /// has no samples.
    pub fn of_samples(trace: &Trace) -> Result<Option<Comms>, Error> {
        let id = extras::ids::SAMPLES;
        let Some(src) = source(trace, id)? else {
            return Ok(None);
        };
        let side = read_side(trace, &*src, id, None)?;
        Ok(Some(Comms {
            changes: side.changes,
            start: start_comms(trace),
        }))
    }

    pub fn get(&self, tid: u32, t: u64) -> Option<&str> {
        if tid == 0 {
            return Some("swapper");
        }
        if let Some(v) = self.changes.get(&tid) {
            let n = v.partition_point(|c| c.0 <= t);
            if n > 0 {
                return Some(&v[n - 1].1);
            }
            // Before its first COMM record: the first one is the best guess.
            if !self.start.contains_key(&tid) {
                return v.first().map(|c| c.1.as_str());
            }
        }
        self.start.get(&tid).map(String::as_str)
    }
}

/// Names of the processes when the recording started: its saved cmdlines, then its
/// process table.
fn start_comms(trace: &Trace) -> HashMap<u32, String> {
    let mut start: HashMap<u32, String> = trace
        .comms
        .iter()
        .map(|(&p, c)| (p as u32, c.clone()))
        .collect();
    if let Some(Ok(ps)) = trace
        .extra(extras::ids::PROCESSES)
        .map(extras::decode_processes)
    {
        for p in ps {
            start.insert(p.pid as u32, p.comm);
        }
    }
    start
}

/// The sampled instruction's address and whether it is user code: the first entry of
/// the call chain (the kernel repeats the ip there, after a context marker), else the ip.
fn leaf(s: &SampleRec) -> (u64, bool) {
    let mut user = !s.is_kernel();
    for &a in &s.callchain {
        if a >= CONTEXT_MAX {
            user = a == CONTEXT_USER;
            continue;
        }
        return (a, user);
    }
    (s.ip, !s.is_kernel())
}

/// Symbols of a sample's call chain, leaf first. `ip - 1` for return addresses, so a
/// call at the very end of a function names the caller.
pub(crate) fn frames(s: &SampleRec, sy: &mut Symbolizer, out: &mut Vec<u32>) {
    out.clear();
    if s.callchain.is_empty() {
        out.push(if s.is_kernel() {
            sy.kernel(s.ip)
        } else {
            sy.user(s.pid, s.ip, s.time)
        });
        return;
    }
    let mut user = !s.is_kernel();
    let mut first_in_ctx = true;
    for &a in &s.callchain {
        if a >= CONTEXT_MAX {
            user = a == CONTEXT_USER;
            first_in_ctx = true;
            continue;
        }
        let look = if first_in_ctx { a } else { a.wrapping_sub(1) };
        first_in_ctx = false;
        let id = if user {
            sy.user(s.pid, look, s.time)
        } else {
            sy.kernel(look)
        };
        out.push(id);
    }
    if out.is_empty() {
        out.push(if s.is_kernel() {
            sy.kernel(s.ip)
        } else {
            sy.user(s.pid, s.ip, s.time)
        });
    }
}

fn corrupt(trace: &Trace, id: u16, e: Error) -> Error {
    let name = extras::section_name(id).unwrap_or("samples");
    Error::new(e.kind, e.offset, format!("{name} section: {}", e.msg)).in_file(&trace.path)
}

/// The first event's time of the whole trace, as the analyzers take it.
fn first_event(trace: &Trace) -> Option<u64> {
    let mut m = Merger::new(trace, None, IdFilter::all()).ok()?;
    m.next().ok().flatten().map(|e| e.ts)
}

/// The perf records of a recording: kstate's section `id` (SAMPLES or STACKS), or for
/// SAMPLES a perf.data's own records; None where the recording has neither.
pub(crate) fn source<'t>(
    trace: &'t Trace,
    id: u16,
) -> Result<Option<Box<dyn RecordSource + 't>>, Error> {
    if let Some(payload) = trace.extra(id) {
        let sec = samples::decode(payload).map_err(|e| corrupt(trace, id, e))?;
        return Ok(Some(Box::new(sec)));
    }
    match &trace.perf {
        Some(pf) if id == extras::ids::SAMPLES => Ok(Some(Box::new(pf.as_ref()))),
        _ => Ok(None),
    }
}

/// An error of a walk over a source: a kstate section's offsets are in its payload.
fn walk_err(trace: &Trace, id: u16, e: Error) -> Error {
    if e.path.is_some() {
        e
    } else {
        corrupt(trace, id, e)
    }
}

/// A source's records other than samples, sorted out (one pass; samples are only counted).
pub(crate) struct Side {
    /// Index of the event whose samples are read, and its header.
    pub event: usize,
    pub header: samples::Header,
    /// Every sampled event's name, in the file's order.
    pub events: Vec<String>,
    /// That event's samples and the earliest of their times.
    pub samples: u64,
    pub first_time: Option<u64>,
    /// Records the kernel lost.
    pub lost: u64,
    /// Side-band records (maps, comms, forks) with their times.
    pub side: Vec<(u64, PerfRecord)>,
    /// Comm changes per thread, in time order (a forked thread starts with its parent's).
    pub changes: HashMap<u32, Vec<(u64, String)>>,
}

/// Reads the side-band records of a source, for the samples of `event` (default: the
/// first sampled).
pub(crate) fn read_side(
    trace: &Trace,
    src: &dyn RecordSource,
    id: u16,
    event: Option<&str>,
) -> Result<Side, Error> {
    let headers = src.events();
    let events: Vec<String> = headers.iter().map(|h| h.event.clone()).collect();
    let ev = match event {
        None => 0,
        Some(name) => events.iter().position(|e| e == name).ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                None,
                format!(
                    "no samples of {name} in this recording; it has {}",
                    events.join(", ")
                ),
            )
            .in_file(&trace.path)
        })?,
    };
    let mut side: Vec<(u64, PerfRecord)> = Vec::new();
    let (mut n, mut first_time, mut lost) = (0u64, None::<u64>, 0u64);
    src.visit(&mut |r| {
        if r.kind == samples::record::SAMPLE {
            if r.event == ev {
                n += 1;
                if let Some(t) = r.sample_time(headers) {
                    first_time = Some(first_time.map_or(t, |f| f.min(t)));
                }
            }
            return Ok(());
        }
        let rec = r.parse(headers)?;
        match rec {
            PerfRecord::Lost { lost: k } if r.event == ev => lost = lost.saturating_add(k),
            PerfRecord::Comm { time, .. } | PerfRecord::Fork { time, .. } => side.push((time, rec)),
            PerfRecord::Mmap2(ref m) => {
                let t = if r.source == Source::Maps { 0 } else { m.time };
                side.push((t, rec));
            }
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| walk_err(trace, id, e))?;
    side.sort_by_key(|e| e.0);
    let mut changes: HashMap<u32, Vec<(u64, String)>> = HashMap::new();
    for (t, r) in &side {
        match r {
            PerfRecord::Comm { tid, comm, .. } => {
                changes.entry(*tid).or_default().push((*t, comm.clone()));
            }
            PerfRecord::Fork { tid, ptid, .. } if tid != ptid => {
                let parent = changes
                    .get(ptid)
                    .and_then(|v| v.last())
                    .map(|c| c.1.clone());
                if let Some(c) = parent {
                    changes.entry(*tid).or_default().push((*t, c));
                }
            }
            _ => {}
        }
    }
    Ok(Side {
        event: ev,
        header: headers[ev].clone(),
        events,
        samples: n,
        first_time,
        lost,
        side,
        changes,
    })
}

/// A section in the SAMPLES layout, its records sorted out.
pub(crate) struct Section {
    /// The header of the event whose samples these are.
    pub header: samples::Header,
    pub samples: Vec<SampleRec>,
    /// Records the kernel lost.
    pub lost: u64,
    /// Side-band records (maps, comms, forks) with their times.
    pub side: Vec<(u64, PerfRecord)>,
    /// How the samples' user chains were found.
    pub chains: unwind::ChainCounts,
}

/// Reads section `id` (SAMPLES or STACKS) of a recording with the samples of its first
/// event (for the lock views, which keep them by thread); None where the recording has
/// no such section.
pub(crate) fn read_section(trace: &Trace, id: u16) -> Result<Option<Section>, Error> {
    let Some(src) = source(trace, id)? else {
        return Ok(None);
    };
    let side = read_side(trace, &*src, id, None)?;
    // The mappings the user stacks are unwound with.
    let maps = build_maps(&mut side.side.clone());
    let mut unwinder = unwind::ChainUnwinder::new(&maps);
    let regs = side.header.attr.sample_regs_user;
    let mut all = Vec::new();
    let headers = src.events();
    src.visit(&mut |r| {
        if r.kind == samples::record::SAMPLE && r.event == side.event {
            if let PerfRecord::Sample(mut s) = r.parse(headers)? {
                unwinder.unwind(&mut s, regs);
                all.push(s);
            }
        }
        Ok(())
    })
    .map_err(|e| walk_err(trace, id, e))?;
    Ok(Some(Section {
        header: side.header,
        samples: all,
        lost: side.lost,
        side: side.side,
        chains: unwinder.counts,
    }))
}

pub fn profile(trace: &Trace, opts: &Options) -> Result<Profile, Error> {
    let id = extras::ids::SAMPLES;
    let Some(src) = source(trace, id)? else {
        return Err(Error::new(
            ErrorKind::Unsupported,
            None,
            "this recording has no CPU samples; record them with `kstate record --sample ...`",
        )
        .in_file(&trace.path));
    };
    let Side {
        event: ev,
        header: h,
        events,
        samples: total_samples,
        first_time,
        lost,
        mut side,
        changes,
    } = read_side(trace, &*src, id, opts.event.as_deref())?;
    let h = &h;
    let comms = Comms {
        changes,
        start: start_comms(trace),
    };

    let trace_start = first_event(trace).or(first_time).unwrap_or(0);
    let f = &opts.filters;
    let sel = TimeSel {
        include: f.window.map_or((0, u64::MAX), |w| w.resolve(trace_start)),
        exclude: f.not_window.map(|w| w.resolve(trace_start)),
    };

    // The mappings the user stacks are unwound with.
    let maps = build_maps(&mut side.clone());
    let mut unwinder = unwind::ChainUnwinder::new(&maps);
    let mut sy = Symbolizer::new(trace, &mut side);

    let mut p = Profile {
        event: h.event.clone(),
        events,
        freq: h.attr.freq(),
        period: h.attr.freq().is_none().then_some(h.attr.period_or_freq),
        clock: h.clock.clone(),
        total_samples,
        lost,
        samples: 0,
        total_period: 0,
        kernel_samples: 0,
        user_samples: 0,
        rows: Vec::new(),
        callers: None,
        callees: None,
        folded: Vec::new(),
        details: Vec::new(),
        trace_start,
        first_ts: None,
        last_ts: None,
        warnings: Vec::new(),
        chains: unwind::ChainCounts::default(),
    };
    let mut per_sym: HashMap<u32, (u64, u64)> = HashMap::new();
    let callers_of = opts.callers.clone();
    let callees_of = opts.callees.clone();
    let mut callers: HashMap<u32, u64> = HashMap::new();
    let mut callees: HashMap<u32, u64> = HashMap::new();
    let (mut in_callers, mut self_callers) = (0u64, 0u64);
    let (mut in_callees, mut self_callees) = (0u64, 0u64);
    let mut folded: HashMap<Vec<u32>, u64> = HashMap::new();
    let mut details: HashMap<u32, SymbolHits> = HashMap::new();
    let (no_caller, self_row) = (
        sy.intern(Sym {
            name: "[no caller]".into(),
            image: String::new(),
            path: None,
            kind: Kind::Unknown,
        }),
        sy.intern(Sym {
            name: "[self]".into(),
            image: String::new(),
            path: None,
            kind: Kind::Unknown,
        }),
    );
    let mut chain = Vec::new();
    let headers = src.events();
    src.visit(&mut |r| {
        if r.kind != samples::record::SAMPLE || r.event != ev {
            return Ok(());
        }
        let PerfRecord::Sample(mut s) = r.parse(headers)? else {
            return Ok(());
        };
        unwinder.unwind(&mut s, h.attr.sample_regs_user);
        let s = &s;
        if !sel.contains(s.time)
            || (!f.pids.is_empty() && !f.pids.contains(&(s.pid as i32)))
            || (!f.tids.is_empty() && !f.tids.contains(&(s.tid as i32)))
            || (!f.cpus.is_empty() && !f.cpus.contains(&s.cpu))
        {
            return Ok(());
        }
        if !f.comms.is_empty() {
            let c = comms.get(s.tid, s.time).unwrap_or("");
            if !f.comms.iter().any(|x| x == c) {
                return Ok(());
            }
        }
        p.samples += 1;
        // (Saturating: a damaged period may be near 2^64.)
        p.total_period = p.total_period.saturating_add(s.period);
        p.first_ts = Some(p.first_ts.map_or(s.time, |t| t.min(s.time)));
        p.last_ts = Some(p.last_ts.map_or(s.time, |t| t.max(s.time)));
        frames(s, &mut sy, &mut chain);
        let leaf = chain[0];
        if sy.syms[leaf as usize].kind.is_kernel() {
            p.kernel_samples += 1;
        } else {
            p.user_samples += 1;
        }
        let e = per_sym.entry(leaf).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(s.period);
        if let Some(name) = &opts.details {
            if sy.syms[leaf as usize].name == *name {
                let (addr, user) = self::leaf(s);
                let at = if user {
                    sy.user_image_addr(s.pid, addr, s.time)
                } else {
                    Some(addr)
                };
                let h = details.entry(leaf).or_insert_with(|| SymbolHits {
                    sym: sy.syms[leaf as usize].clone(),
                    samples: 0,
                    period: 0,
                    addrs: BTreeMap::new(),
                    unplaced: 0,
                });
                h.samples += 1;
                h.period = h.period.saturating_add(s.period);
                match at {
                    Some(a) => *h.addrs.entry(a).or_default() += 1,
                    None => h.unplaced += 1,
                }
            }
        }
        if let Some(name) = &callers_of {
            if let Some(i) = chain
                .iter()
                .position(|&c| sy.syms[c as usize].name == *name)
            {
                in_callers += 1;
                if i == 0 {
                    self_callers += 1;
                }
                *callers
                    .entry(chain.get(i + 1).copied().unwrap_or(no_caller))
                    .or_default() += 1;
            }
        }
        if let Some(name) = &callees_of {
            if let Some(i) = chain
                .iter()
                .position(|&c| sy.syms[c as usize].name == *name)
            {
                in_callees += 1;
                let c = if i == 0 {
                    self_callees += 1;
                    self_row
                } else {
                    chain[i - 1]
                };
                *callees.entry(c).or_default() += 1;
            }
        }
        if opts.folded {
            let mut stack = chain.clone();
            stack.reverse();
            // Runs of unnamed frames (code without frame pointers walks into garbage) as one.
            stack.dedup_by(|x, y| x == y && sy.syms[*x as usize].name == "[unknown]");
            *folded.entry(stack).or_default() += 1;
        }
        Ok(())
    })
    .map_err(|e| walk_err(trace, id, e))?;
    p.chains = unwinder.counts;
    let mut rows: Vec<Row> = per_sym
        .into_iter()
        .map(|(i, (n, per))| Row {
            sym: sy.syms[i as usize].clone(),
            samples: n,
            period: per,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.period
            .cmp(&a.period)
            .then(b.samples.cmp(&a.samples))
            .then(a.sym.name.cmp(&b.sym.name))
            // `[unknown]` stands in many images: order them too, so output is stable.
            .then(a.sym.image.cmp(&b.sym.image))
            .then(a.sym.path.cmp(&b.sym.path))
    });
    p.rows = rows;
    let view = |name: Option<String>, m: HashMap<u32, u64>, n: u64, own: u64| {
        name.map(|symbol| {
            let mut rows: Vec<(Sym, u64)> = m
                .into_iter()
                .map(|(i, c)| (sy.syms[i as usize].clone(), c))
                .collect();
            rows.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then(a.0.name.cmp(&b.0.name))
                    .then(a.0.image.cmp(&b.0.image))
                    .then(a.0.path.cmp(&b.0.path))
            });
            CallView {
                symbol,
                samples: n,
                self_samples: own,
                rows,
            }
        })
    };
    let mut details: Vec<SymbolHits> = details.into_values().collect();
    details.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.sym.image.cmp(&b.sym.image))
            .then(a.sym.name.cmp(&b.sym.name))
    });
    p.details = details;
    p.callers = view(callers_of, callers, in_callers, self_callers);
    p.callees = view(callees_of, callees, in_callees, self_callees);
    if opts.folded {
        let mut v: Vec<(String, u64)> = folded
            .into_iter()
            .map(|(st, n)| {
                let names: Vec<String> = st
                    .iter()
                    .map(|&i| {
                        let s = &sy.syms[i as usize];
                        // Kernel frames marked as stackcollapse marks them.
                        match s.kind.is_kernel() {
                            true => format!("{}_[k]", s.name),
                            false => s.name.replace(';', ":"),
                        }
                    })
                    .collect();
                (names.join(";"), n)
            })
            .collect();
        v.sort();
        p.folded = v;
    }
    let mut mism: Vec<_> = sy.mismatched.into_iter().collect();
    mism.sort();
    for (path, (want, have)) in mism {
        p.warnings.push(format!(
            "{path}: build id {have} differs from the recorded {want} (the file changed since the recording); its samples are left unnamed"
        ));
    }
    sy.unreadable.sort();
    sy.unreadable.dedup();
    p.warnings.extend(sy.unreadable);
    if let Some(e) = &trace.truncated {
        p.warnings.push(e.msg.clone());
    }
    if !sy.kernel_named && p.kernel_samples > 0 {
        p.warnings
            .push("the recording has no kallsyms: kernel samples are shown as addresses".into());
    }
    Ok(p)
}

/// One symbol's share before and after (`kstate diff`).
#[derive(Debug, Clone)]
pub struct DiffRow {
    pub name: String,
    pub image: String,
    pub kind: Kind,
    pub before_samples: u64,
    pub after_samples: u64,
    pub before_percent: f64,
    pub after_percent: f64,
}

/// Symbols of two profiles matched by (name, image), largest change in share first.
pub fn diff(a: &Profile, b: &Profile) -> Vec<DiffRow> {
    let mut m: HashMap<(String, String), DiffRow> = HashMap::new();
    for (p, after) in [(a, false), (b, true)] {
        for r in &p.rows {
            let e = m
                .entry((r.sym.name.clone(), r.sym.image.clone()))
                .or_insert_with(|| DiffRow {
                    name: r.sym.name.clone(),
                    image: r.sym.image.clone(),
                    kind: r.sym.kind,
                    before_samples: 0,
                    after_samples: 0,
                    before_percent: 0.0,
                    after_percent: 0.0,
                });
            if after {
                e.after_samples += r.samples;
                e.after_percent += p.share(r.period);
            } else {
                e.before_samples += r.samples;
                e.before_percent += p.share(r.period);
            }
        }
    }
    let mut v: Vec<DiffRow> = m.into_values().collect();
    v.sort_by(|x, y| {
        let dx = (x.after_percent - x.before_percent).abs();
        let dy = (y.after_percent - y.before_percent).abs();
        dy.total_cmp(&dx)
            .then(y.after_samples.cmp(&x.after_samples))
            .then(x.name.cmp(&y.name))
            // Several images' `[unknown]` tie on everything else: without this they came
            // out in hash order, so the same two files printed differently run to run.
            .then_with(|| x.image.cmp(&y.image))
    });
    v
}
