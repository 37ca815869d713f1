//! User call chains unwound from what each sample carries (`kstate record --stack-bytes`):
//! the user registers (IP, SP, BP) and a copy of the top of the user stack, walked with
//! the DWARF CFI of the mapped files (`.eh_frame`, else `.debug_frame`, also from the
//! debug file found by build id) by the framehop crate, as `perf --call-graph dwarf`
//! and samply do. Code without CFI is walked through its frame pointers.
//!
//! Never a wrong caller: a return address in a file that is gone, unreadable or changed
//! since the recording (build-id mismatch), or in no mapping at all, ends the chain
//! there; so does a stack copy cut short. Such chains are counted as cut.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use kstate_format::samples::{regs, SampleRec, CONTEXT_USER};
use object::{Object, ObjectSection};

use super::Map;

/// Return addresses walked at most per chain.
const MAX_FRAMES: usize = 256;

type Bytes = Arc<[u8]>;

/// How the user chains of a section were found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainCounts {
    /// Unwound from the stack copy, every step through CFI.
    pub cfi: u64,
    /// Walked through frame pointers: by the kernel (no stack copy), or by the unwinder
    /// for at least one frame of code without CFI.
    pub fp: u64,
    /// Ended early: stack copy cut short, a file gone or changed, no rule for a frame.
    pub cut: u64,
}

impl ChainCounts {
    pub fn total(&self) -> u64 {
        self.cfi + self.fp + self.cut
    }

    pub fn add(&mut self, o: &ChainCounts) {
        self.cfi += o.cfi;
        self.fp += o.fp;
        self.cut += o.cut;
    }

    /// `N unwound by CFI, N by frame pointers, N cut short`, for output headers.
    pub fn describe(&self) -> String {
        format!(
            "{} unwound by CFI, {} by frame pointers, {} cut short",
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
    has_cfi: bool,
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
        let segments = super::elf::segments(&f);
        let mut info = ExplicitModuleSectionInfo::<Bytes> {
            base_svma: 0,
            ..Default::default()
        };
        if let Some((r, _)) = section(&f, ".text") {
            info.text_svma = Some(r);
        }
        if let Some((r, _)) = section(&f, ".got") {
            info.got_svma = Some(r);
        }
        if let Some((r, d)) = section(&f, ".eh_frame") {
            info.eh_frame_svma = Some(r);
            info.eh_frame = Some(d);
            if let Some((r, d)) = section(&f, ".eh_frame_hdr") {
                info.eh_frame_hdr_svma = Some(r);
                info.eh_frame_hdr = Some(d);
            }
        } else if let Some((_, d)) = section(&f, ".debug_frame") {
            info.debug_frame = Some(d);
        } else if let Some(d) = build_id.as_deref().and_then(debug_frame_by_build_id) {
            info.debug_frame = Some(d);
        }
        let has_cfi = info.eh_frame.is_some() || info.debug_frame.is_some();
        Some(FileCfi {
            build_id,
            segments,
            sections: info,
            has_cfi,
        })
    }

    /// The load bias of a mapping of the file at `pgoff` starting at `start`.
    fn base_avma(&self, start: u64, pgoff: u64) -> Option<u64> {
        let svma = super::elf::mapping_addr(&self.segments, pgoff)?;
        Some(start.wrapping_sub(svma))
    }
}

/// `.debug_frame` of the distribution's debug file for a build id (`-dbg` packages).
fn debug_frame_by_build_id(id: &[u8]) -> Option<Bytes> {
    if id.len() < 2 {
        return None;
    }
    let hex = kstate_format::samples::hex(id);
    let dbg = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    let cache = object::ReadCache::new(std::fs::File::open(dbg).ok()?);
    let f = object::File::parse(&cache).ok()?;
    section(&f, ".debug_frame").map(|(_, d)| d)
}

/// What a frame's address lies in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A file with CFI.
    Cfi,
    /// Code without CFI (a file without it, anonymous or vdso code): frame pointers.
    NoCfi,
    /// No mapping, or a file gone or changed: the chain ends here.
    Stop,
}

/// One process's modules, as mapped at some time.
struct Process {
    unwinder: UnwinderX86_64<Bytes>,
    /// (start, end, place), by start.
    places: Vec<(u64, u64, Place)>,
}

impl Process {
    fn place(&self, addr: u64) -> Place {
        let n = self.places.partition_point(|p| p.0 <= addr);
        match n.checked_sub(1).map(|i| self.places[i]) {
            Some((_, end, p)) if addr < end => p,
            _ => Place::Stop,
        }
    }
}

/// Unwinds the user chains of one section's samples.
pub(crate) struct ChainUnwinder<'m> {
    maps: &'m HashMap<u32, Vec<Map>>,
    files: HashMap<String, Option<FileCfi>>,
    /// Per process and set of live mappings (indices into its maps).
    processes: HashMap<(u32, Vec<usize>), Process>,
    cache: CacheX86_64,
    pub counts: ChainCounts,
}

impl<'m> ChainUnwinder<'m> {
    pub(crate) fn new(maps: &'m HashMap<u32, Vec<Map>>) -> ChainUnwinder<'m> {
        ChainUnwinder {
            maps,
            files: HashMap::new(),
            processes: HashMap::new(),
            cache: CacheX86_64::new(),
            counts: ChainCounts::default(),
        }
    }

    /// Replaces the user part of `s`'s call chain with the one unwound from its registers
    /// and stack copy, and drops the copy. Samples without them keep the kernel's chain
    /// (counted as frame pointers when it has a user part).
    pub(crate) fn unwind(&mut self, s: &mut SampleRec, regs_mask: u64) {
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
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let p = process(
            self.maps,
            &mut self.files,
            &mut self.processes,
            s.pid,
            s.time,
        );
        let mut out: Vec<u64> = Vec::new();
        let (mut used_fp, mut cut) = (false, false);
        let mut it = p.unwinder.iter_frames(
            ip,
            UnwindRegsX86_64::new(ip, sp, bp),
            &mut self.cache,
            &mut read,
        );
        loop {
            let f = match it.next() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(_) => {
                    cut = true;
                    break;
                }
            };
            out.push(match f {
                FrameAddress::InstructionPointer(a) => a,
                FrameAddress::ReturnAddress(a) => a.get(),
            });
            match p.place(f.address_for_lookup()) {
                Place::Cfi => {}
                Place::NoCfi => used_fp = true,
                Place::Stop => cut = true,
            }
            if cut || out.len() >= MAX_FRAMES {
                cut = true;
                break;
            }
        }
        match (cut, used_fp) {
            (true, _) => self.counts.cut += 1,
            (false, true) => self.counts.fp += 1,
            (false, false) => self.counts.cfi += 1,
        }
        // The kernel's part stays; its user part (if any) gives way to ours.
        let keep = s
            .callchain
            .iter()
            .position(|&a| a == CONTEXT_USER)
            .unwrap_or(s.callchain.len());
        s.callchain.truncate(keep);
        s.callchain.push(CONTEXT_USER);
        s.callchain.extend(out);
    }
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

/// Adds a mapping's file to a process's unwinder; says where its frames lie.
fn add_module(
    files: &mut HashMap<String, Option<FileCfi>>,
    unwinder: &mut UnwinderX86_64<Bytes>,
    m: &Map,
) -> Place {
    if !m.path.starts_with('/') || m.path.starts_with("/memfd:") {
        return Place::NoCfi;
    }
    let loaded = files
        .entry(m.path.clone())
        .or_insert_with(|| FileCfi::load(&m.path));
    // A file gone or unreadable: its frames end the chain.
    let Some(f) = loaded else {
        return Place::Stop;
    };
    if let (Some(want), Some(have)) = (&m.build_id, &f.build_id) {
        if want != have {
            return Place::Stop;
        }
    }
    if !f.has_cfi {
        return Place::NoCfi;
    }
    let Some(base) = f.base_avma(m.start, m.pgoff) else {
        return Place::Stop;
    };
    unwinder.add_module(Module::new(
        m.path.clone(),
        m.start..m.end,
        base,
        f.sections.clone(),
    ));
    Place::Cfi
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
}
