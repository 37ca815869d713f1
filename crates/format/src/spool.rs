//! Traces that cannot be read where they lie: compressed (gzip, zstd, xz, told by magic)
//! or arriving through a pipe, a FIFO or standard input.
//!
//! Such a stream is unpacked once, in one pass, into an unnamed temporary file, and the
//! readers read that copy as they read any file. Every reader seeks (trace.dat's sections
//! point at one another, perf.data's header at its end, each CPU's pages have their own
//! cursor), so a stream is made seekable once here rather than in each reader. Memory stays
//! bounded (a decoder holds its window, the copy a fixed buffer); the copy takes as much
//! disk in `$TMPDIR` as the uncompressed trace. The file has no name (O_TMPFILE where the
//! file system has it, else unlinked at once): nothing is left behind however the process
//! ends, and the readers reach it again through `/proc/self/fd`.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::bytes::fill;
use crate::error::{Error, ErrorKind, Result};
use crate::sniff::{self, Kind, Packing, HEAD};

/// The unnamed copy a trace is read from, and how it came (or, for standard input that
/// is a regular file, that file itself: [`Spool::in_place`]).
#[derive(Debug)]
pub struct Spool {
    /// Held open: the copy lives exactly as long as this value.
    _file: File,
    /// `/proc/self/fd/N`, for the readers to open the copy again.
    pub(crate) path: PathBuf,
    /// The compression the input was unpacked from (None: a plain trace from a pipe).
    pub packing: Option<Packing>,
    /// Whether the input was a pipe, a FIFO or standard input rather than a file.
    pub pipe: bool,
    /// Bytes read from the input (its compressed size).
    pub stored_bytes: u64,
    /// Bytes of the copy (the uncompressed size).
    pub bytes: u64,
}

impl Spool {
    /// Standard input that is a regular file (`kstate info - < t.dat`): no copy is needed,
    /// the readers open the file itself again through `/proc/self/fd`, as they do a copy.
    pub(crate) fn in_place(file: File, name: &Path) -> Result<Spool> {
        let bytes = file.metadata().map_err(|e| Error::io(name, e))?.len();
        Ok(Spool {
            path: PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())),
            _file: file,
            packing: None,
            pipe: false,
            stored_bytes: bytes,
            bytes,
        })
    }
}

/// A finished copy: what it holds, and where the input broke off if it did (the copy then
/// holds what came before).
pub(crate) struct Spooled {
    pub spool: Spool,
    pub kind: Kind,
    pub damage: Option<Error>,
}

/// Copies `input` (whose first bytes, `head`, were already read from it to tell what it
/// is) into an unnamed file, unpacking it if `packing` says so. `name` is the input as the
/// user named it, for messages.
pub(crate) fn spool(
    input: File,
    head: Vec<u8>,
    packing: Option<Packing>,
    pipe: bool,
    name: &Path,
) -> Result<Spooled> {
    let stored = Rc::new(Cell::new(0u64));
    let raw = Counted {
        inner: Cursor::new(head).chain(input),
        n: stored.clone(),
    };
    let mut data: Box<dyn Read> = match packing {
        None => Box::new(raw),
        Some(Packing::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(raw))),
        Some(Packing::Zstd) => Box::new(ZstdFrames::new(BufReader::new(raw))),
        Some(Packing::Xz) => Box::new(XzStreams::new(BufReader::new(raw))),
    };
    let broken = |e: std::io::Error, unpacked: u64| {
        stream_broke(e, packing, stored.get(), unpacked).in_file(name)
    };

    // What the stream holds, before anything is written: a compressed file of something
    // else (or an endless /dev/zero behind a pipe) is refused at once.
    let mut inner = vec![0u8; HEAD];
    let (got, mut early) = fill(&mut data, &mut inner);
    inner.truncate(got);
    let kind = sniff::kind(&inner);
    if got == 0 {
        if let Some(e) = early.take() {
            return Err(broken(e, 0));
        }
    }
    if !matches!(kind, Kind::TraceDat | Kind::PerfData) {
        let whole = got < HEAD;
        let msg = match (packing, kind) {
            (Some(p), Kind::Empty) => {
                format!("{}-compressed, and holds nothing (0 bytes)", p.name())
            }
            (Some(p), _) => format!(
                "{}-compressed, but {}",
                p.name(),
                sniff::not_a_trace(&inner, whole)
            ),
            (None, _) => sniff::not_a_trace(&inner, whole),
        };
        return Err(Error::new(ErrorKind::BadMagic, None, msg).in_file(name));
    }

    let tmp = std::env::temp_dir();
    let file = tempfile::tempfile().map_err(|e| {
        Error::new(
            ErrorKind::Io,
            None,
            format!(
                "cannot make a temporary file in {} to unpack into: {e}",
                tmp.display()
            ),
        )
        .in_file(name)
    })?;
    let no_room = |e: std::io::Error, at: u64| {
        Error::new(
            ErrorKind::Io,
            None,
            format!(
                "unpacking into {} failed after {at} bytes: {e} (set TMPDIR to a file system \
                 with room for the whole uncompressed trace)",
                tmp.display()
            ),
        )
        .in_file(name)
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &file);
    out.write_all(&inner).map_err(|e| no_room(e, 0))?;
    let mut bytes = got as u64;
    let mut damage = early.map(|e| broken(e, bytes));
    let mut buf = vec![0u8; 1 << 20];
    while damage.is_none() {
        let (n, err) = fill(&mut data, &mut buf);
        out.write_all(&buf[..n]).map_err(|e| no_room(e, bytes))?;
        bytes += n as u64;
        damage = err.map(|e| broken(e, bytes));
        if n < buf.len() {
            break;
        }
    }
    out.flush().map_err(|e| no_room(e, bytes))?;
    drop(out);
    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    Ok(Spooled {
        spool: Spool {
            _file: file,
            path,
            packing,
            pipe,
            stored_bytes: stored.get(),
            bytes,
        },
        kind,
        damage,
    })
}

/// Where the input broke off, in the user's terms: the decoders' own texts name their
/// internals, not the file.
fn stream_broke(e: std::io::Error, packing: Option<Packing>, stored: u64, unpacked: u64) -> Error {
    let kept = if unpacked > 0 {
        format!("; the {unpacked} bytes unpacked before it are read")
    } else {
        String::new()
    };
    match packing {
        None => Error::new(
            ErrorKind::Io,
            None,
            format!("reading failed after {stored} bytes: {e}{kept}"),
        ),
        Some(p) if e.kind() == std::io::ErrorKind::Unsupported => Error::new(
            ErrorKind::Unsupported,
            None,
            format!("the {} stream cannot be read: {e}", p.name()),
        ),
        Some(p) if e.kind() == std::io::ErrorKind::UnexpectedEof => Error::new(
            ErrorKind::Truncated,
            Some(stored),
            format!(
                "the {} stream ends early (the file is cut short){kept}",
                p.name()
            ),
        ),
        Some(p) => Error::new(
            ErrorKind::Corrupt,
            Some(stored),
            format!(
                "the {} stream is damaged at or before this offset{kept}",
                p.name()
            ),
        ),
    }
}

/// Counts the bytes read through it (the compressed size, and where damage was met).
struct Counted<R> {
    inner: R,
    n: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n.set(self.n.get() + n as u64);
        Ok(n)
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

/// Every zstd frame of a stream in turn (`zstd` writes one, `pzstd` and `cat a.zst b.zst`
/// several, skippable frames between), checksums verified where the frame has one.
struct ZstdFrames<R> {
    src: R,
    dec: ruzstd::decoding::FrameDecoder,
    in_frame: bool,
}

impl<R: BufRead> ZstdFrames<R> {
    fn new(src: R) -> ZstdFrames<R> {
        ZstdFrames {
            src,
            dec: ruzstd::decoding::FrameDecoder::new(),
            in_frame: false,
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
        loop {
            if self.in_frame {
                if self.dec.can_collect() > 0 {
                    return self.dec.read(buf);
                }
                if self.dec.is_finished() {
                    let (stored, computed) = (
                        self.dec.get_checksum_from_data(),
                        self.dec.get_calculated_checksum(),
                    );
                    if stored.is_some() && stored != computed {
                        return Err(invalid("frame checksum mismatch"));
                    }
                    self.in_frame = false;
                    continue;
                }
                let step = self.dec.decode_blocks(
                    &mut self.src,
                    ruzstd::decoding::BlockDecodingStrategy::UptoBytes(1 << 20),
                );
                if let Err(e) = step {
                    // The decoder says the same of a cut file as of a damaged one.
                    return Err(match self.src.fill_buf() {
                        Ok([]) => std::io::ErrorKind::UnexpectedEof.into(),
                        _ => invalid(e),
                    });
                }
                continue;
            }
            if self.src.fill_buf()?.is_empty() {
                return Ok(0);
            }
            match self.dec.reset(&mut self.src) {
                Ok(()) => self.in_frame = true,
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped = std::io::copy(
                        &mut (&mut self.src).take(length as u64),
                        &mut std::io::sink(),
                    )?;
                    if skipped < length as u64 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                }
                Err(e) => return Err(invalid(e)),
            }
        }
    }
}

/// Every xz stream of a file in turn (`cat a.xz b.xz`), with the zero padding xz allows
/// between them.
struct XzStreams<R> {
    src: R,
    dec: Box<xz4rust::XzDecoder<'static>>,
    /// Between streams: the last one ended, the next (if any) not begun.
    between: bool,
}

impl<R: BufRead> XzStreams<R> {
    fn new(src: R) -> XzStreams<R> {
        XzStreams {
            src,
            // The dictionary grows to what the file asks for (8 MiB for `xz -6`).
            dec: xz4rust::XzDecoder::in_heap_with_alloc_dict_size(1 << 20, xz4rust::DICT_SIZE_MAX),
            between: false,
        }
    }
}

impl<R: BufRead> Read for XzStreams<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use xz4rust::XzNextBlockResult::{EndOfStream, NeedMoreData};
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let input = self.src.fill_buf()?;
            if self.between {
                if input.is_empty() {
                    return Ok(0);
                }
                let zeros = input.iter().take_while(|&&c| c == 0).count();
                if zeros > 0 {
                    self.src.consume(zeros);
                    continue;
                }
                self.dec.reset();
                self.between = false;
            }
            if input.is_empty() {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let step = self.dec.decode(input, buf).map_err(|e| match e {
                xz4rust::XzError::Sha256NotSupported
                | xz4rust::XzError::UnsupportedCheckType(_) => std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "its integrity check is SHA-256 or unknown, which kstate's xz reader does \
                         not verify (xz writes CRC64 unless told otherwise: recompress with `xz`)",
                ),
                e => invalid(e),
            })?;
            let (used, made) = match step {
                NeedMoreData(i, o) => (i, o),
                EndOfStream(i, o) => {
                    self.between = true;
                    (i, o)
                }
            };
            self.src.consume(used);
            if made > 0 {
                return Ok(made);
            }
        }
    }
}
