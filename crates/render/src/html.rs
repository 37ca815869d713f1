//! The HTML report: one self-contained file (inline CSS and SVG, no script, no external
//! request) that opens offline in any browser. A summary (what ran, when, losses, the
//! ranked findings), then one section per analyzer that applies, each with its charts on
//! the shared time axis (same size and margins, so windows line up across sections), its
//! table and notes, then the memory series and the analyzers left out.

use std::fmt::Write as _;

use kstate_analyze::analyzer::Cell;
use kstate_analyze::filter::fmt_secs;

use kstate_views::findings::Finding;
use kstate_views::survey::{Analysis, Survey};

use crate::charts;
use crate::svg::{self, esc, Size};

/// What `kstate run` adds to a report: the command's own figures.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    pub command: Vec<String>,
    pub wall_s: f64,
    /// Shares of CPU time over the run from /proc/stat: user, system, idle, iowait.
    pub cpu: Option<CpuSplit>,
    pub exit: Option<String>,
}

/// Shares of CPU time over the run (/proc/stat, read by kstate_record::cpu_time).
pub use kstate_record::cpu_time::CpuSplit;

/// Rows shown per analyzer table.
const TABLE_ROWS: usize = 20;
/// Keys drawn per chart.
const CHART_KEYS: usize = 5;

pub(crate) const CSS: &str = r#"
body{font-family:"DejaVu Sans",Verdana,Arial,sans-serif;margin:0;background:#f6f7f9;color:#1d2430;font-size:15px;line-height:1.45}
main{max-width:1100px;margin:0 auto;padding:18px 28px 60px}
h1{font-size:26px;margin:8px 0 2px}
h2{font-size:21px;margin:0 0 6px;border-bottom:2px solid #d8dde6;padding-bottom:4px}
h3{font-size:17px;margin:16px 0 6px}
section{background:#fff;border:1px solid #dfe3ea;border-radius:6px;padding:14px 20px;margin:18px 0}
.cmd{font-family:"DejaVu Sans Mono",monospace;background:#eef1f5;padding:2px 6px;border-radius:3px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13.5px}
td,th{padding:3px 10px;border-bottom:1px solid #e6e9ef;text-align:right;white-space:nowrap}
th{background:#f0f2f6;font-weight:600}
td.k,th.k{text-align:left;max-width:420px;overflow:hidden;text-overflow:ellipsis}
table.kv td{text-align:left;border:none;padding:2px 12px 2px 0;white-space:normal}
table.kv td:first-child{color:#5a6475;width:150px}
ol.findings{padding-left:0;list-style:none;margin:6px 0}
ol.findings li{display:flex;gap:12px;align-items:baseline;padding:5px 0;border-bottom:1px solid #eef0f4}
.share{flex:0 0 56px;text-align:right;font-weight:700;color:#b03a2e}
.bar{flex:0 0 90px;height:9px;background:#eef0f4;border-radius:4px;overflow:hidden;align-self:center}
.bar span{display:block;height:100%;background:#e07b53}
.lost{color:#b03a2e;font-weight:700}
.ok{color:#2e7d32}
.note{color:#5a6475;font-size:13.5px}
figure{margin:10px 0}
figure svg{width:100%;height:auto;display:block;border:1px solid #e6e9ef}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:14px}
nav a{margin-right:14px}
a{color:#1f5fa8}
.cpu{display:flex;height:16px;width:420px;border-radius:3px;overflow:hidden;border:1px solid #ccd}
.cpu span{display:block;height:100%}
"#;

/// The whole report as one HTML document.
pub fn render(r: &Survey, run: Option<&RunInfo>) -> String {
    let mut h = String::with_capacity(1 << 20);
    let what = run
        .map(|x| x.command.join(" "))
        .filter(|c| !c.is_empty())
        .or_else(|| {
            r.recording
                .as_ref()
                .map(|x| x.workload.join(" "))
                .filter(|w| !w.is_empty())
        })
        .unwrap_or_else(|| r.file.clone());
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>kstate report: {}</title><style>{CSS}</style></head><body><main>\n",
        esc(&what)
    );
    let _ = writeln!(
        h,
        "<h1>kstate report</h1><p><span class=\"cmd\">{}</span></p>",
        esc(&what)
    );
    h.push_str(&crate::damage::html(&r.damage));
    summary(&mut h, r, run);
    let bands = charts::bands(r, 3);
    let size = svg::DEFAULT_SIZE;
    for a in &r.analyses {
        section(&mut h, ("", ""), r, a, &bands, size);
    }
    if !r.snapshots.is_empty() {
        let _ = writeln!(
            h,
            "<section id=\"sysinfo\"><h2>memory</h2><p class=\"note\">/proc/meminfo as \
             recorded every {} ms.</p><figure>{}</figure></section>",
            r.recording.as_ref().map_or(0, |x| x.sysinfo_interval_ms),
            svg::time_chart(
                &charts::memory_chart(&r.snapshots, &r.axis, bands.clone()),
                size
            )
        );
    }
    watch_log(&mut h, ("", ""), r);
    if !r.skipped.is_empty() {
        h.push_str("<section id=\"skipped\"><h2>analyzers left out</h2><table class=\"kv\">");
        for s in &r.skipped {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{} <span class=\"note\">(record with <span class=\"cmd\">-e {}</span>)</span></td></tr>",
                esc(s.info.name),
                esc(&s.why),
                esc(s.info.preset)
            );
        }
        h.push_str("</table></section>\n");
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">Made by kstate {} from {}.</p></main></body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(&r.file)
    );
    h
}

fn summary(h: &mut String, r: &Survey, run: Option<&RunInfo>) {
    h.push_str("<section id=\"summary\"><h2>summary</h2><table class=\"kv\">");
    let mut kv = |k: &str, v: String| {
        let _ = write!(h, "<tr><td>{}</td><td>{v}</td></tr>", esc(k));
    };
    if let Some(rec) = &r.recording {
        let scope = format!(
            " ({}{})",
            if rec.pids.is_empty() {
                "system-wide"
            } else {
                "selected processes"
            },
            if rec.events.is_empty() {
                String::new()
            } else {
                format!("; {} events enabled", rec.events.len())
            }
        );
        recording_rows(&mut kv, rec, &scope);
    }
    kv("file", esc(&r.file));
    kv(
        "time",
        format!(
            "{} .. {} (trace clock), {:.3} s",
            fmt_secs(r.axis.t0),
            fmt_secs(r.axis.t1),
            r.axis.wall_ns() as f64 / 1e9
        ),
    );
    if let Some(run) = run {
        kv("wall time", format!("{:.3} s", run.wall_s));
        if let Some(c) = run.cpu {
            let seg = |v: f64, col: &str, name: &str| {
                format!(
                    "<span style=\"width:{:.2}%;background:{col}\" title=\"{name} {:.1}%\"></span>",
                    v * 100.0,
                    v * 100.0
                )
            };
            kv(
                "CPU (all CPUs)",
                format!(
                    "user {:.1}%, system {:.1}%, idle {:.1}%, iowait {:.1}%{}<div class=\"cpu\">{}{}{}{}</div>",
                    c.user * 100.0,
                    c.system * 100.0,
                    c.idle * 100.0,
                    c.iowait * 100.0,
                    if c.other > 0.0005 {
                        format!(", other {:.1}%", c.other * 100.0)
                    } else {
                        String::new()
                    },
                    seg(c.user, "#4e79a7", "user"),
                    seg(c.system, "#e15759", "system"),
                    seg(c.iowait, "#f28e2b", "iowait"),
                    seg(c.idle, "#d9dde3", "idle"),
                ),
            );
        }
        if let Some(e) = &run.exit {
            kv("command exit", esc(e));
        }
    }
    kv("events", r.events.to_string());
    kv("lost events", lost_html(&r.lost));
    if let Some(w) = &r.workload {
        kv(
            "command's threads",
            format!(
                "{} (its process and what it forked; findings count only theirs where an analyzer sees them)",
                w.len()
            ),
        );
    }
    h.push_str("</table>");
    h.push_str("<h3>findings</h3>");
    if r.findings.is_empty() {
        h.push_str("<p class=\"note\">none: no analyzer had samples in this recording.</p>");
    } else {
        h.push_str("<ol class=\"findings\">");
        for f in r.findings.iter().take(12) {
            let _ = write!(
                h,
                "<li><span class=\"share\">{:.1}%</span><span class=\"bar\"><span style=\"width:{:.1}%\"></span></span><span>{} <a href=\"#an-{}\">&#8595;</a></span></li>",
                f.share * 100.0,
                (f.share * 100.0).min(100.0),
                esc(&f.text),
                esc(f.analyzer)
            );
        }
        h.push_str("</ol><p class=\"note\">Share: the part of the recording's wall time during which at least one of the finding's intervals was in progress (or the level was high). Shaded bands in the charts are the windows of the top findings.</p>");
    }
    h.push_str("<nav>");
    for a in &r.analyses {
        let _ = write!(h, "<a href=\"#an-{0}\">{0}</a>", esc(a.info.name));
    }
    if !r.snapshots.is_empty() {
        h.push_str("<a href=\"#sysinfo\">memory</a>");
    }
    h.push_str("</nav></section>\n");
}

/// The WATCH_LOG entries, on the report's time axis.
/// The watch log's section; `id` and `who` (empty for one recording) tell one machine's
/// apart from another's, as in [`section`].
pub(crate) fn watch_log(h: &mut String, (id, who): (&str, &str), r: &Survey) {
    if r.watch_log.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"{id}watch-log\"><h2>{}watch log</h2><p class=\"note\">What kstate \
         watch did and saw while recording: alarms, escalations, shedding, losses; seconds \
         from the start of the time axis.</p><table class=\"kv\">",
        esc(who)
    );
    for e in &r.watch_log {
        let _ = write!(
            h,
            "<tr><td>{:.3} s</td><td>{}</td><td>{}</td></tr>",
            e.ts.saturating_sub(r.axis.t0) as f64 / 1e9,
            esc(&e.kind),
            esc(&e.text)
        );
    }
    h.push_str("</table></section>\n");
}

pub(crate) fn lost_html(lost: &std::collections::BTreeMap<u32, Option<u64>>) -> String {
    let any = lost.values().any(|l| *l != Some(0));
    if !any {
        return "<span class=\"ok\">none</span>".into();
    }
    let per: Vec<String> = lost
        .iter()
        .filter(|(_, l)| **l != Some(0))
        .map(|(c, l)| match l {
            Some(n) => format!("cpu{c}: {n}"),
            None => format!("cpu{c}: uncounted"),
        })
        .collect();
    format!("<span class=\"lost\">{}</span>", esc(&per.join(", ")))
}

/// A recording's "command" (if it ran one) and "recorded" rows: when, where and by what,
/// then `more`.
pub(crate) fn recording_rows(
    kv: &mut impl FnMut(&str, String),
    rec: &kstate_format::sections::Recording,
    more: &str,
) {
    if !rec.workload.is_empty() {
        kv(
            "command",
            format!(
                "<span class=\"cmd\">{}</span>",
                esc(&rec.workload.join(" "))
            ),
        );
    }
    kv(
        "recorded",
        format!(
            "{} on {} with {}{more}",
            rec.wall_offset_ns
                .and_then(|w| utc(rec.start_ts as i128 + w as i128))
                .unwrap_or_else(|| "(wall-clock time unknown)".into()),
            esc(&rec.hostname),
            esc(&rec.tool),
        ),
    );
}

pub(crate) fn utc(ns: i128) -> Option<String> {
    const NS: i128 = 1_000_000_000;
    let secs = ns.div_euclid(NS);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    (0..=9999).contains(&year).then(|| {
        format!(
            "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
            tod / 3600,
            tod / 60 % 60,
            tod % 60
        )
    })
}

/// One analyzer's section; its id is `{id}an-NAME` and its heading starts with `who`
/// (both "" alone; the machine's prefix and name in a report of a host and its guests).
pub(crate) fn section(
    h: &mut String,
    (id, who): (&str, &str),
    r: &Survey,
    a: &Analysis,
    bands: &[(f64, f64, String)],
    size: Size,
) {
    let o = &a.stat;
    let info = a.info;
    let _ = write!(
        h,
        "<section id=\"{2}an-{0}\"><h2>{3}{0}: {1}</h2>",
        esc(info.name),
        esc(info.about),
        esc(id),
        esc(who)
    );
    let c = &o.counts;
    let _ = write!(
        h,
        "<p class=\"note\">key: {}; value: {}; {} samples ({} broken by a loss, {} unmatched, {} open at the end); lost events in this time: {}</p>",
        esc(o.by),
        esc(info.value),
        c.selected,
        c.broken_by_loss,
        c.unmatched,
        c.open_at_end,
        lost_html(&o.lost)
    );
    let mine: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.analyzer == info.name)
        .take(4)
        .collect();
    if !mine.is_empty() {
        h.push_str("<ul>");
        for f in mine {
            let _ = write!(h, "<li>{:.1}%: {}</li>", f.share * 100.0, esc(&f.text));
        }
        h.push_str("</ul>");
    }
    let has_dur = !o.rows.is_empty();
    if has_dur {
        let chart = charts::log_chart(a, None, &r.axis, &[], CHART_KEYS, bands.to_vec());
        let _ = write!(h, "<figure>{}</figure>", svg::time_chart(&chart, size));
    }
    if charts::has_levels(a) {
        let chart = charts::level_chart(a, &r.axis, CHART_KEYS, bands.to_vec());
        let _ = write!(h, "<figure>{}</figure>", svg::time_chart(&chart, size));
    }
    if has_dur {
        let unit = info.unit;
        let flag = info.flag_column;
        h.push_str("<table><tr><th class=\"k\">");
        h.push_str(&esc(o.by));
        h.push_str("</th><th>count</th><th>total</th><th>avg</th><th>min</th><th>max</th><th>p50</th><th>p99</th>");
        if let Some(f) = flag {
            let _ = write!(h, "<th>{}</th>", esc(f));
        }
        h.push_str("</tr>");
        for row in o.rows.iter().take(TABLE_ROWS) {
            let g = &row.agg;
            let _ = write!(
                h,
                "<tr><td class=\"k\" title=\"{0}\">{0}</td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>{5}</td><td>{6}</td><td>{7}</td>",
                esc(&row.key),
                g.count,
                unit.fmt(g.total),
                unit.fmt(g.avg()),
                unit.fmt(g.min()),
                unit.fmt(g.max),
                unit.fmt(g.percentile(50.0)),
                unit.fmt(g.percentile(99.0))
            );
            if flag.is_some() {
                let _ = write!(h, "<td>{}</td>", g.flagged);
            }
            h.push_str("</tr>");
        }
        h.push_str("</table>");
        if o.rows.len() > TABLE_ROWS {
            let _ = write!(
                h,
                "<p class=\"note\">{} more keys in {}.csv.</p>",
                o.rows.len() - TABLE_ROWS,
                esc(info.name)
            );
        }
        let small = Size { w: 640, h: 420 };
        let _ = write!(
            h,
            "<div class=\"pair\"><figure>{}</figure><figure>{}</figure></div>",
            svg::stat_chart(&charts::stat_chart(a, 12), small),
            svg::dist_chart(&charts::dist_chart(a, 3), small)
        );
    }
    for t in &o.tables {
        let _ = write!(h, "<h3>{}</h3><table><tr>", esc(&t.title));
        for c in &t.columns {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr>");
        for row in t.rows.iter().take(64) {
            h.push_str("<tr>");
            for c in row {
                let v = match c {
                    Cell::Int(n) => n.to_string(),
                    Cell::Float(f) => format!("{f:.3}"),
                    Cell::Text(t) => t.clone(),
                };
                let _ = write!(h, "<td>{}</td>", esc(&v));
            }
            h.push_str("</tr>");
        }
        h.push_str("</table>");
    }
    for n in &o.notes {
        let _ = write!(h, "<p class=\"note\">note: {}</p>", esc(n));
    }
    for e in &o.errors {
        let _ = write!(h, "<p class=\"lost\">error: {}</p>", esc(&e.to_string()));
    }
    h.push_str("</section>\n");
}
