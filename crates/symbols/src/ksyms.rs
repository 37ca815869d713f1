//! Kernel addresses to names, from the `/proc/kallsyms` text a trace carries
//! ([`kstate_format::Trace::kallsyms`]): `ADDR TYPE NAME [MODULE]` per line.
//!
//! [`Ksyms::parse`] keeps one entry per symbol (address, name span into the text) sorted by
//! address; [`Ksyms::lookup`] is a binary search. [`LazyKsyms`] parses on the first lookup,
//! so analyzers that never print an address pay nothing.
//!
//! kallsyms gives no sizes, so an address belongs to the closest symbol at or below it,
//! with three guards against names that would mislead:
//! - absolute symbols (`a`/`A`, e.g. per-CPU offsets) and address 0 are ignored;
//! - linker section markers (`_stext`, `_edata`, `__start_*`, `__stop_*`, ...) name no
//!   object: an address whose closest symbol is a marker resolves to nothing. This matters
//!   for data: without CONFIG_KALLSYMS_ALL kallsyms lists no variables, and a static lock
//!   would otherwise read as `__start_once+0x1234`;
//! - an address past the last symbol resolves to nothing.
//!
//! Addresses outside the kernel image (heap, per-CPU, vmalloc) resolve to nothing; callers
//! print them as hex.

use std::cell::OnceCell;

/// A parsed kallsyms table.
#[derive(Debug, Clone, Default)]
pub struct Ksyms {
    text: Vec<u8>,
    /// (address, name start, name length), sorted by address.
    syms: Vec<(u64, u32, u32)>,
}

/// Linker markers: names that delimit sections rather than name objects.
fn is_marker(name: &[u8]) -> bool {
    const EXACT: &[&[u8]] = &[
        b"_text",
        b"_stext",
        b"_etext",
        b"_sdata",
        b"_edata",
        b"_sinittext",
        b"_einittext",
        b"__bss_start",
        b"__bss_stop",
        b"_end",
        b"__init_begin",
        b"__init_end",
        b"__brk_base",
        b"__brk_limit",
    ];
    EXACT.contains(&name)
        || name.starts_with(b"__start_")
        || name.starts_with(b"__stop_")
        || name.starts_with(b"__end_")
}

impl Ksyms {
    /// Parses kallsyms text; malformed lines are skipped.
    pub fn parse(text: &[u8]) -> Ksyms {
        let mut syms = Vec::new();
        let mut pos = 0usize;
        for line in text.split(|&b| b == b'\n') {
            let start = pos;
            pos += line.len() + 1;
            let mut f = line
                .split(|&b| b == b' ' || b == b'\t')
                .filter(|w| !w.is_empty());
            let (Some(addr), Some(ty), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let Some(addr) = std::str::from_utf8(addr)
                .ok()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
            else {
                continue;
            };
            if addr == 0 || matches!(ty, b"a" | b"A") {
                continue;
            }
            // `name` is a subslice of `line`, itself of `text`.
            let off = start + (name.as_ptr() as usize - line.as_ptr() as usize);
            let (Ok(off), Ok(len)) = (u32::try_from(off), u32::try_from(name.len())) else {
                continue;
            };
            syms.push((addr, off, len));
        }
        // Aliases at one address: keep file order (the kernel lists the canonical one
        // first), stable sort.
        syms.sort_by_key(|s| s.0);
        Ksyms {
            text: text.to_vec(),
            syms,
        }
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    fn name_at(&self, i: usize) -> &str {
        let (_, off, len) = self.syms[i];
        std::str::from_utf8(&self.text[off as usize..(off + len) as usize]).unwrap_or("?")
    }

    /// The symbol `addr` lies in and the offset into it, if any (see the module notes).
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        // Last symbol at or below addr.
        let n = self.syms.partition_point(|s| s.0 <= addr);
        if n == 0 || n == self.syms.len() && addr != self.syms[n - 1].0 {
            return None;
        }
        let base = self.syms[n - 1].0;
        // Of the aliases at `base`, the first that is not a marker.
        let first = self.syms[..n].partition_point(|s| s.0 < base);
        let i = (first..n).find(|&i| !is_marker(self.name_at(i).as_bytes()))?;
        Some((self.name_at(i), addr - base))
    }

    /// The symbol `addr` lies in, its start, and where the next symbol starts (kallsyms
    /// has no sizes: a function ends where its neighbour begins); None past the last one.
    pub fn bounds(&self, addr: u64) -> Option<(&str, u64, Option<u64>)> {
        let (name, off) = self.lookup(addr)?;
        let n = self.syms.partition_point(|s| s.0 <= addr);
        Some((name, addr - off, self.syms.get(n).map(|s| s.0)))
    }

    /// `name` or `name+0xoff`, as the kernel prints `%pS`.
    pub fn name(&self, addr: u64) -> Option<String> {
        self.lookup(addr).map(|(n, off)| {
            if off == 0 {
                n.to_string()
            } else {
                format!("{n}+{off:#x}")
            }
        })
    }
}

/// A [`Ksyms`] parsed on first use.
#[derive(Debug, Clone, Default)]
pub struct LazyKsyms {
    text: Option<Vec<u8>>,
    table: OnceCell<Ksyms>,
}

impl LazyKsyms {
    /// Over `text` (a trace's kallsyms, if it has one).
    pub fn new(text: Option<&[u8]>) -> LazyKsyms {
        LazyKsyms {
            text: text.map(<[u8]>::to_vec),
            table: OnceCell::new(),
        }
    }

    /// Whether there is a table at all.
    pub fn available(&self) -> bool {
        self.text.as_ref().is_some_and(|t| !t.is_empty())
    }

    pub fn get(&self) -> &Ksyms {
        self.table
            .get_or_init(|| Ksyms::parse(self.text.as_deref().unwrap_or(&[])))
    }

    /// See [`Ksyms::name`].
    pub fn name(&self, addr: u64) -> Option<String> {
        if !self.available() {
            return None;
        }
        self.get().name(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &[u8] = b"0000000000000000 A fixed_percpu_data\n\
ffffffff81000000 T _stext\n\
ffffffff81000000 T _text\n\
ffffffff81001000 T first_fn\n\
ffffffff81001000 T first_alias\n\
ffffffff81001040 t second_fn\n\
ffffffff82400000 D __start_rodata\n\
ffffffff82400100 D some_table\n\
ffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\n\
garbage line\n";

    #[test]
    fn lookups_in_a_small_table() {
        let k = Ksyms::parse(SAMPLE);
        assert_eq!(k.len(), 8);
        assert_eq!(k.name(0xffffffff81001000).as_deref(), Some("first_fn"));
        assert_eq!(k.name(0xffffffff8100103f).as_deref(), Some("first_fn+0x3f"));
        assert_eq!(k.name(0xffffffff81001040).as_deref(), Some("second_fn"));
        // Only markers at this address (and _text/_stext name no function).
        assert_eq!(k.name(0xffffffff81000010), None);
        // Data behind a section marker: nothing, not `__start_rodata+0x10`.
        assert_eq!(k.name(0xffffffff82400010), None);
        assert_eq!(
            k.name(0xffffffff82400108).as_deref(),
            Some("some_table+0x8")
        );
        assert_eq!(
            k.name(0xffffffffc0201000).as_deref(),
            Some("ftrace_trampoline")
        );
        assert_eq!(
            k.bounds(0xffffffff81001010),
            Some(("first_fn", 0xffffffff81001000, Some(0xffffffff81001040)))
        );
        assert_eq!(
            k.bounds(0xffffffff81001050),
            Some(("second_fn", 0xffffffff81001040, Some(0xffffffff82400000)))
        );
        // Heap, below the image, past the last symbol.
        assert_eq!(k.name(0xffff888003a1c000), None);
        assert_eq!(k.name(0xffffffffc0201001), None);
        assert_eq!(k.name(0), None);
        let lazy = LazyKsyms::new(None);
        assert!(!lazy.available());
        assert_eq!(lazy.name(0xffffffff81001000), None);
    }

    /// Against this machine's /proc/kallsyms (root sees real addresses): every function
    /// symbol (type t/T) resolves to itself or to an alias at the same address, and an
    /// address inside it to `name+0xoff`.
    #[test]
    fn this_machines_kallsyms() {
        let Ok(text) = std::fs::read("/proc/kallsyms") else {
            eprintln!("no /proc/kallsyms; nothing to check");
            return;
        };
        let k = LazyKsyms::new(Some(&text));
        let lines: Vec<&str> = std::str::from_utf8(&text).unwrap().lines().collect();
        let mut funcs: Vec<(u64, &str)> = lines
            .iter()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (a, t, n) = (w.next()?, w.next()?, w.next()?);
                let a = u64::from_str_radix(a, 16).ok()?;
                (matches!(t, "t" | "T") && a != 0 && !is_marker(n.as_bytes())).then_some((a, n))
            })
            .collect();
        if funcs.is_empty() {
            eprintln!("/proc/kallsyms hides addresses (not root?); nothing to check");
            return;
        }
        assert!(funcs.len() > 1000, "{} functions", funcs.len());
        funcs.sort();
        let mut by_addr: std::collections::BTreeMap<u64, Vec<&str>> = Default::default();
        for (a, n) in &funcs {
            by_addr.entry(*a).or_default().push(n);
        }
        let addrs: Vec<u64> = by_addr.keys().copied().collect();
        let mut checked = 0;
        for (i, a) in addrs.iter().enumerate().step_by(97) {
            let names = &by_addr[a];
            let (got, off) = k.get().lookup(*a).unwrap();
            assert_eq!(off, 0);
            assert!(names.contains(&got), "{a:#x}: {got} not in {names:?}");
            if let Some(next) = addrs.get(i + 1) {
                if next - a > 1 {
                    let mid = a + (next - a) / 2;
                    let want_off = mid - a;
                    let (got, off) = k.get().lookup(mid).unwrap();
                    // A data symbol may lie between two functions; then it names the address.
                    if names.contains(&got) {
                        assert_eq!(off, want_off);
                        assert_eq!(k.name(mid).unwrap(), format!("{got}+{want_off:#x}"));
                    }
                }
            }
            checked += 1;
        }
        assert!(checked > 10);
        let pipe_lock = by_addr
            .iter()
            .find(|(_, n)| n.contains(&"pipe_lock"))
            .map(|(a, _)| *a);
        if let Some(a) = pipe_lock {
            assert_eq!(k.name(a).as_deref(), Some("pipe_lock"));
            assert_eq!(k.name(a + 4).as_deref(), Some("pipe_lock+0x4"));
        }
        // The heap (the direct map) is below the kernel image.
        assert_eq!(k.name(0xffff888000000000), None);
    }
}
