//! The data caches of CPU 0 as the kernel describes them in
//! `/sys/devices/system/cpu/cpu0/cache/index*/` (level, type, size, ways, line size).
//! The root is a parameter so that a test can point it at a directory of its own.

use std::path::{Path, PathBuf};

use kstate_format::{Error, ErrorKind};

/// One data (or unified) cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub level: u32,
    pub size: u64,
    pub ways: u64,
    pub line: u64,
    pub sets: u64,
}

impl Level {
    /// A cache of `size` bytes, `ways`-way set associative, `line`-byte lines.
    pub fn new(level: u32, size: u64, ways: u64, line: u64) -> Option<Level> {
        let sets = size.checked_div(ways.checked_mul(line)?)?;
        (sets > 0 && line > 0).then_some(Level {
            level,
            size,
            ways,
            line,
            sets,
        })
    }

    /// The bytes one way spans: addresses this far apart share a set.
    pub fn way_size(&self) -> u64 {
        self.sets * self.line
    }

    pub fn set_of(&self, addr: u64) -> u64 {
        (addr / self.line) % self.sets
    }

    /// `L2 2 MiB 16-way 64 B lines (2048 sets)`.
    pub fn describe(&self) -> String {
        format!(
            "L{} {} {}-way {} B lines ({} sets)",
            self.level,
            bytes(self.size),
            self.ways,
            self.line,
            self.sets
        )
    }
}

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The data caches, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    pub levels: Vec<Level>,
    /// Where they were read.
    pub source: PathBuf,
}

impl Geometry {
    /// Reads `ROOT/devices/system/cpu/cpu0/cache` (ROOT is `/sys` on a real machine).
    pub fn read(root: &Path) -> Result<Geometry, Error> {
        let dir = root.join("devices/system/cpu/cpu0/cache");
        let bad = |msg: String| Error::new(ErrorKind::Input, None, msg).in_file(&dir);
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            bad(format!(
                "no cache information ({e}): this kernel or machine does not describe its caches in sysfs, so the cache geometry is unknown"
            ))
        })?;
        let mut levels = Vec::new();
        for ent in entries.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if !name.starts_with("index") {
                continue;
            }
            let d = ent.path();
            let read = |f: &str| -> Result<String, Error> {
                std::fs::read_to_string(d.join(f))
                    .map(|s| s.trim().to_string())
                    .map_err(|e| Error::io(&d.join(f), e))
            };
            let kind = read("type")?;
            if kind == "Instruction" {
                continue;
            }
            let num = |f: &str| -> Result<u64, Error> {
                let v = read(f)?;
                parse_size(&v).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Corrupt,
                        None,
                        format!("{v:?} is not a size or a count"),
                    )
                    .in_file(&d.join(f))
                })
            };
            let level = num("level")? as u32;
            let (size, ways, line) = (
                num("size")?,
                num("ways_of_associativity")?,
                num("coherency_line_size")?,
            );
            let l = Level::new(level, size, ways, line).ok_or_else(|| {
                bad(format!(
                    "{name}: size {size}, {ways} ways, {line} B lines do not make a cache"
                ))
            })?;
            levels.push(l);
        }
        if levels.is_empty() {
            return Err(bad(
                "no data cache among the index* entries: the cache geometry is unknown".into(),
            ));
        }
        levels.sort_by_key(|l| l.level);
        Ok(Geometry {
            levels,
            source: dir,
        })
    }

    pub fn level(&self, n: u32) -> Option<&Level> {
        self.levels.iter().find(|l| l.level == n)
    }

    /// Level `n` (asked for with `--level`), or an error naming the levels there are.
    pub fn require(&self, n: u32) -> Result<Level, Error> {
        self.level(n).copied().ok_or_else(|| {
            let have: Vec<String> = self.levels.iter().map(|l| l.level.to_string()).collect();
            Error::new(
                ErrorKind::Input,
                None,
                format!(
                    "--level {n}: {} describes levels {}",
                    self.source.display(),
                    have.join(", ")
                ),
            )
        })
    }
}

/// `48K`, `2048K`, `1M`, `64`: sysfs's sizes and counts.
fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, idx: u32, fields: &[(&str, &str)]) {
        let d = root.join(format!("devices/system/cpu/cpu0/cache/index{idx}"));
        std::fs::create_dir_all(&d).unwrap();
        for (f, v) in fields {
            std::fs::write(d.join(f), format!("{v}\n")).unwrap();
        }
    }

    #[test]
    fn reads_data_levels_and_skips_instruction_caches() {
        let t = tempfile::tempdir().unwrap();
        let cache = |lvl: &'static str, ty: &'static str, size: &'static str, ways| {
            [
                ("level", lvl),
                ("type", ty),
                ("size", size),
                ("ways_of_associativity", ways),
                ("coherency_line_size", "64"),
            ]
        };
        write(t.path(), 0, &cache("1", "Data", "48K", "12"));
        write(t.path(), 1, &cache("1", "Instruction", "32K", "8"));
        write(t.path(), 2, &cache("2", "Unified", "2048K", "16"));
        let g = Geometry::read(t.path()).unwrap();
        assert_eq!(g.levels.len(), 2);
        assert_eq!(g.levels[0].sets, 48 * 1024 / (12 * 64));
        let l2 = g.level(2).unwrap();
        assert_eq!(
            (l2.size, l2.sets, l2.way_size()),
            (2 << 20, 2048, 128 << 10)
        );
        assert_eq!(l2.set_of(128 << 10), 0);
        assert_eq!(l2.set_of(64 * 5), 5);
    }

    #[test]
    fn missing_sysfs_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let e = Geometry::read(t.path()).unwrap_err().to_string();
        assert!(e.contains("no cache information"), "{e}");
        assert!(e.contains("devices/system/cpu/cpu0/cache"), "{e}");
        write(
            t.path(),
            0,
            &[("type", "Data"), ("level", "1"), ("size", "lots")],
        );
        let e = Geometry::read(t.path()).unwrap_err().to_string();
        assert!(e.contains("\"lots\"") && e.contains("index0/size"), "{e}");
    }
}
