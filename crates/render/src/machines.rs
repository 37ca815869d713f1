//! The HTML report of a host and its guests ([`kstate_views::machines`]): one file, as
//! the one-recording report. A summary of the machines (each one's events and first and
//! last event on the host's clock) and the findings of all of them ranked together; the
//! shared timeline (every machine's overview lanes on one time axis); then one part per
//! machine with its analyses, whose charts all use the shared axis, so a moment sits at
//! the same x in the host's charts and in each guest's.

use std::fmt::Write as _;

use kstate_analyze::filter::fmt_secs;
use kstate_views::lanes::{Lane, Overview};
use kstate_views::machines::{Machine, Machines};

use crate::charts;
use crate::html::{lost_html, recording_rows, section, watch_log, CSS};
use crate::svg::{self, esc, FONT_FAMILY};

/// Width of the timeline's drawing and of its label column, px.
const W: f64 = 1040.0;
const LABEL: f64 = 170.0;
/// Each machine's colour on the timeline (host first).
const COLOURS: [&str; 4] = ["#3f6fb5", "#d9822b", "#3a9a5b", "#8e5bb5"];

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// The element id prefix of machine `i`'s sections.
fn prefix(i: usize) -> String {
    format!("m{i}-")
}

/// The whole report as one HTML document.
pub fn render(m: &Machines) -> String {
    let mut h = String::with_capacity(1 << 20);
    let guests = m.machines.len().saturating_sub(1);
    let title = format!(
        "{} and {guests} guest{}",
        m.machines.first().map_or("", |x| x.survey.file.as_str()),
        if guests == 1 { "" } else { "s" }
    );
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>kstate report: {0}</title><style>{CSS}{MORE_CSS}</style></head><body><main>\n\
         <h1>kstate report: a host and its guests</h1><p><span class=\"cmd\">{0}</span></p>\n",
        esc(&title)
    );
    let damage: Vec<_> = m
        .machines
        .iter()
        .flat_map(|x| x.survey.damage.iter().cloned())
        .collect();
    h.push_str(&crate::damage::html(&damage));
    summary(&mut h, m);
    timeline(&mut h, m);
    for (i, mc) in m.machines.iter().enumerate() {
        machine(&mut h, i, mc);
    }
    let files: Vec<&str> = m.machines.iter().map(|x| x.survey.file.as_str()).collect();
    let _ = writeln!(
        h,
        "<p class=\"note\">Made by kstate {} from {}.</p></main></body></html>",
        env!("CARGO_PKG_VERSION"),
        esc(&files.join(", "))
    );
    h
}

const MORE_CSS: &str = r#"
.machine-head{border-left:6px solid var(--c);background:#fff}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
"#;

/// Seconds on the host's clock, as trace-cmd prints them.
fn host_secs(ts: Option<u64>) -> String {
    ts.map_or_else(|| "-".into(), fmt_secs)
}

fn summary(h: &mut String, m: &Machines) {
    h.push_str("<section id=\"summary\"><h2>summary</h2>");
    let _ = write!(
        h,
        "<p class=\"note\">The guests' timestamps are mapped to the host's clock by their \
         TIME_SHIFT option, as <span class=\"cmd\">trace-cmd report -i host -i guest</span> \
         does; all times below are the host's. Shared time axis: {} .. {} ({:.3} s).</p>",
        fmt_secs(m.axis.t0),
        fmt_secs(m.axis.t1),
        m.axis.wall_ns() as f64 / 1e9
    );
    h.push_str(
        "<table id=\"machines\"><tr><th class=\"k\">machine</th><th class=\"k\">file</th>\
         <th>events</th><th>first event (s)</th><th>last event (s)</th><th class=\"k\">lost events</th></tr>",
    );
    for (i, mc) in m.machines.iter().enumerate() {
        let r = &mc.survey;
        let _ = write!(
            h,
            "<tr data-machine=\"{role}\" data-events=\"{ev}\" data-first-ns=\"{f}\" data-last-ns=\"{l}\">\
             <td class=\"k\"><span class=\"sw\" style=\"background:{c}\"></span><a href=\"#m{i}\">{role}</a></td>\
             <td class=\"k\" title=\"{file}\">{file}</td><td>{ev}</td><td>{fs}</td><td>{ls}</td><td class=\"k\">{lost}</td></tr>",
            role = esc(&mc.role.to_string()),
            ev = r.events,
            f = r.first_ts.map_or(String::new(), |t| t.to_string()),
            l = r.last_ts.map_or(String::new(), |t| t.to_string()),
            c = colour(i),
            file = esc(&r.file),
            fs = host_secs(r.first_ts),
            ls = host_secs(r.last_ts),
            lost = lost_html(&r.lost),
        );
    }
    h.push_str("</table><h3>findings</h3>");
    if m.findings.is_empty() {
        h.push_str("<p class=\"note\">none: no analyzer had samples in these recordings.</p>");
    } else {
        h.push_str("<ol class=\"findings\">");
        for f in m.findings.iter().take(12) {
            let x = &f.finding;
            let _ = write!(
                h,
                "<li data-machine=\"{}\"><span class=\"share\">{:.1}%</span><span class=\"bar\"><span style=\"width:{:.1}%\"></span></span><span>{} <a href=\"#m{}-an-{}\">&#8595;</a></span></li>",
                esc(&m.machines[f.machine].role.to_string()),
                x.share * 100.0,
                (x.share * 100.0).min(100.0),
                esc(&x.text),
                f.machine,
                esc(x.analyzer)
            );
        }
        h.push_str(
            "</ol><p class=\"note\">Share: the part of the shared time axis during which at \
             least one of the finding's intervals was in progress on that machine (or the \
             level was high).</p>",
        );
    }
    h.push_str("<nav><a href=\"#timeline\">shared timeline</a>");
    for (i, mc) in m.machines.iter().enumerate() {
        let _ = write!(h, "<a href=\"#m{i}\">{}</a>", esc(&mc.role.to_string()));
    }
    h.push_str("</nav></section>\n");
}

/// One row of the timeline: a label, and per bin a value drawn as a bar (`level`: height
/// against the peak) or as a shade (busy share).
struct Row<'a> {
    label: String,
    machine: usize,
    kind: RowKind<'a>,
}

enum RowKind<'a> {
    /// From the first to the last event.
    Span(Option<u64>, Option<u64>),
    Busy(&'a Lane),
    Level(&'a Lane),
    Calls(Vec<f64>, u64),
    Lost(&'a Lane),
    Note(String),
}

fn rows_of(i: usize, mc: &Machine) -> Vec<Row<'_>> {
    let role = mc.role.to_string();
    let row = |label: String, kind| Row {
        label,
        machine: i,
        kind,
    };
    let mut v = vec![row(
        format!("{role}: events"),
        RowKind::Span(mc.survey.first_ts, mc.survey.last_ts),
    )];
    let o: &Overview = match &mc.lanes {
        Ok(o) => o,
        Err(e) => {
            v.push(row(format!("{role}: no lanes"), RowKind::Note(e.clone())));
            return v;
        }
    };
    for l in &o.busy {
        v.push(row(format!("{role} {} busy", l.name), RowKind::Busy(l)));
    }
    for l in &o.runq {
        v.push(row(format!("{role} {} queued", l.name), RowKind::Level(l)));
    }
    for l in &o.blk {
        v.push(row(
            format!("{role} {} in flight", l.name),
            RowKind::Level(l),
        ));
    }
    if let Some(s) = &o.syscalls {
        let mut per = vec![0.0; o.span.bins];
        for &(b, _, n) in &s.cells {
            if let Some(x) = per.get_mut(b as usize) {
                *x += n as f64;
            }
        }
        v.push(row(
            format!("{role} system calls"),
            RowKind::Calls(per, s.calls),
        ));
    }
    for l in &o.lost {
        v.push(row(format!("{role} {} lost", l.name), RowKind::Lost(l)));
    }
    v
}

fn row_height(k: &RowKind) -> f64 {
    match k {
        RowKind::Span(..) | RowKind::Note(_) => 12.0,
        RowKind::Busy(_) | RowKind::Lost(_) => 14.0,
        RowKind::Level(_) => 22.0,
        RowKind::Calls(..) => 30.0,
    }
}

/// Every machine's lanes on the shared axis, as one SVG.
fn timeline(h: &mut String, m: &Machines) {
    let rows: Vec<Row> = m
        .machines
        .iter()
        .enumerate()
        .flat_map(|(i, mc)| rows_of(i, mc))
        .collect();
    let axis_h = 24.0;
    let gap = 3.0;
    let height = axis_h + rows.iter().map(|r| row_height(&r.kind) + gap).sum::<f64>() + 8.0;
    let x0 = LABEL;
    let x1 = W - 10.0;
    let ax = m.axis;
    let x_of =
        |ts: u64| x0 + (ax.secs(ts) / (ax.wall_ns() as f64 / 1e9)).clamp(0.0, 1.0) * (x1 - x0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" viewBox=\"0 0 {W} {height}\" font-family=\"{FONT_FAMILY}\" font-size=\"11\" role=\"img\" aria-label=\"the host's and the guests' lanes on one time axis\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
    );
    // Time ticks: seconds from the axis's start.
    let secs = ax.wall_ns() as f64 / 1e9;
    let step = nice_step(secs / 8.0);
    let mut t = 0.0;
    while t <= secs + step * 1e-9 {
        let x = x0 + t / secs * (x1 - x0);
        if x > x1 - 24.0 {
            break;
        }
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{height:.1}\" stroke=\"#e3e7ed\"/><text x=\"{:.1}\" y=\"14\" fill=\"#5d6878\">{}</text>",
            axis_h - 4.0,
            x + 2.0,
            fmt_tick(t, step)
        );
        t += step;
    }
    let _ = write!(
        s,
        "<text x=\"4\" y=\"14\" fill=\"#5d6878\">s from {}</text>",
        fmt_secs(ax.t0)
    );
    let mut y = axis_h;
    for r in &rows {
        let rh = row_height(&r.kind);
        let c = colour(r.machine);
        let _ = write!(
            s,
            "<g class=\"lane\" data-machine=\"{}\" data-lane=\"{}\"><text x=\"4\" y=\"{:.1}\" fill=\"#1d2430\">{}</text>",
            r.machine,
            esc(&r.label),
            y + rh.min(12.0) - 1.0,
            esc(&r.label)
        );
        if !matches!(r.kind, RowKind::Note(_)) {
            let _ = write!(
                s,
                "<rect x=\"{x0}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{rh}\" fill=\"#f3f5f8\"/>",
                x1 - x0
            );
        }
        let bars = |s: &mut String, values: &[f64], top: f64, fill: &str, shade: bool| {
            let bw = (x1 - x0) / values.len().max(1) as f64;
            for (i, &v) in values.iter().enumerate() {
                if v <= 0.0 {
                    continue;
                }
                let x = x0 + i as f64 * bw;
                if shade {
                    let _ = write!(
                        s,
                        "<rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{rh}\" fill=\"{fill}\" fill-opacity=\"{:.2}\"/>",
                        bw.max(0.6),
                        (v / top).clamp(0.08, 1.0)
                    );
                } else {
                    let bh = ((v / top).min(1.0) * rh).max(1.0);
                    let _ = write!(
                        s,
                        "<rect x=\"{x:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{bh:.1}\" fill=\"{fill}\"/>",
                        y + rh - bh,
                        bw.max(0.6)
                    );
                }
            }
        };
        match &r.kind {
            RowKind::Span(a, b) => {
                if let (Some(a), Some(b)) = (a, b) {
                    let (xa, xb) = (x_of(*a), x_of(*b));
                    let _ = write!(
                        s,
                        "<rect class=\"span\" data-first-ns=\"{a}\" data-last-ns=\"{b}\" x=\"{xa:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{c}\"><title>{} .. {}</title></rect>",
                        y + 2.0,
                        (xb - xa).max(1.0),
                        rh - 4.0,
                        fmt_secs(*a),
                        fmt_secs(*b)
                    );
                }
            }
            RowKind::Busy(l) => bars(&mut s, &l.values, 1.0, c, true),
            RowKind::Level(l) => {
                bars(&mut s, &l.values, l.peak.0.max(1.0), c, false);
                let _ = write!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#5d6878\" font-size=\"9\" text-anchor=\"end\">peak {}</text>",
                    x0 - 4.0,
                    y + rh - 2.0,
                    l.peak.0
                );
            }
            RowKind::Calls(per, calls) => {
                let top = per.iter().cloned().fold(1.0, f64::max);
                bars(&mut s, per, top, c, false);
                let _ = write!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#5d6878\" font-size=\"9\" text-anchor=\"end\">{calls} calls</text>",
                    x0 - 4.0,
                    y + rh - 2.0
                );
            }
            RowKind::Lost(l) => bars(&mut s, &l.values, 1.0, "#c0392b", false),
            RowKind::Note(n) => {
                let _ = write!(
                    s,
                    "<text x=\"{x0}\" y=\"{:.1}\" fill=\"#5d6878\" font-style=\"italic\">{}</text>",
                    y + 10.0,
                    esc(n)
                );
            }
        }
        s.push_str("</g>");
        y += rh + gap;
    }
    s.push_str("</svg>");
    // What a lane needs but the recording lacks: the analyzer's name here, its whole
    // reason on hover.
    let missing: Vec<String> = m
        .machines
        .iter()
        .filter_map(|mc| mc.lanes.as_ref().ok().map(|o| (mc.role, o)))
        .flat_map(|(role, o)| {
            o.missing.iter().map(move |why| {
                let name = why.split(':').next().unwrap_or(why);
                format!("<span title=\"{}\">{role} {}</span>", esc(why), esc(name))
            })
        })
        .collect();
    let _ = writeln!(
        h,
        "<section id=\"timeline\"><h2>shared timeline</h2><p class=\"note\">Every machine's \
         overview on the host's clock: events (first to last), CPU busy per CPU (shade: share \
         of the bin), run-queue length per CPU and block requests in flight per device \
         (bars against the lane's peak), system calls started per bin, events lost. {} bins \
         of {}.</p><figure>{s}</figure>{}</section>",
        kstate_views::timeline::BINS,
        fmt_dur_short(ax.bin_ns()),
        if missing.is_empty() {
            String::new()
        } else {
            format!(
                "<p class=\"note\">not shown (not recorded; hover for why): {}</p>",
                missing.join(" \u{b7} ")
            )
        }
    );
}

fn fmt_dur_short(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.3} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

fn nice_step(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    let m = x / p;
    (if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    }) * p
}

fn fmt_tick(t: f64, step: f64) -> String {
    let d = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{t:.d$}")
}

/// One machine's part: its facts, then its analyses on the shared axis.
fn machine(h: &mut String, i: usize, mc: &Machine) {
    let r = &mc.survey;
    let _ = write!(
        h,
        "<section id=\"m{i}\" class=\"machine-head\" style=\"--c:{}\" data-machine=\"{}\"><h2>{}: {}</h2><table class=\"kv\">",
        colour(i),
        esc(&mc.role.to_string()),
        esc(&mc.role.to_string()),
        esc(&r.file)
    );
    let mut kv = |k: &str, v: String| {
        let _ = write!(h, "<tr><td>{}</td><td>{v}</td></tr>", esc(k));
    };
    if let Some(rec) = &r.recording {
        recording_rows(&mut kv, rec, "");
    }
    kv("file", esc(&r.file));
    kv("events", r.events.to_string());
    kv(
        "first, last event",
        format!(
            "{} .. {} (host clock)",
            host_secs(r.first_ts),
            host_secs(r.last_ts)
        ),
    );
    kv("lost events", lost_html(&r.lost));
    h.push_str("</table><nav>");
    for a in &r.analyses {
        let _ = write!(
            h,
            "<a href=\"#{}an-{1}\">{1}</a>",
            prefix(i),
            esc(a.info.name)
        );
    }
    h.push_str("</nav></section>\n");
    let bands = charts::bands(r, 3);
    let size = svg::DEFAULT_SIZE;
    let id = prefix(i);
    let who = format!("{} \u{b7} ", mc.role);
    for a in &r.analyses {
        section(h, (&id, &who), r, a, &bands, size);
    }
    if !r.snapshots.is_empty() {
        let _ = writeln!(
            h,
            "<section id=\"{id}sysinfo\"><h2>{}: memory</h2><figure>{}</figure></section>",
            esc(&mc.role.to_string()),
            svg::time_chart(
                &charts::memory_chart(&r.snapshots, &r.axis, bands.clone()),
                size
            )
        );
    }
    watch_log(h, (&id, &who), r);
    if !r.skipped.is_empty() {
        let _ = write!(
            h,
            "<section id=\"{id}skipped\"><h2>{}: analyzers left out</h2><table class=\"kv\">",
            esc(&mc.role.to_string())
        );
        for s in &r.skipped {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(s.info.name),
                esc(&s.why)
            );
        }
        h.push_str("</table></section>\n");
    }
}
