//! trace-cmd's `trace.dat`, versions 6 and 7 (sections, optionally zstd/zlib-compressed).
//!
//! Both start with the same header: magic `\x17\x08\x44tracing`, the version as a C string,
//! an endianness byte, the traced user space's long size and the page size. v7 adds the
//! compression name and version and the offset of the first options section.
//!
//! Metadata is read into memory; CPU data never is: `Trace::pages` streams it, through
//! `PlainPages` or, for compressed v7 data, `CompressedPages` one chunk at a time.

mod compress;
pub(crate) mod input;
pub(crate) mod meta;
mod v6;
mod v7;

/// trace-cmd's option (and, in v7, section) ids, shared with the writer.
pub use meta::opt;

use std::fs::File;
use std::path::Path;

use crate::bytes::Endian;
use crate::error::{Error, ErrorKind, Result};
use crate::trace::{Container, Trace};

pub use compress::{Codec, CompressedData, CompressedPages};
use input::{FileInput, Input};
use meta::Meta;

const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

pub fn open(path: &Path) -> Result<Trace> {
    read(path).map_err(|e| e.in_file(path))
}

fn read(path: &Path) -> Result<Trace> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut inp = FileInput::new(&file, file_len, 0, Endian::Little);

    let have = inp.bytes(file_len.min(MAGIC.len() as u64), "magic")?;
    if have[..] != MAGIC[..have.len()] {
        return Err(Error::new(
            ErrorKind::BadMagic,
            Some(0),
            format!(
                "bad magic: not a trace.dat (\\x17\\x08\\x44tracing), perf.data (PERFILE2) or capture directory; found {}",
                have.escape_ascii()
            ),
        ));
    }
    if have.len() < MAGIC.len() {
        return Err(Error::truncated(0, "file ends inside the trace.dat magic"));
    }
    let at = inp.offset();
    let version = inp.cstr("file version")?;
    let version: u32 = match version.parse() {
        Ok(v @ (6 | 7)) => v,
        _ => {
            return Err(Error::unsupported(
                Some(at),
                format!("trace.dat version {version:?} (this reader knows 6 and 7)"),
            ))
        }
    };
    let at = inp.offset();
    inp.endian = match inp.u8("endianness")? {
        0 => Endian::Little,
        1 => Endian::Big,
        b => {
            return Err(Error::corrupt(
                at,
                format!("endianness byte {b}: expected 0 or 1"),
            ))
        }
    };
    let at = inp.offset();
    let long_size = match inp.u8("long size")? {
        b @ (4 | 8) => b as usize,
        b => {
            return Err(Error::corrupt(
                at,
                format!("long size {b}: expected 4 or 8"),
            ))
        }
    };
    let at = inp.offset();
    let page_size = inp.u32("page size")?;
    if !page_size.is_power_of_two() || !(1024..=1 << 26).contains(&page_size) {
        return Err(Error::corrupt(
            at,
            format!("page size {page_size}: expected a power of two from 1 KiB to 64 MiB"),
        ));
    }
    let mut meta = Meta::new(inp.endian, long_size, page_size as usize);

    if version == 6 {
        let d = v6::read(path, &mut inp, file_len, &mut meta)?;
        let container = Container::TraceDat {
            version,
            compression: None,
        };
        return Ok(meta.finish(path, container, d.header_cpus, d.cpu_data, d.truncated));
    }

    let at = inp.offset();
    let name = inp.cstr("compression name")?;
    let _codec_version = inp.cstr("compression version")?;
    let codec = compress::Codec::from_name(&name).ok_or_else(|| {
        Error::unsupported(
            Some(at),
            format!("compression {name:?} (this reader knows zstd and zlib)"),
        )
    })?;
    let first_options = inp.u64("first options section offset")?;
    let d = v7::read(path, &file, file_len, codec, first_options, &mut meta)?;
    let container = Container::TraceDat {
        version,
        compression: codec.map(|c| c.name().to_string()),
    };
    Ok(meta.finish(path, container, d.header_cpus, d.cpu_data, d.truncated))
}
