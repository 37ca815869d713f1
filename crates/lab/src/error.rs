//! The lab's one error type, in the classes the CLI turns into exit statuses: arguments
//! the user must fix (2), a trace that could not be read (its reader's class), and the
//! system or a command the lab ran failing (1) — a peer tool missing or failing, a child
//! that printed what could not be read, a file the harness needs refused.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The arguments cannot be run as given.
    Usage(String),
    /// A trace could not be read or written (the reader's or writer's error, with its
    /// class and the file, offset and problem).
    Trace(kstate_format::Error),
    /// The system refused a file or a call the harness needs.
    Io { path: PathBuf, source: io::Error },
    /// A command the lab ran (a peer tool, kstate itself, a workload) failed or printed
    /// what could not be read; or a measurement could not be made.
    Failed(String),
}

impl Error {
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }
    pub fn failed(msg: impl Into<String>) -> Error {
        Error::Failed(msg.into())
    }
    pub fn io(path: impl AsRef<Path>, source: io::Error) -> Error {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(msg) | Error::Failed(msg) => f.write_str(msg),
            Error::Trace(e) => e.fmt(f),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Trace(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            Error::Usage(_) | Error::Failed(_) => None,
        }
    }
}

impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        Error::Trace(e)
    }
}

/// An unreadable trace as the reader said; a question the engine refused is the
/// arguments' fault.
impl From<kstate_analyze::Error> for Error {
    fn from(e: kstate_analyze::Error) -> Error {
        match e {
            kstate_analyze::Error::Trace(e) => Error::Trace(e),
            e => Error::Usage(e.to_string()),
        }
    }
}

/// A chart in a format this build cannot write is the arguments' fault; the rasterizer or
/// the file system failing is the system's.
impl From<kstate_render::error::Error> for Error {
    fn from(e: kstate_render::error::Error) -> Error {
        use kstate_render::error::Error as E;
        match e {
            E::Format(msg) => Error::Usage(msg),
            E::Write { path, source } => Error::Io { path, source },
            e => Error::Failed(e.to_string()),
        }
    }
}
