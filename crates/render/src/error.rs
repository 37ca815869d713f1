//! What can fail while render writes its files: a chart asked for in a format this build
//! cannot write, the rasterizer, or the file system. Front ends map the first to bad
//! arguments and the others to a failure of the system (the CLI's exit statuses 2 and 1).

use std::fmt;
use std::path::PathBuf;

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The output's name asks for a format this build cannot write; the text says which.
    Format(String),
    /// Rasterizing an SVG to PNG failed.
    Raster(String),
    /// Writing `path` failed.
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    /// Whether what the user asked for is at fault, not the system.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, Error::Format(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format(msg) | Error::Raster(msg) => f.write_str(msg),
            Error::Write { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Write { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The readers' error the lab's harness (benches, scale) reports, of the same class and
/// with the same text.
impl From<Error> for kstate_format::Error {
    fn from(e: Error) -> kstate_format::Error {
        use kstate_format::ErrorKind;
        match e {
            Error::Format(msg) => kstate_format::Error::new(ErrorKind::Unsupported, None, msg),
            Error::Raster(msg) => kstate_format::Error::new(ErrorKind::Io, None, msg),
            Error::Write { path, source } => kstate_format::Error::io(&path, source),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::rundir::write_chart;
    use kstate_format::ErrorKind;

    #[test]
    fn a_chart_in_an_unknown_format_is_bad_input_and_a_failed_write_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let txt = dir.path().join("chart.txt");
        let e = write_chart("<svg/>", &txt).unwrap_err();
        assert!(e.is_bad_input());
        let text = format!("{}: the output must end in .svg or .png", txt.display());
        assert_eq!(e.to_string(), text);
        let f = kstate_format::Error::from(e);
        assert_eq!((f.kind, f.to_string()), (ErrorKind::Unsupported, text));

        let gone = dir.path().join("no/such/dir/chart.svg");
        let e = write_chart("<svg/>", &gone).unwrap_err();
        assert!(!e.is_bad_input(), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{}: ", gone.display())),
            "{e}"
        );
        let f = kstate_format::Error::from(e);
        assert_eq!(f.kind, ErrorKind::Io);
        assert!(f.to_string().starts_with(&format!("{}: ", gone.display())));
    }
}
