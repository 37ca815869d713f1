//! Writing a survey to files: the charts as SVG or PNG, every analysis as CSV and JSON, the
//! ranked findings, and report.html — what `kstate run` and `kstate report --dir` leave in
//! their directory.

use std::path::{Path, PathBuf};

use kstate_analyze::analyzer::Buckets;
use kstate_format::output;
use kstate_views::survey::Survey;

use crate::error::Error;
use crate::html::{self, RunInfo};
use crate::{charts, svg, Format, Meta};

/// Writing `path` failed.
fn write_err(path: &Path, source: std::io::Error) -> Error {
    Error::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `svg` to `path` as SVG or PNG, by the extension.
pub fn write_chart(svg: &str, path: &Path) -> Result<(), Error> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let bytes = match ext.as_deref() {
        Some("svg") => svg.as_bytes().to_vec(),
        Some("png") => png(svg)?,
        _ => {
            return Err(Error::Format(format!(
                "{}: the output must end in .svg or .png",
                path.display()
            )))
        }
    };
    output::write(path, bytes).map_err(|e| write_err(path, e))
}

/// `svg` rasterized (see [`crate::png`]).
#[cfg(feature = "png")]
pub fn png(svg: &str) -> Result<Vec<u8>, Error> {
    crate::png::svg_to_png(svg).map_err(Error::Raster)
}

/// Without the `png` feature there is no rasterizer: a clear error instead.
#[cfg(not(feature = "png"))]
pub fn png(_svg: &str) -> Result<Vec<u8>, Error> {
    Err(Error::Format(
        "this kstate was built without PNG support (cargo feature `png`); write .svg".into(),
    ))
}

/// The top `n` findings, as `kstate run` and `kstate report` print them.
pub fn print_findings(r: &Survey, n: usize) {
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
    output::write_with(path, f).map_err(|e| write_err(path, e))
}

/// Writes each analysis as `NAME.csv`/`NAME.json` (what `kstate analyze NAME --format
/// csv|json` prints), `NAME.dist.csv`/`.json` (`--dist --buckets log10`), and the charts
/// `NAME.log`, `NAME.levels`, `NAME.stat`, `NAME.dist`, `memory` as `.svg` (and `.png`
/// where built with PNG support). Returns the files written.
pub fn write_outputs(r: &Survey, dir: &Path, file: &str) -> Result<Vec<PathBuf>, Error> {
    let meta = Meta {
        file: file.to_string(),
        filters: Vec::new(),
    };
    let mut written = Vec::new();
    let size = svg::DEFAULT_SIZE;
    let bands = charts::bands(r, 3);
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
            write_text(&p, |w| crate::stat(&a.stat, &meta, fmt, w))?;
            written.push(p);
            let p = dir.join(format!("{n}.dist.{suffix}"));
            write_text(&p, |w| crate::dist(&a.dist, &meta, Buckets::Log10, fmt, w))?;
            written.push(p);
        }
        if !a.stat.rows.is_empty() {
            let c = charts::log_chart(a, None, &r.axis, &[], 5, bands.clone());
            chart(&format!("{n}.log"), svg::time_chart(&c, size), &mut written)?;
            chart(
                &format!("{n}.stat"),
                svg::stat_chart(&charts::stat_chart(a, 12), size),
                &mut written,
            )?;
            chart(
                &format!("{n}.dist"),
                svg::dist_chart(&charts::dist_chart(a, 3), size),
                &mut written,
            )?;
        }
        if charts::has_levels(a) {
            let c = charts::level_chart(a, &r.axis, 5, bands.clone());
            chart(
                &format!("{n}.levels"),
                svg::time_chart(&c, size),
                &mut written,
            )?;
        }
    }
    if !r.snapshots.is_empty() {
        let c = charts::memory_chart(&r.snapshots, &r.axis, bands.clone());
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
pub fn write_html(r: &Survey, run: Option<&RunInfo>, path: &Path) -> Result<(), Error> {
    output::write(path, html::render(r, run)).map_err(|e| write_err(path, e))
}
