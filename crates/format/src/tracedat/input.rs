//! A cursor over metadata that is either read from the file as it goes (v6, where kallsyms
//! and friends sit inline) or already in memory (v7 sections, possibly decompressed).
//! Parsers of the shared structures are written once against `Input`.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::bytes::{Endian, Reader};
use crate::error::{Error, Result};

/// Longest NUL-terminated string we accept in metadata (system names, instance names):
/// anything longer is a corrupt file, not a name.
const MAX_CSTR: usize = 4096;

pub(crate) trait Input {
    fn endian(&self) -> Endian;
    /// Absolute offset of the cursor (file offset, or offset in a decompressed section).
    fn offset(&self) -> u64;
    fn remaining(&self) -> u64;
    /// Reads `n` bytes; callers go through `bytes`, which checks `n` against `remaining`.
    fn read_checked(&mut self, n: usize, what: &str) -> Result<Vec<u8>>;
    fn cstr(&mut self, what: &str) -> Result<String>;

    /// Reads `n` bytes where `n` usually came from the file: checked before allocating.
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if n > self.remaining() {
            return Err(Error::truncated(
                self.offset(),
                format!("{what}: need {n} bytes, only {} left", self.remaining()),
            ));
        }
        self.read_checked(n as usize, what)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.bytes(2, what)?;
        Ok(self.endian().u16([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.bytes(4, what)?;
        Ok(self.endian().u32([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.bytes(8, what)?;
        Ok(self
            .endian()
            .u64([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
}

/// Positioned reads from the file, bounded by its length.
pub(crate) struct FileInput<'f> {
    file: &'f File,
    pos: u64,
    len: u64,
    pub endian: Endian,
}

impl<'f> FileInput<'f> {
    pub fn new(file: &'f File, len: u64, pos: u64, endian: Endian) -> FileInput<'f> {
        FileInput {
            file,
            pos,
            len,
            endian,
        }
    }
}

/// Fills `buf` from `offset`; the caller has checked the range lies inside the file, so a
/// short read means the file shrank under us.
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::truncated(offset, "file ended during a read")
        } else {
            Error::new(crate::ErrorKind::Io, Some(offset), e.to_string())
        }
    })
}

impl Input for FileInput<'_> {
    fn endian(&self) -> Endian {
        self.endian
    }
    fn offset(&self) -> u64 {
        self.pos
    }
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }
    fn read_checked(&mut self, n: usize, _what: &str) -> Result<Vec<u8>> {
        let mut v = vec![0; n];
        read_exact_at(self.file, &mut v, self.pos)?;
        self.pos += n as u64;
        Ok(v)
    }
    fn cstr(&mut self, what: &str) -> Result<String> {
        let start = self.pos;
        let mut s = Vec::new();
        let mut block = [0u8; 256];
        loop {
            let want = (self.remaining() as usize).min(block.len());
            if want == 0 {
                return Err(Error::truncated(
                    start,
                    format!("{what}: string has no terminating NUL before the end of the file"),
                ));
            }
            read_exact_at(self.file, &mut block[..want], self.pos)?;
            if let Some(nul) = block[..want].iter().position(|&c| c == 0) {
                s.extend_from_slice(&block[..nul]);
                self.pos += nul as u64 + 1;
                break;
            }
            s.extend_from_slice(&block[..want]);
            self.pos += want as u64;
            if s.len() > MAX_CSTR {
                return Err(Error::corrupt(
                    start,
                    format!("{what}: string longer than {MAX_CSTR} bytes"),
                ));
            }
        }
        String::from_utf8(s).map_err(|_| Error::corrupt(start, format!("{what}: not UTF-8")))
    }
}

impl Input for Reader<'_> {
    fn endian(&self) -> Endian {
        self.endian
    }
    fn offset(&self) -> u64 {
        Reader::offset(self)
    }
    fn remaining(&self) -> u64 {
        Reader::remaining(self) as u64
    }
    fn read_checked(&mut self, n: usize, what: &str) -> Result<Vec<u8>> {
        Ok(Reader::bytes(self, n, what)?.to_vec())
    }
    fn cstr(&mut self, what: &str) -> Result<String> {
        Reader::cstr(self, what).map(String::from)
    }
}
