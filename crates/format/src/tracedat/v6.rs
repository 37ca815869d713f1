//! trace.dat v6: the metadata follows the file header in a fixed order (header files,
//! ftrace formats, event formats, kallsyms, printk formats, cmdlines, CPU count), then an
//! optional "options  " block, then "flyrecord" with a per-CPU (offset, size) table, then
//! (if a TRACECLOCK option was present) the trace_clock text, then page-aligned CPU data.

use std::path::Path;

use crate::error::{Error, Result};
use crate::trace::{CpuData, DataLoc};

use super::input::{FileInput, Input};
use super::meta::{opt, selected_clock, Meta};

pub(crate) struct V6 {
    pub header_cpus: u32,
    pub cpu_data: Vec<CpuData>,
    pub truncated: Option<Error>,
}

pub(crate) fn read(path: &Path, inp: &mut FileInput, file_len: u64, meta: &mut Meta) -> Result<V6> {
    meta.read_headers(inp)?;
    meta.read_ftrace_formats(inp)?;
    meta.read_event_formats(inp)?;
    meta.read_kallsyms(inp)?;
    meta.read_printk(inp)?;
    meta.read_cmdlines(inp)?;
    let header_cpus = inp.u32("CPU count")?;

    let mut at = inp.offset();
    let mut kind = inp.bytes(10, "data kind (options, flyrecord or latency)")?;
    if kind.starts_with(b"options") {
        read_options(inp, meta)?;
        at = inp.offset();
        kind = inp.bytes(10, "data kind (flyrecord or latency)")?;
    }
    if kind.starts_with(b"latency") {
        return Err(Error::unsupported(
            Some(at),
            "trace.dat latency mode (a text report of a latency tracer) is not supported",
        ));
    }
    if !kind.starts_with(b"flyrecord") {
        return Err(Error::corrupt(
            at,
            format!(
                "expected \"options\", \"flyrecord\" or \"latency\", found {:?}",
                String::from_utf8_lossy(&kind)
            ),
        ));
    }

    let mut table = Vec::new();
    for cpu in 0..header_cpus {
        let offset = inp.u64("CPU data offset")?;
        let size = inp.u64("CPU data size")?;
        table.push((cpu, offset, size));
    }
    if meta.has_clock_option {
        let size = inp.u64("trace_clock size")?;
        let text = inp.bytes(size, "trace_clock")?;
        meta.clock = selected_clock(&String::from_utf8_lossy(&text));
    }

    let mut truncated = None;
    let mut cpu_data = Vec::new();
    for (cpu, offset, size) in table {
        if size == 0 {
            continue;
        }
        super::meta::note_short_cpu(cpu, offset, size, file_len, &mut truncated);
        cpu_data.push(CpuData {
            cpu,
            file_bytes: size,
            loc: DataLoc::Plain {
                path: path.to_path_buf(),
                offset,
                size,
            },
        });
    }
    Ok(V6 {
        header_cpus,
        cpu_data,
        truncated,
    })
}

/// v6 options: `u16 id, u32 size, payload` until id 0 (which has no size).
fn read_options(inp: &mut FileInput, meta: &mut Meta) -> Result<()> {
    loop {
        let id = inp.u16("option id")?;
        if id == opt::DONE {
            return Ok(());
        }
        let size = inp.u32("option size")?;
        let at = inp.offset();
        let payload = inp.bytes(size as u64, "option payload")?;
        // BUFFER options describe instance buffers (their own flyrecord blocks); only the
        // top-level buffer is read for now, so they are kept as extra options.
        meta.option(id, payload, at)?;
    }
}
