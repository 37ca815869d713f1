//! `kstate ui FILE [FILE2]`: the browser front end (crate kstate-ui); this only hands it
//! the files and the CLI's opener.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::Error;

#[derive(clap::Args)]
#[command(after_help = "\
The page: an overview of the recording on one time axis (CPU busy and run-queue length per
CPU, block requests in flight per device, system-call durations, lost events); a timeline
of per-CPU tracks (the task on the CPU, coloured by process; hard and soft interrupts),
per-thread tracks (running, runnable with who woke it, sleeping in S or D with the system
call it slept in; its system calls) and block devices (requests queued, in the device),
drawn from the server's level-of-detail summaries at any zoom; the events of the view as
`kstate dump` prints them; a flame graph of the CPU samples in the selection (recordings
made with --sample); and a panel per analyzer that applies (the numbers of `kstate analyze
NAME --format json` for the same filters).

Timeline: drag to select a window (every panel's --window), click a slice for what it is,
the events behind it and the analyzers' rows it belongs to (a woken thread's slice draws
an arrow from its waker), Ctrl+wheel or W/S to zoom, Shift+wheel or A/D to pan, M for a
marker, arrows and Shift+arrows for a keyboard selection (Enter applies it). Tracks can be
pinned, hidden, grouped by process, searched by comm or pid; an event name in the search
box lists only those events. Clicking a key adds it as a filter; the filters show as chips
and live in the URL, one history entry per view (Back and Forward move through them).
\"Inside vs outside\" shows each panel for the window against the rest of the recording
(counts and totals per second of each); with two files every panel shows A, B and the
change, a differential flame graph shows where the samples moved, and \"what changed
most\" ranks keys by the wall time they added per second (the order of `kstate compare`).

A host and its guests: when every file after the first is a guest's recording whose clock
trace-cmd mapped to its host's (the TIME_SHIFT option `trace-cmd record -A` writes), the
files are one timeline, as `trace-cmd report -i host.dat -i guest.dat` shows them: the
overview holds every machine's lanes on the host's clock, windows apply to every machine,
and the panels are the selected machine's. --compare compares two such files A/B instead.

The server listens on 127.0.0.1 only and every URL carries a random token: share the URL
only with whom may read the recordings (--open hands the browser a file only you can read,
never the URL on a command line). A file that is missing or cannot be read stops it
(exit status 2); one that does not parse is shown as an error on the page. It runs until
interrupted (Ctrl-C).")]
pub struct Args {
    /// The recording (trace.dat, perf.data, raw capture or Parquet directory), and
    /// optionally a second one to compare it with (A, then B), or a host's recording
    /// and its guests'
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Compare two files (A/B) even when the second is the first's guest
    #[arg(long)]
    compare: bool,
    /// Port to listen on (default: a free one)
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Launch the default browser (xdg-open) on a file only you can read that sends it to
    /// the URL (the token never appears on a command line)
    #[arg(long)]
    open: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    // A file that is not there or cannot be read is the arguments' fault: say so and exit
    // 2 before serving (a file that reads but does not parse is shown on the page).
    for f in &args.files {
        readable(f)?;
    }
    let opts = kstate_ui::Options {
        files: args.files,
        compare: args.compare,
        port: args.port,
        open: args.open,
    };
    kstate_ui::serve(opts, |p| super::source(p).map_err(|e| e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `path` exists and can be read (a file opened, a directory listed).
fn readable(path: &Path) -> Result<(), Error> {
    let r = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path).map(drop),
        Ok(_) => std::fs::File::open(path).map(drop),
        Err(e) => Err(e),
    };
    r.map_err(|e| {
        let mut e = kstate_format::Error::io(path, e);
        e.kind = kstate_format::ErrorKind::Input;
        Error::Input(e)
    })
}
