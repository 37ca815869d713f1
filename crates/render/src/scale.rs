//! The report of `kstate scale`: one self-contained HTML page (the run report's style,
//! inline SVG, no script) with the table of runs, the scalability plot (speed-up and
//! throughput against CPUs) and one section per run: CPU accounting, the verdict with its
//! evidence, and the tables the CLI gathered for it (profile, locks, block requests).

use std::fmt::Write as _;

use crate::html::{CpuSplit, CSS};
use crate::svg::{self, esc, Axis, Scale, Series, Style, TimeChart, ValueKind};

/// A small table of a run's section.
#[derive(Debug, Clone, Default)]
pub struct RunTable {
    pub title: String,
    /// What the figures are and where they come from.
    pub note: String,
    pub header: Vec<String>,
    /// Cells as shown; the first column is left-aligned.
    pub rows: Vec<Vec<String>>,
    /// Shown in place of the table when there are no rows.
    pub empty: String,
}

/// One CPU count's run.
#[derive(Debug, Clone, Default)]
pub struct ScaleRun {
    pub cpus: usize,
    pub seconds: f64,
    pub speedup: f64,
    /// /proc/stat over the CPUs the command was pinned to.
    pub cpu: CpuSplit,
    pub verdict: String,
    pub evidence: String,
    /// The classifier's figures: (name, value as shown).
    pub figures: Vec<(String, String)>,
    pub tables: Vec<RunTable>,
    /// The recording kept for this run, if any.
    pub file: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ScaleReport {
    pub command: Vec<String>,
    /// How each run was recorded, e.g. `kstate record -e perf,syscall,futex -a --sample`.
    pub how: String,
    pub runs: Vec<ScaleRun>,
}

/// Speed-up (measured and linear) and throughput (runs per second) against CPUs.
pub fn plot(r: &ScaleReport) -> String {
    let style = |n: usize| if n > 1 { Style::Line } else { Style::Points };
    let speed: Vec<(f64, f64)> = r.runs.iter().map(|x| (x.cpus as f64, x.speedup)).collect();
    let base = r.runs.first().map_or(1, |x| x.cpus.max(1)) as f64;
    let ideal: Vec<(f64, f64)> = r
        .runs
        .iter()
        .map(|x| (x.cpus as f64, x.cpus as f64 / base))
        .collect();
    let thr: Vec<(f64, f64)> = r
        .runs
        .iter()
        .filter(|x| x.seconds > 0.0)
        .map(|x| (x.cpus as f64, 1.0 / x.seconds))
        .collect();
    let max = r.runs.iter().map(|x| x.cpus).max().unwrap_or(1) as f64;
    let min = r.runs.iter().map(|x| x.cpus).min().unwrap_or(1) as f64;
    let mut ticks: Vec<f64> = r.runs.iter().map(|x| x.cpus as f64).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let chart = TimeChart {
        title: "scalability: speed-up and throughput against CPUs".into(),
        x: (min - 0.5, max + 0.5),
        left: Axis {
            label: "speed-up over the first run".into(),
            kind: ValueKind::Plain,
            scale: Scale::Linear,
        },
        left_series: vec![
            Series {
                name: "speed-up".into(),
                style: style(speed.len()),
                points: speed,
            },
            Series {
                name: "linear".into(),
                style: style(ideal.len()),
                points: ideal,
            },
        ],
        right: Some((
            Axis {
                label: "throughput (runs/s = 1 / seconds)".into(),
                kind: ValueKind::Plain,
                scale: Scale::Linear,
            },
            vec![Series {
                name: "throughput".into(),
                style: style(thr.len()),
                points: thr,
            }],
        )),
        bands: Vec::new(),
    };
    svg::xy_chart(&chart, "CPUs", &ticks, svg::DEFAULT_SIZE)
}

fn pct(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

/// The whole report as one HTML document.
pub fn render(r: &ScaleReport) -> String {
    let mut h = String::with_capacity(1 << 18);
    let cmd = r.command.join(" ");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>kstate scale: {}</title><style>{CSS}</style></head><body><main>\n\
         <h1>kstate scale</h1><p><span class=\"cmd\">{}</span></p>\n",
        esc(&cmd),
        esc(&cmd)
    );
    h.push_str("<section id=\"summary\"><h2>runs</h2>");
    let _ = write!(
        h,
        "<p class=\"note\">Each run: {}, the command pinned to CPUs 0..N-1. Seconds are the \
         recording's span; CPU shares are /proc/stat of the CPUs used.</p>",
        esc(&r.how)
    );
    h.push_str(
        "<table><tr><th>CPUs</th><th>seconds</th><th>speed-up</th><th>user %</th>\
         <th>system %</th><th>idle %</th><th>iowait %</th><th class=\"k\">verdict</th></tr>",
    );
    for x in &r.runs {
        let _ = write!(
            h,
            "<tr><td><a href=\"#cpus{}\">{}</a></td><td>{:.3}</td><td>{:.2}x</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td class=\"k\">{}</td></tr>",
            x.cpus,
            x.cpus,
            x.seconds,
            x.speedup,
            pct(x.cpu.user),
            pct(x.cpu.system),
            pct(x.cpu.idle),
            pct(x.cpu.iowait),
            esc(&x.verdict)
        );
    }
    h.push_str("</table>");
    let _ = writeln!(
        h,
        "<figure id=\"scalability\">{}</figure></section>",
        plot(r)
    );
    for x in &r.runs {
        run_section(&mut h, x);
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">Made by kstate {}.</p></main></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    h
}

fn run_section(h: &mut String, x: &ScaleRun) {
    let _ = write!(
        h,
        "<section id=\"cpus{}\" class=\"run\"><h2>{} CPU{}: {}</h2>",
        x.cpus,
        x.cpus,
        if x.cpus == 1 { "" } else { "s" },
        esc(&x.verdict)
    );
    let _ = write!(h, "<p>{}</p>", esc(&x.evidence));
    h.push_str("<h3>CPU accounting</h3>");
    let c = x.cpu;
    h.push_str("<div class=\"cpu\">");
    for (share, col, name) in [
        (c.user, "#1f77b4", "user"),
        (c.system, "#d62728", "system"),
        (c.iowait, "#ff7f0e", "iowait"),
        (c.idle, "#e6e9ef", "idle"),
        (c.other, "#7f7f7f", "other"),
    ] {
        if share > 0.0 {
            let _ = write!(
                h,
                "<span style=\"width:{:.2}%;background:{col}\" title=\"{name} {}%\"></span>",
                share * 100.0,
                pct(share)
            );
        }
    }
    h.push_str("</div><table class=\"kv\">");
    let _ = write!(
        h,
        "<tr><td>/proc/stat</td><td>user {} %, system {} %, iowait {} %, idle {} % of \
         {} CPU{} over {:.3} s</td></tr>",
        pct(c.user),
        pct(c.system),
        pct(c.iowait),
        pct(c.idle),
        x.cpus,
        if x.cpus == 1 { "" } else { "s" },
        x.seconds
    );
    for (k, v) in &x.figures {
        let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(v));
    }
    if let Some(f) = &x.file {
        let _ = write!(
            h,
            "<tr><td>recording</td><td><span class=\"cmd\">{}</span></td></tr>",
            esc(f)
        );
    }
    h.push_str("</table>");
    for t in &x.tables {
        let _ = write!(h, "<h3>{}</h3>", esc(&t.title));
        if !t.note.is_empty() {
            let _ = write!(h, "<p class=\"note\">{}</p>", esc(&t.note));
        }
        if t.rows.is_empty() {
            let _ = write!(h, "<p>{}</p>", esc(&t.empty));
            continue;
        }
        h.push_str("<table><tr>");
        for (i, c) in t.header.iter().enumerate() {
            let k = if i == 0 { " class=\"k\"" } else { "" };
            let _ = write!(h, "<th{k}>{}</th>", esc(c));
        }
        h.push_str("</tr>");
        for r in &t.rows {
            h.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let k = if i == 0 { " class=\"k\"" } else { "" };
                let _ = write!(h, "<td{k}>{}</td>", esc(c));
            }
            h.push_str("</tr>");
        }
        h.push_str("</table>");
    }
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpus: usize, seconds: f64) -> ScaleRun {
        ScaleRun {
            cpus,
            seconds,
            speedup: 1.0 / seconds,
            verdict: "CPU-busy".into(),
            evidence: "CPU busy <50 %>".into(),
            tables: vec![RunTable {
                title: "profile".into(),
                header: vec!["symbol".into(), "share %".into()],
                rows: vec![vec!["hot_loop".into(), "97.0".into()]],
                ..RunTable::default()
            }],
            ..ScaleRun::default()
        }
    }

    #[test]
    fn one_section_per_run_and_the_plot() {
        let r = ScaleReport {
            command: vec!["spin".into()],
            how: "kstate record".into(),
            runs: vec![run(1, 1.0), run(2, 0.5)],
        };
        let h = render(&r);
        assert_eq!(h.matches("<section id=\"cpus").count(), 2);
        assert!(h.contains("id=\"cpus1\"") && h.contains("id=\"cpus2\""));
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains(">CPUs</text>"));
        // Escaped, and no external reference.
        assert!(h.contains("CPU busy &lt;50 %&gt;"));
        assert!(!h.contains("http://") || h.contains("xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(!h.contains("<script"));
    }
}
