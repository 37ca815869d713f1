//! `kstate profile --details SYMBOL`: sample counts per instruction of one function, with
//! the disassembled instruction (like opannotate or `perf annotate`).
//!
//! The function is decoded whole from its start (bounds from the ELF symbol table, or for
//! the kernel from the kallsyms neighbour), so instruction boundaries are the real ones and
//! not guesses from the sampled addresses; each sampled address is attributed to the
//! instruction that contains it.
//!
//! Code bytes: user code from the ELF file the recording's mmap records name (the
//! profile has already checked its build id: a changed file never gets this far under the
//! symbol's name); kernel code from /proc/kcore, and only when the kernel running here
//! is the one recorded — it must have the function at the same address with the same
//! extent in its kallsyms (a reboot moves everything under KASLR). Without code bytes,
//! or on a build without a disassembler (not x86), the counts are given per sampled
//! address with the reason why there is no text.

use std::io::{Read, Seek, SeekFrom};

use kstate_format::Trace;

use super::SymbolHits;
use kstate_symbols::ksyms::Ksyms;
use kstate_symbols::ElfImage;
use kstate_symbols::{Kind, Sym};

/// More than any real function: bounds past this are a missing neighbour, not code.
const MAX_FUNCTION: u64 = 1 << 20;

/// One row: an instruction (with text), or a sampled address (without).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub addr: u64,
    /// Offset from the symbol's start, when the start is known.
    pub offset: Option<u64>,
    pub samples: u64,
    /// The instruction's bytes (empty without code).
    pub bytes: Vec<u8>,
    /// AT&T syntax, as objdump prints it.
    pub text: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Annotation {
    pub sym: Sym,
    /// Image addresses: the running kernel's, or the ELF file's symbol addresses.
    pub start: Option<u64>,
    pub size: Option<u64>,
    pub samples: u64,
    /// Samples whose address could not be placed in the file.
    pub unplaced: u64,
    /// Where the code bytes came from.
    pub source: Option<String>,
    /// Why there is no instruction text, when there is none.
    pub no_text: Option<String>,
    /// Every instruction of the function with text; else every sampled address.
    pub lines: Vec<Line>,
}

/// Annotates one symbol's samples (`hits` from [`super::profile`] with `details` set).
pub fn annotate(trace: &Trace, hits: &SymbolHits) -> Annotation {
    let mut a = Annotation {
        sym: hits.sym.clone(),
        start: None,
        size: None,
        samples: hits.samples,
        unplaced: hits.unplaced,
        source: None,
        no_text: None,
        lines: Vec::new(),
    };
    let Some(&first) = hits.addrs.keys().next() else {
        a.no_text = Some("no sample could be placed in the file".into());
        return a;
    };
    let code = match hits.sym.kind {
        Kind::Kernel | Kind::Module => kernel_code(trace, first, &mut a),
        Kind::Binary | Kind::Library => match &hits.sym.path {
            Some(p) => user_code(p, first, &mut a),
            None => Err("no file for this image".into()),
        },
        Kind::Vdso => Err("the vDSO is not kept in the recording".into()),
        Kind::Anon => Err("anonymous memory (JIT code?) is not kept in the recording".into()),
        Kind::Unknown => Err("no mapping is known for these addresses".into()),
    };
    let code = match code {
        Ok(c) => {
            a.source = Some(c.source.clone());
            Some(c)
        }
        Err(why) => {
            a.no_text = Some(why);
            None
        }
    };
    let mut lines = match &code {
        Some(c) => match disassemble(c) {
            Ok(v) => v,
            Err(why) => {
                a.no_text = Some(why);
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    attribute(&mut lines, hits);
    if let Some(s) = a.start {
        for l in &mut lines {
            l.offset = l.addr.checked_sub(s);
        }
    }
    a.lines = lines;
    a
}

/// Adds each sampled address's count to the instruction holding it; addresses outside
/// every instruction become rows of their own.
fn attribute(lines: &mut Vec<Line>, hits: &SymbolHits) {
    let mut extra = Vec::new();
    for (&addr, &n) in &hits.addrs {
        let i = lines.partition_point(|l| l.addr <= addr);
        match i.checked_sub(1).map(|i| &mut lines[i]) {
            Some(l) if addr < l.addr + l.bytes.len().max(1) as u64 => l.samples += n,
            _ => extra.push(Line {
                addr,
                offset: None,
                samples: n,
                bytes: Vec::new(),
                text: None,
            }),
        }
    }
    lines.extend(extra);
    lines.sort_by_key(|l| l.addr);
}

/// A function's code.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "x86")),
    allow(dead_code)
)]
struct Code {
    start: u64,
    bytes: Vec<u8>,
    bits: u32,
    source: String,
}

/// The function's code; its bounds go into `a` as soon as they are known, so that the
/// offsets are right even when the bytes cannot be had.
fn user_code(path: &str, addr: u64, a: &mut Annotation) -> Result<Code, String> {
    let img = ElfImage::load(path);
    if let Some(p) = &img.problem {
        return Err(p.clone());
    }
    let (start, size, _) = img
        .function(addr)
        .ok_or_else(|| format!("{path}: no function at {addr:#x}"))?;
    (a.start, a.size) = (Some(start), Some(size));
    let (off, left) = img
        .addr_to_offset(start)
        .ok_or_else(|| format!("{path}: {start:#x} is not in a loaded segment"))?;
    let len = size.min(left).min(MAX_FUNCTION);
    let bytes = read_at(path, off, len)?;
    Ok(Code {
        start,
        bytes,
        bits: if img.bits == 32 { 32 } else { 64 },
        source: path.to_string(),
    })
}

const KCORE: &str = "/proc/kcore";

fn kernel_code(trace: &Trace, addr: u64, a: &mut Annotation) -> Result<Code, String> {
    let text = trace.kallsyms.as_deref().unwrap_or_default();
    if text.is_empty() {
        return Err("the recording has no kallsyms".into());
    }
    let rec = Ksyms::parse(text);
    let (name, start, end) = rec
        .bounds(addr)
        .ok_or_else(|| format!("{addr:#x} is in no symbol of the recorded kallsyms"))?;
    let end = end
        .filter(|&e| e - start <= MAX_FUNCTION)
        .ok_or_else(|| format!("{name}: no neighbouring symbol bounds it"))?;
    (a.start, a.size) = (Some(start), Some(end - start));
    // The recording's addresses are only good for this machine's memory if this is the
    // same kernel, booted with the same layout.
    let live = std::fs::read("/proc/kallsyms").map_err(|e| {
        format!("cannot read /proc/kallsyms to check this is the recorded kernel: {e}")
    })?;
    let live = Ksyms::parse(&live);
    if live.bounds(addr) != Some((name, start, Some(end))) {
        return Err(format!(
            "the running kernel is not the recorded one (or was rebooted): {name} is not at {start:#x} here"
        ));
    }
    let bytes = kcore_read(KCORE, start, end - start)?;
    Ok(Code {
        start,
        bytes,
        bits: 64,
        source: KCORE.into(),
    })
}

/// Reads `len` bytes at virtual address `vaddr` of an ELF core file such as /proc/kcore,
/// through its PT_LOAD headers (the file is sparse and as large as the address space:
/// only the headers and the bytes wanted are read).
fn kcore_read(path: &str, vaddr: u64, len: u64) -> Result<Vec<u8>, String> {
    let explain = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("{path} does not exist (a kernel without CONFIG_PROC_KCORE?): kernel code cannot be read on this machine")
        } else {
            format!("cannot read {path}: {e}")
        }
    };
    let mut f = std::fs::File::open(path).map_err(explain)?;
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).map_err(explain)?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return Err(format!("{path}: not a 64-bit little-endian ELF file"));
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as u64;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(&eh, 32), u16_at(&eh, 54), u16_at(&eh, 56));
    if phentsize < 56 {
        return Err(format!("{path}: program headers of {phentsize} bytes"));
    }
    let mut ph = vec![0u8; (phentsize * phnum) as usize];
    f.seek(SeekFrom::Start(phoff)).map_err(explain)?;
    f.read_exact(&mut ph).map_err(explain)?;
    for h in ph.chunks_exact(phentsize as usize) {
        const PT_LOAD: u32 = 1;
        if u32::from_le_bytes(h[..4].try_into().unwrap()) != PT_LOAD {
            continue;
        }
        let (off, va, filesz) = (u64_at(h, 8), u64_at(h, 16), u64_at(h, 32));
        if vaddr >= va && vaddr.saturating_add(len) <= va.saturating_add(filesz) {
            return read_at(path, off + (vaddr - va), len);
        }
    }
    Err(format!("{path} maps no memory at {vaddr:#x}"))
}

fn read_at(path: &str, off: u64, len: u64) -> Result<Vec<u8>, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    f.seek(SeekFrom::Start(off))
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut v = Vec::with_capacity(len as usize);
    f.take(len)
        .read_to_end(&mut v)
        .map_err(|e| format!("cannot read {path} at {off:#x}: {e}"))?;
    if (v.len() as u64) < len {
        return Err(format!(
            "{path}: {len} bytes wanted at {off:#x}, only {} there",
            v.len()
        ));
    }
    Ok(v)
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn disassemble(c: &Code) -> Result<Vec<Line>, String> {
    use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Instruction};
    let mut dec = Decoder::with_ip(c.bits, &c.bytes, c.start, DecoderOptions::NONE);
    let mut fmt = GasFormatter::new();
    // objdump's spacing: mnemonic, a space, operands.
    let o = fmt.options_mut();
    o.set_space_after_operand_separator(false);
    o.set_uppercase_hex(false);
    o.set_branch_leading_zeros(false);
    let mut ins = Instruction::default();
    let mut out = Vec::new();
    while dec.can_decode() {
        let at = dec.position();
        dec.decode_out(&mut ins);
        let mut text = String::new();
        if ins.is_invalid() {
            text.push_str("(bad)");
        } else {
            fmt.format(&ins, &mut text);
        }
        out.push(Line {
            addr: ins.ip(),
            offset: None,
            samples: 0,
            bytes: c.bytes[at..at + ins.len()].to_vec(),
            text: Some(text),
        });
    }
    Ok(out)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
fn disassemble(_: &Code) -> Result<Vec<Line>, String> {
    Err(format!(
        "disassembly is not available in this build of kstate (for {}): x86 only",
        std::env::consts::ARCH
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn hits(addrs: &[(u64, u64)]) -> SymbolHits {
        SymbolHits {
            sym: Sym {
                name: "f".into(),
                image: "x".into(),
                path: None,
                kind: Kind::Binary,
            },
            samples: addrs.iter().map(|a| a.1).sum(),
            period: 0,
            addrs: addrs.iter().copied().collect::<BTreeMap<_, _>>(),
            unplaced: 0,
        }
    }

    /// A sample inside an instruction counts for it; one past the code gets its own row.
    #[test]
    fn samples_go_to_the_instruction_holding_them() {
        let line = |addr, len| Line {
            addr,
            offset: None,
            samples: 0,
            bytes: vec![0x90; len],
            text: Some("x".into()),
        };
        let mut v = vec![line(0x10, 3), line(0x13, 1), line(0x14, 2)];
        attribute(&mut v, &hits(&[(0x10, 2), (0x12, 1), (0x15, 4), (0x20, 5)]));
        let got: Vec<(u64, u64, bool)> = v
            .iter()
            .map(|l| (l.addr, l.samples, l.text.is_some()))
            .collect();
        assert_eq!(
            got,
            [
                (0x10, 3, true),
                (0x13, 0, true),
                (0x14, 4, true),
                (0x20, 5, false)
            ]
        );
    }

    /// /proc/kcore's layout: an ELF core file whose PT_LOAD headers map kernel addresses
    /// to file offsets. A made-up one with a single segment.
    #[test]
    fn reads_through_core_file_segments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("core");
        let mut f = vec![0u8; 64 + 56];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = &mut f[64..];
        ph[..4].copy_from_slice(&1u32.to_le_bytes());
        ph[8..16].copy_from_slice(&200u64.to_le_bytes());
        ph[16..24].copy_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
        ph[32..40].copy_from_slice(&16u64.to_le_bytes());
        f.resize(200, 0);
        f.extend(0u8..16);
        std::fs::write(&path, &f).unwrap();
        let p = path.to_str().unwrap();
        assert_eq!(kcore_read(p, 0xffff_ffff_8100_0004, 3).unwrap(), [4, 5, 6]);
        assert!(kcore_read(p, 0xffff_ffff_8100_000f, 2).is_err());
        assert!(kcore_read("/nonexistent", 0, 1)
            .unwrap_err()
            .contains("does not exist"));
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    #[test]
    fn decodes_from_the_function_start() {
        // push %rbp; mov %rsp,%rbp; rep stosb; pop %rbp; ret
        let c = Code {
            start: 0x1000,
            bytes: vec![0x55, 0x48, 0x89, 0xe5, 0xf3, 0xaa, 0x5d, 0xc3],
            bits: 64,
            source: String::new(),
        };
        let v = disassemble(&c).unwrap();
        let got: Vec<(u64, &str)> = v
            .iter()
            .map(|l| (l.addr, l.text.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (0x1000, "push %rbp"),
                (0x1001, "mov %rsp,%rbp"),
                (0x1004, "rep stos %al,(%rdi)"),
                (0x1006, "pop %rbp"),
                (0x1007, "ret"),
            ]
        );
    }
}
