//! LEB128 varints and a bounds-checked reader over a section payload, for kstate's own
//! binary sections (sysinfo snapshots, CPU samples). Offsets in errors are payload offsets.

use crate::error::{Error, Result};

/// Appends `v` as an LEB128 varint.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads `b[pos..end]`; errors name the section (`"sysinfo"`, `"samples"`).
pub struct Reader<'a> {
    pub b: &'a [u8],
    pub pos: usize,
    /// End of the current record body.
    pub end: usize,
    section: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8], pos: usize, end: usize, section: &'static str) -> Reader<'a> {
        Reader {
            b,
            pos,
            end,
            section,
        }
    }

    pub fn varint(&mut self, what: &str) -> Result<u64> {
        let at = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&c) = self.b[..self.end].get(self.pos) else {
                return Err(Error::corrupt(
                    at as u64,
                    format!(
                        "{} section: {what} runs past the end of its record",
                        self.section
                    ),
                ));
            };
            self.pos += 1;
            if i == 9 && c > 1 {
                break;
            }
            v |= ((c & 0x7f) as u64) << (7 * i);
            if c & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::corrupt(
            at as u64,
            format!("{} section: {what} is more than 64 bits", self.section),
        ))
    }

    pub fn bytes(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let at = self.pos;
        if n > (self.end - self.pos) as u64 {
            return Err(Error::corrupt(
                at as u64,
                format!(
                    "{} section: {what} of {n} bytes runs past the end of its record ({} left)",
                    self.section,
                    self.end - self.pos
                ),
            ));
        }
        self.pos += n as usize;
        Ok(&self.b[at..self.pos])
    }

    /// A varint length, then that many bytes of UTF-8.
    pub fn text(&mut self, what: &str) -> Result<String> {
        let n = self.varint(what)?;
        let at = self.pos;
        let b = self.bytes(n, what)?;
        std::str::from_utf8(b).map(str::to_string).map_err(|e| {
            Error::corrupt(
                (at + e.valid_up_to()) as u64,
                format!("{} section: {what} is not UTF-8", self.section),
            )
        })
    }
}
