//! Writes trace-cmd `trace.dat` files, version 7 (see trace-cmd.dat.v7(5)), so that
//! `trace-cmd report` and KernelShark open what kstate records.
//!
//! The writer streams: ring-buffer pages go to the file as they arrive (compressed in
//! chunks when asked), so memory stays bounded whatever the recording size. The small
//! metadata (formats, kallsyms, cmdlines, ...) is kept until the first CPU's data starts
//! and written before it, as trace-cmd's own writer lays a file out: libtracecmd 3.1
//! reads the event formats' system names with a seek whose result it keeps in an `int`
//! (`do_lseek` in `read_string`), so an uncompressed event formats section starting past
//! 2 GiB makes `trace-cmd report` give up on the whole file, printing nothing. Metadata
//! changed after CPU data started is written again after the data; the options point
//! at the last copy written.
//!
//! File layout, every section directly after the previous one (trace-cmd's `dump` walks
//! them back to back, so there are no gaps between sections):
//!
//! ```text
//! initial header   magic, "7", endian, long size, page size, compression name/version,
//!                  u64 offset of the options section (patched in finish)
//! section 16       header_page + header_event
//! section 17       ftrace event formats
//! section 18       event formats by system
//! section 19/20/21 kallsyms, printk formats, saved cmdlines
//! section 3        "buffer flyrecord ": for each CPU, padding to a page boundary, then
//!                  its pages (raw, or u32 chunk count + chunks of u32 csize, u32 rsize, data)
//! section 0        options: offsets of sections 16..21, CPUCOUNT, TRACECLOCK, UNAME,
//!                  VERSION, clock options (TSC2NSEC, OFFSET, TIME_SHIFT) when given,
//!                  kstate's own options, BUFFER (where each CPU's data is), DONE(0)
//! section 15       strings: the section descriptions
//! ```
//!
//! Everything is written to a fresh temporary file beside `PATH` ([`crate::output::NewFile`]:
//! created exclusively, mode 0600), synced and renamed to `PATH` only when complete, so a
//! crash or a full disk never leaves a file that looks finished, and a link planted at
//! either name is never written through; on any error (or if the writer is dropped
//! unfinished) the temporary file is removed.
//!
//! kstate's own data goes in options with ids in [`KSTATE_OPTION_IDS`]. trace-cmd skips
//! option ids it does not know (libtracecmd's `handle_options` falls through to a warning
//! that is only printed at verbose log levels); the tests check `trace-cmd report` prints
//! nothing on stderr for a file carrying one.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use crate::bytes::Endian;
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{whole_pages, PageLayout};
use crate::output::NewFile;
use crate::timeshift::TimeShift;
use crate::trace::{ClockMap, Container, Trace};

/// Option ids reserved for kstate's own sections: far above trace-cmd's (0..=22 in 3.1,
/// a few more in later versions, allocated sequentially), so they will not collide.
pub const KSTATE_OPTION_IDS: RangeInclusive<u16> = 0x6b00..=0x6bff;

/// Section and option ids from trace-cmd (`TRACECMD_OPTION_*`). In v7 a section's id is
/// the id of the option that points to it.
pub use crate::tracedat::opt as id;

/// Section header flag: the section body is compressed.
const SECTION_COMPRESSED: u16 = 1;
/// Section header: u16 id, u16 flags, u32 description string id, u64 size.
const SECTION_HEADER_LEN: u64 = 16;

/// The kernel's `events/header_event`, unchanged since 2.6.31; used when a capture lacks it
/// (trace-cmd reads but does not interpret it).
pub const DEFAULT_HEADER_EVENT: &str = "# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    /// zstd, by the pure-Rust `ruzstd` encoder (its fastest level).
    Zstd,
}

#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Ring-buffer page (sub-buffer) size in bytes; CPU data is aligned to it.
    pub page_size: usize,
    /// Bytes per `long` of the traced machine (4 or 8).
    pub long_size: usize,
    pub endian: Endian,
    pub compression: Compression,
    /// Pages per compressed chunk: a reader decompresses a whole chunk to get one page.
    pub chunk_pages: usize,
    /// Trace clock name (`local`, `global`, `x86-tsc`, ...); trace-cmd assumes `local`.
    pub clock: Option<String>,
    pub uname: Option<String>,
    /// The recording tool, e.g. "kstate 0.1.0".
    pub version: Option<String>,
    /// CPUs in the traced system; defaults to one past the highest CPU written.
    pub cpu_count: Option<u32>,
}

impl WriterConfig {
    /// Uncompressed, this machine's byte order, 8-byte longs.
    pub fn new(page_size: usize) -> WriterConfig {
        WriterConfig {
            page_size,
            long_size: 8,
            endian: NATIVE,
            compression: Compression::None,
            chunk_pages: 16,
            clock: None,
            uname: None,
            version: None,
            cpu_count: None,
        }
    }
}

const NATIVE: Endian = if cfg!(target_endian = "big") {
    Endian::Big
} else {
    Endian::Little
};

/// Where one CPU's data landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CpuEntry {
    cpu: u32,
    offset: u64,
    /// As trace-cmd records it: the raw bytes, or for compressed data the chunks
    /// (headers included) without the leading chunk count.
    size: u64,
}

#[derive(Default)]
struct Metadata {
    header_page: Option<Vec<u8>>,
    header_event: Option<Vec<u8>>,
    ftrace: Vec<Vec<u8>>,
    /// Systems in first-seen order, each with its formats.
    systems: Vec<(String, Vec<Vec<u8>>)>,
    kallsyms: Vec<u8>,
    printk: Vec<u8>,
    cmdlines: Vec<u8>,
    extras: Vec<(u16, Vec<u8>)>,
}

/// The output file with its position tracked here, so offsets need no seeks.
struct Out {
    file: BufWriter<NewFile>,
    pos: u64,
    endian: Endian,
    path: PathBuf,
}

impl Out {
    fn err(&self, what: &str, e: std::io::Error) -> Error {
        Error::new(
            ErrorKind::Io,
            Some(self.pos),
            format!(
                "writing {what} to {}: {e}",
                self.file.get_ref().tmp_path().display()
            ),
        )
        .in_file(&self.path)
    }
    fn bytes(&mut self, b: &[u8], what: &str) -> Result<()> {
        self.file.write_all(b).map_err(|e| self.err(what, e))?;
        self.pos += b.len() as u64;
        Ok(())
    }
    fn u16(&mut self, v: u16, what: &str) -> Result<()> {
        self.bytes(&self.endian.u16_bytes(v), what)
    }
    fn u32(&mut self, v: u32, what: &str) -> Result<()> {
        self.bytes(&self.endian.u32_bytes(v), what)
    }
    fn u64(&mut self, v: u64, what: &str) -> Result<()> {
        self.bytes(&self.endian.u64_bytes(v), what)
    }
    /// Overwrites a u32/u64 written earlier (a size or offset known only later).
    fn patch(&mut self, at: u64, value: &[u8], what: &str) -> Result<()> {
        let r = (|| {
            self.file.seek(SeekFrom::Start(at))?;
            self.file.write_all(value)?;
            self.file.seek(SeekFrom::Start(self.pos)).map(|_| ())
        })();
        r.map_err(|e| self.err(what, e))
    }
    /// Zero padding up to the next multiple of `align`.
    fn align(&mut self, align: u64, what: &str) -> Result<()> {
        let pad = (align - self.pos % align) % align;
        if pad > 0 {
            // Seeking leaves a hole: no zero writes, and a sparse file where the FS allows.
            self.file
                .seek(SeekFrom::Current(pad as i64))
                .map_err(|e| self.err(what, e))?;
            self.pos += pad;
        }
        Ok(())
    }
}

/// A size that the format stores in 32 bits.
fn size32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::unsupported(
            None,
            format!("{what} is {n} bytes; trace.dat stores its size in 32 bits"),
        )
    })
}

/// The metadata string table: descriptions are referred to by their offset in it.
#[derive(Default)]
struct Strings {
    data: Vec<u8>,
}

impl Strings {
    fn add(&mut self, s: &str) -> u32 {
        let mut at = 0;
        for existing in self.data.split(|&c| c == 0) {
            if existing == s.as_bytes() && at < self.data.len() {
                return at as u32;
            }
            at += existing.len() + 1;
        }
        let id = self.data.len() as u32;
        self.data.extend_from_slice(s.as_bytes());
        self.data.push(0);
        id
    }
}

/// Appends `u64 size` + bytes, the framing of most metadata files.
fn put_sized64(buf: &mut Vec<u8>, e: Endian, data: &[u8]) {
    buf.extend_from_slice(&e.u64_bytes(data.len() as u64));
    buf.extend_from_slice(data);
}

/// Body of the HEADER_INFO section.
fn header_info_body(e: Endian, header_page: &[u8], header_event: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(header_page.len() + header_event.len() + 41);
    b.extend_from_slice(b"header_page\0");
    put_sized64(&mut b, e, header_page);
    b.extend_from_slice(b"header_event\0");
    put_sized64(&mut b, e, header_event);
    b
}

/// Body of the FTRACE_EVENTS section.
fn ftrace_body(e: Endian, formats: &[Vec<u8>]) -> Result<Vec<u8>> {
    let mut b = e
        .u32_bytes(size32(formats.len(), "ftrace event count")?)
        .to_vec();
    for f in formats {
        put_sized64(&mut b, e, f);
    }
    Ok(b)
}

/// Body of the EVENT_FORMATS section.
fn events_body(e: Endian, systems: &[(String, Vec<Vec<u8>>)]) -> Result<Vec<u8>> {
    let mut b = e
        .u32_bytes(size32(systems.len(), "event system count")?)
        .to_vec();
    for (name, formats) in systems {
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend_from_slice(&e.u32_bytes(size32(formats.len(), "event count")?));
        for f in formats {
            put_sized64(&mut b, e, f);
        }
    }
    Ok(b)
}

/// Body of the KALLSYMS and PRINTK sections (32-bit size).
fn sized32_body(e: Endian, data: &[u8], what: &str) -> Result<Vec<u8>> {
    let mut b = e.u32_bytes(size32(data.len(), what)?).to_vec();
    b.extend_from_slice(data);
    Ok(b)
}

/// The BUFFER option payload: where the flyrecord section and each CPU's data are.
fn buffer_option(
    e: Endian,
    section: u64,
    clock: &str,
    page_size: u32,
    cpus: &[CpuEntry],
) -> Vec<u8> {
    let mut b = e.u64_bytes(section).to_vec();
    b.push(0); // "" names the top-level buffer
    b.extend_from_slice(clock.as_bytes());
    b.push(0);
    b.extend_from_slice(&e.u32_bytes(page_size));
    b.extend_from_slice(&e.u32_bytes(cpus.len() as u32));
    for c in cpus {
        b.extend_from_slice(&e.u32_bytes(c.cpu));
        b.extend_from_slice(&e.u64_bytes(c.offset));
        b.extend_from_slice(&e.u64_bytes(c.size));
    }
    b
}

/// Options as stored in an options section, ending with DONE(`next`).
fn options_body(e: Endian, options: &[(u16, Vec<u8>)], next: u64) -> Result<Vec<u8>> {
    let mut b = Vec::new();
    for (oid, data) in options {
        b.extend_from_slice(&e.u16_bytes(*oid));
        b.extend_from_slice(&e.u32_bytes(size32(data.len(), "option")?));
        b.extend_from_slice(data);
    }
    b.extend_from_slice(&e.u16_bytes(id::DONE));
    b.extend_from_slice(&e.u32_bytes(8));
    b.extend_from_slice(&e.u64_bytes(next));
    Ok(b)
}

/// A NUL-terminated string option payload.
fn cstring(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// Writes one trace.dat. See the module documentation for the layout.
pub struct TraceWriter {
    out: Out,
    cfg: WriterConfig,
    meta: Metadata,
    strings: Strings,
    /// Where the initial header holds the options section's offset.
    options_offset_at: u64,
    /// Offset of the flyrecord section header, once started.
    buffer_section: Option<u64>,
    /// Where the metadata sections went (id, offset), once written.
    metadata_at: Option<Vec<(u16, u64)>>,
    /// Metadata changed after it was written: it is written again at the end.
    metadata_late: bool,
    cpus: Vec<CpuEntry>,
    /// Every CPU started, with or without data.
    cpus_seen: Vec<u32>,
    /// Set when a write failed or a CPU was left half-written: the file cannot be finished.
    broken: Option<String>,
}

impl TraceWriter {
    /// The temporary file the trace is written to until [`TraceWriter::finish`].
    pub fn tmp_path(&self) -> &Path {
        self.out.file.get_ref().tmp_path()
    }

    /// Starts the temporary file for `PATH` and writes the initial header.
    pub fn create(path: &Path, cfg: WriterConfig) -> Result<TraceWriter> {
        if !cfg.page_size.is_power_of_two() || cfg.page_size < 64 || cfg.page_size > 1 << 26 {
            return Err(Error::unsupported(
                None,
                format!(
                    "page size {} is not a plausible power of two",
                    cfg.page_size
                ),
            )
            .in_file(path));
        }
        if cfg.long_size != 4 && cfg.long_size != 8 {
            return Err(Error::unsupported(
                None,
                format!("long size {} is neither 4 nor 8", cfg.long_size),
            )
            .in_file(path));
        }
        let file = NewFile::create(path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                None,
                format!(
                    "creating a temporary file in {}: {e}",
                    crate::output::parent_dir(path).display()
                ),
            )
            .in_file(path)
        })?;
        // A trace.dat's header is completed by seeking back into it: a pipe cannot take it.
        if file.in_place() && { file.file() }.stream_position().is_err() {
            return Err(Error::new(
                ErrorKind::Input,
                None,
                "is a pipe, and a trace.dat is written with seeks: name a file".to_string(),
            )
            .in_file(path));
        }
        let mut w = TraceWriter {
            out: Out {
                file: BufWriter::with_capacity(1 << 20, file),
                pos: 0,
                endian: cfg.endian,
                path: path.to_path_buf(),
            },
            cfg,
            meta: Metadata::default(),
            strings: Strings::default(),
            options_offset_at: 0,
            buffer_section: None,
            metadata_at: None,
            metadata_late: false,
            cpus: Vec::new(),
            cpus_seen: Vec::new(),
            broken: None,
        };
        w.write_initial_header()?;
        Ok(w)
    }

    fn write_initial_header(&mut self) -> Result<()> {
        let mut h = vec![0x17, 0x08, 0x44];
        h.extend_from_slice(b"tracing7\0");
        h.push(u8::from(self.cfg.endian == Endian::Big));
        h.push(self.cfg.long_size as u8);
        h.extend_from_slice(&self.cfg.endian.u32_bytes(self.cfg.page_size as u32));
        let (name, version) = match self.cfg.compression {
            Compression::None => ("none", ""),
            // trace-cmd checks only the name; the version names the encoder honestly.
            Compression::Zstd => ("zstd", "ruzstd-0.8"),
        };
        h.extend_from_slice(&cstring(name));
        h.extend_from_slice(&cstring(version));
        self.out.bytes(&h, "file header")?;
        // Offset of the options section, patched by finish.
        self.options_offset_at = self.out.pos;
        self.out.u64(0, "file header")
    }

    /// `events/header_page`: describes the ring-buffer page; checked against the page size.
    pub fn header_page(&mut self, text: &[u8]) -> Result<()> {
        let layout = PageLayout::parse(text, self.cfg.endian, Some(self.cfg.page_size))
            .map_err(|e| e.in_file(&self.out.path))?;
        if layout.page_size != self.cfg.page_size {
            return Err(Error::corrupt(
                0,
                format!(
                    "header_page describes {}-byte pages but the writer was configured for {}",
                    layout.page_size, self.cfg.page_size
                ),
            )
            .in_file(&self.out.path));
        }
        self.meta.header_page = Some(text.to_vec());
        self.metadata_late |= self.metadata_at.is_some();
        Ok(())
    }

    /// `events/header_event`; [`DEFAULT_HEADER_EVENT`] is written when not given.
    pub fn header_event(&mut self, text: &[u8]) {
        self.meta.header_event = Some(text.to_vec());
        self.metadata_late |= self.metadata_at.is_some();
    }

    /// One `events/SYSTEM/EVENT/format` file. The `ftrace` system goes to its own section,
    /// as trace-cmd expects.
    pub fn event_format(&mut self, system: &str, text: &[u8]) {
        self.metadata_late |= self.metadata_at.is_some();
        if system == "ftrace" {
            self.meta.ftrace.push(text.to_vec());
            return;
        }
        match self.meta.systems.iter_mut().find(|(s, _)| s == system) {
            Some((_, v)) => v.push(text.to_vec()),
            None => self
                .meta
                .systems
                .push((system.to_string(), vec![text.to_vec()])),
        }
    }

    /// `/proc/kallsyms`.
    pub fn kallsyms(&mut self, text: &[u8]) {
        self.meta.kallsyms = text.to_vec();
        self.metadata_late |= self.metadata_at.is_some();
    }

    /// tracefs `printk_formats`.
    pub fn printk_formats(&mut self, text: &[u8]) {
        self.meta.printk = text.to_vec();
        self.metadata_late |= self.metadata_at.is_some();
    }

    /// tracefs `saved_cmdlines` (`pid comm` lines).
    pub fn cmdlines(&mut self, text: &[u8]) {
        self.meta.cmdlines = text.to_vec();
        self.metadata_late |= self.metadata_at.is_some();
    }

    /// A kstate option; `id` must be in [`KSTATE_OPTION_IDS`] so it can never be taken
    /// for one of trace-cmd's.
    pub fn extra_option(&mut self, id: u16, payload: &[u8]) -> Result<()> {
        if !KSTATE_OPTION_IDS.contains(&id) {
            return Err(Error::unsupported(
                None,
                format!(
                    "option id {id:#x} is outside kstate's range {:#x}..={:#x}",
                    KSTATE_OPTION_IDS.start(),
                    KSTATE_OPTION_IDS.end()
                ),
            )
            .in_file(&self.out.path));
        }
        size32(payload.len(), "option")?;
        self.meta.extras.push((id, payload.to_vec()));
        Ok(())
    }

    /// trace-cmd's clock options, so that a file's timestamps read the same after kstate
    /// rewrites it (`convert`, `split`), and so that tests can make the files trace-cmd
    /// writes for a virtual machine's guest, which it cannot record here: TSC2NSEC
    /// (raw counts to ns: `mult`, `shift`, and the TSC offset trace-cmd stores beside
    /// them), OFFSET (ns added to every timestamp) and TIME_SHIFT (the guest-to-host
    /// samples, see [`TimeShift`]).
    pub fn clock_options(&mut self, map: &ClockMap, shift: Option<&TimeShift>) {
        let e = self.cfg.endian;
        if map.mult != 0 {
            let mut p = e.u32_bytes(map.mult).to_vec();
            p.extend_from_slice(&e.u32_bytes(map.shift));
            p.extend_from_slice(&e.u64_bytes(map.tsc_offset));
            self.meta.extras.push((id::TSC2NSEC, p));
        }
        if map.offset != 0 {
            self.meta
                .extras
                .push((id::OFFSET, cstring(&map.offset.to_string())));
        }
        if let Some(t) = shift {
            self.meta.extras.push((id::TIME_SHIFT, t.to_bytes(e)));
        }
    }

    fn check_usable(&self) -> Result<()> {
        match &self.broken {
            None => Ok(()),
            Some(why) => Err(Error::new(
                ErrorKind::Io,
                None,
                format!("cannot continue after an earlier failure: {why}"),
            )
            .in_file(&self.out.path)),
        }
    }

    /// Records a failure so later calls refuse to go on with an inconsistent file.
    fn fail<T>(&mut self, r: Result<T>) -> Result<T> {
        let r = r.map_err(|e| e.in_file(&self.out.path));
        if let Err(e) = &r {
            if self.broken.is_none() {
                self.broken = Some(e.msg.clone());
            }
        }
        r
    }

    /// Starts one CPU's data; pages are then added with [`CpuWriter::write_page`] and the
    /// CPU is completed with [`CpuWriter::finish`]. CPUs are written one after another.
    pub fn cpu_writer(&mut self, cpu: u32) -> Result<CpuWriter<'_>> {
        self.check_usable()?;
        if self.cpus_seen.contains(&cpu) {
            return Err(
                Error::unsupported(None, format!("CPU {cpu} data written twice"))
                    .in_file(&self.out.path),
            );
        }
        let r = self.start_cpu();
        let start = self.fail(r)?;
        self.cpus_seen.push(cpu);
        let chunk_cap = if self.cfg.compression == Compression::Zstd {
            self.cfg.page_size * self.cfg.chunk_pages.max(1)
        } else {
            0
        };
        Ok(CpuWriter {
            w: self,
            cpu,
            start,
            chunk: Vec::with_capacity(chunk_cap),
            chunks: 0,
            pages: 0,
            done: false,
        })
    }

    fn start_cpu(&mut self) -> Result<u64> {
        self.start_buffer_section()?;
        // trace-cmd maps CPU data page by page, so it must start on a page boundary.
        self.out
            .align(self.cfg.page_size as u64, "CPU data padding")?;
        let start = self.out.pos;
        if self.cfg.compression == Compression::Zstd {
            self.out.u32(0, "chunk count")?; // patched when the CPU is finished
        }
        Ok(start)
    }

    fn start_buffer_section(&mut self) -> Result<()> {
        if self.buffer_section.is_none() {
            let at = self.write_metadata()?;
            self.metadata_at = Some(at);
            self.buffer_section = Some(self.out.pos);
            let flags = match self.cfg.compression {
                Compression::None => 0,
                Compression::Zstd => SECTION_COMPRESSED,
            };
            // The description is "buffer flyrecord " + the buffer's name ("" for the top one).
            self.section_header(id::BUFFER, flags, "buffer flyrecord ", 0)?;
        }
        Ok(())
    }

    fn section_header(&mut self, sid: u16, flags: u16, desc: &str, size: u64) -> Result<()> {
        let desc = self.strings.add(desc);
        let what = "section header";
        self.out.u16(sid, what)?;
        self.out.u16(flags, what)?;
        self.out.u32(desc, what)?;
        self.out.u64(size, what)
    }

    /// Writes a whole section, compressed when configured; returns its offset.
    fn section(&mut self, sid: u16, desc: &str, body: &[u8], may_compress: bool) -> Result<u64> {
        let at = self.out.pos;
        if may_compress && self.cfg.compression == Compression::Zstd {
            let c = zstd(body);
            let csize = size32(c.len(), desc)?;
            let rsize = size32(body.len(), desc)?;
            self.section_header(sid, SECTION_COMPRESSED, desc, 8 + c.len() as u64)?;
            self.out.u32(csize, desc)?;
            self.out.u32(rsize, desc)?;
            self.out.bytes(&c, desc)?;
        } else {
            self.section_header(sid, 0, desc, body.len() as u64)?;
            self.out.bytes(body, desc)?;
        }
        Ok(at)
    }

    /// Streams one CPU's pages from `src` (whole pages, e.g. a per-CPU scratch file or a
    /// copy of `trace_pipe_raw`) until its end; returns the page bytes read.
    pub fn cpu_data(&mut self, cpu: u32, src: &mut dyn Read) -> Result<u64> {
        let page_size = self.cfg.page_size;
        let path = self.out.path.clone();
        let mut cw = self.cpu_writer(cpu)?;
        // Many pages per read: one syscall and one buffered write per batch.
        let mut buf = vec![0u8; whole_pages(page_size, 4 << 20)];
        let mut total = 0u64;
        loop {
            let (got, err) = crate::bytes::fill(src, &mut buf);
            if let Some(e) = err {
                return Err(Error::new(
                    ErrorKind::Io,
                    Some(total + got as u64),
                    format!("reading CPU {cpu} pages: {e}"),
                )
                .in_file(&path));
            }
            let whole = got - got % page_size;
            for page in buf[..whole].chunks_exact(page_size) {
                cw.write_page(page)?;
            }
            total += got as u64;
            if got < buf.len() {
                if whole != got {
                    return Err(Error::truncated(
                        total,
                        format!(
                            "CPU {cpu} data ends {} bytes into a page: not a whole number of {page_size}-byte pages",
                            got - whole
                        ),
                    )
                    .in_file(&path));
                }
                break;
            }
        }
        cw.finish()?;
        Ok(total)
    }

    /// Writes the metadata, options and strings, then moves the temporary file to `PATH`.
    pub fn finish(mut self) -> Result<()> {
        self.check_usable()?;
        let r = self.write_trailer();
        self.fail(r)?;
        let out = &mut self.out;
        let r = out
            .file
            .flush()
            .and_then(|_| out.file.get_ref().file().sync_all())
            .map_err(|e| out.err("the end of the file", e));
        self.fail(r)?;
        let file = self.out.file.get_mut();
        file.persist().map_err(|e| {
            Error::new(
                ErrorKind::Io,
                None,
                format!("renaming {} into place: {e}", file.tmp_path().display()),
            )
            .in_file(&self.out.path)
        })?;
        // Make the rename itself durable; a failure here loses nothing already written.
        if let Ok(d) = File::open(crate::output::parent_dir(&self.out.path)) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Writes the six metadata sections here; returns where each went.
    fn write_metadata(&mut self) -> Result<Vec<(u16, u64)>> {
        let meta = &self.meta;
        let e = self.cfg.endian;
        let header_page = match &meta.header_page {
            Some(t) => t.clone(),
            None => default_header_page(self.cfg.long_size, self.cfg.page_size).into_bytes(),
        };
        let header_event = meta
            .header_event
            .clone()
            .unwrap_or_else(|| DEFAULT_HEADER_EVENT.as_bytes().to_vec());
        let sections: [(u16, &str, Vec<u8>); 6] = [
            (
                id::HEADER_INFO,
                "headers",
                header_info_body(e, &header_page, &header_event),
            ),
            (
                id::FTRACE_EVENTS,
                "ftrace events",
                ftrace_body(e, &meta.ftrace)?,
            ),
            (
                id::EVENT_FORMATS,
                "events format",
                events_body(e, &meta.systems)?,
            ),
            (
                id::KALLSYMS,
                "kallsyms",
                sized32_body(e, &meta.kallsyms, "kallsyms")?,
            ),
            (
                id::PRINTK,
                "printk",
                sized32_body(e, &meta.printk, "printk formats")?,
            ),
            (id::CMDLINES, "command lines", {
                let mut b = Vec::new();
                put_sized64(&mut b, e, &meta.cmdlines);
                b
            }),
        ];
        let mut at = Vec::new();
        for (sid, desc, body) in sections {
            at.push((sid, self.section(sid, desc, &body, true)?));
        }
        self.metadata_late = false;
        Ok(at)
    }

    fn write_trailer(&mut self) -> Result<()> {
        let e = self.cfg.endian;
        // Close the flyrecord section (an empty one when no CPU had data).
        self.start_buffer_section()?;
        let buffer_at = self.buffer_section.unwrap_or_default();
        let size = self.out.pos - buffer_at - SECTION_HEADER_LEN;
        self.out
            .patch(buffer_at + 8, &e.u64_bytes(size), "flyrecord section size")?;

        let at = match self.metadata_at.take() {
            Some(at) if !self.metadata_late => at,
            _ => self.write_metadata()?,
        };
        let mut options: Vec<(u16, Vec<u8>)> = at
            .into_iter()
            .map(|(sid, at)| (sid, e.u64_bytes(at).to_vec()))
            .collect();

        self.cpus.sort_by_key(|c| c.cpu);
        let cpu_count = self
            .cfg
            .cpu_count
            .unwrap_or_else(|| self.cpus_seen.iter().max().map_or(0, |c| c + 1));
        options.push((id::CPUCOUNT, e.u32_bytes(cpu_count).to_vec()));
        let clock = self.cfg.clock.clone().unwrap_or_else(|| "local".into());
        // trace-cmd decides from this whether timestamps are nanoseconds (local, global,
        // mono, ...) or raw counts (counter, x86-tsc) when printing.
        options.push((id::TRACECLOCK, cstring(&format!("[{clock}]"))));
        if let Some(u) = &self.cfg.uname {
            options.push((id::UNAME, cstring(u)));
        }
        if let Some(v) = &self.cfg.version {
            options.push((id::VERSION, cstring(v)));
        }
        options.extend(std::mem::take(&mut self.meta.extras));
        options.push((
            id::BUFFER,
            buffer_option(e, buffer_at, &clock, self.cfg.page_size as u32, &self.cpus),
        ));
        let body = options_body(e, &options, 0)?;
        let options_at = self.section(id::DONE, "options", &body, false)?;

        // The strings section goes last so it holds every description, its own included
        // (added first, so writing the section header finds it already there).
        self.strings.add("strings");
        let strings = self.strings.data.clone();
        self.section(id::STRINGS, "strings", &strings, true)?;

        self.out.patch(
            self.options_offset_at,
            &e.u64_bytes(options_at),
            "options offset in the file header",
        )
    }
}

/// The header_page text kernels since 2.6.31 produce, for callers that have none.
fn default_header_page(long_size: usize, page_size: usize) -> String {
    format!(
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
         \tfield: local_t commit;\toffset:8;\tsize:{long_size};\tsigned:1;\n\
         \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
         \tfield: char data;\toffset:{};\tsize:{};\tsigned:0;\n",
        8 + long_size,
        page_size - 8 - long_size
    )
}

/// One CPU's data being written. Dropping it unfinished makes the whole file unusable
/// (its data section would be incomplete), which `TraceWriter::finish` then reports.
pub struct CpuWriter<'a> {
    w: &'a mut TraceWriter,
    cpu: u32,
    start: u64,
    chunk: Vec<u8>,
    chunks: u32,
    pages: u64,
    done: bool,
}

impl CpuWriter<'_> {
    /// Adds one whole page (exactly the configured page size).
    pub fn write_page(&mut self, page: &[u8]) -> Result<()> {
        self.w.check_usable()?;
        if page.len() != self.w.cfg.page_size {
            let e = Error::unsupported(
                None,
                format!(
                    "CPU {}: page of {} bytes, expected {}",
                    self.cpu,
                    page.len(),
                    self.w.cfg.page_size
                ),
            )
            .in_file(&self.w.out.path);
            return self.w.fail(Err(e));
        }
        self.pages += 1;
        if self.w.cfg.compression == Compression::None {
            let r = self.w.out.bytes(page, "CPU data");
            return self.w.fail(r);
        }
        self.chunk.extend_from_slice(page);
        if self.chunk.len() >= self.chunk.capacity() {
            let r = self.flush_chunk();
            return self.w.fail(r);
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let c = zstd(&self.chunk);
        let what = "compressed CPU data";
        let csize = size32(c.len(), what)?;
        let rsize = size32(self.chunk.len(), what)?;
        self.w.out.u32(csize, what)?;
        self.w.out.u32(rsize, what)?;
        self.w.out.bytes(&c, what)?;
        self.chunks += 1;
        self.chunk.clear();
        Ok(())
    }

    /// Completes this CPU; returns the page bytes written (before compression).
    pub fn finish(mut self) -> Result<u64> {
        self.done = true;
        self.w.check_usable()?;
        let r = self.finish_inner();
        self.w.fail(r)
    }

    fn finish_inner(&mut self) -> Result<u64> {
        let e = self.w.cfg.endian;
        let mut size = self.w.out.pos - self.start;
        if self.w.cfg.compression == Compression::Zstd {
            self.flush_chunk()?;
            self.w
                .out
                .patch(self.start, &e.u32_bytes(self.chunks), "chunk count")?;
            // trace-cmd records the chunks' bytes without the 4-byte count.
            size = self.w.out.pos - self.start - 4;
        }
        // Like trace-cmd, CPUs without data are left out of the BUFFER option.
        if self.pages > 0 {
            self.w.cpus.push(CpuEntry {
                cpu: self.cpu,
                offset: self.start,
                size,
            });
        }
        Ok(self.pages * self.w.cfg.page_size as u64)
    }
}

impl Drop for CpuWriter<'_> {
    fn drop(&mut self) {
        if !self.done && self.w.broken.is_none() {
            self.w.broken = Some(format!("CPU {} data was left unfinished", self.cpu));
        }
    }
}

/// Converts a raw capture directory (see `rawdir`) into a trace.dat at `out`. Page size,
/// long size and byte order come from the capture; `cfg` gives compression, uname,
/// version, and the clock when the capture has no `trace_clock`.
pub fn write_from_capture(capture: &Trace, out: &Path, cfg: WriterConfig) -> Result<()> {
    if capture.container != Container::RawDir {
        return Err(Error::unsupported(
            None,
            "write_from_capture converts raw capture directories only",
        )
        .in_file(&capture.path));
    }
    write_from_trace(capture, out, cfg, None)
}

/// Writes what `src` holds (any container) as a trace.dat at `out`: its metadata, its
/// kstate sections, and the pages of the CPUs in `cpus` (all when `None`) unchanged, so
/// timestamps and lost-event marks are kept. Page size, long size and byte order come
/// from `src`; `cfg` gives compression, and uname, version and clock where `src` has none.
pub fn write_from_trace(
    src: &Trace,
    out: &Path,
    mut cfg: WriterConfig,
    cpus: Option<&[u32]>,
) -> Result<()> {
    cfg.page_size = src.layout.page_size;
    cfg.long_size = src.long_size;
    cfg.endian = src.endian;
    if src.clock.is_some() {
        cfg.clock = src.clock.clone();
    }
    if src.uname.is_some() {
        cfg.uname = src.uname.clone();
    }
    cfg.cpu_count = Some(cfg.cpu_count.unwrap_or(src.cpu_count));
    let mut w = TraceWriter::create(out, cfg)?;
    let header_page = match &src.header_page {
        Some(t) => t.clone(),
        None => default_header_page(src.long_size, src.layout.page_size).into_bytes(),
    };
    w.header_page(&header_page)
        .map_err(|e| e.in_file(&src.path))?;
    for (system, text) in &src.format_texts {
        w.event_format(system, text);
    }
    if let Some(k) = &src.kallsyms {
        w.kallsyms(k);
    }
    if let Some(p) = &src.printk_formats {
        w.printk_formats(p);
    }
    let mut comms: Vec<_> = src.comms.iter().collect();
    comms.sort();
    let cmdlines: String = comms
        .iter()
        .map(|(pid, c)| format!("{pid} {c}\n"))
        .collect();
    w.cmdlines(cmdlines.as_bytes());
    w.clock_options(&src.clock_map, src.time_shift.as_deref());
    for (id, payload) in &src.extra_options {
        if KSTATE_OPTION_IDS.contains(id) {
            w.extra_option(*id, payload)?;
        }
    }
    for (i, cd) in src.cpu_data.iter().enumerate() {
        if cpus.is_some_and(|c| !c.contains(&cd.cpu)) {
            continue;
        }
        let mut pages = src.pages(i)?;
        let mut cw = w.cpu_writer(cd.cpu)?;
        while pages.advance()? {
            cw.write_page(pages.page())?;
        }
        cw.finish()?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    /// The names in a directory, to check the writer left no temporary file.
    fn names_in(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    use super::*;

    fn le16(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
    }
    fn le32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn le64(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn options_end_with_done_and_next_offset() {
        let b = options_body(Endian::Little, &[(8, vec![4, 0, 0, 0])], 0x1122).unwrap();
        assert_eq!(
            b,
            [
                8, 0, 4, 0, 0, 0, 4, 0, 0, 0, // CPUCOUNT, size 4, 4 CPUs
                0, 0, 8, 0, 0, 0, 0x22, 0x11, 0, 0, 0, 0, 0, 0 // DONE, size 8, next
            ]
        );
        let b = options_body(Endian::Big, &[], 1).unwrap();
        assert_eq!(b, [0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn buffer_option_layout() {
        let cpus = [
            CpuEntry {
                cpu: 0,
                offset: 4096,
                size: 8192,
            },
            CpuEntry {
                cpu: 3,
                offset: 12288,
                size: 4096,
            },
        ];
        let b = buffer_option(Endian::Little, 42, "local", 4096, &cpus);
        assert_eq!(le64(&b, 0), 42);
        assert_eq!(&b[8..15], b"\0local\0");
        assert_eq!((le32(&b, 15), le32(&b, 19)), (4096, 2));
        assert_eq!((le32(&b, 23), le64(&b, 27), le64(&b, 35)), (0, 4096, 8192));
        assert_eq!((le32(&b, 43), le64(&b, 47), le64(&b, 55)), (3, 12288, 4096));
        assert_eq!(b.len(), 63);
    }

    #[test]
    fn metadata_bodies() {
        let e = Endian::Little;
        let h = header_info_body(e, b"HP", b"HEV");
        assert_eq!(&h[..12], b"header_page\0");
        assert_eq!(le64(&h, 12), 2);
        assert_eq!(&h[20..22], b"HP");
        assert_eq!(&h[22..35], b"header_event\0");
        assert_eq!(le64(&h, 35), 3);
        assert_eq!(&h[43..], b"HEV");

        let f = ftrace_body(e, &[b"abc".to_vec()]).unwrap();
        assert_eq!(f, [1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, b'a', b'b', b'c']);

        let ev = events_body(e, &[("sched".into(), vec![b"x".to_vec(), b"yz".to_vec()])]).unwrap();
        let mut want = vec![1, 0, 0, 0];
        want.extend_from_slice(b"sched\0");
        want.extend_from_slice(&[2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, b'x']);
        want.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, b'y', b'z']);
        assert_eq!(ev, want);

        assert_eq!(
            sized32_body(e, b"k", "kallsyms").unwrap(),
            [1, 0, 0, 0, b'k']
        );
    }

    #[test]
    fn strings_are_shared() {
        let mut s = Strings::default();
        assert_eq!(s.add("options"), 0);
        assert_eq!(s.add("headers"), 8);
        assert_eq!(s.add("options"), 0);
        assert_eq!(s.add("opt"), 16);
        assert_eq!(s.data, b"options\0headers\0opt\0");
    }

    #[test]
    fn header_page_must_match_the_page_size() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w =
            TraceWriter::create(&tmp.path().join("a.dat"), WriterConfig::new(8192)).unwrap();
        let e = w
            .header_page(default_header_page(8, 4096).as_bytes())
            .unwrap_err();
        assert!(e.msg.contains("4096-byte pages"), "{e}");
        assert!(w
            .header_page(default_header_page(8, 8192).as_bytes())
            .is_ok());
    }

    /// A synthetic page carrying its index, so misplaced pages show.
    fn page(i: u8) -> Vec<u8> {
        let mut p = vec![i; 4096];
        p[8..16].copy_from_slice(&0u64.to_le_bytes());
        p
    }

    struct Parsed {
        bytes: Vec<u8>,
        /// (id, flags, description id, size, body offset) per section, in file order.
        sections: Vec<(u16, u16, u32, u64, usize)>,
        options: Vec<(u16, Vec<u8>)>,
    }

    /// Walks a little-endian file the way `trace-cmd dump` does: sections back to back.
    fn parse(path: &Path, compression: &str) -> Parsed {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[..12], b"\x17\x08\x44tracing7\0");
        assert_eq!((bytes[12], bytes[13], le32(&bytes, 14)), (0, 8, 4096));
        let mut at = 18;
        for want in [
            compression,
            if compression == "zstd" {
                "ruzstd-0.8"
            } else {
                ""
            },
        ] {
            let end = at + bytes[at..].iter().position(|&c| c == 0).unwrap();
            assert_eq!(&bytes[at..end], want.as_bytes());
            at = end + 1;
        }
        let options_at = le64(&bytes, at) as usize;
        at += 8;
        let mut sections = Vec::new();
        while at < bytes.len() {
            let s = (
                le16(&bytes, at),
                le16(&bytes, at + 2),
                le32(&bytes, at + 4),
                le64(&bytes, at + 8),
                at + 16,
            );
            at = s.4 + s.3 as usize;
            sections.push(s);
        }
        assert_eq!(at, bytes.len(), "sections must tile the file");
        let opt = sections
            .iter()
            .find(|s| s.4 - 16 == options_at)
            .expect("options section");
        assert_eq!((opt.0, opt.1), (0, 0));
        let mut options = Vec::new();
        let mut p = opt.4;
        loop {
            let (oid, size) = (le16(&bytes, p), le32(&bytes, p + 2) as usize);
            options.push((oid, bytes[p + 6..p + 6 + size].to_vec()));
            p += 6 + size;
            if oid == id::DONE {
                break;
            }
        }
        assert_eq!(p, opt.4 + opt.3 as usize, "options fill their section");
        Parsed {
            bytes,
            sections,
            options,
        }
    }

    fn write(compression: Compression, cpus: &[(u32, &[u8])]) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.dat");
        let mut cfg = WriterConfig::new(4096);
        cfg.endian = Endian::Little;
        cfg.compression = compression;
        cfg.chunk_pages = 2;
        cfg.version = Some("kstate test".into());
        let mut w = TraceWriter::create(&path, cfg).unwrap();
        w.event_format("ftrace", b"name: function\n");
        w.event_format("sched", b"name: a\n");
        w.event_format("irq", b"name: b\n");
        w.event_format("sched", b"name: c\n");
        w.extra_option(0x6b01, b"extra").unwrap();
        for (cpu, pages) in cpus {
            let mut cw = w.cpu_writer(*cpu).unwrap();
            for &i in pages.iter() {
                cw.write_page(&page(i)).unwrap();
            }
            assert_eq!(cw.finish().unwrap(), pages.len() as u64 * 4096);
        }
        w.finish().unwrap();
        assert_eq!(names_in(tmp.path()), ["t.dat"], "a temporary file was left");
        (tmp, path)
    }

    fn cpus_of(p: &Parsed) -> Vec<(u32, usize, usize)> {
        let (_, b) = p.options.iter().find(|(o, _)| *o == id::BUFFER).unwrap();
        let name_end = 8 + b[8..].iter().position(|&c| c == 0).unwrap() + 1;
        let clock_end = name_end + b[name_end..].iter().position(|&c| c == 0).unwrap() + 1;
        assert_eq!(&b[name_end..clock_end], b"local\0");
        let n = le32(b, clock_end + 4) as usize;
        (0..n)
            .map(|i| {
                let at = clock_end + 8 + i * 20;
                (
                    le32(b, at),
                    le64(b, at + 4) as usize,
                    le64(b, at + 12) as usize,
                )
            })
            .collect()
    }

    #[test]
    fn uncompressed_file_layout() {
        let (_tmp, path) = write(Compression::None, &[(1, &[1, 2, 3]), (0, &[4]), (2, &[])]);
        let p = parse(&path, "none");
        // Metadata before the CPU data, as trace-cmd writes it (see the module docs: its
        // reader cannot seek to event formats past 2 GiB).
        let ids: Vec<u16> = p.sections.iter().map(|s| s.0).collect();
        assert_eq!(ids, [16, 17, 18, 19, 20, 21, 3, 0, 15]);
        // Section options point at their sections.
        for (oid, data) in &p.options {
            if (16..=21).contains(oid) {
                let at = le64(data, 0) as usize;
                assert!(p.sections.iter().any(|s| s.0 == *oid && s.4 - 16 == at));
            }
        }
        let opt = |o: u16| {
            p.options
                .iter()
                .find(|(i, _)| *i == o)
                .map(|(_, d)| d.clone())
        };
        assert_eq!(opt(id::CPUCOUNT), Some(vec![3, 0, 0, 0]));
        assert_eq!(opt(id::VERSION).as_deref(), Some(&b"kstate test\0"[..]));
        assert_eq!(opt(0x6b01).as_deref(), Some(&b"extra"[..]));
        assert_eq!(opt(id::DONE), Some(vec![0; 8]));
        // Sorted by CPU, page aligned, CPU 2 (no pages) left out.
        let cpus = cpus_of(&p);
        assert_eq!(
            cpus.iter().map(|c| (c.0, c.2)).collect::<Vec<_>>(),
            [(0, 4096), (1, 3 * 4096)]
        );
        for (cpu, off, size) in cpus {
            assert_eq!(off % 4096, 0);
            let want: &[u8] = if cpu == 0 { &[4] } else { &[1, 2, 3] };
            for (k, &i) in want.iter().enumerate() {
                assert_eq!(&p.bytes[off + k * 4096..off + (k + 1) * 4096], page(i));
            }
            assert_eq!(size, want.len() * 4096);
        }
        // The ftrace system goes to its own section; others keep their first-seen order.
        let ev = p
            .sections
            .iter()
            .find(|s| s.0 == id::EVENT_FORMATS)
            .unwrap();
        let body = &p.bytes[ev.4..ev.4 + ev.3 as usize];
        assert_eq!(le32(body, 0), 2);
        assert_eq!(&body[4..10], b"sched\0");
        assert_eq!(le32(body, 10), 2);
        // Descriptions resolve in the strings section.
        let st = p.sections.last().unwrap();
        let strings = &p.bytes[st.4..st.4 + st.3 as usize];
        let desc = |d: u32| {
            let s = &strings[d as usize..];
            String::from_utf8(s[..s.iter().position(|&c| c == 0).unwrap()].to_vec()).unwrap()
        };
        let names: Vec<String> = p.sections.iter().map(|s| desc(s.2)).collect();
        assert_eq!(
            names,
            [
                "headers",
                "ftrace events",
                "events format",
                "kallsyms",
                "printk",
                "command lines",
                "buffer flyrecord ",
                "options",
                "strings"
            ]
        );
    }

    #[test]
    fn metadata_changed_after_the_data_is_written_again_after_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.dat");
        let mut w = TraceWriter::create(&path, WriterConfig::new(4096)).unwrap();
        w.cmdlines(b"1 early\n");
        let mut cw = w.cpu_writer(0).unwrap();
        cw.write_page(&page(1)).unwrap();
        cw.finish().unwrap();
        w.cmdlines(b"1 late\n");
        w.finish().unwrap();
        let p = parse(&path, "none");
        let ids: Vec<u16> = p.sections.iter().map(|s| s.0).collect();
        assert_eq!(
            ids,
            [16, 17, 18, 19, 20, 21, 3, 16, 17, 18, 19, 20, 21, 0, 15]
        );
        let (_, at) = p.options.iter().find(|(o, _)| *o == id::CMDLINES).unwrap();
        let at = le64(at, 0) as usize + 16;
        assert_eq!(&p.bytes[at + 8..at + 15], b"1 late\n");
        let t = Trace::open(&path).unwrap();
        assert_eq!(t.comms.get(&1).map(String::as_str), Some("late"));
    }

    fn unzstd(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(data)
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn compressed_file_layout() {
        let (_tmp, path) = write(Compression::Zstd, &[(0, &[1, 2, 3, 4, 5])]);
        let p = parse(&path, "zstd");
        let flags: Vec<(u16, u16)> = p.sections.iter().map(|s| (s.0, s.1)).collect();
        assert_eq!(
            flags,
            [
                (16, 1),
                (17, 1),
                (18, 1),
                (19, 1),
                (20, 1),
                (21, 1),
                (3, 1),
                (0, 0),
                (15, 1)
            ]
        );
        // A compressed metadata section: u32 csize, u32 rsize, one zstd frame.
        let hdr = p.sections.iter().find(|s| s.0 == id::HEADER_INFO).unwrap();
        let b = &p.bytes[hdr.4..hdr.4 + hdr.3 as usize];
        assert_eq!(le32(b, 0) as usize + 8, b.len());
        let body = unzstd(&b[8..]);
        assert_eq!(le32(b, 4) as usize, body.len());
        assert_eq!(&body[..12], b"header_page\0");
        // CPU data: chunk count, then chunks of 2, 2 and 1 pages.
        let [(0, off, size)] = cpus_of(&p)[..] else {
            panic!()
        };
        assert_eq!(off % 4096, 0);
        assert_eq!(le32(&p.bytes, off), 3);
        let mut at = off + 4;
        let mut pages = Vec::new();
        for _ in 0..3 {
            let (csize, rsize) = (le32(&p.bytes, at) as usize, le32(&p.bytes, at + 4) as usize);
            let raw = unzstd(&p.bytes[at + 8..at + 8 + csize]);
            assert_eq!(raw.len(), rsize);
            pages.extend(raw.chunks(4096).map(|c| c.to_vec()));
            at += 8 + csize;
        }
        assert_eq!(
            size,
            at - off - 4,
            "size counts the chunks, not the chunk count"
        );
        assert_eq!(pages, (1..=5).map(page).collect::<Vec<_>>());
    }

    #[test]
    fn bad_pages_and_ids_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("b.dat");
        let mut w = TraceWriter::create(&path, WriterConfig::new(4096)).unwrap();
        assert!(w.extra_option(21, b"x").is_err());
        let e = w.cpu_data(0, &mut &[0u8; 5000][..]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Truncated);
        assert!(e.msg.contains("904 bytes into a page"), "{e}");
        assert!(
            w.finish().is_err(),
            "a failed CPU leaves the file unfinishable"
        );
        assert!(names_in(tmp.path()).is_empty(), "a temporary file was left");
        assert!(!path.exists());

        let mut w = TraceWriter::create(&path, WriterConfig::new(4096)).unwrap();
        {
            let mut cw = w.cpu_writer(0).unwrap();
            assert!(cw.write_page(&[0u8; 100]).is_err());
        }
        assert!(w.cpu_writer(1).is_err());
        assert!(TraceWriter::create(&path, WriterConfig::new(1000)).is_err());
    }
}
