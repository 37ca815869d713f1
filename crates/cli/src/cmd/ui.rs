//! `kstate ui FILE [FILE2]`: the browser front end (crate kstate-ui); this only hands it
//! the files and the CLI's opener.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;

#[derive(clap::Args)]
#[command(after_help = "\
The page: an overview of the recording on one time axis (CPU busy and run-queue length per
CPU, block requests in flight per device, system-call durations, lost events; drag to select
a time range, wheel to zoom, shift+drag to pan) and a panel per analyzer that applies (the
numbers of `kstate analyze NAME --format json` for the same filters). A selected range
becomes every panel's --window; clicking a key adds it as a filter; the filters show as
chips and live in the URL. \"Inside vs outside\" shows each panel for the window against
the rest of the recording; with two files every panel shows A, B and the change (the rules
of `kstate compare`).

A host and its guests: when every file after the first is a guest's recording whose clock
trace-cmd mapped to its host's (the TIME_SHIFT option `trace-cmd record -A` writes), the
files are one timeline, as `trace-cmd report -i host.dat -i guest.dat` shows them: the
overview holds every machine's lanes on the host's clock, windows apply to every machine,
and the panels are the selected machine's. --compare compares two such files A/B instead.

The server listens on 127.0.0.1 only and every URL carries a random token: share the URL
only with whom may read the recordings. It runs until interrupted (Ctrl-C).")]
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
    /// Launch the default browser (xdg-open) on the URL
    #[arg(long)]
    open: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let opts = kstate_ui::Options {
        files: args.files,
        compare: args.compare,
        port: args.port,
        open: args.open,
    };
    kstate_ui::serve(opts, |p| super::source(p).map_err(|e| e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}
