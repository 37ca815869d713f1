//! The recorder's error: one message that says what failed, where, and why.

use std::fmt;
use std::path::Path;

#[derive(Debug)]
pub struct Error {
    msg: String,
    /// The OS error behind it, when there is one (ENOSPC is handled specially).
    pub os: Option<i32>,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error {
            msg: msg.into(),
            os: None,
        }
    }

    /// "`what` PATH: error", keeping the OS error number.
    pub fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
        Error {
            msg: format!("{what} {}: {e}", path.display()),
            os: e.raw_os_error(),
        }
    }

    /// "`what`: this error", keeping the OS error number.
    pub fn context(self, what: impl fmt::Display) -> Error {
        Error {
            msg: format!("{what}: {}", self.msg),
            os: self.os,
        }
    }

    /// Marks the error as caused by OS error `errno`.
    pub fn with_os(mut self, errno: i32) -> Error {
        self.os = Some(errno);
        self
    }

    pub fn is_disk_full(&self) -> bool {
        matches!(self.os, Some(libc::ENOSPC) | Some(libc::EDQUOT))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        Error::new(e.to_string())
    }
}
