//! What can stop `kstate ui` before or while it serves, in the classes a user acts on
//! differently: the files given (fix the arguments; exit status 2 in the CLI) or the
//! system (a port in use, no random source; exit status 1). A file that does not parse
//! is not one of them: the page shows its error and the server keeps serving.

use std::fmt;

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The files cannot be shown together (too many for a comparison, or not a host and
    /// its guests).
    Files(String),
    /// The server cannot listen on the port asked for.
    Listen { port: u16, source: std::io::Error },
    /// The system refused something the server needs (the random source for the token,
    /// the listening socket's address).
    System(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Files(msg) | Error::System(msg) => f.write_str(msg),
            Error::Listen { port, source } => {
                write!(f, "cannot listen on 127.0.0.1:{port}: {source}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Listen { source, .. } => Some(source),
            _ => None,
        }
    }
}
