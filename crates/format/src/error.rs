//! One error type for every reader: it names the file, the byte offset and the problem,
//! because a user holding a broken trace needs all three to act on it.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, coarse enough for callers to decide what to do (e.g. `kstate info`
/// keeps going on `Truncated` and reports what it could read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The data ends before a structure it announces.
    Truncated,
    /// The file is not of the kind it was opened as.
    BadMagic,
    /// A structure is internally inconsistent (overrunning length, bad id, ...).
    Corrupt,
    /// Well-formed, but uses something this reader does not implement.
    Unsupported,
    /// The operating system refused a read or a write, or a command kstate ran failed:
    /// a failure of the system, not of the input.
    Io,
    /// The input the user named cannot be opened or read (missing, not permitted): bad
    /// input, like a corrupt file.
    Input,
    /// An analysis does not apply to the trace: the events it reads are not in it (a
    /// survey leaves it out; asked for by name, it is bad input). The message says how
    /// to record them. (One name only: every reader's error stays small.)
    NotApplicable { analyzer: &'static str },
    /// The call chains an analysis needs are not in the trace (`kstate record --stacks`):
    /// it can still be run by another key.
    MissingStacks,
    /// A part of the file the events do not need was lost to damage, and the trace is
    /// read without it.
    LostSection(LostPart),
}

/// The part of a trace.dat lost to damage ([`ErrorKind::LostSection`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostPart {
    /// The ftrace formats section: needed only by records of ftrace's own events.
    FtraceFormats,
    Kallsyms,
    PrintkFormats,
    Cmdlines,
    /// One event's format, which does not parse: its records are left out
    /// ([`Error::event`] names it).
    EventFormat,
}

impl ErrorKind {
    /// Whether the error lies in what the user gave (a file, an argument) rather than in
    /// the system: front ends report the two classes differently (the CLI's exit status 2
    /// against 1).
    pub fn is_bad_input(self) -> bool {
        self != ErrorKind::Io
    }

    /// Whether the error says an analysis does not apply to the trace (its events or
    /// call chains are not in it) rather than that something is wrong.
    pub fn is_not_applicable(self) -> bool {
        matches!(
            self,
            ErrorKind::NotApplicable { .. } | ErrorKind::MissingStacks
        )
    }
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub path: Option<PathBuf>,
    /// Byte offset in `path` (or in the decompressed section it names) where the problem is.
    pub offset: Option<u64>,
    /// The CPU whose stream the problem is in, where it is in one: what a reader skips
    /// there is that CPU's events from the offset on.
    pub cpu: Option<u32>,
    /// The event (`system:name`) the problem is about, where it is about one (a format
    /// that does not parse): whoever needs that event names this as what hides it.
    pub event: Option<Box<str>>,
    pub msg: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, offset: Option<u64>, msg: impl Into<String>) -> Error {
        Error {
            kind,
            path: None,
            offset,
            cpu: None,
            event: None,
            msg: msg.into(),
        }
    }
    pub fn truncated(offset: u64, msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Truncated, Some(offset), msg)
    }
    pub fn corrupt(offset: u64, msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt, Some(offset), msg)
    }
    pub fn unsupported(offset: Option<u64>, msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unsupported, offset, msg)
    }
    pub fn io(path: &Path, err: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, None, err.to_string()).in_file(path)
    }
    /// Attaches the file name unless a more specific one (e.g. a format file inside a
    /// capture directory) is already there.
    pub fn in_file(mut self, path: &Path) -> Error {
        if self.path.is_none() {
            self.path = Some(path.to_path_buf());
        }
        self
    }
    /// Names `to` where the error named `from` (a copy read in place of the user's file).
    pub fn renamed(mut self, from: &Path, to: &Path) -> Error {
        if self.path.as_deref() == Some(from) {
            self.path = Some(to.to_path_buf());
        }
        self
    }
    /// Places the problem in `cpu`'s stream (unless it is placed already).
    pub fn on_cpu(mut self, cpu: u32) -> Error {
        self.cpu.get_or_insert(cpu);
        self
    }
    /// Whether `other` reports the same problem at the same place (two passes over one
    /// file meet the same damage; it is reported once).
    pub fn same_place(&self, other: &Error) -> bool {
        self.path == other.path
            && self.offset == other.offset
            && self.cpu == other.cpu
            && self.msg == other.msg
    }
    /// Shifts a section-relative offset to a file offset.
    pub fn shifted(mut self, base: u64) -> Error {
        if let Some(off) = self.offset.as_mut() {
            *off += base;
        }
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}: ", p.display())?;
        }
        if let Some(off) = self.offset {
            write!(f, "offset {off} (0x{off:x}): ")?;
        }
        if let Some(cpu) = self.cpu {
            write!(f, "CPU {cpu}: ")?;
        }
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}
