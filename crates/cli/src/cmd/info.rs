//! `kstate info`: what a trace holds, read in one streaming pass.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat (v6/v7) file or raw tracefs capture directory
    file: PathBuf,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
    /// How a perf.data's samples are read (hidden: tests and `bench analyze` compare
    /// the older ways with the direct one)
    #[arg(long, hide = true, value_parser = ["direct", "pages", "sorted"])]
    perf_read: Option<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let opts = super::open_options(None, args.perf_read.as_deref());
    let trace = super::open_with(&args.file, &opts)?;
    let report = kstate_views::describe::describe(&trace)?;
    if args.json {
        let json = kstate_render::info::json(&report);
        println!(
            "{}",
            serde_json::to_string_pretty(&json).expect("JSON of plain values")
        );
    } else {
        print!("{}", kstate_render::info::text(&report));
    }
    // The figures cover what could be read; what could not is said here, and exits 2.
    Ok(super::damage::finish(&report.errors))
}
