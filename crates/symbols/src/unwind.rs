//! User call chains unwound from what each sample carries (`kstate record --stack-bytes`):
//! the user registers (IP, SP, BP) and a copy of the top of the user stack, walked with
//! the DWARF CFI of the mapped files (`.eh_frame`, else `.debug_frame`, also from the
//! debug file found by build id) by the framehop crate, as `perf --call-graph dwarf`
//! and samply do. Code without CFI (a file without it, anonymous code, or a function
//! without an FDE in a file that has CFI, such as hand-written assembly) is walked
//! through its frame pointers.
//!
//! Never a wrong caller: every address is checked against the file's CFI first
//! ([`super::cover`]); corrupt CFI, a frame in a file that is gone or changed since the
//! recording (build-id mismatch, unless perf's build-id cache holds the file as it was),
//! or a stack copy cut short end the chain there, counted as cut. A walk that reaches an
//! address in no executable mapping has gone astray: it is dropped for the kernel's own
//! frame-pointer chain, recorded with the sample. So is a walk that reached the end of
//! the copy in a function that keeps its frame pointer (its CFI says so), where the
//! kernel's chain agrees with every frame walked: the kernel read the whole stack.

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use kstate_format::perf::decode::{regs, SampleRec, CONTEXT_USER};
use object::{Object, ObjectSection};

use crate::cover::{Cfi, Cover, Svmas};
use crate::entry_exit::{Code, Stage};
use crate::symbolizer::Map;

/// Return addresses walked at most per chain.
const MAX_FRAMES: usize = 256;

pub(super) type Bytes = Arc<[u8]>;

/// How the user chains of a section were found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainCounts {
    /// Unwound from the stack copy, every step through CFI.
    pub cfi: u64,
    /// Walked through frame pointers: by the kernel (no stack copy, or the walk through
    /// the copy went astray), or by the unwinder for at least one frame of code without
    /// CFI.
    pub fp: u64,
    /// Ended early: stack copy cut short, a file gone or changed, corrupt CFI.
    pub cut: u64,
    /// Of those, ended at the end of the stack copy: the frames above lay past what was
    /// copied (`--stack-bytes`), which is no fault of the chain. A futex() chain's 1 KiB
    /// copy reaches the lock's caller, not always its thread's root.
    pub copy_end: u64,
}

impl ChainCounts {
    pub fn total(&self) -> u64 {
        self.cfi + self.fp + self.cut
    }

    pub fn add(&mut self, o: &ChainCounts) {
        self.cfi += o.cfi;
        self.fp += o.fp;
        self.cut += o.cut;
        self.copy_end += o.copy_end;
    }

    /// `N unwound by CFI, N by frame pointers, N cut short (N at the end of the stack
    /// copy)`, for output headers.
    pub fn describe(&self) -> String {
        let at_end = match self.copy_end {
            0 => String::new(),
            n => format!(" ({n} at the end of the stack copy)"),
        };
        format!(
            "{} unwound by CFI, {} by frame pointers, {} cut short{at_end}",
            self.cfi, self.fp, self.cut
        )
    }
}

/// A file's unwind sections, loaded once per path.
struct FileCfi {
    build_id: Option<Vec<u8>>,
    /// PT_LOAD segments: (file offset, file size, virtual address, memory size).
    segments: Vec<(u64, u64, u64, u64)>,
    sections: ExplicitModuleSectionInfo<Bytes>,
    /// The same CFI, for checking addresses; None without CFI.
    cfi: Option<Arc<Cfi>>,
    /// Its code, read where a function without CFI was sampled.
    code: Arc<Code>,
}

fn section<'d, R: object::ReadRef<'d>>(
    f: &object::File<'d, R>,
    name: &str,
) -> Option<(Range<u64>, Bytes)> {
    let s = f.section_by_name(name)?;
    let data = s.uncompressed_data().ok()?;
    Some((s.address()..s.address() + s.size(), Arc::from(&*data)))
}

impl FileCfi {
    fn load(path: &str) -> Option<FileCfi> {
        // Only the headers and the sections used are read (a debug build is 100+ MiB).
        let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
        let f = object::File::parse(&cache).ok()?;
        let build_id = f.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = crate::elf::segments(&f);
        let mut info = ExplicitModuleSectionInfo::<Bytes> {
            base_svma: 0,
            ..Default::default()
        };
        let mut at = Svmas::default();
        if let Some((r, _)) = section(&f, ".text") {
            info.text_svma = Some(r.clone());
            at.text = Some(r);
        }
        if let Some((r, _)) = section(&f, ".got") {
            info.got_svma = Some(r.clone());
            at.got = Some(r);
        }
        let cfi = if let Some((r, d)) = section(&f, ".eh_frame") {
            info.eh_frame_svma = Some(r.clone());
            info.eh_frame = Some(d.clone());
            at.eh_frame = Some(r);
            let hdr = section(&f, ".eh_frame_hdr").map(|(r, h)| {
                info.eh_frame_hdr_svma = Some(r.clone());
                info.eh_frame_hdr = Some(h.clone());
                at.eh_frame_hdr = Some(r);
                h
            });
            Some(Cfi::new(d, true, hdr, &at))
        } else {
            let d = section(&f, ".debug_frame")
                .map(|(_, d)| d)
                .or_else(|| build_id.as_deref().and_then(debug_frame_by_build_id));
            d.map(|d| {
                info.debug_frame = Some(d.clone());
                Cfi::new(d, false, None, &at)
            })
        };
        Some(FileCfi {
            build_id,
            code: Arc::new(Code::new(path, segments.clone())),
            segments,
            sections: info,
            cfi: cfi.map(Arc::new),
        })
    }

    /// The load bias of a mapping of the file at `pgoff` starting at `start`.
    fn base_avma(&self, start: u64, pgoff: u64) -> Option<u64> {
        let svma = crate::elf::mapping_addr(&self.segments, pgoff)?;
        Some(start.wrapping_sub(svma))
    }
}

/// `.debug_frame` of the distribution's debug file for a build id (`-dbg` packages).
fn debug_frame_by_build_id(id: &[u8]) -> Option<Bytes> {
    if id.len() < 2 {
        return None;
    }
    let hex = kstate_format::perf::decode::hex(id);
    let dbg = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    let cache = object::ReadCache::new(std::fs::File::open(dbg).ok()?);
    let f = object::File::parse(&cache).ok()?;
    section(&f, ".debug_frame").map(|(_, d)| d)
}

/// What a frame's address lies in.
#[derive(Clone)]
enum Place {
    /// A file with CFI, loaded at this bias.
    Cfi(Arc<Cfi>, u64, Arc<Code>),
    /// Code without CFI (a file without it, anonymous or vdso code): frame pointers.
    NoCfi,
    /// A file gone or changed: the chain ends at this frame.
    Gone,
}

/// One process's modules, as mapped at some time.
struct Process {
    unwinder: UnwinderX86_64<Bytes>,
    /// (start, end, place), by start.
    places: Vec<(u64, u64, Place)>,
}

impl Process {
    /// None where no executable mapping holds `addr`.
    fn place(&self, addr: u64) -> Option<&Place> {
        let n = self.places.partition_point(|p| p.0 <= addr);
        match n.checked_sub(1).map(|i| &self.places[i]) {
            Some((_, end, p)) if addr < *end => Some(p),
            _ => None,
        }
    }
}

/// How a walk through the stack copy ended.
#[derive(PartialEq, Eq)]
enum End {
    /// At the process's root.
    Root,
    /// Early, counted as cut.
    Cut,
    /// At a return address in no executable mapping.
    Astray,
    /// At the end of the stack copy, counted as cut.
    ShortCopy,
}

/// How one frame is stepped over.
#[derive(Clone, Copy)]
enum Step {
    /// framehop, with the file's CFI or (code without CFI) frame pointers.
    Framehop,
    /// Frame pointers, for a function without CFI in a file with CFI: framehop would
    /// take it for a leaf that has pushed nothing.
    FramePointer,
    /// Out of such a function sampled before its frame is set up or after it is taken
    /// down.
    EntryExit(Stage),
}

/// Unwinds the user chains of one section's samples.
pub struct ChainUnwinder<'m> {
    maps: &'m HashMap<u32, Vec<Map>>,
    files: HashMap<String, Option<FileCfi>>,
    /// Per process and set of live mappings (indices into its maps).
    processes: HashMap<(u32, Vec<usize>), Process>,
    cache: CacheX86_64,
    /// What a file's CFI says of an address (by the file's `Cfi` and SVMA).
    covers: HashMap<(usize, u64), Cover>,
    /// How far a function without CFI had set up its frame (by the file's `Code` and
    /// SVMA of the sampled instruction).
    stages: HashMap<(usize, u64), Stage>,
    pub counts: ChainCounts,
}

impl<'m> ChainUnwinder<'m> {
    pub fn new(maps: &'m HashMap<u32, Vec<Map>>) -> ChainUnwinder<'m> {
        ChainUnwinder {
            maps,
            files: HashMap::new(),
            processes: HashMap::new(),
            cache: CacheX86_64::new(),
            covers: HashMap::new(),
            stages: HashMap::new(),
            counts: ChainCounts::default(),
        }
    }

    /// Replaces the user part of `s`'s call chain with the one unwound from its registers
    /// and stack copy, and drops the copy. Samples without them keep the kernel's chain
    /// (counted as frame pointers when it has a user part).
    pub fn unwind(&mut self, s: &mut SampleRec, regs_mask: u64) {
        let (Some(ip), Some(sp), Some(bp)) = (
            s.user_reg(regs_mask, regs::IP),
            s.user_reg(regs_mask, regs::SP),
            s.user_reg(regs_mask, regs::BP),
        ) else {
            if s.callchain.contains(&CONTEXT_USER) {
                self.counts.fp += 1;
            }
            s.user_stack = Vec::new();
            return;
        };
        let stack = std::mem::take(&mut s.user_stack);
        // Set when a read went past the end of the copy.
        let past_copy = Cell::new(false);
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let b = stack.get(off..off.checked_add(8).ok_or(())?);
            past_copy.set(b.is_none());
            Ok(u64::from_le_bytes(b.ok_or(())?.try_into().map_err(|_| ())?))
        };
        let p = process(
            self.maps,
            &mut self.files,
            &mut self.processes,
            s.pid,
            s.time,
        );
        let mut regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut addr = FrameAddress::from_instruction_pointer(ip);
        let mut out = vec![ip];
        let (mut used_fp, mut keeps_fp) = (false, false);
        let end = loop {
            let look = addr.address_for_lookup();
            let step = match p.place(look) {
                // The first frame's IP only (every return address is checked below).
                None => break End::Cut,
                Some(Place::Gone) => break End::Cut,
                Some(Place::NoCfi) => {
                    used_fp = true;
                    Step::Framehop
                }
                Some(Place::Cfi(cfi, base, code)) => {
                    let svma = look.wrapping_sub(*base);
                    let key = (Arc::as_ptr(cfi) as usize, svma);
                    match *self.covers.entry(key).or_insert_with(|| cfi.cover(svma)) {
                        Cover::Covered => Step::Framehop,
                        Cover::Uncovered => {
                            used_fp = true;
                            // Only the sampled instruction can be outside the frame: a
                            // return address is inside its caller's body.
                            let stage = match out.len() {
                                1 => *self
                                    .stages
                                    .entry((Arc::as_ptr(code) as usize, svma))
                                    .or_insert_with(|| code.stage(svma)),
                                _ => Stage::Body,
                            };
                            match stage {
                                Stage::Body => Step::FramePointer,
                                s => Step::EntryExit(s),
                            }
                        }
                        Cover::Corrupt => break End::Cut,
                    }
                }
            };
            let next = match step {
                Step::Framehop => p
                    .unwinder
                    .unwind_frame(addr, &mut regs, &mut self.cache, &mut read)
                    .map_err(|_| ()),
                Step::FramePointer => frame_pointer_step(&mut regs, &mut read),
                Step::EntryExit(stage) => {
                    crate::entry_exit::step(stage, &mut regs, &mut read).map(Some)
                }
            };
            let ra = match next {
                Ok(Some(ra)) => ra,
                Ok(None) => break End::Root,
                Err(()) if past_copy.get() => {
                    // Whether the kernel's frame-pointer walk got this frame's caller right.
                    keeps_fp = match (step, p.place(look)) {
                        (Step::FramePointer, _) => true,
                        // %rbp was still the caller's: the kernel walked through it.
                        (Step::EntryExit(_), _) => false,
                        (_, Some(Place::Cfi(cfi, base, _))) => {
                            cfi.keeps_frame_pointer(look.wrapping_sub(*base))
                        }
                        _ => true,
                    };
                    break End::ShortCopy;
                }
                Err(()) => break End::Cut,
            };
            let Some(next) = FrameAddress::from_return_address(ra) else {
                break End::Cut;
            };
            if p.place(next.address_for_lookup()).is_none() {
                break End::Astray;
            }
            if out.len() >= MAX_FRAMES {
                break End::Cut;
            }
            out.push(ra);
            addr = next;
        };
        let user = s
            .callchain
            .iter()
            .position(|&a| a == CONTEXT_USER)
            .unwrap_or(s.callchain.len());
        // Where ours went astray, or the copy ended in a function that keeps its frame
        // pointer, the kernel's walk (it reads the whole stack) takes over, provided it
        // agrees with ours as far as ours went.
        let agree = match end {
            End::Astray => Some(0),
            End::ShortCopy if keeps_fp => Some(out.len()),
            _ => None,
        };
        let kernel = s.callchain.get(user + 1..).unwrap_or_default();
        if agree.is_some_and(|n| kernel.len() > n && kernel[..n] == out[..n]) {
            // Up to its own first address in no mapping.
            let ok = kernel
                .iter()
                .skip(1)
                .position(|&a| p.place(a.wrapping_sub(1)).is_none())
                .map_or(kernel.len(), |n| n + 1);
            if ok == kernel.len() {
                self.counts.fp += 1;
            } else {
                self.counts.cut += 1;
            }
            s.callchain.truncate(user + 1 + ok);
            return;
        }
        match (end, used_fp) {
            (End::Root, false) => self.counts.cfi += 1,
            (End::Root, true) => self.counts.fp += 1,
            (End::ShortCopy, _) => {
                self.counts.cut += 1;
                self.counts.copy_end += 1;
            }
            _ => self.counts.cut += 1,
        }
        // The kernel's part stays; its user part (if any) gives way to ours.
        s.callchain.truncate(user);
        s.callchain.push(CONTEXT_USER);
        s.callchain.extend(out);
    }
}

/// One frame-pointer step (`push rbp; mov rbp, rsp` prologues): the caller's frame
/// pointer at [bp], the return address above it. Ok(None) at the root (bp 0).
fn frame_pointer_step(
    regs: &mut UnwindRegsX86_64,
    read: &mut impl FnMut(u64) -> Result<u64, ()>,
) -> Result<Option<u64>, ()> {
    let (sp, bp) = (regs.sp(), regs.bp());
    if bp == 0 {
        return Ok(None);
    }
    // A frame lies above the stack pointer; a walk must move up the stack.
    if bp < sp {
        return Err(());
    }
    let ra = read(bp.checked_add(8).ok_or(())?)?;
    let caller_bp = read(bp)?;
    regs.set_sp(bp.checked_add(16).ok_or(())?);
    regs.set_bp(caller_bp);
    regs.set_ip(ra);
    Ok(Some(ra))
}

/// The modules of process `pid` as mapped at `time`, made once per set of mappings.
fn process<'a>(
    maps: &HashMap<u32, Vec<Map>>,
    files: &mut HashMap<String, Option<FileCfi>>,
    processes: &'a mut HashMap<(u32, Vec<usize>), Process>,
    pid: u32,
    time: u64,
) -> &'a Process {
    let all = maps.get(&pid).map(Vec::as_slice).unwrap_or_default();
    let live: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].time <= time && time < all[i].until)
        .collect();
    processes.entry((pid, live)).or_insert_with_key(|key| {
        let mut unwinder = UnwinderX86_64::new();
        let mut places: Vec<(u64, u64, Place)> = key
            .1
            .iter()
            .map(|&i| {
                let m = &all[i];
                (m.start, m.end, add_module(files, &mut unwinder, m))
            })
            .collect();
        places.sort_by_key(|p| p.0);
        Process { unwinder, places }
    })
}

/// The file a mapping's code is read from: its path, or where that file is gone or
/// changed (its build id not the recorded one), the copy in perf's build-id cache.
fn file_for<'f>(files: &'f mut HashMap<String, Option<FileCfi>>, m: &Map) -> Option<&'f FileCfi> {
    let same = |f: &FileCfi| match (&m.build_id, &f.build_id) {
        (Some(want), Some(have)) => want == have,
        _ => true,
    };
    let at_path = files
        .entry(m.path.clone())
        .or_insert_with(|| FileCfi::load(&m.path));
    if at_path.as_ref().is_some_and(same) {
        return files[&m.path].as_ref();
    }
    let cached = crate::symbolizer::build_id_cache(&m.path, m.build_id.as_deref()?)?;
    let f = files
        .entry(cached.clone())
        .or_insert_with(|| FileCfi::load(&cached));
    f.as_ref()
        .filter(|f| m.build_id.is_some() && f.build_id == m.build_id)
}

/// Adds a mapping's file to a process's unwinder; says where its frames lie.
fn add_module(
    files: &mut HashMap<String, Option<FileCfi>>,
    unwinder: &mut UnwinderX86_64<Bytes>,
    m: &Map,
) -> Place {
    if !m.path.starts_with('/') || m.path.starts_with("/memfd:") {
        return Place::NoCfi;
    }
    // A file gone, unreadable or changed, and not in the cache: its frames end the chain.
    let Some(f) = file_for(files, m) else {
        return Place::Gone;
    };
    let Some(cfi) = &f.cfi else {
        return Place::NoCfi;
    };
    let Some(base) = f.base_avma(m.start, m.pgoff) else {
        return Place::Gone;
    };
    unwinder.add_module(Module::new(
        m.path.clone(),
        m.start..m.end,
        base,
        f.sections.clone(),
    ));
    Place::Cfi(cfi.clone(), base, f.code.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ip: u64, stack: Vec<u8>) -> SampleRec {
        SampleRec {
            pid: 7,
            tid: 7,
            time: 10,
            callchain: vec![CONTEXT_USER, ip, 0x1111],
            // bp, sp, ip
            user_regs: vec![0x9000, 0x8000, ip],
            user_stack: stack,
            ..SampleRec::default()
        }
    }

    fn map(path: &str) -> Map {
        Map {
            start: 0x400000,
            end: 0x500000,
            pgoff: 0,
            path: path.into(),
            build_id: None,
            time: 0,
            until: u64::MAX,
        }
    }

    /// A frame in a file that is gone ends the chain there, counted as cut; the kernel's
    /// frame-pointer guess (0x1111) is not kept.
    #[test]
    fn a_file_that_is_gone_cuts_the_chain() {
        let maps = HashMap::from([(7, vec![map("/nonexistent/kstate-test")])]);
        let mut u = ChainUnwinder::new(&maps);
        let mut s = sample(0x401000, vec![0; 64]);
        u.unwind(&mut s, regs::UNWIND_MASK);
        assert_eq!(s.callchain, vec![CONTEXT_USER, 0x401000]);
        assert_eq!(u.counts.cut, 1);
        assert!(s.user_stack.is_empty());
    }

    /// A stack copy too short for the walk: cut, never a made-up frame.
    #[test]
    fn a_short_stack_copy_cuts_the_chain() {
        // Anonymous code: walked through frame pointers, from a bp outside the copy.
        let maps = HashMap::from([(7, vec![map("")])]);
        let mut u = ChainUnwinder::new(&maps);
        let mut s = sample(0x401000, vec![0; 8]);
        u.unwind(&mut s, regs::UNWIND_MASK);
        assert_eq!(s.callchain, vec![CONTEXT_USER, 0x401000]);
        assert_eq!(
            u.counts,
            ChainCounts {
                cut: 1,
                ..ChainCounts::default()
            }
        );
        // No registers: the kernel's chain stays, as a frame-pointer chain.
        let mut s = sample(0x401000, Vec::new());
        s.user_regs.clear();
        u.unwind(&mut s, regs::UNWIND_MASK);
        assert_eq!(s.callchain, vec![CONTEXT_USER, 0x401000, 0x1111]);
        assert_eq!(u.counts.fp, 1);
    }

    /// A walk that reaches a return address in no mapping has gone astray: that address
    /// is never shown; the kernel's own chain is kept, up to its first such address.
    #[test]
    fn a_walk_gone_astray_gives_way_to_the_kernels_chain() {
        let maps = HashMap::from([(7, vec![map("")])]);
        let mut u = ChainUnwinder::new(&maps);
        // Frame pointer at sp: saved bp 0, return address 0xdead000 (no mapping).
        let stack = [0u64.to_le_bytes(), 0xdead000u64.to_le_bytes()].concat();
        let mut s = sample(0x401000, stack.clone());
        s.user_regs[0] = 0x8000;
        s.callchain = vec![CONTEXT_USER, 0x401000, 0x402000];
        u.unwind(&mut s, regs::UNWIND_MASK);
        assert_eq!(s.callchain, vec![CONTEXT_USER, 0x401000, 0x402000]);
        assert_eq!(u.counts.fp, 1);
        // The kernel's chain astray too: kept up to there, counted as cut.
        let mut s = sample(0x401000, stack);
        s.user_regs[0] = 0x8000;
        s.callchain = vec![CONTEXT_USER, 0x401000, 0x402000, 0x1111, 0x403000];
        u.unwind(&mut s, regs::UNWIND_MASK);
        assert_eq!(s.callchain, vec![CONTEXT_USER, 0x401000, 0x402000]);
        assert_eq!(u.counts.cut, 1);
    }
}
