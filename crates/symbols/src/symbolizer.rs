//! Addresses to symbols: the kernel's through the recording's kallsyms ([`Ksyms`], modules
//! named by their `[module]` tag), user code's through the process's mappings at the
//! sample's time (MMAP2 records: the kernel's, and those the recorder made from /proc at
//! the start) to a file and offset, then that file's ELF symbols ([`ElfImage`]). A file
//! whose build id differs from the one recorded gives no names, not wrong ones; perf's
//! build-id cache may still hold the file as it was.

use std::collections::HashMap;

use kstate_format::perf::decode::{self, PerfRecord, SampleRec, CONTEXT_MAX, CONTEXT_USER};
use kstate_format::Trace;

use crate::elf::ElfImage;
use crate::ksyms::Ksyms;

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

/// One executable mapping of a process, valid from `time` until `until`.
#[derive(Debug, Clone)]
pub struct Map {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) path: String,
    pub(crate) build_id: Option<Vec<u8>>,
    pub(crate) time: u64,
    pub(crate) until: u64,
}

/// The kernel half: kallsyms plus which symbol addresses belong to modules.
pub(crate) struct Kernel {
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
pub struct Symbolizer {
    pub(crate) kernel: Kernel,
    /// Whether there are kernel symbols (the recording's, or this machine's for a perf.data).
    pub(crate) kernel_named: bool,
    pub(crate) maps: HashMap<u32, Vec<Map>>,
    /// (pid, ip) -> indices into the pid's maps that hold ip, whatever their time.
    pub(crate) candidates: HashMap<(u32, u64), Vec<usize>>,
    pub(crate) images: HashMap<String, ElfImage>,
    /// Paths whose recorded build id differs from the file's.
    pub(crate) mismatched: HashMap<String, (String, String)>,
    pub(crate) syms: Vec<Sym>,
    pub(crate) index: HashMap<Sym, u32>,
    /// (pid, map index, ip) and kernel ip -> symbol.
    pub(crate) user_cache: HashMap<(u32, usize, u64), u32>,
    pub(crate) kernel_cache: HashMap<u64, u32>,
    pub(crate) unreadable: Vec<String>,
}

impl Symbolizer {
    /// For a recording's kernel symbols and the side-band records of one of its sample
    /// sections (sorted here).
    pub fn new(trace: &Trace, side: &mut [(u64, PerfRecord)]) -> Symbolizer {
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

    /// Whether kernel addresses get names: the recording's kallsyms, or this machine's
    /// for a perf.data of the running kernel.
    pub fn kernel_named(&self) -> bool {
        self.kernel_named
    }

    /// What a report should say once symbolizing is done: the files whose build id differs
    /// from the recorded one (path -> (recorded, found), hex), and the files that could not
    /// be read.
    pub fn into_problems(self) -> (HashMap<String, (String, String)>, Vec<String>) {
        (self.mismatched, self.unreadable)
    }

    pub fn sym(&self, id: u32) -> &Sym {
        &self.syms[id as usize]
    }

    /// The ELF image of a path, loaded once.
    pub fn image(&mut self, path: &str) -> &ElfImage {
        if !self.images.contains_key(path) {
            let img = ElfImage::load(path);
            if let Some(p) = &img.problem {
                self.unreadable.push(p.clone());
            }
            self.images.insert(path.to_string(), img);
        }
        &self.images[path]
    }

    pub fn intern(&mut self, s: Sym) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let i = self.syms.len() as u32;
        self.index.insert(s.clone(), i);
        self.syms.push(s);
        i
    }

    pub(crate) fn kernel(&mut self, addr: u64) -> u32 {
        if let Some(&i) = self.kernel_cache.get(&addr) {
            return i;
        }
        let s = self.kernel.sym(addr);
        let i = self.intern(s);
        self.kernel_cache.insert(addr, i);
        i
    }

    /// The index (into the pid's maps) of the mapping holding `addr` at `time`.
    pub(crate) fn map_for(&mut self, pid: u32, addr: u64, time: u64) -> Option<usize> {
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
    pub fn user_image_addr(&mut self, pid: u32, addr: u64, time: u64) -> Option<u64> {
        let mi = self.map_for(pid, addr, time)?;
        let m = &self.maps[&pid][mi];
        let off = addr - m.start + m.pgoff;
        self.images.get(&m.path)?.offset_to_addr(off)
    }

    pub(crate) fn user(&mut self, pid: u32, addr: u64, time: u64) -> u32 {
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
    pub(crate) fn cached(&mut self, path: &str, want: &[u8]) -> Option<String> {
        let c = build_id_cache(path, want)?;
        if !self.images.contains_key(&c) {
            self.images.insert(c.clone(), ElfImage::load(&c));
        }
        (self.images[&c].build_id.as_deref() == Some(want)).then_some(c)
    }

    pub(crate) fn user_sym(&mut self, m: &Map, addr: u64) -> Sym {
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
                            .or_insert_with(|| (decode::hex(want), decode::hex(have)));
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
    pub(crate) fn sym_in(
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
pub(crate) fn build_id_cache(path: &str, id: &[u8]) -> Option<String> {
    let home = std::env::var_os("HOME")?;
    let hex = decode::hex(id);
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
    use kstate_format::perf::file::feature;
    let recorded = pf
        .build_ids()
        .into_iter()
        .find(|b| b.kernel && b.path == "[kernel.kallsyms]");
    let running = std::fs::read("/sys/kernel/notes")
        .ok()
        .and_then(|n| decode::find_build_id(&n, kstate_format::Endian::Little));
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
pub fn build_maps(events: &mut [(u64, PerfRecord)]) -> HashMap<u32, Vec<Map>> {
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

/// The sampled instruction's address and whether it is user code: the first entry of
/// the call chain (the kernel repeats the ip there, after a context marker), else the ip.
pub fn leaf(s: &SampleRec) -> (u64, bool) {
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
pub fn frames(s: &SampleRec, sy: &mut Symbolizer, out: &mut Vec<u32>) {
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
