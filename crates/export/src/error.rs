//! The exporters' one error type. An export reads a trace and writes another format, and
//! the two fail for different reasons a caller reports differently: the trace (or a fleet
//! summary) could not be read — the reader's error names the file, the offset and the
//! problem —, the export asked for cannot be made, or the system refused the write.
//! Opening a trace ([`crate::open`], a Parquet directory read back) is a reader like any
//! other and returns the readers' error, `kstate_format::Error`.

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Reading the trace being exported, a file beside it or a summary failed, or an
    /// analyzer refused the trace; the reader's error names the file, offset and problem.
    Read(kstate_format::Error),
    /// What was asked cannot be exported (an analyzer that does not exist, an output that
    /// already holds tables); the text says why.
    Unsupported(String),
    /// Creating, writing or putting in place the output `path` failed.
    Write { path: PathBuf, source: io::Error },
    /// Writing the output stream failed where the writer knows no path.
    Stream(io::Error),
    /// The Parquet encoder failed while writing `path`; the text is its.
    Encode { path: PathBuf, msg: String },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn write(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Write {
            path: path.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read(e) => e.fmt(f),
            Error::Unsupported(msg) => f.write_str(msg),
            Error::Write { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Stream(source) => write!(f, "writing output: {source}"),
            Error::Encode { path, msg } => write!(f, "{}: {msg}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Read(e) => Some(e),
            Error::Write { source, .. } | Error::Stream(source) => Some(source),
            Error::Unsupported(_) | Error::Encode { .. } => None,
        }
    }
}

/// The engine's errors: the trace unreadable as the reader said, or a question refused.
impl From<kstate_analyze::Error> for Error {
    fn from(e: kstate_analyze::Error) -> Error {
        match e {
            kstate_analyze::Error::Trace(e) => Error::Read(e),
            e => Error::Unsupported(e.to_string()),
        }
    }
}

impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        Error::Read(e)
    }
}
