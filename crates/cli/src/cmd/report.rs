//! `kstate report`: the self-contained HTML report of an existing recording (and, with
//! --dir, every analysis as CSV and JSON and every chart as SVG and PNG, as `kstate run`
//! writes them).

use std::path::PathBuf;
use std::process::ExitCode;

use kstate_format::{output, Error};
use kstate_render::html;
use kstate_render::rundir::{print_findings, write_outputs};

#[derive(clap::Args)]
#[command(after_help = kstate_analyze::ranking_help!())]
pub struct Args {
    /// trace.dat (v6/v7) file or raw tracefs capture directory
    file: PathBuf,
    /// The HTML file to write
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
    /// Also write every analysis (CSV, JSON) and chart (SVG, PNG) into DIR
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let source = super::source(&args.file)?;
    let file = source.label().to_string();
    let r = source.survey();
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        write_outputs(&r, dir, &file)?;
    }
    let html = html::render(&r, None);
    output::write(&args.output, html).map_err(|e| Error::io(&args.output, e))?;
    print_findings(&r, 5);
    eprintln!("kstate: wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}
