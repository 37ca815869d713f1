//! Whether a file's DWARF CFI really covers a code address, checked with gimli before
//! framehop is asked to unwind it.
//!
//! framehop is forgiving where kstate must not be: an FDE that does not parse becomes a
//! frame-pointer step, and an address no FDE covers (hand-written assembly without
//! `.cfi_*` directives, in a file that has CFI for everything else) is taken for a leaf
//! that has not pushed anything. Either can skip a caller or invent one. Here the CFI
//! section is parsed whole once per file, and each address once: covered by an FDE that
//! parses up to it, not covered in a section that parsed cleanly (code without CFI:
//! frame pointers), or anything else (corrupt CFI: the chain is cut).

use std::ops::Range;
use std::sync::OnceLock;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, EhFrameHdr, EndianSlice, LittleEndian,
    RegisterRule, UnwindContext, UnwindSection, UnwindTableRow, X86_64,
};

use crate::unwind::Bytes;

type R<'a> = EndianSlice<'a, LittleEndian>;

/// What a file's CFI says about one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cover {
    /// An FDE covers it, and its rows parse up to it.
    Covered,
    /// No FDE covers it, and the whole section parsed: code without CFI.
    Uncovered,
    /// The section, the FDE or its rows do not parse, or `.eh_frame_hdr` names another
    /// FDE than the section does: nothing said about this address can be trusted.
    Corrupt,
}

/// The FDEs of a section, sorted by start address.
struct Index {
    /// (start, end, offset in the section), SVMAs.
    fdes: Vec<(u64, u64, usize)>,
    /// The section parsed to its end: an address outside every FDE truly has none.
    complete: bool,
}

/// One file's unwind section, as framehop is given it.
pub(super) struct Cfi {
    data: Bytes,
    /// `.eh_frame` (with its header when the file has one), else `.debug_frame`.
    eh_frame: bool,
    hdr: Option<Bytes>,
    bases: BaseAddresses,
    index: OnceLock<Index>,
}

/// The SVMA ranges of the sections CFI pointers may be relative to.
#[derive(Default)]
pub(super) struct Svmas {
    pub eh_frame: Option<Range<u64>>,
    pub eh_frame_hdr: Option<Range<u64>>,
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
}

impl Cfi {
    pub(super) fn new(data: Bytes, eh_frame: bool, hdr: Option<Bytes>, at: &Svmas) -> Cfi {
        let start = |r: &Option<Range<u64>>| r.as_ref().map_or(0, |r| r.start);
        // The same bases framehop uses (framehop::dwarf::base_addresses_for_sections).
        let bases = BaseAddresses::default()
            .set_eh_frame(start(&at.eh_frame))
            .set_eh_frame_hdr(start(&at.eh_frame_hdr))
            .set_text(start(&at.text))
            .set_got(start(&at.got));
        Cfi {
            data,
            eh_frame,
            hdr,
            bases,
            index: OnceLock::new(),
        }
    }

    /// What the CFI says about the code at `svma`.
    pub(super) fn cover(&self, svma: u64) -> Cover {
        let data = EndianSlice::new(&self.data[..], LittleEndian);
        if self.eh_frame {
            let mut s = EhFrame::from(data);
            s.set_address_size(8);
            let c = self.cover_in(&s, svma);
            match (c, &self.hdr) {
                (Cover::Covered, Some(hdr)) => self.hdr_agrees(&s, hdr, svma, c),
                _ => c,
            }
        } else {
            let mut s = DebugFrame::from(data);
            s.set_address_size(8);
            self.cover_in(&s, svma)
        }
    }

    fn cover_in<'a, S: UnwindSection<R<'a>>>(&self, s: &S, svma: u64) -> Cover {
        let index = self.index.get_or_init(|| index(s, &self.bases));
        let Some(off) = index.fde_at(svma) else {
            return uncovered(index);
        };
        match self.row_at(s, off, svma, |_| ()) {
            Some(()) => Cover::Covered,
            None => Cover::Corrupt,
        }
    }

    /// `f` of the CFI row for `svma` of the FDE at `off`; None where it does not parse.
    fn row_at<'a, S: UnwindSection<R<'a>>, T>(
        &self,
        s: &S,
        off: usize,
        svma: u64,
        f: impl FnOnce(&UnwindTableRow<usize>) -> T,
    ) -> Option<T> {
        let fde = s
            .fde_from_offset(&self.bases, S::Offset::from(off), S::cie_from_offset)
            .ok()?;
        let mut ctx = UnwindContext::new();
        let row = fde
            .unwind_info_for_address(s, &self.bases, &mut ctx, svma)
            .ok()?;
        Some(f(row))
    }

    /// Whether the covered code at `svma` keeps the caller's frame pointer where a
    /// frame-pointer walk looks for it (CFA = rbp + 16, rbp saved at CFA - 16): then the
    /// kernel's frame-pointer chain is right about this frame's caller.
    pub(super) fn keeps_frame_pointer(&self, svma: u64) -> bool {
        let data = EndianSlice::new(&self.data[..], LittleEndian);
        if self.eh_frame {
            let mut s = EhFrame::from(data);
            s.set_address_size(8);
            self.keeps_frame_pointer_in(&s, svma)
        } else {
            let mut s = DebugFrame::from(data);
            s.set_address_size(8);
            self.keeps_frame_pointer_in(&s, svma)
        }
    }

    fn keeps_frame_pointer_in<'a, S: UnwindSection<R<'a>>>(&self, s: &S, svma: u64) -> bool {
        let index = self.index.get_or_init(|| index(s, &self.bases));
        let Some(off) = index.fde_at(svma) else {
            return false;
        };
        self.row_at(s, off, svma, |row| {
            let cfa = matches!(row.cfa(),
                CfaRule::RegisterAndOffset { register, offset: 16 } if *register == X86_64::RBP);
            cfa && matches!(row.register(X86_64::RBP), Some(RegisterRule::Offset(-16)))
        })
        .unwrap_or(false)
    }

    /// framehop finds an address's FDE through the header's table: it must be the FDE
    /// the section itself gives.
    fn hdr_agrees(&self, s: &EhFrame<R<'_>>, hdr: &Bytes, svma: u64, c: Cover) -> Cover {
        let hdr = EhFrameHdr::new(&hdr[..], LittleEndian);
        let found = hdr.parse(&self.bases, 8).ok().and_then(|h| {
            let t = h.table()?;
            let ptr = t.lookup(svma, &self.bases).ok()?;
            let off = t.pointer_to_offset(ptr).ok()?;
            s.fde_from_offset(&self.bases, off, EhFrame::cie_from_offset)
                .ok()
                .filter(|f| f.contains(svma))
        });
        if found.is_some() {
            c
        } else {
            Cover::Corrupt
        }
    }
}

impl Index {
    /// The offset of the FDE covering `svma`.
    fn fde_at(&self, svma: u64) -> Option<usize> {
        let n = self.fdes.partition_point(|f| f.0 <= svma);
        let &(_, end, off) = &self.fdes[n.checked_sub(1)?];
        (svma < end).then_some(off)
    }
}

fn uncovered(index: &Index) -> Cover {
    if index.complete {
        Cover::Uncovered
    } else {
        Cover::Corrupt
    }
}

/// Every FDE of a section, read until the end or the first entry that does not parse.
fn index<'a, S: UnwindSection<R<'a>>>(s: &S, bases: &BaseAddresses) -> Index {
    let mut fdes = Vec::new();
    let mut entries = s.entries(bases);
    let complete = loop {
        match entries.next() {
            Ok(None) => break true,
            Ok(Some(CieOrFde::Cie(_))) => {}
            Ok(Some(CieOrFde::Fde(p))) => match p.parse(S::cie_from_offset) {
                Ok(f) if f.len() > 0 => {
                    let start = f.initial_address();
                    fdes.push((start, start.saturating_add(f.len()), f.offset()));
                }
                Ok(_) => {}
                Err(_) => break false,
            },
            Err(_) => break false,
        }
    };
    fdes.sort_unstable();
    Index { fdes, complete }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A CIE (code align 1, data align -8, RA r16, CFA = rsp+8, RA at CFA-8) and one FDE
    /// for [0x1000, 0x1010) with absolute addresses and instructions `fde`, as
    /// `.debug_frame`.
    fn debug_frame(instructions: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        // CIE: length, id 0xffffffff, version 1, augmentation "", code align 1,
        // data align -8, RA reg 16, then DW_CFA_def_cfa rsp(7) 8, DW_CFA_offset r16 1.
        let cie_body: Vec<u8> = [
            &0xffff_ffffu32.to_le_bytes()[..],
            &[1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1],
        ]
        .concat();
        let mut cie = cie_body.clone();
        while !(cie.len() + 4).is_multiple_of(8) {
            cie.push(0); // DW_CFA_nop
        }
        v.extend((cie.len() as u32).to_le_bytes());
        v.extend(cie);
        // FDE: length, CIE offset 0, initial location, range.
        let fde: Vec<u8> = [
            &0u32.to_le_bytes()[..],
            &0x1000u64.to_le_bytes(),
            &0x10u64.to_le_bytes(),
            instructions,
        ]
        .concat();
        v.extend((fde.len() as u32).to_le_bytes());
        v.extend(fde);
        v
    }

    fn cfi(data: Vec<u8>) -> Cfi {
        Cfi::new(Arc::from(data), false, None, &Svmas::default())
    }

    #[test]
    fn covered_uncovered_and_corrupt_are_told_apart() {
        let good = cfi(debug_frame(&[]));
        assert_eq!(good.cover(0x1004), Cover::Covered);
        // Code after the FDE, in a section that parsed: code without CFI.
        assert_eq!(good.cover(0x2000), Cover::Uncovered);
        assert_eq!(good.cover(0x0800), Cover::Uncovered);

        // The FDE's CIE pointer broken: nothing can be said about any address.
        let mut bad = debug_frame(&[]);
        let cie_pointer = bad.len() - 20;
        bad[cie_pointer..cie_pointer + 4].copy_from_slice(&0x7777u32.to_le_bytes());
        let bad = cfi(bad);
        assert_eq!(bad.cover(0x1004), Cover::Corrupt);
        assert_eq!(bad.cover(0x2000), Cover::Corrupt);
    }

    /// `push rbp` at 0x1000, `mov rbp, rsp` at 0x1001: from 0x1004 the CFA is rbp+16
    /// and the kernel's frame-pointer walk is right about the caller; before, it is not.
    #[test]
    fn a_frame_pointer_prologue_is_seen_in_the_cfi() {
        let prologue = [
            0x41, // advance_loc 1
            0x0e, 16, // def_cfa_offset 16
            0x86, 2,    // offset rbp, CFA-16
            0x43, // advance_loc 3
            0x0d, 6, // def_cfa_register rbp
        ];
        let c = cfi(debug_frame(&prologue));
        assert_eq!(c.cover(0x1000), Cover::Covered);
        assert!(!c.keeps_frame_pointer(0x1000));
        assert!(!c.keeps_frame_pointer(0x1002));
        assert!(c.keeps_frame_pointer(0x1008));
        // Frameless code (the CIE's rule only).
        assert!(!cfi(debug_frame(&[])).keeps_frame_pointer(0x1008));
    }
}
