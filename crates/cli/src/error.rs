//! The CLI's one error type. Its variants are the classes a user acts on differently —
//! fix the input or the arguments (exit status 2), or look at the system or the command
//! kstate ran (exit status 1) — so the class is decided where the error is made, by the
//! code that knows which it is, and `main` only asks [`Error::exit_code`]. The text is
//! what `kstate: ` is followed by; every variant names the file (and offset) it is about
//! when there is one.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::{EXIT_BAD_INPUT, EXIT_FAILED};

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A trace or file the user named is missing, unreadable, truncated, corrupt or of a
    /// kind kstate does not read: the reader's error names the file, the offset and the
    /// problem, which is all a user holding a broken trace needs.
    Input(kstate_format::Error),
    /// The arguments ask for what cannot be done (an analyzer that does not exist, options
    /// that contradict each other, an output that is not empty): the user's to fix, and
    /// found before anything is written.
    Usage(String),
    /// Writing a result to `path` failed (a full disk, no permission, a directory in the
    /// way): the input was fine, the system refused.
    Output { path: PathBuf, source: io::Error },
    /// Writing a result to standard output failed (other than the reader going away, which
    /// is not an error).
    Stdout(io::Error),
    /// The system refused a read or a write while trace data was being read or written
    /// (the readers' `Io` kind: an EIO mid-file, a full disk under a trace.dat being
    /// written); the error names the file.
    System(kstate_format::Error),
    /// The system or a command kstate ran failed (recording, valgrind, the browser UI's
    /// server); the text says what and why.
    Failed(String),
}

impl Error {
    /// The exit status that says which class the error is in, as `kstate --help` states.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) | Error::Usage(_) => EXIT_BAD_INPUT,
            Error::Output { .. } | Error::Stdout(_) | Error::System(_) | Error::Failed(_) => {
                EXIT_FAILED
            }
        }
    }

    /// Writing `path` failed.
    pub fn output(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Output {
            path: path.into(),
            source,
        }
    }

    /// Reading or changing `path`, a file kstate did not make the user name as a trace,
    /// failed in the system (the readers' `Io` kind, with its text).
    pub fn system(path: &std::path::Path, source: io::Error) -> Error {
        Error::System(kstate_format::Error::io(path, source))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Input(e) | Error::System(e) => e.fmt(f),
            Error::Usage(msg) | Error::Failed(msg) => f.write_str(msg),
            Error::Output { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Stdout(source) => write!(f, "writing output: {source}"),
        }
    }
}

impl From<kstate_ui::Error> for Error {
    fn from(e: kstate_ui::Error) -> Error {
        match e {
            // Files that cannot be shown together: the arguments are the user's to fix.
            kstate_ui::Error::Files(msg) => Error::Usage(msg),
            e => Error::Failed(e.to_string()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Input(e) | Error::System(e) => Some(e),
            Error::Output { source, .. } | Error::Stdout(source) => Some(source),
            Error::Usage(_) | Error::Failed(_) => None,
        }
    }
}

/// A reader's error is bad input unless the system refused the read or write.
impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        if e.kind.is_bad_input() {
            Error::Input(e)
        } else {
            Error::System(e)
        }
    }
}

/// The engine's error: the trace could not be read, or the query cannot be answered as
/// put (the arguments' fault).
impl From<kstate_analyze::Error> for Error {
    fn from(e: kstate_analyze::Error) -> Error {
        match e {
            kstate_analyze::Error::Trace(e) => e.into(),
            e => Error::Usage(e.to_string()),
        }
    }
}

/// An exporter's error: the trace being exported could not be read (its reader's class),
/// the export asked for cannot be made (the arguments'), or writing it failed (the
/// system's).
impl From<kstate_export::Error> for Error {
    fn from(e: kstate_export::Error) -> Error {
        use kstate_export::Error as E;
        match e {
            E::Read(e) => e.into(),
            E::Unsupported(msg) => Error::Usage(msg),
            E::Write { path, source } => Error::Output { path, source },
            e => Error::Failed(e.to_string()),
        }
    }
}

/// A recording refused for its arguments is bad input; anything else the recorder hits
/// is a failure of the system.
impl From<kstate_record::Error> for Error {
    fn from(e: kstate_record::Error) -> Error {
        if e.is_bad_argument() {
            Error::Usage(e.to_string())
        } else {
            Error::Failed(e.to_string())
        }
    }
}

/// A chart in a format this build cannot write is the arguments' fault; the rasterizer or
/// the file system failing is not.
impl From<kstate_render::error::Error> for Error {
    fn from(e: kstate_render::error::Error) -> Error {
        use kstate_render::error::Error as E;
        match e {
            E::Format(msg) => Error::Usage(msg),
            E::Write { path, source } => Error::Output { path, source },
            e => Error::Failed(e.to_string()),
        }
    }
}

/// A watch refused before recording is the arguments' fault; tracefs or the recording
/// failing is the system's.
impl From<kstate_watch::Error> for Error {
    fn from(e: kstate_watch::Error) -> Error {
        match e {
            kstate_watch::Error::Arguments(msg) => Error::Usage(msg),
            e => Error::Failed(e.to_string()),
        }
    }
}

/// The lab's error: its arguments (2), a trace it read (the reader's class), or the
/// system or a command it ran (1).
impl From<kstate_lab::Error> for Error {
    fn from(e: kstate_lab::Error) -> Error {
        use kstate_lab::Error as E;
        match e {
            E::Usage(msg) => Error::Usage(msg),
            E::Trace(e) => e.into(),
            E::Io { path, source } => Error::system(&path, source),
            e => Error::Failed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstate_format::ErrorKind;
    use std::path::Path;

    fn class(e: impl Into<Error>) -> (u8, String) {
        let e = e.into();
        (e.exit_code(), e.to_string())
    }

    #[test]
    fn a_readers_error_is_bad_input_unless_the_system_refused() {
        let corrupt = kstate_format::Error::corrupt(4096, "commit overruns the page")
            .in_file(Path::new("t.dat"));
        let text = "t.dat: offset 4096 (0x1000): commit overruns the page";
        assert_eq!(class(corrupt), (EXIT_BAD_INPUT, text.into()));
        let eio = kstate_format::Error::io(Path::new("t.dat"), io::Error::from_raw_os_error(5));
        assert_eq!(
            class(eio),
            (EXIT_FAILED, "t.dat: Input/output error (os error 5)".into())
        );
    }

    #[test]
    fn each_engine_crates_error_lands_in_its_class_with_its_text() {
        let enospc = || io::Error::from_raw_os_error(libc::ENOSPC);
        let full = "out: No space left on device (os error 28)";
        // The engine: a query it refuses is the arguments' fault.
        let q = kstate_analyze::Error::Query("no analyzer \"x\"".into());
        assert_eq!(class(q), (EXIT_BAD_INPUT, "no analyzer \"x\"".into()));
        // The exporters.
        let u = kstate_export::Error::Unsupported("no analyzer \"x\"".into());
        assert_eq!(class(u).0, EXIT_BAD_INPUT);
        let w = kstate_export::Error::write("out", enospc());
        assert_eq!(class(w), (EXIT_FAILED, full.into()));
        let s = kstate_export::Error::Stream(enospc());
        let stream = "writing output: No space left on device (os error 28)";
        assert_eq!(class(s), (EXIT_FAILED, stream.into()));
        let r = kstate_export::Error::Read(kstate_format::Error::new(
            ErrorKind::Truncated,
            Some(8),
            "short",
        ));
        assert_eq!(class(r), (EXIT_BAD_INPUT, "offset 8 (0x8): short".into()));
        // The renderer.
        let f = kstate_render::error::Error::Format(
            "chart.txt: the output must end in .svg or .png".into(),
        );
        assert_eq!(class(f).0, EXIT_BAD_INPUT);
        let w = kstate_render::error::Error::Write {
            path: "out".into(),
            source: enospc(),
        };
        assert_eq!(class(w), (EXIT_FAILED, full.into()));
        // The recorder and the watch.
        let b = kstate_record::Error::bad_argument("-p 1: no process 1").context("checking");
        assert_eq!(
            class(b),
            (EXIT_BAD_INPUT, "checking: -p 1: no process 1".into())
        );
        let o = kstate_record::Error::io("writing", Path::new("out"), enospc());
        assert_eq!(class(o).0, EXIT_FAILED);
        let a = kstate_watch::Error::Arguments("alarm rule \"x\": no comparison".into());
        assert_eq!(class(a).0, EXIT_BAD_INPUT);
        let s = kstate_watch::Error::System("tracefs: not mounted".into());
        assert_eq!(class(s), (EXIT_FAILED, "tracefs: not mounted".into()));
        // The lab: its arguments, a peer failing, a file the harness needs, a trace.
        let u = kstate_lab::Error::usage("--stride 100: a multiple of the 4096-byte page");
        assert_eq!(class(u).0, EXIT_BAD_INPUT);
        let p = kstate_lab::Error::failed("\"perf\" failed (status 1)");
        assert_eq!(class(p), (EXIT_FAILED, "\"perf\" failed (status 1)".into()));
        assert_eq!(
            class(kstate_lab::Error::io("out", enospc())),
            (EXIT_FAILED, full.into())
        );
        let t = kstate_format::Error::corrupt(8, "bad magic").in_file(Path::new("t.dat"));
        assert_eq!(class(kstate_lab::Error::from(t)).0, EXIT_BAD_INPUT);
        // The CLI's own.
        assert_eq!(
            class(Error::output("out", enospc())),
            (EXIT_FAILED, full.into())
        );
        assert_eq!(class(Error::Usage("--k 0".into())).0, EXIT_BAD_INPUT);
    }
}
