//! `kstate report`: the self-contained HTML report of an existing recording (and, with
//! --dir, every analysis as CSV and JSON and every chart as SVG and PNG, as `kstate run`
//! writes them).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kstate_analyze::analyzer::Buckets;
use kstate_format::{output, Error};
use kstate_render::html::{self, RunInfo};
use kstate_render::report::{self, Report};
use kstate_render::svg;
use kstate_render::{Format, Meta};

use super::plot::write_chart;

#[derive(clap::Args)]
#[command(after_help = super::run::ranking_help!())]
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
    let trace = super::open(&args.file)?;
    let tgids = super::analyze::saved_tgids_of(&args.file);
    let file = args.file.display().to_string();
    let r = report::build(&trace, &file, &tgids);
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

/// Prints the top `n` findings.
pub fn print_findings(r: &Report, n: usize) {
    if r.findings.is_empty() {
        println!("findings: none (no analyzer had samples)");
        return;
    }
    println!("top findings (share of wall time each explains):");
    for f in r.findings.iter().take(n) {
        println!("  {:>6.1}%  {}", f.share * 100.0, f.text);
    }
}

fn write_text(
    path: &Path,
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    output::write_with(path, f).map_err(|e| Error::io(path, e))
}

/// Writes each analysis as `NAME.csv`/`NAME.json` (what `kstate analyze NAME --format
/// csv|json` prints), `NAME.dist.csv`/`.json` (`--dist --buckets log10`), and the charts
/// `NAME.log`, `NAME.levels`, `NAME.stat`, `NAME.dist`, `memory` as `.svg` (and `.png`
/// where built with PNG support). Returns the files written.
pub fn write_outputs(r: &Report, dir: &Path, file: &str) -> Result<Vec<PathBuf>, Error> {
    let meta = Meta {
        file: file.to_string(),
        filters: Vec::new(),
    };
    let mut written = Vec::new();
    let size = svg::DEFAULT_SIZE;
    let bands = report::bands(r, 3);
    let chart = |name: &str, svg: String, written: &mut Vec<PathBuf>| -> Result<(), Error> {
        let p = dir.join(format!("{name}.svg"));
        write_chart(&svg, &p)?;
        written.push(p);
        if cfg!(feature = "png") {
            let p = dir.join(format!("{name}.png"));
            write_chart(&svg, &p)?;
            written.push(p);
        }
        Ok(())
    };
    for a in &r.analyses {
        let n = a.info.name;
        for (suffix, fmt) in [("csv", Format::Csv), ("json", Format::Json)] {
            let p = dir.join(format!("{n}.{suffix}"));
            write_text(&p, |w| kstate_render::stat(&a.stat, &meta, fmt, w))?;
            written.push(p);
            let p = dir.join(format!("{n}.dist.{suffix}"));
            write_text(&p, |w| {
                kstate_render::dist(&a.dist, &meta, Buckets::Log10, fmt, w)
            })?;
            written.push(p);
        }
        if !a.stat.rows.is_empty() {
            let c = report::log_chart(a, None, &r.axis, &[], 5, bands.clone());
            chart(&format!("{n}.log"), svg::time_chart(&c, size), &mut written)?;
            chart(
                &format!("{n}.stat"),
                svg::stat_chart(&report::stat_chart(a, 12), size),
                &mut written,
            )?;
            chart(
                &format!("{n}.dist"),
                svg::dist_chart(&report::dist_chart(a, 3), size),
                &mut written,
            )?;
        }
        if report::has_levels(a) {
            let c = report::level_chart(a, &r.axis, 5, bands.clone());
            chart(
                &format!("{n}.levels"),
                svg::time_chart(&c, size),
                &mut written,
            )?;
        }
    }
    if !r.snapshots.is_empty() {
        let c = report::memory_chart(&r.snapshots, &r.axis, bands.clone());
        chart("memory", svg::time_chart(&c, size), &mut written)?;
    }
    let p = dir.join("findings.txt");
    write_text(&p, |w| {
        for f in &r.findings {
            writeln!(w, "{:6.2}%  {}", f.share * 100.0, f.text)?;
        }
        Ok(())
    })?;
    written.push(p);
    Ok(written)
}

/// The HTML report of `r` into `path`.
pub fn write_html(r: &Report, run: Option<&RunInfo>, path: &Path) -> Result<(), Error> {
    output::write(path, html::render(r, run)).map_err(|e| Error::io(path, e))
}
