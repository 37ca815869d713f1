//! Hand-written SVG charts, the four LKST plot kinds: a time series (one or two value axes),
//! a stat chart (bars = count, lines = avg/max/min per key), a distribution histogram,
//! and the memory-usage series. No plotting library: a chart is a few hundred lines of
//! text, the same text the HTML report inlines and the PNG output rasterizes.
//!
//! Every time-series chart of one size puts its plot area at the same place (fixed
//! margins on both sides, whether or not there is a right axis), so charts stacked in the
//! report share their x pixels: a window in one lines up with the same window in the next.

use std::fmt::Write as _;

/// The font charts name; the PNG renderer embeds this face, browsers fall back to theirs.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// Default chart size (16:9, readable when shown at 100 %).
pub const DEFAULT_SIZE: Size = Size { w: 960, h: 540 };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub w: u32,
    pub h: u32,
}

impl Size {
    /// `960x540`.
    pub fn parse(s: &str) -> Result<Size, String> {
        let (w, h) = s
            .split_once(['x', 'X'])
            .ok_or_else(|| format!("size {s:?}: expected WIDTHxHEIGHT, e.g. 960x540"))?;
        let p = |v: &str| -> Result<u32, String> {
            let n: u32 = v
                .trim()
                .parse()
                .map_err(|_| format!("size {s:?}: {v:?} is not a whole number of pixels"))?;
            if !(200..=8000).contains(&n) {
                return Err(format!("size {s:?}: each side must be 200 to 8000 pixels"));
            }
            Ok(n)
        };
        Ok(Size { w: p(w)?, h: p(h)? })
    }
}

/// What values on an axis are: chooses tick labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// Nanoseconds, labelled 10us, 1.5ms, 2s.
    Ns,
    /// Plain numbers, labelled 1.5k, 2M.
    Plain,
    /// Bytes, labelled in KiB/MiB/GiB.
    Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

/// One value axis.
#[derive(Debug, Clone)]
pub struct Axis {
    /// e.g. "syscall duration".
    pub label: String,
    pub kind: ValueKind,
    pub scale: Scale,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A dot per point.
    Points,
    /// Points joined by straight lines.
    Line,
    /// A level held until the next point.
    Step,
}

/// One named series of (x, y) points; x is seconds for time series.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
}

/// A time series chart: x is seconds from the start of the recording.
#[derive(Debug, Clone)]
pub struct TimeChart {
    pub title: String,
    /// The x range in seconds; every chart of a report uses the same.
    pub x: (f64, f64),
    pub left: Axis,
    pub left_series: Vec<Series>,
    /// A second value axis on the right (twin axes).
    pub right: Option<(Axis, Vec<Series>)>,
    /// Shaded windows (from, to, label), in seconds.
    pub bands: Vec<(f64, f64, String)>,
}

/// LKST's stat chart: per key, bars = count (left axis), lines = avg/max/min (right axis).
#[derive(Debug, Clone)]
pub struct StatChart {
    pub title: String,
    pub value: Axis,
    /// (key, count, avg, max, min)
    pub rows: Vec<(String, u64, u64, u64, u64)>,
}

/// A histogram: bucket labels on x, one bar group per bucket, one bar per key.
#[derive(Debug, Clone)]
pub struct DistChart {
    pub title: String,
    pub x_label: String,
    pub buckets: Vec<String>,
    /// (key, count per bucket)
    pub keys: Vec<(String, Vec<u64>)>,
}

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// Colour of the series `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

// Layout, in pixels at the default size; scaled for other sizes.
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    font: f64,
}

impl Frame {
    fn new(size: Size) -> Frame {
        let (w, h) = (size.w as f64, size.h as f64);
        // Fonts follow the smaller side so small charts stay legible and large ones are not
        // tiny: 14 px at 960x540.
        let font = (h.min(w * 0.5625) / 540.0 * 14.0).clamp(10.0, 28.0);
        Frame {
            w,
            h,
            left: font * 6.5,
            right: w - font * 6.5,
            top: font * 3.2,
            bottom: h - font * 3.6,
            font,
        }
    }
    fn pw(&self) -> f64 {
        self.right - self.left
    }
    fn ph(&self) -> f64 {
        self.bottom - self.top
    }
}

/// XML text escaping.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

fn header(s: &mut String, f: &Frame, title: &str) {
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT_FAMILY}" font-size="{fs:.1}">"##,
        w = f.w,
        h = f.h,
        fs = f.font
    );
    let _ = write!(s, "<title>{}</title>", esc(title));
    let _ = write!(
        s,
        r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
        f.w, f.h
    );
    let (size, shown) = fit_title(title, f.w - f.left - f.font, f.font);
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="{:.1}" font-weight="bold" fill="#222222">{}</text>"##,
        f.left,
        f.font * 1.8,
        size,
        esc(&shown)
    );
}

/// A chart drawn from a damaged or cut file, marked so under its title (in red, at the
/// right): the image alone must not pass for a picture of the whole recording.
/// `problems` is how many distinct problems the reader skipped.
pub fn mark_damaged(svg: &str, problems: usize, size: Size) -> String {
    let f = Frame::new(size);
    let note = format!(
        "damaged input: {problems} problem{} skipped; the chart shows what could be read",
        if problems == 1 { "" } else { "s" }
    );
    let mark = format!(
        r##"<text class="damaged" x="{:.1}" y="{:.1}" font-size="{:.1}" text-anchor="end" fill="#b00020">{}</text>"##,
        f.right,
        f.font * 2.9,
        f.font * 0.85,
        esc(&note)
    );
    match svg.rfind("</svg>") {
        Some(at) => format!("{}{mark}{}", &svg[..at], &svg[at..]),
        None => format!("{svg}{mark}"),
    }
}

/// The chart title's font size and text for `width` pixels: 1.2x the chart's font,
/// shrunk to 0.9x for a long title, then cut with an ellipsis (the whole title stays in
/// the SVG's <title>, shown on hover).
fn fit_title(title: &str, width: f64, font: f64) -> (f64, String) {
    // Average advance of bold DejaVu Sans, in ems.
    const EM: f64 = 0.62;
    let chars = title.chars().count() as f64;
    let size = (width / (chars * EM)).clamp(font * 0.9, font * 1.2);
    let fits = (width / (size * EM)) as usize;
    if title.chars().count() <= fits {
        return (size, title.to_string());
    }
    let cut: String = title.chars().take(fits.saturating_sub(1)).collect();
    (size, format!("{}…", cut.trim_end()))
}

fn frame_box(s: &mut String, f: &Frame) {
    let _ = write!(
        s,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#444444" stroke-width="1"/>"##,
        f.left,
        f.top,
        f.pw(),
        f.ph()
    );
}

/// "Nice" tick values covering [lo, hi], about `n` of them.
fn linear_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut v = Vec::new();
    let mut t = first;
    while t <= hi + step * 1e-9 {
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    v
}

/// Byte axes tick in whole KiB/MiB/GiB: the unit values are divided by before "nice"
/// numbers are chosen.
fn unit_step(kind: ValueKind, hi: f64) -> f64 {
    if kind != ValueKind::Bytes {
        return 1.0;
    }
    let mut u = 1.0;
    while hi / (u * 1024.0) >= 1.0 && u < 1024f64.powi(4) {
        u *= 1024.0;
    }
    u
}

/// Rounded-up "nice" maximum for a linear axis starting at 0.
fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|v| *v >= max)
        .unwrap_or(10.0 * mag)
}

/// A tick label for value `v` of `kind`.
pub fn fmt_value(v: f64, kind: ValueKind) -> String {
    fn trim(x: f64) -> String {
        let s = if x.abs() >= 100.0 || x == x.trunc() {
            format!("{x:.0}")
        } else if x.abs() >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        };
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
    match kind {
        ValueKind::Ns => {
            let a = v.abs();
            if a == 0.0 {
                "0".into()
            } else if a < 1e3 {
                format!("{}ns", trim(v))
            } else if a < 1e6 {
                format!("{}us", trim(v / 1e3))
            } else if a < 1e9 {
                format!("{}ms", trim(v / 1e6))
            } else {
                format!("{}s", trim(v / 1e9))
            }
        }
        ValueKind::Plain => {
            let a = v.abs();
            if a < 1e4 {
                trim(v)
            } else if a < 1e6 {
                format!("{}k", trim(v / 1e3))
            } else if a < 1e9 {
                format!("{}M", trim(v / 1e6))
            } else {
                format!("{}G", trim(v / 1e9))
            }
        }
        ValueKind::Bytes => {
            let a = v.abs();
            if a < 1024.0 {
                format!("{}B", trim(v))
            } else if a < 1024.0 * 1024.0 {
                format!("{}KiB", trim(v / 1024.0))
            } else if a < 1024.0 * 1024.0 * 1024.0 {
                format!("{}MiB", trim(v / 1024.0 / 1024.0))
            } else {
                format!("{}GiB", trim(v / 1024.0 / 1024.0 / 1024.0))
            }
        }
    }
}

/// Maps values of one axis to pixels.
struct YMap {
    scale: Scale,
    kind: ValueKind,
    lo: f64,
    hi: f64,
    top: f64,
    bottom: f64,
}

impl YMap {
    /// Fits an axis to `values` (positive only for log axes).
    fn fit(axis: &Axis, values: impl Iterator<Item = f64>, f: &Frame) -> YMap {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for v in values {
            if !v.is_finite() || (axis.scale == Scale::Log && v <= 0.0) {
                continue;
            }
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let (lo, hi) = match axis.scale {
            Scale::Log => {
                if !lo.is_finite() {
                    (1.0, 10.0)
                } else {
                    let l = 10f64.powf(lo.log10().floor());
                    let mut h = 10f64.powf(hi.log10().ceil());
                    if h <= l {
                        h = l * 10.0;
                    }
                    (l, h)
                }
            }
            Scale::Linear => {
                let hi = if hi.is_finite() { hi } else { 1.0 };
                let u = unit_step(axis.kind, hi);
                (0.0, nice_max(hi / u) * u)
            }
        };
        YMap {
            scale: axis.scale,
            kind: axis.kind,
            lo,
            hi,
            top: f.top,
            bottom: f.bottom,
        }
    }
    fn y(&self, v: f64) -> f64 {
        let t = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => {
                let v = v.max(self.lo);
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        };
        self.bottom - t.clamp(0.0, 1.0) * (self.bottom - self.top)
    }
    fn ticks(&self) -> Vec<f64> {
        match self.scale {
            Scale::Linear => {
                let u = unit_step(self.kind, self.hi);
                linear_ticks(self.lo / u, self.hi / u, 5)
                    .into_iter()
                    .map(|t| t * u)
                    .collect()
            }
            Scale::Log => {
                let a = self.lo.log10().round() as i32;
                let b = self.hi.log10().round() as i32;
                let every = ((b - a) as usize).div_ceil(8).max(1);
                (a..=b).step_by(every).map(|e| 10f64.powi(e)).collect()
            }
        }
    }
}

/// Draws a value axis (ticks, grid on the left one, rotated label).
fn y_axis(s: &mut String, f: &Frame, m: &YMap, axis: &Axis, right: bool) {
    let x = if right { f.right } else { f.left };
    for t in m.ticks() {
        let y = m.y(t);
        if !right {
            let _ = write!(
                s,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4" stroke-width="1"/>"##,
                f.left, f.right
            );
        }
        let (x2, anchor, tx) = if right {
            (x + 5.0, "start", x + 8.0)
        } else {
            (x - 5.0, "end", x - 8.0)
        };
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{y:.1}" x2="{x2:.1}" y2="{y:.1}" stroke="#444444"/><text x="{tx:.1}" y="{:.1}" text-anchor="{anchor}" fill="#333333">{}</text>"##,
            y + f.font * 0.35,
            esc(&fmt_value(t, axis.kind))
        );
    }
    let cy = (f.top + f.bottom) / 2.0;
    let (lx, rot) = if right {
        (f.w - f.font * 1.0, 90)
    } else {
        (f.font * 1.3, -90)
    };
    let label = match axis.scale {
        Scale::Log => format!("{} (log scale)", axis.label),
        Scale::Linear => axis.label.clone(),
    };
    let _ = write!(
        s,
        r##"<text x="{lx:.1}" y="{cy:.1}" text-anchor="middle" transform="rotate({rot} {lx:.1} {cy:.1})" fill="#222222">{}</text>"##,
        esc(&label)
    );
}

fn legend(s: &mut String, f: &Frame, entries: &[(String, &'static str, Style)]) {
    if entries.is_empty() {
        return;
    }
    let lh = f.font * 1.35;
    let width = entries
        .iter()
        .map(|(n, _, _)| n.chars().count())
        .max()
        .unwrap_or(0) as f64
        * f.font
        * 0.62
        + f.font * 3.2;
    let x = f.right - width - f.font * 0.5;
    let y = f.top + f.font * 0.5;
    let _ = write!(
        s,
        r##"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{:.1}" fill="#ffffff" fill-opacity="0.85" stroke="#bbbbbb"/>"##,
        lh * entries.len() as f64 + f.font * 0.4
    );
    for (i, (name, col, style)) in entries.iter().enumerate() {
        let cy = y + f.font * 0.2 + lh * (i as f64 + 0.5);
        let x0 = x + f.font * 0.4;
        match style {
            Style::Points => {
                let _ = write!(
                    s,
                    r##"<circle cx="{:.1}" cy="{cy:.1}" r="{:.1}" fill="{col}"/>"##,
                    x0 + f.font * 0.8,
                    f.font * 0.3
                );
            }
            _ => {
                let _ = write!(
                    s,
                    r##"<line x1="{x0:.1}" y1="{cy:.1}" x2="{:.1}" y2="{cy:.1}" stroke="{col}" stroke-width="{:.1}"/>"##,
                    x0 + f.font * 1.6,
                    f.font * 0.2
                );
            }
        }
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#222222">{}</text>"##,
            x0 + f.font * 2.2,
            cy + f.font * 0.35,
            esc(name)
        );
    }
}

/// The path of one series.
fn series_path(
    s: &mut String,
    ser: &Series,
    col: &str,
    xmap: &dyn Fn(f64) -> f64,
    m: &YMap,
    f: &Frame,
) {
    let mut d = String::new();
    let pts: Vec<(f64, f64)> = ser
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && (m.scale == Scale::Linear || *y > 0.0))
        .map(|(x, y)| (xmap(*x), m.y(*y)))
        .collect();
    if pts.is_empty() {
        return;
    }
    match ser.style {
        Style::Points => {
            for (x, y) in &pts {
                let _ = write!(d, "M{x:.1} {y:.1}h0.1");
            }
            let _ = write!(
                s,
                r##"<path d="{d}" fill="none" stroke="{col}" stroke-width="{:.1}" stroke-linecap="round" stroke-opacity="0.8"><title>{}</title></path>"##,
                f.font * 0.38,
                esc(&ser.name)
            );
        }
        Style::Line | Style::Step => {
            for (i, (x, y)) in pts.iter().enumerate() {
                if i == 0 {
                    let _ = write!(d, "M{x:.1} {y:.1}");
                } else if ser.style == Style::Step {
                    let _ = write!(d, "H{x:.1}V{y:.1}");
                } else {
                    let _ = write!(d, "L{x:.1} {y:.1}");
                }
            }
            if ser.style == Style::Step {
                let _ = write!(d, "H{:.1}", f.right);
            }
            let _ = write!(
                s,
                r##"<path d="{d}" fill="none" stroke="{col}" stroke-width="{:.1}" stroke-linejoin="round"><title>{}</title></path>"##,
                f.font * 0.13,
                esc(&ser.name)
            );
        }
    }
}

/// Renders a time series chart.
pub fn time_chart(c: &TimeChart, size: Size) -> String {
    let (x0, x1) = x_range(c);
    let ticks = linear_ticks(x0, x1, 8)
        .into_iter()
        .map(|t| (t, fmt_secs_tick(t, x1 - x0)))
        .collect::<Vec<_>>();
    line_chart(c, size, "time since the start of the recording (s)", &ticks)
}

/// Renders a chart of a [`TimeChart`]'s shape whose x axis is not time (e.g. CPUs): ticks
/// at `x_ticks`, labelled as plain numbers, under `x_label`.
pub fn xy_chart(c: &TimeChart, x_label: &str, x_ticks: &[f64], size: Size) -> String {
    let ticks: Vec<(f64, String)> = x_ticks
        .iter()
        .map(|&t| (t, fmt_value(t, ValueKind::Plain)))
        .collect();
    line_chart(c, size, x_label, &ticks)
}

fn x_range(c: &TimeChart) -> (f64, f64) {
    if c.x.1 > c.x.0 {
        c.x
    } else {
        (c.x.0, c.x.0 + 1.0)
    }
}

fn line_chart(c: &TimeChart, size: Size, x_label: &str, ticks: &[(f64, String)]) -> String {
    let f = Frame::new(size);
    let mut s = String::new();
    header(&mut s, &f, &c.title);
    let (x0, x1) = x_range(c);
    let xmap = |x: f64| f.left + (x - x0) / (x1 - x0) * f.pw();
    for (a, b, label) in &c.bands {
        let xa = xmap(a.max(x0));
        let xb = xmap(b.min(x1)).max(xa + 2.0);
        let _ = write!(
            s,
            r##"<rect x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#ffd54f" fill-opacity="0.35"><title>{}</title></rect>"##,
            f.top,
            xb - xa,
            f.ph(),
            esc(label)
        );
    }
    let lm = YMap::fit(
        &c.left,
        c.left_series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1)),
        &f,
    );
    y_axis(&mut s, &f, &lm, &c.left, false);
    // x ticks
    for (t, label) in ticks {
        let x = xmap(*t);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{b:.1}" x2="{x:.1}" y2="{:.1}" stroke="#444444"/><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{b:.1}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#333333">{}</text>"##,
            f.bottom + 5.0,
            f.top,
            f.bottom + f.font * 1.4,
            esc(label),
            b = f.bottom,
        );
    }
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222222">{}</text>"##,
        (f.left + f.right) / 2.0,
        f.h - f.font * 0.8,
        esc(x_label)
    );
    let mut entries = Vec::new();
    let mut ci = 0;
    let clip_id = clip_id(c);
    let clip = format!(
        r##"<clipPath id="plot{}"><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/></clipPath>"##,
        clip_id,
        f.left,
        f.top - 2.0,
        f.pw(),
        f.ph() + 4.0
    );
    s.push_str(&clip);
    let _ = write!(s, r##"<g clip-path="url(#plot{clip_id})">"##);
    for ser in &c.left_series {
        let col = color(ci);
        series_path(&mut s, ser, col, &xmap, &lm, &f);
        entries.push((ser.name.clone(), col, ser.style));
        ci += 1;
    }
    let mut right_map = None;
    if let Some((axis, series)) = &c.right {
        let rm = YMap::fit(
            axis,
            series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
            &f,
        );
        for ser in series {
            let col = color(ci);
            series_path(&mut s, ser, col, &xmap, &rm, &f);
            entries.push((format!("{} (right axis)", ser.name), col, ser.style));
            ci += 1;
        }
        right_map = Some((rm, axis));
    }
    s.push_str("</g>");
    if let Some((rm, axis)) = right_map {
        y_axis(&mut s, &f, &rm, axis, true);
    }
    frame_box(&mut s, &f);
    if c.left_series.iter().all(|s| s.points.is_empty())
        && c.right
            .as_ref()
            .is_none_or(|r| r.1.iter().all(|s| s.points.is_empty()))
    {
        no_data(&mut s, &f);
    }
    legend(&mut s, &f, &entries);
    s.push_str("</svg>\n");
    s
}

/// A short id from the chart's title and data, so charts inlined in one page keep
/// distinct clip paths (a host's and a guest's charts share their titles); charts with the
/// same id are the same chart.
fn clip_id(c: &TimeChart) -> String {
    let mut h: u32 = 2166136261;
    let mut add = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ b as u32).wrapping_mul(16777619);
        }
    };
    add(c.title.as_bytes());
    let right = c.right.iter().flat_map(|(_, s)| s);
    for ser in c.left_series.iter().chain(right) {
        add(ser.name.as_bytes());
        for (x, y) in &ser.points {
            add(&x.to_bits().to_le_bytes());
            add(&y.to_bits().to_le_bytes());
        }
    }
    format!("{h:08x}")
}

fn no_data(s: &mut String, f: &Frame) {
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#888888" font-size="{:.1}">no data in this time</text>"##,
        (f.left + f.right) / 2.0,
        (f.top + f.bottom) / 2.0,
        f.font * 1.3
    );
}

fn fmt_secs_tick(t: f64, range: f64) -> String {
    if range >= 20.0 {
        format!("{t:.0}")
    } else if range >= 2.0 {
        format!("{t:.1}")
    } else if range >= 0.2 {
        format!("{t:.2}")
    } else {
        format!("{t:.3}")
    }
}

/// Shortens a category label to `max` characters.
fn clip_label(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut o: String = s.chars().take(max.saturating_sub(1)).collect();
        o.push('…');
        o
    }
}

/// Category x axis: labels under slots, rotated when crowded.
fn category_axis(s: &mut String, f: &Frame, labels: &[String], x_label: &str) {
    let n = labels.len().max(1);
    let slot = f.pw() / n as f64;
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    let rotate = longest * f.font * 0.6 > slot * 0.95;
    let max_chars = if rotate {
        ((f.h - f.bottom - f.font * 1.2) / (f.font * 0.62 * 0.6)) as usize
    } else {
        usize::MAX
    };
    for (i, l) in labels.iter().enumerate() {
        let x = f.left + slot * (i as f64 + 0.5);
        let y = f.bottom + f.font * 1.3;
        let text = esc(&clip_label(l, max_chars.max(4)));
        if rotate {
            let _ = write!(
                s,
                r##"<text x="{x:.1}" y="{y:.1}" text-anchor="end" transform="rotate(-35 {x:.1} {y:.1})" fill="#333333" font-size="{:.1}">{text}<title>{}</title></text>"##,
                f.font * 0.85,
                esc(l)
            );
        } else {
            let _ = write!(
                s,
                r##"<text x="{x:.1}" y="{y:.1}" text-anchor="middle" fill="#333333">{text}</text>"##
            );
        }
    }
    if !rotate {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222222">{}</text>"##,
            (f.left + f.right) / 2.0,
            f.h - f.font * 0.8,
            esc(x_label)
        );
    }
}

/// Renders LKST's stat chart.
pub fn stat_chart(c: &StatChart, size: Size) -> String {
    let mut f = Frame::new(size);
    // Room for rotated key labels.
    f.bottom = f.h - f.font * 7.0;
    let mut s = String::new();
    header(&mut s, &f, &c.title);
    let count_axis = Axis {
        label: "count".into(),
        kind: ValueKind::Plain,
        scale: Scale::Linear,
    };
    let cm = YMap::fit(&count_axis, c.rows.iter().map(|r| r.1 as f64), &f);
    y_axis(&mut s, &f, &cm, &count_axis, false);
    let vm = YMap::fit(
        &c.value,
        c.rows
            .iter()
            .flat_map(|r| [r.2 as f64, r.3 as f64, r.4 as f64]),
        &f,
    );
    let n = c.rows.len().max(1);
    let slot = f.pw() / n as f64;
    for (i, r) in c.rows.iter().enumerate() {
        let x = f.left + slot * i as f64 + slot * 0.2;
        let y = cm.y(r.1 as f64);
        let _ = write!(
            s,
            r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="#9ecae1"><title>{}: {} </title></rect>"##,
            slot * 0.6,
            (f.bottom - y).max(0.0),
            esc(&r.0),
            r.1
        );
    }
    type Get = fn(&(String, u64, u64, u64, u64)) -> u64;
    let lines: [(&str, Get); 3] = [("avg", |r| r.2), ("max", |r| r.3), ("min", |r| r.4)];
    let mut entries = vec![("count (left axis)".to_string(), "#9ecae1", Style::Step)];
    for (li, (name, get)) in lines.iter().enumerate() {
        let col = color(li + 1);
        let ser = Series {
            name: (*name).into(),
            style: Style::Line,
            points: c
                .rows
                .iter()
                .enumerate()
                .map(|(i, r)| (i as f64, get(r) as f64))
                .collect(),
        };
        let xmap = |i: f64| f.left + slot * (i + 0.5);
        series_path(&mut s, &ser, col, &xmap, &vm, &f);
        for (i, r) in c.rows.iter().enumerate() {
            let v = get(r) as f64;
            if vm.scale == Scale::Log && v <= 0.0 {
                continue;
            }
            let _ = write!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="{:.1}" fill="{col}"><title>{} {}: {}</title></circle>"##,
                xmap(i as f64),
                vm.y(v),
                f.font * 0.28,
                esc(&r.0),
                name,
                esc(&fmt_value(v, c.value.kind))
            );
        }
        entries.push((format!("{name} (right axis)"), col, Style::Line));
    }
    y_axis(&mut s, &f, &vm, &c.value, true);
    let labels: Vec<String> = c.rows.iter().map(|r| r.0.clone()).collect();
    category_axis(&mut s, &f, &labels, "key");
    frame_box(&mut s, &f);
    if c.rows.is_empty() {
        no_data(&mut s, &f);
    }
    legend(&mut s, &f, &entries);
    s.push_str("</svg>\n");
    s
}

/// Renders a distribution histogram.
pub fn dist_chart(c: &DistChart, size: Size) -> String {
    let f = Frame::new(size);
    let mut s = String::new();
    header(&mut s, &f, &c.title);
    let axis = Axis {
        label: "count".into(),
        kind: ValueKind::Plain,
        scale: Scale::Linear,
    };
    let m = YMap::fit(
        &axis,
        c.keys.iter().flat_map(|k| k.1.iter().map(|v| *v as f64)),
        &f,
    );
    y_axis(&mut s, &f, &m, &axis, false);
    let n = c.buckets.len().max(1);
    let slot = f.pw() / n as f64;
    let k = c.keys.len().max(1);
    let bw = slot * 0.8 / k as f64;
    let mut entries = Vec::new();
    for (ki, (key, counts)) in c.keys.iter().enumerate() {
        let col = color(ki);
        for (bi, v) in counts.iter().enumerate() {
            if *v == 0 {
                continue;
            }
            let x = f.left + slot * bi as f64 + slot * 0.1 + bw * ki as f64;
            let y = m.y(*v as f64);
            let _ = write!(
                s,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{col}"><title>{} {}: {v}</title></rect>"##,
                bw.max(1.0),
                (f.bottom - y).max(1.0),
                esc(key),
                esc(c.buckets.get(bi).map_or("", String::as_str))
            );
        }
        entries.push((key.clone(), col, Style::Step));
    }
    category_axis(&mut s, &f, &c.buckets, &c.x_label);
    frame_box(&mut s, &f);
    if c.keys.iter().all(|k| k.1.iter().all(|v| *v == 0)) {
        no_data(&mut s, &f);
    }
    legend(&mut s, &f, &entries);
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_titles_shrink_then_end_in_an_ellipsis() {
        let (size, shown) = fit_title("short", 800.0, 12.0);
        assert!((size - 14.4).abs() < 1e-9);
        assert_eq!(shown, "short");
        let long = "x".repeat(200);
        let (size, shown) = fit_title(&long, 800.0, 12.0);
        assert!((size - 10.8).abs() < 1e-9);
        assert!(shown.ends_with('…'));
        assert!(shown.chars().count() as f64 * size * 0.62 <= 800.0);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(Size::parse("960x540").unwrap(), DEFAULT_SIZE);
        assert!(Size::parse("960").is_err());
        assert!(Size::parse("10x10").is_err());
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(
            linear_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(nice_max(7.3), 8.0);
        assert_eq!(fmt_value(1_500_000.0, ValueKind::Ns), "1.5ms");
        assert_eq!(fmt_value(10_000.0, ValueKind::Ns), "10us");
        assert_eq!(fmt_value(25_000.0, ValueKind::Plain), "25k");
        assert_eq!(fmt_value(3.0 * 1024.0 * 1024.0, ValueKind::Bytes), "3MiB");
    }

    #[test]
    fn a_time_chart_has_its_points() {
        let c = TimeChart {
            title: "t <&>".into(),
            x: (0.0, 10.0),
            left: Axis {
                label: "duration".into(),
                kind: ValueKind::Ns,
                scale: Scale::Log,
            },
            left_series: vec![Series {
                name: "write".into(),
                style: Style::Points,
                points: (0..50)
                    .map(|i| (i as f64 / 5.0, 1e3 * (i + 1) as f64))
                    .collect(),
            }],
            right: None,
            bands: vec![(1.0, 2.0, "w".into())],
        };
        let s = time_chart(&c, DEFAULT_SIZE);
        assert!(s.starts_with("<svg"));
        assert!(s.contains("t &lt;&amp;&gt;"));
        assert_eq!(s.matches("h0.1").count(), 50);
    }
}
