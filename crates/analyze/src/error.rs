//! The engine's one error type: either the trace could not be read (the reader's error
//! names the file, the offset and the problem), or the question asked of it cannot be
//! answered as put (an analyzer that does not exist, filters that contradict each other).
//! Front ends map the two to their own outcomes (the CLI: exit status 2 for both, as
//! both are bad input).

use std::fmt;

#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// Reading the trace failed.
    Trace(kstate_format::Error),
    /// The query is not one the engine can answer; the text says why.
    Query(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Trace(e) => e.fmt(f),
            Error::Query(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Why the analyzer asked for does not apply to this file (its events or call chains
    /// are not in it: [`kstate_format::ErrorKind::is_not_applicable`]), for the lists of
    /// what a survey skipped; `None` for every other failure.
    pub fn not_applicable(&self) -> Option<&str> {
        match self {
            Error::Trace(e) if e.kind.is_not_applicable() => Some(&e.msg),
            _ => None,
        }
    }
}

impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        Error::Trace(e)
    }
}
