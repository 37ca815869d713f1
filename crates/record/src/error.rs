//! The recorder's error: what failed, where (the file or tracefs path), and why (the OS
//! error, kept as the source), so a caller can tell a full disk or a bad argument from
//! the rest and a user reads one line that names all three.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Doing `what` to `path` (a file, a tracefs or /proc entry) failed.
    Io {
        what: String,
        path: PathBuf,
        source: io::Error,
    },
    /// A system call on no path failed (splicing from the kernel, eventfd, a pipe, ...).
    Os { what: String, source: io::Error },
    /// The arguments ask for what cannot be recorded (an output that is a directory, a
    /// process that does not exist, ...): the user's to fix.
    BadArgument(String),
    /// The output's filesystem has no room to start.
    NoSpace(String),
    /// Writing or reading trace data failed (the trace.dat writer, a page layout).
    Format(kstate_format::Error),
    /// `what` was being done when `source` happened.
    Context { what: String, source: Box<Error> },
    /// Anything else (something this machine or kernel lacks, a thread that failed), in
    /// words.
    Other(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error::Other(msg.into())
    }

    pub fn bad_argument(msg: impl Into<String>) -> Error {
        Error::BadArgument(msg.into())
    }

    /// "`what` PATH: error".
    pub fn io(what: &str, path: &Path, e: io::Error) -> Error {
        Error::Io {
            what: what.to_string(),
            path: path.to_path_buf(),
            source: e,
        }
    }

    /// "`what`: error", for a system call on no path.
    pub fn os(what: impl Into<String>, e: io::Error) -> Error {
        Error::Os {
            what: what.into(),
            source: e,
        }
    }

    /// "`what`: this error", keeping this one as the source.
    pub fn context(self, what: impl fmt::Display) -> Error {
        Error::Context {
            what: what.to_string(),
            source: Box::new(self),
        }
    }

    /// The OS error number behind the error, if any.
    pub fn os_errno(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } | Error::Os { source, .. } => source.raw_os_error(),
            Error::Context { source, .. } => source.os_errno(),
            _ => None,
        }
    }

    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::NoSpace(_))
            || matches!(self.os_errno(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
    }

    pub fn is_bad_argument(&self) -> bool {
        match self {
            Error::BadArgument(_) => true,
            Error::Context { source, .. } => source.is_bad_argument(),
            _ => false,
        }
    }
}

/// A copy for a second owner (a thread's failure is both returned and reported): the OS
/// error keeps its number, or its kind and text.
impl Clone for Error {
    fn clone(&self) -> Error {
        let copy = |e: &io::Error| match e.raw_os_error() {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        match self {
            Error::Io { what, path, source } => Error::Io {
                what: what.clone(),
                path: path.clone(),
                source: copy(source),
            },
            Error::Os { what, source } => Error::Os {
                what: what.clone(),
                source: copy(source),
            },
            Error::BadArgument(m) => Error::BadArgument(m.clone()),
            Error::NoSpace(m) => Error::NoSpace(m.clone()),
            Error::Format(e) => Error::Format(e.clone()),
            Error::Context { what, source } => Error::Context {
                what: what.clone(),
                source: source.clone(),
            },
            Error::Other(m) => Error::Other(m.clone()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, path, source } => {
                write!(f, "{what} {}: {source}", path.display())
            }
            Error::Os { what, source } => write!(f, "{what}: {source}"),
            Error::Context { what, source } => write!(f, "{what}: {source}"),
            Error::Format(e) => e.fmt(f),
            Error::BadArgument(m) | Error::NoSpace(m) | Error::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Os { source, .. } => Some(source),
            Error::Format(e) => Some(e),
            Error::Context { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        Error::Format(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_where_and_why_and_keep_the_os_error() {
        let e = Error::io(
            "writing",
            Path::new("/x/cpu0"),
            io::Error::from_raw_os_error(libc::ENOSPC),
        )
        .context("CPU 0");
        assert!(e
            .to_string()
            .starts_with("CPU 0: writing /x/cpu0: No space left"));
        assert!(e.is_disk_full());
        assert_eq!(e.os_errno(), Some(libc::ENOSPC));
        let c = e.clone();
        assert_eq!(c.to_string(), e.to_string());
        assert!(c.is_disk_full());
        assert!(std::error::Error::source(&e).is_some());
        assert!(Error::bad_argument("-p 1: no process 1").is_bad_argument());
        assert!(!Error::new("x").is_disk_full());
    }
}
