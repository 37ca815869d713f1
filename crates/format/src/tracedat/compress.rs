//! trace.dat v7 compression: whole metadata sections are one compressed block; CPU data is a
//! sequence of chunks, each a few pages, that we decompress one at a time so memory stays
//! bounded whatever the trace size.
//!
//! CPU data layout (file endianness): `u32 chunk count`, then per chunk `u32 compressed size,
//! u32 uncompressed size (a whole number of pages), compressed bytes`.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::bytes::Endian;
use crate::error::{Error, ErrorKind, Result};
use crate::pages::{PackedPages, PageSource};

use super::input::read_exact_at;

/// Largest uncompressed chunk we accept. trace-cmd writes chunks of ten pages; a claim far
/// beyond that is corruption, and we must not allocate it.
pub const MAX_CHUNK: usize = 64 << 20;
/// Largest uncompressed metadata section (kallsyms of big kernels run to tens of MiB).
pub const MAX_SECTION: usize = 512 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Zstd,
    Zlib,
}

impl Codec {
    /// The codec for the name in the v7 header: `Some(None)` for "none", None if unknown.
    pub fn from_name(name: &str) -> Option<Option<Codec>> {
        match name {
            "none" => Some(None),
            "zstd" => Some(Some(Codec::Zstd)),
            "zlib" => Some(Some(Codec::Zlib)),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Codec::Zstd => "zstd",
            Codec::Zlib => "zlib",
        }
    }
}

/// Decoder state kept across chunks so each chunk does not pay for fresh tables.
pub(crate) struct Decompressor {
    codec: Codec,
    zstd: Option<Box<ruzstd::decoding::FrameDecoder>>,
}

impl Decompressor {
    pub fn new(codec: Codec) -> Decompressor {
        Decompressor { codec, zstd: None }
    }

    /// Decompresses `input` into `out`, which must end up exactly `size` bytes long.
    /// `size` has been checked against our limits by the caller. The error says what is
    /// wrong with the block in words; the decoders' own texts describe their internals.
    pub fn decompress(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        size: usize,
    ) -> std::result::Result<(), String> {
        out.clear();
        out.resize(size, 0);
        let codec = self.codec;
        let damaged = || format!("is damaged: it does not decompress as {}", codec.name());
        let got = match codec {
            Codec::Zstd => {
                let dec = self
                    .zstd
                    .get_or_insert_with(|| Box::new(ruzstd::decoding::FrameDecoder::new()));
                match zstd_frames(dec, input, out) {
                    Ok(n) => n,
                    Err(ZstdError::TooLong) => {
                        return Err(format!(
                            "decompresses to more than the {size} bytes its header announces"
                        ))
                    }
                    Err(ZstdError::Checksum) => {
                        return Err("is damaged: it decompresses as zstd, but not to the bytes \
                                    its checksum was taken of"
                            .into())
                    }
                    Err(ZstdError::Damaged) => return Err(damaged()),
                }
            }
            Codec::Zlib => {
                // trace-cmd uses zlib's compress2()/uncompress(): zlib framing, not raw deflate.
                let mut d = flate2::Decompress::new(true);
                let status = d
                    .decompress(input, out, flate2::FlushDecompress::Finish)
                    .map_err(|_| damaged())?;
                if status != flate2::Status::StreamEnd {
                    return Err(format!(
                        "does not end within the {size} bytes its header announces"
                    ));
                }
                d.total_out() as usize
            }
        };
        if got != size {
            return Err(format!(
                "decompresses to {got} bytes, where its header announces {size}"
            ));
        }
        Ok(())
    }
}

enum ZstdError {
    TooLong,
    Damaged,
    /// A frame decoded without error to bytes its checksum disagrees with.
    Checksum,
}

/// Decodes every frame of `input` into `out` and returns the bytes written: ruzstd's
/// `decode_all`, plus the check of each frame's checksum where it has one. Without it a
/// damaged byte in a raw literal block decodes without complaint to wrong text or wrong
/// events. (trace-cmd's libzstd writes frames without a checksum; kstate's writer and
/// the `zstd` tool write them with one.)
fn zstd_frames(
    dec: &mut ruzstd::decoding::FrameDecoder,
    mut input: &[u8],
    mut out: &mut [u8],
) -> std::result::Result<usize, ZstdError> {
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    use std::io::Read;
    let mut written = 0;
    while !input.is_empty() {
        match dec.init(&mut input) {
            Ok(()) => {}
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                input = input.get(length as usize..).ok_or(ZstdError::Damaged)?;
                continue;
            }
            Err(_) => return Err(ZstdError::Damaged),
        }
        loop {
            dec.decode_blocks(
                &mut input,
                ruzstd::decoding::BlockDecodingStrategy::UptoBytes(1 << 20),
            )
            .map_err(|_| ZstdError::Damaged)?;
            let n = dec.read(out).map_err(|_| ZstdError::Damaged)?;
            out = &mut out[n..];
            written += n;
            if dec.can_collect() != 0 {
                return Err(ZstdError::TooLong);
            }
            if dec.is_finished() {
                break;
            }
            if input.is_empty() {
                // The frame's last block or its checksum is missing.
                return Err(ZstdError::Damaged);
            }
        }
        let stored = dec.get_checksum_from_data();
        if stored.is_some() && stored != dec.get_calculated_checksum() {
            return Err(ZstdError::Checksum);
        }
    }
    Ok(written)
}

/// Where a CPU's compressed chunks are (v7).
#[derive(Debug, Clone)]
pub struct CompressedData {
    /// File offset of the chunk count.
    pub offset: u64,
    /// Size trace-cmd records for the data: the chunks, not counting the 4-byte chunk count.
    pub size: u64,
    pub codec: Codec,
    pub endian: Endian,
}

impl PackedPages for CompressedData {
    fn open(&self, data: &Path, shown: &Path, page_size: usize) -> Result<Box<dyn PageSource>> {
        Ok(Box::new(
            CompressedPages::open(data, self, page_size)?.named(shown.to_path_buf()),
        ))
    }
    fn offset(&self) -> u64 {
        self.offset
    }
}

/// Decompresses one CPU's chunks one at a time and hands out their pages.
pub struct CompressedPages {
    file: File,
    path: PathBuf,
    file_len: u64,
    endian: Endian,
    page_size: usize,
    decomp: Decompressor,
    /// File offset of the next chunk header; None until the chunk count has been read.
    next_chunk: Option<u64>,
    data_offset: u64,
    chunks_left: u32,
    chunk_offset: u64,
    compressed: Vec<u8>,
    chunk: Vec<u8>,
    pos: usize,
    /// Start of the current page in `chunk`, once `advance` has found one.
    current: Option<usize>,
    done: bool,
}

impl CompressedPages {
    pub fn open(path: &Path, data: &CompressedData, page_size: usize) -> Result<CompressedPages> {
        if page_size == 0 {
            return Err(Error::corrupt(data.offset, "page size 0").in_file(path));
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(CompressedPages {
            file,
            path: path.to_path_buf(),
            file_len,
            endian: data.endian,
            page_size,
            decomp: Decompressor::new(data.codec),
            next_chunk: None,
            data_offset: data.offset,
            chunks_left: 0,
            chunk_offset: data.offset,
            compressed: Vec::new(),
            chunk: Vec::new(),
            pos: 0,
            current: None,
            done: false,
        })
    }

    /// Names `path` in messages (the user's name for an unnamed copy).
    pub fn named(mut self, path: PathBuf) -> CompressedPages {
        self.path = path;
        self
    }

    fn read_u32s<const N: usize>(&self, at: u64, what: &str) -> Result<[u32; N]> {
        let mut b = [0u8; 8];
        let b = &mut b[..N * 4];
        if at.saturating_add(b.len() as u64) > self.file_len {
            return Err(Error::truncated(
                at,
                format!("{what}: the file ends at {}", self.file_len),
            ));
        }
        read_exact_at(&self.file, b, at)?;
        let mut out = [0u32; N];
        for (i, v) in out.iter_mut().enumerate() {
            *v = self
                .endian
                .u32([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        }
        Ok(out)
    }

    /// Loads the next non-empty chunk; false when there are no more.
    fn load_chunk(&mut self) -> Result<bool> {
        let mut at = match self.next_chunk {
            Some(at) => at,
            None => {
                let [count] = self.read_u32s::<1>(self.data_offset, "compressed CPU data")?;
                self.chunks_left = count;
                self.data_offset + 4
            }
        };
        loop {
            if self.chunks_left == 0 {
                return Ok(false);
            }
            let [csize, usize_] = self.read_u32s::<2>(at, "compressed chunk header")?;
            let (csize, usize_) = (csize as usize, usize_ as usize);
            if usize_ > MAX_CHUNK || usize_ % self.page_size != 0 {
                return Err(Error::corrupt(
                    at,
                    format!(
                        "compressed chunk claims {usize_} bytes uncompressed: expected a multiple \
                         of the {}-byte page, at most {MAX_CHUNK}",
                        self.page_size
                    ),
                ));
            }
            // Incompressible input grows a little under either codec, never by this much.
            if csize > usize_ + usize_ / 8 + 1024 {
                return Err(Error::corrupt(
                    at,
                    format!("compressed chunk of {csize} bytes for {usize_} uncompressed"),
                ));
            }
            let body = at + 8;
            if body + csize as u64 > self.file_len {
                return Err(Error::truncated(
                    body,
                    format!(
                        "compressed chunk of {csize} bytes runs past the end of the file at {}",
                        self.file_len
                    ),
                ));
            }
            self.compressed.resize(csize, 0);
            read_exact_at(&self.file, &mut self.compressed, body)?;
            self.chunks_left -= 1;
            self.next_chunk = Some(body + csize as u64);
            self.chunk_offset = at;
            self.decomp
                .decompress(&self.compressed, &mut self.chunk, usize_)
                .map_err(|m| {
                    Error::corrupt(at, format!("compressed chunk of {csize} bytes {m}"))
                })?;
            self.pos = 0;
            if !self.chunk.is_empty() {
                return Ok(true);
            }
            at = body + csize as u64;
        }
    }
}

impl PageSource for CompressedPages {
    fn advance(&mut self) -> Result<bool> {
        self.current = None;
        if self.done {
            return Ok(false);
        }
        if self.pos >= self.chunk.len() {
            match self.load_chunk() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return Ok(false);
                }
                Err(e) => {
                    self.done = true;
                    return Err(e.in_file(&self.path));
                }
            }
        }
        self.current = Some(self.pos);
        self.pos += self.page_size;
        Ok(true)
    }
    fn page(&self) -> &[u8] {
        match self.current {
            Some(at) => &self.chunk[at..at + self.page_size],
            None => &[],
        }
    }
    fn page_offset(&self) -> u64 {
        self.chunk_offset
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads a compressed metadata block (`u32 compressed size, u32 uncompressed size, data`)
/// from `body` (the section content) and returns the uncompressed bytes. `at` is the file
/// offset of `body`, for messages.
pub(crate) fn decompress_section(
    body: &[u8],
    at: u64,
    endian: Endian,
    codec: Codec,
    what: &str,
) -> Result<Vec<u8>> {
    let mut r = crate::bytes::Reader::new(body, at, endian);
    let csize = r.u32(what)? as usize;
    let usize_ = r.u32(what)? as usize;
    if usize_ > MAX_SECTION {
        return Err(Error::new(
            ErrorKind::Corrupt,
            Some(at),
            format!(
                "{what}: claims {usize_} bytes uncompressed, more than the {MAX_SECTION} we accept"
            ),
        ));
    }
    if csize > r.remaining() {
        return Err(Error::corrupt(
            at,
            format!(
                "{what}: compressed block of {csize} bytes overruns its section ({} bytes left)",
                r.remaining()
            ),
        ));
    }
    let data = r.bytes(csize, what)?;
    let mut out = Vec::new();
    Decompressor::new(codec)
        .decompress(data, &mut out, usize_)
        .map_err(|m| {
            Error::corrupt(
                at,
                format!("{what} section: its compressed block of {csize} bytes {m}"),
            )
        })?;
    Ok(out)
}
