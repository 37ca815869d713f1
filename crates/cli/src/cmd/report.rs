//! `kstate report`: the self-contained HTML report of an existing recording (and, with
//! --dir, every analysis as CSV and JSON and every chart as SVG and PNG, as `kstate run`
//! writes them). Several files are a host and its guests (each guest's file maps its
//! clock to the host's with trace-cmd's TIME_SHIFT option), reported together on the
//! host's clock: a part per machine and a shared timeline.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_format::output;
use kstate_render::html;
use kstate_render::machines;
use kstate_render::rundir::{print_findings, write_outputs};

#[derive(clap::Args)]
#[command(after_help = kstate_views::ranking_help!())]
pub struct Args {
    /// trace.dat (v6/v7) file or raw tracefs capture directory; several: a host's
    /// recording, then its guests' (trace-cmd record -A), on the host's clock
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// The HTML file to write
    #[arg(short, long, default_value = "report.html")]
    output: PathBuf,
    /// Also write every analysis (CSV, JSON) and chart (SVG, PNG) into DIR (with a host
    /// and its guests: into DIR/host, DIR/guest1, ...)
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    if args.files.len() > 1 {
        return machines(&args);
    }
    let source = super::source(&args.files[0])?;
    let file = source.label().to_string();
    let r = kstate_views::survey::of(&source);
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::output(dir, e))?;
        write_outputs(&r, dir, &file)?;
    }
    let html = html::render(&r, None);
    output::write(&args.output, html).map_err(|e| Error::output(&args.output, e))?;
    print_findings(&r, 5);
    eprintln!("kstate: wrote {}", args.output.display());
    Ok(super::damage::finish(&r.damage))
}

/// A host and its guests on the host's clock.
fn machines(args: &Args) -> Result<ExitCode, Error> {
    let sources = args
        .files
        .iter()
        .map(|f| super::source(f))
        .collect::<Result<Vec<_>, Error>>()?;
    let m = kstate_views::machines::survey(&sources)
        // Recordings that cannot be put on one clock are the user's choice of files, and so
        // is one that cannot be read: bad input either way.
        .map_err(|e| match e {
            kstate_analyze::Error::Trace(e) => Error::Input(e),
            e => Error::Usage(e.to_string()),
        })?;
    if let Some(dir) = &args.dir {
        for mc in &m.machines {
            let sub = dir.join(mc.role.to_string().replace(' ', ""));
            std::fs::create_dir_all(&sub).map_err(|e| Error::output(&sub, e))?;
            write_outputs(&mc.survey, &sub, &mc.survey.file)?;
        }
    }
    let html = machines::render(&m);
    output::write(&args.output, html).map_err(|e| Error::output(&args.output, e))?;
    if m.findings.is_empty() {
        println!("findings: none (no analyzer had samples)");
    } else {
        println!("top findings (share of the shared time axis each explains):");
        for f in m.findings.iter().take(5) {
            println!("  {:>6.1}%  {}", f.finding.share * 100.0, f.finding.text);
        }
    }
    eprintln!("kstate: wrote {}", args.output.display());
    let damage: Vec<_> = m
        .machines
        .iter()
        .flat_map(|x| x.survey.damage.iter().cloned())
        .collect();
    Ok(super::damage::finish(&damage))
}
