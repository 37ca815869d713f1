//! trace.dat v7: after the header, a chain of OPTIONS sections (the first found from the
//! header, each ending in a DONE option holding the next one's offset). Options point at the
//! metadata sections (ids 16..=21, optionally compressed as one block each) and, through
//! BUFFER options, at the per-CPU trace data of each buffer instance.
//!
//! Every section starts with `u16 id, u16 flags (1 = compressed), u32 description string id,
//! u64 size`; a compressed section's content is `u32 compressed size, u32 uncompressed size,
//! data`, and its size counts those 8 bytes.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use crate::bytes::{Endian, Reader};
use crate::error::{Error, ErrorKind, LostPart, Result};
use crate::trace::{CpuData, DataLoc, MAX_CPUS};

use super::compress::{decompress_section, Codec, CompressedData};
use super::input::{FileInput, Input};
use super::meta::{opt, Meta};

const FLAG_COMPRESSED: u16 = 1;

pub(crate) struct V7 {
    pub header_cpus: u32,
    pub cpu_data: Vec<CpuData>,
    pub truncated: Option<Error>,
}

/// The file and what every section read needs to know about it.
struct File7<'f> {
    file: &'f File,
    len: u64,
    endian: Endian,
    codec: Option<Codec>,
}

struct SectionHeader {
    id: u16,
    flags: u16,
    size: u64,
    /// File offset of the content.
    content_at: u64,
}

/// A section's content, decompressed if it was compressed.
struct Section {
    id: u16,
    content: Vec<u8>,
    content_at: u64,
    compressed: bool,
}

impl File7<'_> {
    fn header(&self, at: u64, what: &str) -> Result<SectionHeader> {
        if at >= self.len {
            return Err(Error::truncated(
                at,
                format!("{what}: the file ends at {}, before this offset", self.len),
            ));
        }
        let mut inp = FileInput::new(self.file, self.len, at, self.endian);
        let id = inp.u16(what)?;
        let flags = inp.u16(what)?;
        let _description = inp.u32(what)?;
        let size = inp.u64(what)?;
        Ok(SectionHeader {
            id,
            flags,
            size,
            content_at: inp.offset(),
        })
    }

    fn section(&self, at: u64, what: &str) -> Result<Section> {
        let h = self.header(at, &format!("{what} section header"))?;
        let mut inp = FileInput::new(self.file, self.len, h.content_at, self.endian);
        let raw = inp.bytes(h.size, &format!("{what} section"))?;
        let compressed = h.flags & FLAG_COMPRESSED != 0;
        let content = if compressed {
            let codec = self.compressed_codec(at, what)?;
            decompress_section(&raw, h.content_at, self.endian, codec, what)?
        } else {
            raw
        };
        Ok(Section {
            id: h.id,
            content,
            content_at: h.content_at,
            compressed,
        })
    }

    fn compressed_codec(&self, at: u64, what: &str) -> Result<Codec> {
        self.codec.ok_or_else(|| {
            Error::corrupt(
                at,
                format!("{what} section is flagged compressed, but the file header says \"none\""),
            )
        })
    }
}

impl Section {
    /// Runs `f` over the content. Offsets inside a decompressed section are not file
    /// offsets, so errors there point at the section and say where inside it they are.
    fn parse<T>(
        &self,
        endian: Endian,
        what: &str,
        f: impl FnOnce(&mut Reader) -> Result<T>,
    ) -> Result<T> {
        let base = if self.compressed { 0 } else { self.content_at };
        let mut r = Reader::new(&self.content, base, endian);
        f(&mut r).map_err(|mut e| {
            if self.compressed {
                e.msg = format!(
                    "{} (at byte {} of the decompressed {what} section)",
                    e.msg,
                    e.offset.unwrap_or(0)
                );
                e.offset = Some(self.content_at);
            }
            e
        })
    }
}

/// The BUFFER (or BUFFER_TEXT) option of the top-level buffer.
struct TopBuffer {
    section: u64,
    clock: String,
    latency: bool,
    cpus: Vec<(u32, u64, u64)>,
}

pub(crate) fn read(
    path: &Path,
    file: &File,
    file_len: u64,
    codec: Option<Codec>,
    first_options: u64,
    meta: &mut Meta,
) -> Result<V7> {
    let f = File7 {
        file,
        len: file_len,
        endian: meta.endian,
        codec,
    };
    let mut sections = Vec::new();
    let mut top = None;
    let mut seen = HashSet::new();
    let mut next = first_options;
    while next != 0 {
        if !seen.insert(next) {
            return Err(Error::corrupt(next, "options sections form a loop"));
        }
        let sec = f.section(next, "options")?;
        if sec.id != opt::DONE {
            return Err(Error::corrupt(
                next,
                format!(
                    "expected an options section (id 0), found section id {}",
                    sec.id
                ),
            ));
        }
        next = sec.parse(f.endian, "options", |r| {
            read_options(r, meta, &mut sections, &mut top)
        })?;
    }

    for (id, at) in sections {
        let what = match id {
            opt::HEADER_INFO => "header info",
            opt::FTRACE_EVENTS => "ftrace formats",
            opt::EVENT_FORMATS => "event formats",
            opt::KALLSYMS => "kallsyms",
            opt::PRINTK => "printk formats",
            _ => "saved cmdlines",
        };
        let read = f.section(at, what).and_then(|sec| {
            if sec.id != id {
                return Err(Error::corrupt(
                    at,
                    format!(
                        "expected the {what} section (id {id}), found section id {}",
                        sec.id
                    ),
                ));
            }
            if id == opt::EVENT_FORMATS && !sec.compressed {
                meta.trace_cmd_unreadable = formats_out_of_reach(at, sec.content.len() as u64);
            }
            meta.in_section = sec.compressed.then_some(sec.content_at);
            sec.parse(f.endian, what, |r| match id {
                opt::HEADER_INFO => meta.read_headers(r),
                opt::FTRACE_EVENTS => meta.read_ftrace_formats(r),
                opt::EVENT_FORMATS => meta.read_event_formats(r),
                opt::KALLSYMS => meta.read_kallsyms(r),
                opt::PRINTK => meta.read_printk(r),
                _ => meta.read_cmdlines(r),
            })
        });
        match read {
            Ok(()) => {}
            // The events do not need these: read them without it, and say what was lost
            // (ftrace formats only while no record is an ftrace event: see open.rs).
            Err(mut e)
                if matches!(
                    id,
                    opt::KALLSYMS | opt::PRINTK | opt::CMDLINES | opt::FTRACE_EVENTS
                ) =>
            {
                e.msg = format!(
                    "lost the {what} section (the events are read without it): {}",
                    e.msg
                );
                e.kind = ErrorKind::LostSection(match id {
                    opt::KALLSYMS => LostPart::Kallsyms,
                    opt::PRINTK => LostPart::PrintkFormats,
                    opt::CMDLINES => LostPart::Cmdlines,
                    _ => LostPart::FtraceFormats,
                });
                meta.lost_sections.push(e);
            }
            Err(e) => return Err(e),
        }
    }

    let Some(top) = top else {
        // No data for the top-level buffer: the metadata is all there is.
        return Ok(V7 {
            header_cpus: 0,
            cpu_data: Vec::new(),
            truncated: None,
        });
    };
    if meta.clock.is_none() && !top.clock.is_empty() {
        meta.clock = Some(top.clock.clone());
    }
    if top.latency {
        return Err(Error::unsupported(
            Some(top.section),
            "trace.dat latency mode (a text report of a latency tracer) is not supported",
        ));
    }
    let h = f.header(top.section, "buffer section header")?;
    if h.id != opt::BUFFER {
        return Err(Error::corrupt(
            top.section,
            format!(
                "expected a buffer section (id 3), found section id {}",
                h.id
            ),
        ));
    }
    let codec = if h.flags & FLAG_COMPRESSED != 0 {
        Some(f.compressed_codec(top.section, "buffer")?)
    } else {
        None
    };

    let mut truncated = None;
    let mut cpu_data = Vec::new();
    let header_cpus = top
        .cpus
        .iter()
        .map(|c| c.0.saturating_add(1))
        .max()
        .unwrap_or(0);
    for &(cpu, offset, size) in &top.cpus {
        if size == 0 {
            continue;
        }
        // trace-cmd's size for compressed data leaves out the leading 4-byte chunk count.
        let (file_bytes, loc) = match codec {
            None => (
                size,
                DataLoc::Plain {
                    path: path.to_path_buf(),
                    offset,
                    size,
                },
            ),
            Some(codec) => (
                size.saturating_add(4),
                DataLoc::Compressed(std::sync::Arc::new(CompressedData {
                    offset,
                    size,
                    codec,
                    endian: f.endian,
                })),
            ),
        };
        super::meta::note_short_cpu(cpu, offset, file_bytes, file_len, &mut truncated);
        cpu_data.push(CpuData {
            cpu,
            file_bytes,
            loc,
        });
    }
    Ok(V7 {
        header_cpus,
        cpu_data,
        truncated,
    })
}

/// One options section: `u16 id, u32 size, payload` until DONE, whose payload is the offset
/// of the next options section (0 for none). Returns that offset.
fn read_options(
    r: &mut Reader,
    meta: &mut Meta,
    sections: &mut Vec<(u16, u64)>,
    top: &mut Option<TopBuffer>,
) -> Result<u64> {
    loop {
        if r.is_empty() {
            return Err(Error::truncated(
                r.offset(),
                "options section ends without a DONE option",
            ));
        }
        let id = r.u16("option id")?;
        let size = r.u32("option size")?;
        let at = r.offset();
        let payload = r.sized(size as u64, "option payload")?;
        let mut p = Reader::new(payload, at, r.endian);
        match id {
            opt::DONE => return p.u64("DONE option: next options offset"),
            opt::HEADER_INFO..=opt::CMDLINES => {
                let offset = p.u64("section offset option")?;
                sections.push((id, offset));
            }
            opt::BUFFER | opt::BUFFER_TEXT => {
                let section = p.u64("buffer option: section offset")?;
                let name = Input::cstr(&mut p, "buffer option: instance name")?;
                if !name.is_empty() {
                    // Instance buffers are not read yet; keep them for whoever wants them.
                    meta.extra_options.push((id, payload.to_vec()));
                    continue;
                }
                let clock = Input::cstr(&mut p, "buffer option: clock")?;
                let mut cpus = Vec::new();
                if id == opt::BUFFER {
                    let _page_size = p.u32("buffer option: page size")?;
                    let count = p.u32("buffer option: CPU count")?;
                    for _ in 0..count {
                        let cpu_at = p.offset();
                        let cpu = p.u32("buffer option: CPU id")?;
                        if cpu >= MAX_CPUS {
                            return Err(Error::corrupt(
                                cpu_at,
                                format!("buffer option: CPU id {cpu} is implausible"),
                            ));
                        }
                        let offset = p.u64("buffer option: CPU data offset")?;
                        let size = p.u64("buffer option: CPU data size")?;
                        cpus.push((cpu, offset, size));
                    }
                }
                *top = Some(TopBuffer {
                    section,
                    clock,
                    latency: id == opt::BUFFER_TEXT,
                    cpus,
                });
            }
            _ => meta.option(id, payload.to_vec(), at)?,
        }
    }
}

/// libtracecmd 3.1 reads the event formats' system names with a seek whose result it
/// keeps in an `int` (`do_lseek` in `read_string`): a name at or past 2 GiB in the file
/// fails the whole open, and `trace-cmd report` prints nothing. (Compressed sections are
/// read from memory, and trace-cmd's own writer puts the metadata before the CPU data.)
fn formats_out_of_reach(section: u64, content_len: u64) -> Option<String> {
    let end = section.saturating_add(16).saturating_add(content_len);
    (end > i32::MAX as u64).then(|| {
        format!(
            "its event formats (section at offset {section}) lie past 2 GiB, where trace-cmd \
             3.1 cannot seek; `kstate convert FILE -o NEW` rewrites it with the metadata first"
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn event_formats_past_2_gib_are_out_of_trace_cmds_reach() {
        assert_eq!(super::formats_out_of_reach(4096, 500_000), None);
        let limit = i32::MAX as u64;
        assert_eq!(super::formats_out_of_reach(limit - 16 - 100, 100), None);
        let why = super::formats_out_of_reach(limit - 16 - 100, 101).unwrap();
        assert!(why.contains("past 2 GiB"), "{why}");
        assert!(super::formats_out_of_reach(3 << 30, 10).is_some());
    }
}
