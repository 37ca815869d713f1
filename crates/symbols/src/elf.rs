//! User-space symbols: a mapped file's ELF symbol table (or, when it is stripped, the
//! one of its separate debug file found by build id), with the program headers that turn
//! a file offset into a symbol address. Functions name code addresses; data objects (with
//! their sizes) name data addresses, such as the lock a thread waited on.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// One ELF file, loaded once per path.
#[derive(Debug, Default)]
pub struct ElfImage {
    pub build_id: Option<Vec<u8>>,
    /// PT_LOAD segments: (file offset, file size, virtual address, memory size).
    segments: Vec<(u64, u64, u64, u64)>,
    /// Functions: (address, size, name), sorted by address.
    syms: Vec<(u64, u64, String)>,
    /// Data objects: (address, size, name), sorted by address.
    data: Vec<(u64, u64, String)>,
    /// Why there are no symbols, when there are none.
    pub problem: Option<String>,
    /// Where the symbols came from, when not the file itself.
    pub debug_file: Option<String>,
    /// 32 for an ELFCLASS32 file, else 64 (the disassembler's mode).
    pub bits: u32,
}

impl ElfImage {
    pub fn load(path: &str) -> ElfImage {
        // A recording names its mapped files; only a regular file is read (a map of a
        // device such as /dev/zero would never end).
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return ElfImage {
                problem: Some(format!("{path} is not a regular file")),
                ..ElfImage::default()
            };
        }
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                return ElfImage {
                    problem: Some(format!("cannot read {path}: {e}")),
                    ..ElfImage::default()
                }
            }
        };
        let file = match object::File::parse(&*data) {
            Ok(f) => f,
            Err(e) => {
                return ElfImage {
                    problem: Some(format!("{path}: not an ELF file ({e})")),
                    ..ElfImage::default()
                }
            }
        };
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = segments(&file);
        let mut img = ElfImage {
            build_id,
            segments,
            syms: symbols(&file, SymbolKind::Text),
            data: symbols(&file, SymbolKind::Data),
            bits: if file.is_64() { 64 } else { 32 },
            ..ElfImage::default()
        };
        if !has_symtab(&file) {
            // Stripped: the distribution's debug file, by build id, has the full table.
            if let Some(id) = img.build_id.as_deref().filter(|id| id.len() > 1) {
                let hex = kstate_format::perf::decode::hex(id);
                let dbg = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
                if let Ok(d) = std::fs::read(&dbg) {
                    if let Ok(f) = object::File::parse(&*d) {
                        let syms = symbols(&f, SymbolKind::Text);
                        if !syms.is_empty() {
                            img.syms = syms;
                            img.data = symbols(&f, SymbolKind::Data);
                            img.debug_file = Some(dbg);
                        }
                    }
                }
            }
        }
        if img.syms.is_empty() {
            img.problem = Some(format!("{path} has no function symbols"));
        }
        img
    }

    /// The symbol address of a file offset (through the PT_LOAD segment holding it).
    pub fn offset_to_addr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(o, size, _, _)| off >= o && off < o + size)
            .map(|&(o, _, vaddr, _)| off - o + vaddr)
    }

    /// The symbol address a mapping of the file at offset `pgoff` starts at. A segment is
    /// mapped from its offset rounded down to a page, which may lie inside the previous
    /// segment: the segment starting on that page wins.
    pub fn mapping_addr(&self, pgoff: u64) -> Option<u64> {
        mapping_addr(&self.segments, pgoff)
    }

    /// Whether a symbol address lies in one of the file's loaded segments (`.bss`
    /// included, which has no file bytes).
    pub fn holds(&self, addr: u64) -> bool {
        self.segments
            .iter()
            .any(|&(_, _, vaddr, memsz)| addr >= vaddr && addr - vaddr < memsz)
    }

    /// The data object at `addr` and the offset into it: the closest one at or below it,
    /// if `addr` lies inside it (an object without a size only at its address).
    pub fn lookup_data(&self, addr: u64) -> Option<(&str, u64)> {
        let n = self.data.partition_point(|s| s.0 <= addr);
        let (a, size, name) = self.data.get(n.checked_sub(1)?)?;
        let off = addr - a;
        (off < (*size).max(1)).then_some((name.as_str(), off))
    }

    /// The function at `addr`: the closest symbol at or below it, if `addr` lies inside
    /// it (symbols without a size take everything up to the next one).
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let n = self.syms.partition_point(|s| s.0 <= addr);
        let (a, size, name) = self.syms.get(n.checked_sub(1)?)?;
        (*size == 0 || addr < a + size).then_some(name.as_str())
    }
}

impl ElfImage {
    /// The function at `addr` with its start and size (0: unknown, up to the next symbol).
    pub fn function(&self, addr: u64) -> Option<(u64, u64, &str)> {
        let n = self.syms.partition_point(|s| s.0 <= addr);
        let (a, size, name) = self.syms.get(n.checked_sub(1)?)?;
        if *size == 0 || addr < a + size {
            let size = match (*size, self.syms.get(n)) {
                (0, Some(next)) => next.0 - a,
                (s, _) => s,
            };
            Some((*a, size, name.as_str()))
        } else {
            None
        }
    }

    /// The file offset of a symbol address, and how many bytes from there the segment
    /// holds in the file.
    pub fn addr_to_offset(&self, addr: u64) -> Option<(u64, u64)> {
        self.segments
            .iter()
            .find(|&&(_, size, vaddr, _)| addr >= vaddr && addr < vaddr + size)
            .map(|&(o, size, vaddr, _)| (addr - vaddr + o, vaddr + size - addr))
    }
}

/// [`ElfImage::mapping_addr`] over PT_LOAD segments (file offset, file size, virtual
/// address, memory size).
pub(crate) fn mapping_addr(segments: &[(u64, u64, u64, u64)], pgoff: u64) -> Option<u64> {
    let page = |o: u64| o & !0xfff;
    let seg = segments
        .iter()
        .rev()
        .find(|&&(o, _, _, _)| page(o) == pgoff)
        .or_else(|| {
            segments
                .iter()
                .find(|&&(o, size, _, _)| pgoff >= o && pgoff < o + size)
        })?;
    Some(seg.2.wrapping_sub(seg.0).wrapping_add(pgoff))
}

/// PT_LOAD segments as [`mapping_addr`] takes them.
pub(crate) fn segments<'d, R: object::ReadRef<'d>>(
    f: &object::File<'d, R>,
) -> Vec<(u64, u64, u64, u64)> {
    f.segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address(), s.size())
        })
        .collect()
}

fn has_symtab(f: &object::File<'_>) -> bool {
    f.symbols().any(|s| s.kind() == SymbolKind::Text)
}

/// Defined symbols of one kind (functions, data objects) from both symbol tables.
fn symbols(f: &object::File<'_>, kind: SymbolKind) -> Vec<(u64, u64, String)> {
    let mut v: Vec<(u64, u64, String)> = f
        .symbols()
        .chain(f.dynamic_symbols())
        .filter(|s| s.kind() == kind && s.address() != 0 && s.is_definition())
        .filter_map(|s| Some((s.address(), s.size(), demangle(s.name().ok()?))))
        .collect();
    // By address; of symbols at one address, sized ones first, then by name; one kept.
    v.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then((b.1 > 0).cmp(&(a.1 > 0)))
            .then(a.2.cmp(&b.2))
    });
    v.dedup_by_key(|s| s.0);
    v
}

/// Rust names without their hash, C++ names without their parameters and return type
/// (both as perf shows them); anything else as it is.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        let short = format!("{d:#}");
        // Rust's legacy names are C++-mangled with a hash element last: the hash is what
        // tells them from a C++ name the Rust demangler also reads. v0 names are _R.
        if name.starts_with("_R") || short != d.to_string() {
            return short;
        }
    }
    if name.starts_with("_Z") {
        let opts = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Some(d) = cpp_demangle::Symbol::new(name)
            .ok()
            .and_then(|s| s.demangle_with_options(&opts).ok())
        {
            return d;
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping whose page starts inside the previous segment belongs to the segment
    /// starting on that page; `.bss` (memory past the file bytes) is held.
    #[test]
    fn mappings_and_bss() {
        let img = ElfImage {
            // As in a PIE built by rustc: R at 0, R E at 0x5c3d10 (vaddr 0x5c4d10), RW
            // with .bss past its file size.
            segments: vec![
                (0, 0x5c3d08, 0, 0x5c3d08),
                (0x5c3d10, 0xc28620, 0x5c4d10, 0xc28620),
                (0x12adbc0, 0xf68, 0x12b0bc0, 0x10a8),
            ],
            data: vec![(0x12b1b30, 16, "LOCK".into())],
            ..ElfImage::default()
        };
        assert_eq!(img.mapping_addr(0), Some(0));
        assert_eq!(img.mapping_addr(0x5c3000), Some(0x5c4000));
        assert_eq!(img.mapping_addr(0x12ad000), Some(0x12b0000));
        assert!(img.holds(0x12b1c60) && !img.holds(0x12b1c68));
        assert_eq!(img.lookup_data(0x12b1b34), Some(("LOCK", 4)));
        assert_eq!(img.lookup_data(0x12b1b40), None);
    }

    /// This test binary: its own functions resolve by address.
    #[test]
    fn own_symbols() {
        let exe = std::env::current_exe().unwrap();
        let img = ElfImage::load(exe.to_str().unwrap());
        assert!(img.problem.is_none(), "{:?}", img.problem);
        let addr = own_symbols as *const () as u64;
        // Find our load bias from /proc/self/maps: the mapping of this file holding addr.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (start, off) = maps
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (r, _, o) = (w.next()?, w.next()?, w.next()?);
                let (a, b) = r.split_once('-')?;
                let (a, b) = (
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                );
                (addr >= a && addr < b).then(|| (a, u64::from_str_radix(o, 16).unwrap()))
            })
            .next()
            .unwrap();
        let sym_addr = img.offset_to_addr(addr - start + off).unwrap();
        let name = img.lookup(sym_addr).unwrap();
        assert!(name.ends_with("own_symbols"), "{name}");
        let (start, size, same) = img.function(sym_addr).unwrap();
        assert_eq!(same, name);
        assert!(start <= sym_addr && sym_addr < start + size);
        let (off, left) = img.addr_to_offset(start).unwrap();
        assert_eq!(img.offset_to_addr(off), Some(start));
        assert!(left >= size);
        assert_eq!(
            demangle("_ZN6kstate3cmd4spin3run17h0123456789abcdefE"),
            "kstate::cmd::spin::run"
        );
        // C++ as perf and `c++filt --no-params` show it; C names untouched.
        assert_eq!(
            demangle("_ZN6shapes3AccIdE3addERKSt6vectorIdSaIdEE"),
            "shapes::Acc<double>::add"
        );
        assert_eq!(demangle("_ZN6shapes11spin_doubleEl"), "shapes::spin_double");
        assert_eq!(demangle("plain_c"), "plain_c");
        assert_eq!(demangle("_Znot_mangled"), "_Znot_mangled");
        assert!(ElfImage::load("/nonexistent").problem.is_some());
    }
}
