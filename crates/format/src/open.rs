//! Which reader a path needs: a directory is a raw capture; a file is told by its magic
//! (perf.data's `PERFILE2`, trace.dat's `\x17\x08\x44tracing`); a compressed file or a
//! stream (a pipe, a FIFO, `-` for standard input when it is not a regular file) is first
//! unpacked into an unnamed copy (`spool`), so every command reads all of these the same
//! way.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, LostPart, Result};
use crate::open_options::OpenOptions;
use crate::sniff::{self, Kind, HEAD};
use crate::trace::{Trace, MAX_CPUS};

/// The name `-` is read from, in messages and in `info`.
pub const STDIN_NAME: &str = "standard input";

impl Trace {
    /// Opens a trace.dat file, a perf.data file, a raw capture directory or kstate's
    /// Parquet directory, compressed with gzip, zstd or xz or not (files), from a file, a
    /// pipe, a FIFO or standard input (`-`).
    pub fn open(path: &Path) -> Result<Trace> {
        Trace::open_with(path, &OpenOptions::default())
    }

    /// [`Trace::open`] as `opts` choose.
    pub fn open_with(path: &Path, opts: &OpenOptions) -> Result<Trace> {
        let (mut file, name) = if path == Path::new("-") {
            let fd = std::os::fd::AsFd::as_fd(&std::io::stdin())
                .try_clone_to_owned()
                .map_err(|e| Error::io(Path::new(STDIN_NAME), e))?;
            (File::from(fd), PathBuf::from(STDIN_NAME))
        } else {
            let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
            if meta.is_dir() {
                if let Some(dir) = crate::parquet::locate(path)? {
                    return crate::parquet::open(&dir)?.checked();
                }
                return crate::rawdir::open(path)?.checked();
            }
            (
                File::open(path).map_err(|e| Error::io(path, e))?,
                path.to_path_buf(),
            )
        };
        // A regular file is read where it lies, also as standard input (`- < t.dat`); only a
        // pipe, a FIFO or a terminal has to be copied to be read.
        let regular = file.metadata().map_err(|e| Error::io(&name, e))?.is_file();
        let stdin = path == Path::new("-");
        let mut head = Vec::with_capacity(HEAD);
        (&mut file)
            .take(HEAD as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(&name, e))?;
        let kind = sniff::kind(&head);
        match kind {
            Kind::Empty => Err(Error::new(
                ErrorKind::Truncated,
                None,
                "empty (0 bytes): nothing was recorded",
            )
            .in_file(&name)),
            Kind::Other if regular => Err(Error::new(
                ErrorKind::BadMagic,
                None,
                sniff::not_a_trace(&head, head.len() < HEAD),
            )
            .in_file(&name)),
            Kind::TraceDat | Kind::PerfData if regular && stdin => {
                let spool = crate::spool::Spool::in_place(file, &name)?;
                read_spooled(
                    crate::spool::Spooled {
                        spool,
                        kind,
                        damage: None,
                    },
                    &name,
                    opts,
                )
            }
            Kind::TraceDat | Kind::PerfData if regular => read_as(path, kind, opts)?.checked(),
            Kind::Packed(p) => unpacked(file, head, Some(p), !regular, &name, opts),
            _ => unpacked(file, head, None, true, &name, opts),
        }
    }

    /// Refuses CPU numbers that would size per-CPU tables beyond [`MAX_CPUS`] (each reader
    /// checks where it reads them, naming the offset; this holds for every container),
    /// and takes in a recording's own word that it was cut short ([`Trace::cut_short`]).
    /// Readers outside this crate (kstate's Parquet tables) call it too.
    pub fn checked(mut self) -> Result<Trace> {
        self.cut_short = self.cut_short.take().or_else(|| self.said_cut_short());
        let worst = self
            .cpu_data
            .iter()
            .map(|c| c.cpu)
            .chain([self.cpu_count.saturating_sub(1)])
            .max();
        match worst {
            Some(cpu) if cpu >= MAX_CPUS => Err(Error::new(
                ErrorKind::Corrupt,
                None,
                format!("CPU number {cpu} is implausible (Linux builds for at most 8192 CPUs)"),
            )
            .in_file(&self.path)),
            _ => Ok(self),
        }
    }
}

impl Trace {
    /// The recording's own word that it was cut short (kstate's RECORDING section), as
    /// the damage every reader reports: what came after was never recorded. (A section
    /// that does not decode is reported where it is read.)
    fn said_cut_short(&self) -> Option<Error> {
        let rec = crate::sections::Recording::decode(self.extra(crate::sections::ids::RECORDING)?);
        let why = rec.ok()?.cut_short?;
        Some(
            Error::new(
                ErrorKind::Truncated,
                None,
                format!("the recording was cut short ({why}): nothing after it was recorded"),
            )
            .in_file(&self.path),
        )
    }
}

/// The reader for a file of `kind`, at `path`.
fn read_as(path: &Path, kind: Kind, opts: &OpenOptions) -> Result<Trace> {
    match kind {
        Kind::PerfData => crate::perf::open(path, opts),
        _ => needs_no_lost_formats(crate::tracedat::open(path)?),
    }
}

/// A damaged ftrace formats section is lost like kallsyms when no record needs it (most
/// recordings have no ftrace event: no function, print or bprint); when one does, its
/// records could be read only as unknown events, so the file is refused, saying which
/// event and how many records. The check reads every record's id once, and only when
/// that section was lost; damage in the CPU data is left to the readers to report.
fn needs_no_lost_formats(trace: Trace) -> Result<Trace> {
    let Some(lost) = trace
        .lost_sections
        .iter()
        .find(|e| e.kind == ErrorKind::LostSection(LostPart::FtraceFormats))
    else {
        return Ok(trace);
    };
    let mut unknown: std::collections::BTreeMap<u32, u64> = Default::default();
    for i in 0..trace.cpu_data.len() {
        let Ok(mut pages) = trace.pages(i) else {
            continue;
        };
        while let Ok(true) = pages.advance() {
            let Ok((_, records)) = crate::page::PageRecords::new(pages.page(), &trace.layout)
            else {
                break;
            };
            for (_, payload) in records.map_while(|r| r.ok()) {
                let id = trace.endian.uint(payload, 0, 2).unwrap_or(0) as u32;
                if trace.events.get(id).is_none() {
                    *unknown.entry(id).or_default() += 1;
                }
            }
        }
    }
    let Some((&id, &n)) = unknown.iter().max_by_key(|(_, n)| **n) else {
        return Ok(trace);
    };
    let others = match unknown.len() - 1 {
        0 => String::new(),
        1 => " (and records of another event unknown without it)".to_string(),
        k => format!(" (and records of {k} other events unknown without it)"),
    };
    // The lost section's problem, as v7.rs worded it after its own preamble.
    let problem = lost.msg.split_once("): ").map_or(&*lost.msg, |(_, p)| p);
    let mut e = lost.clone();
    e.kind = ErrorKind::Corrupt;
    e.msg = format!(
        "the ftrace formats section is damaged, and {n} records of event id {id}{others} \
         need it (ftrace's own events, such as print or bprint, are described only there): {problem}"
    );
    Err(e)
}

/// Reads a trace from an unnamed copy of `file` (see `spool`), under the user's `name`.
fn unpacked(
    file: File,
    head: Vec<u8>,
    packing: Option<sniff::Packing>,
    pipe: bool,
    name: &Path,
    opts: &OpenOptions,
) -> Result<Trace> {
    let s = crate::spool::spool(file, head, packing, pipe, name)?;
    read_spooled(s, name, opts)
}

/// Reads the trace in `s` (a copy, or standard input's own file) under the user's `name`.
fn read_spooled(s: crate::spool::Spooled, name: &Path, opts: &OpenOptions) -> Result<Trace> {
    let packing = s.spool.packing;
    let copy = s.spool.path.clone();
    // Offsets into the copy are not offsets into a compressed file: say which they are.
    let renamed = |e: Error| {
        let mut e = e.renamed(&copy, name);
        if packing.is_some() && e.offset.is_some() && e.path.as_deref() == Some(name) {
            e.msg.push_str(" (the offset is in the unpacked data)");
        }
        e
    };
    let mut trace = match read_as(&copy, s.kind, opts) {
        Ok(t) => t,
        // What unpacked before the damage is not a readable trace: the damage is the news.
        Err(e) => {
            return Err(match s.damage {
                Some(mut d) => {
                    d.msg = format!("{}; what came before it does not open: {}", d.msg, e.msg);
                    d
                }
                None => renamed(e),
            })
        }
    };
    trace.path = name.to_path_buf();
    trace.truncated = s.damage.or(trace.truncated.take().map(renamed));
    trace.lost_sections = std::mem::take(&mut trace.lost_sections)
        .into_iter()
        .map(renamed)
        .collect();
    trace.spool = Some(Arc::new(s.spool));
    trace.checked()
}
