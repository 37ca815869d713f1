//! Endian-aware reads from byte slices. Trace files carry the traced machine's byte order,
//! which need not be ours.

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    #[inline(always)]
    pub fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(b),
            Endian::Big => u16::from_be_bytes(b),
        }
    }
    #[inline(always)]
    pub fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        }
    }
    #[inline(always)]
    pub fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(b),
            Endian::Big => u64::from_be_bytes(b),
        }
    }
    /// Reads an unsigned integer of `size` bytes (1, 2, 4 or 8) at `off`; None if it does not fit.
    #[inline(always)]
    pub fn uint(self, data: &[u8], off: usize, size: usize) -> Option<u64> {
        let b = data.get(off..off.checked_add(size)?)?;
        Some(match size {
            1 => b[0] as u64,
            2 => self.u16([b[0], b[1]]) as u64,
            4 => self.u32([b[0], b[1], b[2], b[3]]) as u64,
            8 => self.u64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            _ => return None,
        })
    }

    /// Reads from the start of a slice the caller has checked is long enough (a record
    /// whose size was checked against its fields).
    pub(crate) fn r16(self, b: &[u8]) -> u16 {
        self.u16([b[0], b[1]])
    }
    pub(crate) fn r32(self, b: &[u8]) -> u32 {
        self.u32([b[0], b[1], b[2], b[3]])
    }
    pub(crate) fn r64(self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        self.u64(a)
    }

    /// `v` in this byte order.
    pub fn u16_bytes(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    pub fn u32_bytes(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    pub fn u64_bytes(self, v: u64) -> [u8; 8] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }

    /// Writes the low `out.len()` bytes (1, 2, 4 or 8) of `v` in this byte order.
    pub fn put_uint(self, out: &mut [u8], v: u64) {
        let n = out.len();
        match self {
            Endian::Little => out.copy_from_slice(&v.to_le_bytes()[..n]),
            Endian::Big => out.copy_from_slice(&v.to_be_bytes()[8 - n..]),
        }
    }
}

/// A cursor over a byte slice whose errors carry absolute offsets (`base` + position).
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    pub endian: Endian,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8], base: u64, endian: Endian) -> Reader<'a> {
        Reader {
            data,
            pos: 0,
            base,
            endian,
        }
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// Absolute offset of the cursor.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::truncated(
                self.offset(),
                format!("{what}: need {n} bytes, only {} left", self.remaining()),
            ));
        }
        let b = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let b = self.bytes(N, what)?;
        Ok(b.try_into().expect("length checked"))
    }
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.array(what)?;
        Ok(self.endian.u16(b))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.array(what)?;
        Ok(self.endian.u32(b))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.array(what)?;
        Ok(self.endian.u64(b))
    }
    /// A NUL-terminated string; the NUL is consumed and not returned.
    pub fn cstr(&mut self, what: &str) -> Result<&'a str> {
        let rest = &self.data[self.pos..];
        let Some(len) = rest.iter().position(|&c| c == 0) else {
            return Err(Error::truncated(
                self.offset(),
                format!("{what}: string has no terminating NUL"),
            ));
        };
        let s = std::str::from_utf8(&rest[..len])
            .map_err(|_| Error::corrupt(self.offset(), format!("{what}: string is not UTF-8")))?;
        self.pos += len + 1;
        Ok(s)
    }
    /// Reads `n` bytes where `n` was just read from the file: checks it fits first, so a
    /// corrupt length cannot make us allocate or read past the data.
    pub fn sized(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.bytes(n, what)
    }
}

/// Fills `buf` as far as `r` goes (short only at its end); an error ends the filling and is
/// returned beside the count of bytes read before it.
pub(crate) fn fill(r: &mut dyn std::io::Read, buf: &mut [u8]) -> (usize, Option<std::io::Error>) {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}
