//! Kernel addresses to names and printk format strings, resolved the way libtraceevent
//! resolves them, so that `kstate dump` names the same function `trace-cmd report` names.
//!
//! This is deliberately not `kstate_symbols::ksyms`: that table refuses addresses whose
//! nearest symbol is a section marker and ignores aliases, which is right for an analysis but
//! would print other names than trace-cmd does. libtraceevent's rules, learnt from its
//! `tep_parse_kallsyms` and `find_func`:
//! - lines are `ADDR TYPE NAME [MODULE]`; absolute symbols (`a`/`A`) and names starting with
//!   `$` are skipped; the first line that does not parse ends the table;
//! - the table is sorted by address, aliases at one address in reverse file order (the list
//!   is built by prepending, then sorted stably);
//! - an address belongs to the entry it equals or the entry before the next higher address,
//!   found by glibc's `bsearch` (which entry of a run of aliases that lands on depends on the
//!   probe sequence, so the probe sequence is reproduced); past the last symbol only an exact
//!   match resolves.

/// One symbol: address and the span of its name in the table's text.
#[derive(Debug, Clone, Copy)]
struct Sym {
    addr: u64,
    start: u32,
    len: u32,
}

#[derive(Debug, Default)]
pub struct FuncMap {
    text: Vec<u8>,
    syms: Vec<Sym>,
}

/// glibc's `bsearch` over `n` items: the same probes in the same order.
fn bsearch(n: usize, mut cmp: impl FnMut(usize) -> std::cmp::Ordering) -> Option<usize> {
    let (mut l, mut u) = (0usize, n);
    while l < u {
        let idx = (l + u) / 2;
        match cmp(idx) {
            std::cmp::Ordering::Less => u = idx,
            std::cmp::Ordering::Greater => l = idx + 1,
            std::cmp::Ordering::Equal => return Some(idx),
        }
    }
    None
}

impl FuncMap {
    pub fn parse(text: &[u8]) -> FuncMap {
        let mut syms = Vec::new();
        let mut pos = 0usize;
        for line in text.split(|&b| b == b'\n') {
            let line_start = pos;
            pos += line.len() + 1;
            if line.is_empty() {
                continue;
            }
            let Some(sym) = parse_line(line, line_start) else {
                break;
            };
            if let Some(s) = sym {
                syms.push(s);
            }
        }
        // Prepending then a stable sort: aliases end up in reverse file order.
        syms.reverse();
        syms.sort_by_key(|s| s.addr);
        FuncMap {
            text: text.to_vec(),
            syms,
        }
    }

    fn name(&self, i: usize) -> &[u8] {
        let s = self.syms[i];
        self.text
            .get(s.start as usize..(s.start as usize + s.len as usize))
            .unwrap_or_default()
    }

    /// The function containing `addr` and its start address.
    pub fn find(&self, addr: u64) -> Option<(&[u8], u64)> {
        let syms = &self.syms;
        let i = bsearch(syms.len(), |i| {
            let here = syms[i].addr;
            // The entry after the last is libtraceevent's sentinel, address 0.
            let next = syms.get(i + 1).map_or(0, |s| s.addr);
            if addr == here || (addr > here && addr < next) {
                std::cmp::Ordering::Equal
            } else if addr < here {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        })?;
        Some((self.name(i), syms[i].addr))
    }

    /// The address of the first symbol named `name` (in address order), for print fmt atoms
    /// that name a kernel variable (`vmemmap_base`); 0 when there is none.
    pub fn address_of(&self, name: &[u8]) -> u64 {
        (0..self.syms.len())
            .find(|&i| self.name(i) == name)
            .map_or(0, |i| self.syms[i].addr)
    }
}

/// Parses one kallsyms line: `Some(None)` for a line that parses but is skipped, `None` for
/// one that does not parse (which ends libtraceevent's table).
fn parse_line(line: &[u8], line_start: usize) -> Option<Option<Sym>> {
    let mut words = line
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|w| !w.is_empty());
    let addr = words.next()?;
    let ty = words.next()?;
    let name = words.next()?;
    // sscanf's %16llx reads at most 16 hex digits.
    let digits = addr.get(..addr.len().min(16))?;
    let addr = u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
    if name.first() == Some(&b'$') || ty.first().is_some_and(|&t| t == b'a' || t == b'A') {
        return Some(None);
    }
    let start = line_start + (name.as_ptr() as usize - line.as_ptr() as usize);
    Some(Some(Sym {
        addr,
        start: u32::try_from(start).ok()?,
        len: u32::try_from(name.len()).ok()?,
    }))
}

/// The trace's printk formats (`ADDR : "format"` lines): the format strings of `bprint`
/// events and the constant strings `%s` fields point at.
#[derive(Debug, Default)]
pub struct PrintkMap {
    /// (address, format) sorted by address, duplicates in reverse file order.
    entries: Vec<(u64, Box<[u8]>)>,
}

impl PrintkMap {
    pub fn parse(text: &[u8]) -> PrintkMap {
        let mut entries = Vec::new();
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                // strtok_r gives the whole line as the address and no format: stop, as
                // libtraceevent does with an empty entry.
                break;
            };
            let addr = parse_hex_prefix(&line[..colon]);
            // The format follows ": " (one character skipped after the colon).
            let mut fmt = line.get(colon + 2..).unwrap_or_default();
            if let Some(rest) = fmt.strip_prefix(b"\"") {
                fmt = rest;
            }
            if let Some(rest) = fmt.strip_suffix(b"\"") {
                fmt = rest;
            }
            if let Some(rest) = fmt.strip_suffix(b"\\n") {
                fmt = rest;
            }
            entries.push((addr, fmt.into()));
        }
        entries.reverse();
        entries.sort_by_key(|e| e.0);
        PrintkMap { entries }
    }

    pub fn get(&self, addr: u64) -> Option<&[u8]> {
        let e = &self.entries;
        let i = bsearch(e.len(), |i| addr.cmp(&e[i].0))?;
        Some(&e[i].1)
    }
}

/// `strtoull(s, NULL, 16)`: leading blanks, an optional `0x`, then hex digits as far as they go.
fn parse_hex_prefix(s: &[u8]) -> u64 {
    let s = s.trim_ascii_start();
    let s = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    let mut v: u64 = 0;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => break,
        };
        v = v.saturating_mul(16).saturating_add(d as u64);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_resolve_as_libtraceevent_does() {
        let m = FuncMap::parse(
            b"ffffffff81000000 T _stext\nffffffff81000000 T startup_64\n\
              ffffffff81000100 t foo\nffffffff81000200 A absolute\n\
              ffffffff81000300 t $x\nffffffff81000400 T bar\t[mod]\n",
        );
        assert_eq!(
            m.find(0xffffffff81000150),
            Some((&b"foo"[..], 0xffffffff81000100))
        );
        // Past the last symbol: only the exact address.
        assert_eq!(m.find(0xffffffff81000400).map(|f| f.0), Some(&b"bar"[..]));
        assert_eq!(m.find(0xffffffff81000401), None);
        assert_eq!(m.find(0x10), None);
        // Between aliases: the one first in the file.
        assert_eq!(
            m.find(0xffffffff81000010).map(|f| f.0),
            Some(&b"_stext"[..])
        );
        assert_eq!(m.address_of(b"bar"), 0xffffffff81000400);
        assert_eq!(m.address_of(b"absolute"), 0);
        // A malformed line ends the table.
        let m = FuncMap::parse(b"ffff0000 T a\nnot a line\nffff0010 T b\n");
        assert_eq!(m.find(0xffff0010), None);
        assert_eq!(m.address_of(b"b"), 0);
    }

    #[test]
    fn printk_formats() {
        let p =
            PrintkMap::parse(b"0xffffffc0008f3da0 : \"a=%d\\n\"\n0xffffffc0008f3fc0 : \"b=%s\"\n");
        assert_eq!(p.get(0xffffffc0008f3da0), Some(&b"a=%d"[..]));
        assert_eq!(p.get(0xffffffc0008f3fc0), Some(&b"b=%s"[..]));
        assert_eq!(p.get(1), None);
    }
}
