//! Which code's data piles into few cache sets. Every data access of a program (valgrind
//! lackey's `--trace-mem` stream) is charged to the instruction that made it; a load or
//! store site reads one field of one kind of structure, so its distinct lines are that
//! field across the structures it visits. Per site: the lines, the sets of one cache
//! level they fall in, the sets they would use spread evenly, and the stride they share
//! (the gcd of their distances: 8 KiB for page-aligned structures). A site is flagged
//! when its lines overflow the sets they use (more lines than `sets used x ways`) although
//! spread evenly they would fit the cache and use at least twice as many sets: a conflict
//! of alignment, not of size, which colouring cures with [`model::colours_needed`]
//! colours.
//!
//! Memory is bounded: each site keeps at most [`SITE_LINES`] distinct lines and all sites
//! together [`TOTAL_LINES`]; a site that reached the bound says so.

use std::io::BufRead;

use kstate_format::{Error, ErrorKind};

use crate::{model, Level};
use kstate_format::fxmap::FxMap;
use kstate_symbols::elf::ElfImage;

pub const SITE_LINES: usize = 1 << 18;
pub const TOTAL_LINES: usize = 1 << 23;

#[derive(Debug, Default, Clone)]
struct Site {
    accesses: u64,
    lines: FxMap<u64, ()>,
    first: Option<u64>,
    /// gcd of the distances (in lines) of every line from the first one.
    gcd: u64,
    capped: bool,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One site's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub ip: u64,
    pub accesses: u64,
    pub lines: u64,
    pub used_sets: u64,
    /// Sets the same number of lines would use spread evenly.
    pub even_sets: u64,
    /// The most lines in one set.
    pub max_per_set: u64,
    /// Bytes every line's distance from the first is a multiple of (0: one line).
    pub stride: u64,
    pub flagged: bool,
    /// Colours that would spread the lines into enough sets (1: none needed).
    pub colours: u64,
    /// The site kept only its first SITE_LINES lines.
    pub capped: bool,
}

/// Accumulates accesses per site against one cache level.
#[derive(Debug)]
pub struct Detector {
    pub level: Level,
    sites: FxMap<u64, Site>,
    total_lines: usize,
    pub accesses: u64,
}

impl Detector {
    pub fn new(level: Level) -> Detector {
        Detector {
            level,
            sites: FxMap::default(),
            total_lines: 0,
            accesses: 0,
        }
    }

    /// A data access of `size` bytes at `addr` by the instruction at `ip`.
    pub fn access(&mut self, ip: u64, addr: u64, size: u64) {
        self.accesses += 1;
        let first = addr / self.level.line;
        let last = (addr + size.max(1) - 1) / self.level.line;
        let full = self.total_lines >= TOTAL_LINES;
        let s = self.sites.entry(ip).or_default();
        s.accesses += 1;
        for line in first..=last {
            if s.lines.contains_key(&line) {
                continue;
            }
            if full || s.lines.len() >= SITE_LINES {
                s.capped = true;
                continue;
            }
            s.lines.insert(line, ());
            self.total_lines += 1;
            let f = *s.first.get_or_insert(line);
            s.gcd = gcd(s.gcd, line.abs_diff(f));
        }
    }

    fn finding(&self, ip: u64, s: &Site) -> Finding {
        let l = &self.level;
        let mut per_set: FxMap<u64, u64> = FxMap::default();
        for line in s.lines.keys() {
            *per_set.entry(line % l.sets).or_default() += 1;
        }
        let lines = s.lines.len() as u64;
        let used = per_set.len() as u64;
        let even = lines.min(l.sets);
        let flagged = lines >= 2 * l.ways
            && lines > used * l.ways
            && lines <= l.sets * l.ways
            && even >= 2 * used;
        Finding {
            ip,
            accesses: s.accesses,
            lines,
            used_sets: used,
            even_sets: even,
            max_per_set: per_set.values().copied().max().unwrap_or(0),
            stride: s.gcd * l.line,
            flagged,
            colours: if flagged {
                model::colours_needed(lines, used, l.ways)
            } else {
                1
            },
            capped: s.capped,
        }
    }

    /// Every site with at least `min_lines` distinct lines: the flagged first, then by
    /// lines and accesses.
    pub fn findings(&self, min_lines: u64) -> Vec<Finding> {
        let mut v: Vec<Finding> = self
            .sites
            .iter()
            .filter(|(_, s)| s.lines.len() as u64 >= min_lines)
            .map(|(&ip, s)| self.finding(ip, s))
            .collect();
        v.sort_by(|a, b| {
            b.flagged
                .cmp(&a.flagged)
                .then(b.lines.cmp(&a.lines))
                .then(b.accesses.cmp(&a.accesses))
                .then(a.ip.cmp(&b.ip))
        });
        v
    }

    pub fn sites(&self) -> usize {
        self.sites.len()
    }
}

/// An object valgrind loaded: its path and where its symbols are (address = symbol
/// address + bias).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub path: String,
    pub bias: u64,
}

/// What a lackey run said besides the accesses.
#[derive(Debug, Default)]
pub struct Trace {
    pub objects: Vec<Object>,
    /// valgrind's own lines (`==PID== ...`), the last few, for error messages.
    pub messages: Vec<String>,
    pub instructions: u64,
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// `ADDR,SIZE` in hex and decimal.
fn addr_size(s: &str) -> Option<(u64, u64)> {
    let (a, n) = s.trim().split_once(',')?;
    Some((hex(a)?, n.trim().parse().ok()?))
}

/// Reads lackey's `--trace-mem=yes` output, with valgrind's `-v -v` lines (`Reading syms
/// from PATH` followed by `svma X, avma Y`, which place each object), from `r` into `d`.
pub fn read_lackey(r: impl BufRead, d: &mut Detector) -> Result<Trace, Error> {
    let mut t = Trace::default();
    let mut ip = 0u64;
    let mut reading: Option<String> = None;
    let mut offset = 0u64;
    let mut buf = Vec::with_capacity(256);
    let mut r = r;
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                Some(offset),
                format!("reading valgrind's output: {e}"),
            )
        })?;
        if n == 0 {
            break;
        }
        offset += n as u64;
        let Ok(line) = std::str::from_utf8(&buf) else {
            continue;
        };
        let line = line.trim_end_matches('\n');
        let b = line.as_bytes();
        match b {
            [b'I', b' ', ..] => {
                if let Some((a, _)) = addr_size(&line[2..]) {
                    ip = a;
                    t.instructions += 1;
                }
            }
            [b' ', b'L' | b'S' | b'M', b' ', ..] => {
                if let Some((a, n)) = addr_size(&line[3..]) {
                    d.access(ip, a, n);
                }
            }
            [b'-', b'-', ..] => {
                let rest = line.trim_start_matches('-');
                let rest = rest
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .trim_start_matches('-');
                if let Some(p) = rest.strip_prefix(" Reading syms from ") {
                    reading = Some(p.trim().to_string());
                } else if let (Some(path), Some((svma, avma))) = (
                    reading.as_ref(),
                    rest.trim().strip_prefix("svma ").and_then(|x| {
                        let (s, a) = x.split_once(", avma ")?;
                        Some((hex(s)?, hex(a)?))
                    }),
                ) {
                    t.objects.push(Object {
                        path: path.clone(),
                        bias: avma.wrapping_sub(svma),
                    });
                    reading = None;
                }
            }
            [b'=', b'=', ..] => {
                if t.messages.len() >= 40 {
                    t.messages.remove(0);
                }
                t.messages.push(line.to_string());
            }
            _ => {}
        }
    }
    Ok(t)
}

/// Names code addresses from the objects a lackey run loaded.
pub struct Symbols {
    images: Vec<(Object, ElfImage)>,
}

impl Symbols {
    pub fn new(objects: &[Object]) -> Symbols {
        Symbols {
            images: objects
                .iter()
                .filter(|o| !o.path.contains("/valgrind/"))
                .map(|o| (o.clone(), ElfImage::load(&o.path)))
                .collect(),
        }
    }

    /// `function+0x12 (file name)`, or the bare address.
    pub fn name(&self, ip: u64) -> String {
        for (o, img) in &self.images {
            let a = ip.wrapping_sub(o.bias);
            if !img.holds(a) {
                continue;
            }
            let file = o.path.rsplit('/').next().unwrap_or(&o.path);
            return match img.function(a) {
                Some((start, _, f)) => format!("{f}+{:#x} ({file})", a - start),
                None => format!("{a:#x} ({file})"),
            };
        }
        format!("{ip:#x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l2() -> Level {
        // 2 MiB, 16 ways, 64 B lines: 2048 sets, 128 KiB per way.
        Level::new(2, 2 << 20, 16, 64).unwrap()
    }

    #[test]
    fn page_strided_fields_are_flagged_and_spread_ones_are_not() {
        let mut d = Detector::new(l2());
        // Site 1: one field of 1,024 structures 8 KiB apart: 16 sets, 64 lines each.
        // Site 2: the same coloured 4 ways (64 B shifts by the bits above 128 KiB):
        // 64 sets of 16 lines, which fit. Site 3: 16,384 lines of a 1 MiB table in a
        // scrambled order: every set, 8 lines each.
        for i in 0..1024u64 {
            d.access(1, 0x1000_0000 + i * 8192 + 24, 8);
            d.access(2, 0x2000_0000 + i * 8192 + ((i / 16) % 4) * 64, 8);
        }
        for k in 0..16384u64 {
            let slot = (k * 40503) % 16384;
            d.access(3, 0x4000_0000 + slot * 64, 8);
        }
        let f = d.findings(1);
        assert_eq!(f.len(), 3);
        let by = |ip| f.iter().find(|x| x.ip == ip).unwrap();
        let (a, b, c) = (by(1), by(2), by(3));
        assert_eq!(f[0].ip, 1);
        assert_eq!(
            (a.lines, a.used_sets, a.even_sets, a.max_per_set, a.stride),
            (1024, 16, 1024, 64, 8192)
        );
        assert!(a.flagged);
        assert_eq!(a.colours, 4);
        assert_eq!((b.used_sets, b.max_per_set, b.stride), (64, 16, 64));
        assert!(!b.flagged && b.colours == 1);
        assert_eq!((c.lines, c.used_sets, c.max_per_set), (16384, 2048, 8));
        assert!(!c.flagged);
        // A structure larger than the cache is a capacity problem, not a conflict.
        let mut d = Detector::new(l2());
        for i in 0..40_000u64 {
            d.access(9, i * 8192, 8);
        }
        assert!(!d.findings(1)[0].flagged);
    }

    #[test]
    fn reads_lackey_output_and_places_objects() {
        let text = "\
==123== Lackey, an example Valgrind tool
--123-- Reading syms from /usr/bin/prog
--123--    svma 0x00000022d0, avma 0x000010a2d0
--123-- Reading syms from /usr/lib/libc.so.6
--123--   Considering /usr/lib/debug/x.debug ..
--123--    svma 0x0000026380, avma 0x000486c380
I  0010a300,3
 L 1ffefff000,8
 S 1ffefff040,8
I  0010a303,4
 M 0400003e,4
garbage line
==123== 
";
        let mut d = Detector::new(l2());
        let t = read_lackey(text.as_bytes(), &mut d).unwrap();
        assert_eq!(t.instructions, 2);
        assert_eq!(d.accesses, 3);
        assert_eq!(
            t.objects,
            [
                Object {
                    path: "/usr/bin/prog".into(),
                    bias: 0x108000
                },
                Object {
                    path: "/usr/lib/libc.so.6".into(),
                    bias: 0x486c380 - 0x26380
                }
            ]
        );
        let f = d.findings(1);
        let first = f.iter().find(|x| x.ip == 0x10a300).unwrap();
        assert_eq!((first.accesses, first.lines), (2, 2));
        // The modify at 0x400003e, 4 bytes, spans two lines.
        let m = f.iter().find(|x| x.ip == 0x10a303).unwrap();
        assert_eq!(m.lines, 2);
        assert_eq!(t.messages.len(), 2);
    }
}
