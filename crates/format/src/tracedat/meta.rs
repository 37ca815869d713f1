//! What v6 and v7 share: the header files, event formats, kallsyms, printk formats, saved
//! cmdlines and options, and the assembly of a `Trace` from them. v6 lays these out one
//! after another; v7 puts each in a section found through the options.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::bytes::Endian;
use crate::error::{Error, ErrorKind, LostPart, Result};
use crate::event_format::{EventFormat, FormatAt};
use crate::layout::PageLayout;
use crate::timeshift::TimeShift;
use crate::trace::{ClockMap, Container, CpuData, EventTable, Trace, MAX_CPUS};

use super::input::Input;

/// Option ids (trace-cmd's `enum tracecmd_file_options`). In v7 the ids 16..=21 double as
/// section ids.
pub mod opt {
    pub const DONE: u16 = 0;
    pub const DATE: u16 = 1;
    pub const BUFFER: u16 = 3;
    pub const TRACECLOCK: u16 = 4;
    pub const UNAME: u16 = 5;
    pub const OFFSET: u16 = 7;
    pub const CPUCOUNT: u16 = 8;
    pub const VERSION: u16 = 9;
    pub const TIME_SHIFT: u16 = 12;
    pub const TSC2NSEC: u16 = 14;
    pub const STRINGS: u16 = 15;
    pub const HEADER_INFO: u16 = 16;
    pub const FTRACE_EVENTS: u16 = 17;
    pub const EVENT_FORMATS: u16 = 18;
    pub const KALLSYMS: u16 = 19;
    pub const PRINTK: u16 = 20;
    pub const CMDLINES: u16 = 21;
    pub const BUFFER_TEXT: u16 = 22;
}

/// Notes (once) that a CPU's data runs past the end of the file: the trace opens, and
/// readers report the short page when they reach it.
pub(crate) fn note_short_cpu(
    cpu: u32,
    offset: u64,
    size: u64,
    file_len: u64,
    truncated: &mut Option<Error>,
) {
    let end = offset.saturating_add(size);
    if end > file_len && truncated.is_none() {
        *truncated = Some(Error::truncated(
            file_len,
            format!(
                "CPU {cpu} data should run from {offset} to {end}, but the file ends at {file_len}"
            ),
        ));
    }
}

/// Metadata gathered while walking either layout.
pub(crate) struct Meta {
    pub endian: Endian,
    /// From the file header: the traced user space's long.
    pub long_size: usize,
    pub page_size: usize,
    pub layout: Option<PageLayout>,
    pub header_page: Option<Vec<u8>>,
    pub ftrace: Vec<Vec<u8>>,
    pub systems: Vec<(String, Vec<Vec<u8>>)>,
    /// Where each format text of `ftrace` and of `systems` is.
    pub ftrace_at: Vec<FormatAt>,
    pub systems_at: Vec<Vec<FormatAt>>,
    /// v7: the data offset of the compressed section being read (its offsets are not the
    /// file's), else None.
    pub in_section: Option<u64>,
    pub kallsyms: Option<Vec<u8>>,
    pub printk: Option<Vec<u8>>,
    pub cmdlines: Option<Vec<u8>>,
    pub clock: Option<String>,
    pub clock_map: ClockMap,
    pub time_shift: Option<TimeShift>,
    pub trace_cmd_unreadable: Option<String>,
    pub uname: Option<String>,
    pub tool_version: Option<String>,
    pub cpu_count: Option<u32>,
    pub extra_options: Vec<(u16, Vec<u8>)>,
    /// v6 only: a TRACECLOCK option means the trace_clock text follows the CPU table.
    pub has_clock_option: bool,
    /// v7 only: damaged sections read around (see `Trace::lost_sections`).
    pub lost_sections: Vec<Error>,
}

impl Meta {
    pub fn new(endian: Endian, long_size: usize, page_size: usize) -> Meta {
        Meta {
            endian,
            long_size,
            page_size,
            layout: None,
            header_page: None,
            ftrace: Vec::new(),
            systems: Vec::new(),
            ftrace_at: Vec::new(),
            systems_at: Vec::new(),
            in_section: None,
            kallsyms: None,
            printk: None,
            cmdlines: None,
            clock: None,
            clock_map: ClockMap::default(),
            time_shift: None,
            trace_cmd_unreadable: None,
            uname: None,
            tool_version: None,
            cpu_count: None,
            extra_options: Vec::new(),
            has_clock_option: false,
            lost_sections: Vec::new(),
        }
    }

    /// `header_page` and `header_event`, each a fixed tag, a u64 size and the text.
    pub fn read_headers(&mut self, inp: &mut impl Input) -> Result<()> {
        expect_tag(inp, b"header_page\0")?;
        let size = inp.u64("header_page size")?;
        let at = inp.offset();
        let text = inp.bytes(size, "header_page")?;
        let layout = PageLayout::parse(&text, self.endian, Some(self.page_size))
            .map_err(|e| e.shifted(at))?;
        self.layout = Some(layout);
        self.header_page = Some(text);
        expect_tag(inp, b"header_event\0")?;
        let size = inp.u64("header_event size")?;
        // The event header layout has been fixed since 2.6.31; nothing in it we need.
        inp.bytes(size, "header_event")?;
        Ok(())
    }

    pub fn read_ftrace_formats(&mut self, inp: &mut impl Input) -> Result<()> {
        let count = inp.u32("ftrace format count")?;
        // Each entry takes at least its 8-byte size, so a corrupt count runs out of data
        // instead of looping for long; no capacity is reserved from it.
        for _ in 0..count {
            let size = inp.u64("ftrace format size")?;
            let at = self.format_at(inp.offset());
            self.ftrace.push(inp.bytes(size, "ftrace format")?);
            self.ftrace_at.push(at);
        }
        Ok(())
    }

    pub fn read_event_formats(&mut self, inp: &mut impl Input) -> Result<()> {
        let systems = inp.u32("event system count")?;
        for _ in 0..systems {
            let name = inp.cstr("event system name")?;
            let count = inp.u32("event format count")?;
            let mut formats = Vec::new();
            let mut at = Vec::new();
            for _ in 0..count {
                let size = inp.u64("event format size")?;
                at.push(self.format_at(inp.offset()));
                formats.push(inp.bytes(size, "event format")?);
            }
            self.systems.push((name, formats));
            self.systems_at.push(at);
        }
        Ok(())
    }

    fn format_at(&self, at: u64) -> FormatAt {
        match self.in_section {
            Some(section) => FormatAt::Section { section, at },
            None => FormatAt::File(at),
        }
    }

    pub fn read_kallsyms(&mut self, inp: &mut impl Input) -> Result<()> {
        let size = inp.u32("kallsyms size")?;
        self.kallsyms = Some(inp.bytes(size as u64, "kallsyms")?);
        Ok(())
    }

    pub fn read_printk(&mut self, inp: &mut impl Input) -> Result<()> {
        let size = inp.u32("printk formats size")?;
        self.printk = Some(inp.bytes(size as u64, "printk formats")?);
        Ok(())
    }

    pub fn read_cmdlines(&mut self, inp: &mut impl Input) -> Result<()> {
        let size = inp.u64("saved cmdlines size")?;
        self.cmdlines = Some(inp.bytes(size, "saved cmdlines")?);
        Ok(())
    }

    /// Interprets an option both versions share, keeping the rest in `extra_options`.
    /// `at` is the payload's offset, for messages.
    pub fn option(&mut self, id: u16, payload: Vec<u8>, at: u64) -> Result<()> {
        match id {
            // trace-cmd: DATE is the gettimeofday offset in microseconds, OFFSET a plain
            // nanosecond offset; both C strings read with strtoll(.., 0) and summed.
            opt::DATE => {
                let us = parse_c_integer(&text(&payload));
                self.add_offset(us.saturating_mul(1000));
            }
            opt::OFFSET => self.add_offset(parse_c_integer(&text(&payload))),
            opt::TRACECLOCK => {
                self.has_clock_option = true;
                if let Some(c) = selected_clock(&text(&payload)) {
                    self.clock = Some(c);
                }
            }
            opt::UNAME => self.uname = Some(text(&payload)),
            opt::VERSION => self.tool_version = Some(text(&payload)),
            opt::CPUCOUNT if payload.len() >= 4 => {
                let n = self
                    .endian
                    .u32([payload[0], payload[1], payload[2], payload[3]]);
                if n > MAX_CPUS {
                    return Err(Error::corrupt(
                        at,
                        format!("CPUCOUNT option: {n} CPUs is implausible"),
                    ));
                }
                self.cpu_count = Some(n);
            }
            opt::TSC2NSEC if payload.len() >= 16 => {
                let e = self.endian;
                let mult = e.u32([payload[0], payload[1], payload[2], payload[3]]);
                let shift = e.u32([payload[4], payload[5], payload[6], payload[7]]);
                if shift > 63 {
                    return Err(Error::corrupt(
                        at + 4,
                        format!("TSC2NSEC option: shift {shift} is more than 63"),
                    ));
                }
                // The option also carries a TSC offset (bytes 8..16), but trace-cmd 3.1.6
                // does not subtract it when converting (checked against `trace-cmd report`
                // in tests/format/tracedat.rs), so neither do we: timestamps must match its output.
                self.clock_map.mult = mult;
                self.clock_map.shift = shift;
            }
            // trace-cmd skips a payload too short to hold the header, and refuses the file
            // when the samples do not fit.
            opt::TIME_SHIFT if payload.len() >= 16 => {
                self.time_shift = Some(TimeShift::parse(&payload, self.endian, at)?);
            }
            _ => self.extra_options.push((id, payload)),
        }
        Ok(())
    }

    fn add_offset(&mut self, ns: i64) {
        self.clock_map.offset = self.clock_map.offset.wrapping_add(ns);
    }

    /// Builds the `Trace`; `header_cpus` is the CPU count when no CPUCOUNT option gives one.
    pub fn finish(
        self,
        path: &Path,
        container: Container,
        header_cpus: u32,
        cpu_data: Vec<CpuData>,
        truncated: Option<Error>,
    ) -> Trace {
        let layout = self.layout.unwrap_or_else(|| {
            PageLayout::default_for(self.endian, self.long_size, self.page_size)
        });
        // Like trace-cmd, prefer the kernel's long (the header_page commit field) over the
        // file header's, which describes the recording tool's user space.
        let long_size = layout.commit_size;
        let mut events = EventTable::default();
        let format_at: Vec<FormatAt> = self
            .ftrace_at
            .into_iter()
            .chain(self.systems_at.into_iter().flatten())
            .collect();
        let format_texts: Vec<(String, Vec<u8>)> = self
            .ftrace
            .into_iter()
            .map(|f| ("ftrace".to_string(), f))
            .chain(
                self.systems
                    .into_iter()
                    .flat_map(|(s, fs)| fs.into_iter().map(move |f| (s.clone(), f))),
            )
            .collect();
        let mut lost_sections = self.lost_sections;
        for (i, (system, text)) in format_texts.iter().enumerate() {
            // trace-cmd counts formats it cannot parse and carries on; records of such an
            // event show up downstream as an unknown id rather than sinking the whole file.
            // Said as damage, with its place, so that no reader takes its events for never
            // recorded.
            let at = format_at.get(i).copied();
            match EventFormat::parse(text, system, long_size) {
                Ok(mut ev) => {
                    ev.at = at;
                    events.insert(ev);
                }
                Err(e) => lost_sections.push(unparsed_format(text, system, at, e)),
            }
        }
        Trace {
            path: path.to_path_buf(),
            container,
            endian: self.endian,
            long_size,
            layout,
            events,
            header_page: self.header_page,
            format_texts,
            comms: self
                .cmdlines
                .as_deref()
                .map(parse_cmdlines)
                .unwrap_or_default(),
            clock: self.clock,
            clock_map: self.clock_map,
            time_shift: self.time_shift.filter(TimeShift::is_active).map(Arc::new),
            trace_cmd_unreadable: self.trace_cmd_unreadable,
            uname: self.uname,
            tool_version: self.tool_version,
            kallsyms: self.kallsyms,
            printk_formats: self.printk,
            cpu_count: self.cpu_count.unwrap_or(header_cpus),
            cpu_data,
            extra_options: self.extra_options,
            truncated: truncated.map(|e| e.in_file(path)),
            cut_short: None,
            lost_sections: lost_sections.into_iter().map(|e| e.in_file(path)).collect(),
            spool: None,
            perf: None,
        }
    }
}

/// The damage of an event format that does not parse (`e`; a damaged offset or size, a
/// line cut short), found at `at`: its events are left out.
fn unparsed_format(text: &[u8], system: &str, at: Option<FormatAt>, e: Error) -> Error {
    let line = |key: &str| {
        let t = std::str::from_utf8(text).ok()?;
        t.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
            .filter(|v| !v.is_empty())
    };
    let event = line("name:").map(|name| format!("{system}:{name}"));
    let what = match (&event, line("ID:")) {
        (Some(ev), Some(id)) => format!("{ev} (id {id})"),
        (Some(ev), None) => ev.clone(),
        (None, _) => format!("an event of system {system}"),
    };
    let problem = e.msg.strip_prefix("event format: ").unwrap_or(&e.msg);
    let within = e.offset.unwrap_or(0);
    let (offset, place) = match at {
        Some(FormatAt::File(at)) => (Some(at + within), String::new()),
        Some(FormatAt::Section { section, at }) => (
            Some(section),
            format!(
                " (at byte {} of the decompressed event formats section)",
                at + within
            ),
        ),
        None => (None, String::new()),
    };
    let mut lost = Error::new(
        ErrorKind::LostSection(LostPart::EventFormat),
        offset,
        format!("the event format of {what} does not parse, and its events are left out: {problem}{place}"),
    );
    lost.event = event.map(String::into_boxed_str);
    lost
}

fn expect_tag(inp: &mut impl Input, tag: &[u8]) -> Result<()> {
    let at = inp.offset();
    let found = inp.bytes(tag.len() as u64, "section tag")?;
    if found != tag {
        return Err(Error::corrupt(
            at,
            format!(
                "expected {:?}, found {:?}",
                String::from_utf8_lossy(tag),
                String::from_utf8_lossy(&found)
            ),
        ));
    }
    Ok(())
}

/// An option's C string payload, without the NUL and anything after it.
pub(crate) fn text(payload: &[u8]) -> String {
    let end = payload
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(payload.len());
    String::from_utf8_lossy(&payload[..end]).into_owned()
}

/// The clock shown in brackets in a `trace_clock` file: "[local] global counter" -> "local".
pub(crate) fn selected_clock(text: &str) -> Option<String> {
    let word = text.split_whitespace().find(|w| w.starts_with('['))?;
    let name = word.trim_start_matches('[').split(']').next()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// `strtoll(s, NULL, 0)`: optional sign, then hex (0x), octal (leading 0) or decimal digits,
/// stopping at the first character that is not one; saturates like strtoll.
pub(crate) fn parse_c_integer(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, h)
    } else if s.len() > 1 && s.starts_with('0') {
        (8, &s[1..])
    } else {
        (10, s)
    };
    let mut v: i128 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        v = (v * radix as i128 + d as i128).min(i64::MAX as i128 + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// saved_cmdlines: one "pid comm" per line; the comm is the rest of the line (it may hold
/// spaces).
pub(crate) fn parse_cmdlines(text: &[u8]) -> HashMap<i32, String> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .filter_map(|line| {
            let (pid, comm) = line.trim_start().split_once(' ')?;
            Some((pid.parse().ok()?, comm.trim_end().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_integers() {
        assert_eq!(parse_c_integer("0x10"), 16);
        assert_eq!(parse_c_integer("-1000000000"), -1_000_000_000);
        assert_eq!(parse_c_integer("010"), 8);
        assert_eq!(parse_c_integer("  42abc"), 42);
        assert_eq!(parse_c_integer(""), 0);
        assert_eq!(parse_c_integer("99999999999999999999999"), i64::MAX);
        assert_eq!(parse_c_integer("-99999999999999999999999"), i64::MIN);
    }

    #[test]
    fn clocks_and_cmdlines() {
        assert_eq!(
            selected_clock("[local] global counter uptime\n").as_deref(),
            Some("local")
        );
        assert_eq!(selected_clock("local global").as_deref(), None);
        assert_eq!(selected_clock("x86-tsc [mono]").as_deref(), Some("mono"));
        let c = parse_cmdlines(b"1 init\n42 Web Content\nbogus\n-3 x\n");
        assert_eq!(c.get(&42).map(String::as_str), Some("Web Content"));
        assert_eq!(c.get(&1).map(String::as_str), Some("init"));
        assert_eq!(c.get(&-3).map(String::as_str), Some("x"));
        assert_eq!(c.len(), 3);
    }
}
