//! The charts of a survey ([`kstate_views::survey`]): samples and levels over the common
//! time axis, LKST's stat and distribution charts, memory over time. They draw what the
//! survey holds and run no analyzer.

use kstate_analyze::analyzer::Unit;
use kstate_analyze::hist::DECADES;
use kstate_analyze::Info;
use kstate_format::sections::Snapshot;
use kstate_views::survey::{Analysis, Survey};
use kstate_views::timeline::{KeyTrack, TimeAxis, BINS};

use crate::svg::{Axis, DistChart, Scale, Series, StatChart, Style, TimeChart, ValueKind};

fn value_kind(unit: Unit) -> ValueKind {
    match unit {
        Unit::Ns => ValueKind::Ns,
        Unit::Bytes => ValueKind::Bytes,
        Unit::Count(_) => ValueKind::Plain,
    }
}

fn value_axis(info: &Info, lo: u64, hi: u64) -> Axis {
    let unit = match info.unit {
        Unit::Ns => String::new(),
        Unit::Bytes => String::new(),
        Unit::Count(w) => format!(" ({w})"),
    };
    Axis {
        label: format!("{} {}{unit}", info.name, info.value),
        kind: value_kind(info.unit),
        scale: if lo > 0 && hi / lo.max(1) >= 100 {
            Scale::Log
        } else {
            Scale::Linear
        },
    }
}

/// Point series (per bin: the largest and smallest sample starting in it) of the keys
/// chosen: `keys` if given, else the `top` largest by total.
fn dur_series(a: &Analysis, ax: &TimeAxis, keys: &[String], top: usize) -> (Vec<Series>, u64, u64) {
    let chosen: Vec<&KeyTrack> = if keys.is_empty() {
        a.stat
            .rows
            .iter()
            .filter_map(|r| a.track.get(&r.key))
            .filter(|k| !k.level)
            .take(top)
            .collect()
    } else {
        keys.iter().filter_map(|k| a.track.get(k)).collect()
    };
    let (mut lo, mut hi) = (u64::MAX, 0);
    let series = chosen
        .iter()
        .map(|k| {
            let mut pts = Vec::new();
            for i in 0..BINS {
                if k.min[i] == u64::MAX {
                    continue;
                }
                lo = lo.min(k.min[i].max(1));
                hi = hi.max(k.max[i]);
                pts.push((ax.bin_secs(i), k.max[i] as f64));
                if k.min[i] != k.max[i] {
                    pts.push((ax.bin_secs(i), k.min[i].max(1) as f64));
                }
            }
            Series {
                name: k.key.clone(),
                style: Style::Points,
                points: pts,
            }
        })
        .collect();
    (series, lo, hi)
}

/// Step series of an analyzer's levels (per bin: the highest level held in it).
fn level_series(a: &Analysis, ax: &TimeAxis, top: usize) -> Vec<Series> {
    let mut ks: Vec<&KeyTrack> = a.track.keys.iter().filter(|k| k.level).collect();
    ks.sort_by(|x, y| y.peak.cmp(&x.peak).then_with(|| x.key.cmp(&y.key)));
    ks.into_iter()
        .take(top)
        .map(|k| Series {
            name: k.key.clone(),
            style: Style::Step,
            points: (0..BINS)
                .filter(|i| k.min[*i] != u64::MAX)
                .map(|i| (i as f64 * ax.bin_ns() / 1e9, k.max[i] as f64))
                .collect(),
        })
        .collect()
}

/// Does this analyzer emit levels?
pub fn has_levels(a: &Analysis) -> bool {
    a.track.keys.iter().any(|k| k.level)
}

/// Windows of the report's top findings, to shade on every time chart.
pub fn bands(r: &Survey, n: usize) -> Vec<(f64, f64, String)> {
    r.findings
        .iter()
        .filter_map(|f| f.window.map(|(a, b)| (a, b, f.text.clone())))
        .take(n)
        .collect()
}

/// `--log` chart: samples over time (and a second analyzer on the right axis).
pub fn log_chart(
    a: &Analysis,
    with: Option<&Analysis>,
    ax: &TimeAxis,
    keys: &[String],
    top: usize,
    bands: Vec<(f64, f64, String)>,
) -> TimeChart {
    // `keys` choose the left analyzer's keys; the right one shows its largest.
    let side = |a: &Analysis, keys: &[String]| -> (Axis, Vec<Series>) {
        let (series, lo, hi) = dur_series(a, ax, keys, top);
        if series.iter().all(|s| s.points.is_empty()) && has_levels(a) {
            let lv = level_series(a, ax, top);
            return (
                Axis {
                    label: format!("{} level", a.info.name),
                    kind: ValueKind::Plain,
                    scale: Scale::Linear,
                },
                lv,
            );
        }
        (value_axis(a.info, lo, hi), series)
    };
    let (left, left_series) = side(a, keys);
    let right = with.map(|b| side(b, &[]));
    let title = match with {
        Some(b) => format!(
            "{} {} and {} {} over time",
            a.info.name, a.info.value, b.info.name, b.info.value
        ),
        None => format!(
            "{} {} over time (by {}; per {:.3} ms bin: longest and shortest)",
            a.info.name,
            a.info.value,
            a.stat.by,
            ax.bin_ns() / 1e6
        ),
    };
    TimeChart {
        title,
        x: (0.0, ax.wall_ns() as f64 / 1e9),
        left,
        left_series,
        right,
        bands,
    }
}

/// Levels over time (run-queue length, requests in flight).
pub fn level_chart(
    a: &Analysis,
    ax: &TimeAxis,
    top: usize,
    bands: Vec<(f64, f64, String)>,
) -> TimeChart {
    TimeChart {
        title: format!("{} levels over time (highest per bin)", a.info.name),
        x: (0.0, ax.wall_ns() as f64 / 1e9),
        left: Axis {
            label: "level".into(),
            kind: ValueKind::Plain,
            scale: Scale::Linear,
        },
        left_series: level_series(a, ax, top),
        right: None,
        bands,
    }
}

/// LKST's stat chart of the `top` keys by total.
pub fn stat_chart(a: &Analysis, top: usize) -> StatChart {
    let rows: Vec<(String, u64, u64, u64, u64)> = a
        .stat
        .rows
        .iter()
        .take(top)
        .map(|r| {
            (
                r.key.clone(),
                r.agg.count,
                r.agg.avg(),
                r.agg.max,
                r.agg.min(),
            )
        })
        .collect();
    let lo = rows
        .iter()
        .map(|r| r.4)
        .filter(|v| *v > 0)
        .min()
        .unwrap_or(1);
    let hi = rows.iter().map(|r| r.3).max().unwrap_or(1);
    let mut value = value_axis(a.info, lo, hi);
    value.label = format!("{} avg / max / min", a.info.value);
    StatChart {
        title: format!(
            "{}: count, avg, max, min per {} (top {} by total)",
            a.info.name,
            a.stat.by,
            rows.len()
        ),
        value,
        rows,
    }
}

/// Decade label, as `kstate analyze --dist --buckets log10` prints it.
fn decade_label(i: usize, unit: Unit) -> String {
    crate::decade_label(i, unit)
}

/// Histogram of the `top` keys in LKST's decimal buckets.
pub fn dist_chart(a: &Analysis, top: usize) -> DistChart {
    let rows: Vec<_> = a.dist.rows.iter().take(top).collect();
    let mut first = DECADES;
    let mut last = 0;
    for r in &rows {
        let c = &r.agg.decades.counts;
        if let Some(f) = c.iter().position(|&n| n > 0) {
            first = first.min(f);
        }
        if let Some(l) = c.iter().rposition(|&n| n > 0) {
            last = last.max(l);
        }
    }
    if first > last {
        first = 0;
        last = 0;
    }
    DistChart {
        title: format!(
            "{} {} distribution (top {} {} by total)",
            a.info.name,
            a.info.value,
            rows.len(),
            a.stat.by
        ),
        x_label: format!("{} (decimal buckets)", a.info.value),
        buckets: (first..=last)
            .map(|i| decade_label(i, a.info.unit))
            .collect(),
        keys: rows
            .iter()
            .map(|r| (r.key.clone(), r.agg.decades.counts[first..=last].to_vec()))
            .collect(),
    }
}

/// Memory use over time from the file's /proc/meminfo snapshots (LKST's sysinfo plot).
pub fn memory_chart(
    snaps: &[Snapshot],
    ax: &TimeAxis,
    bands: Vec<(f64, f64, String)>,
) -> TimeChart {
    let get = |s: &Snapshot, n: &str| s.get(&format!("meminfo.{n}"));
    let mut series: Vec<Series> = Vec::new();
    let mut add = |name: &str, f: &dyn Fn(&Snapshot) -> Option<u64>| {
        let pts: Vec<(f64, f64)> = snaps
            .iter()
            .filter_map(|s| f(s).map(|v| (ax.secs(s.ts), v as f64)))
            .collect();
        if !pts.is_empty() {
            series.push(Series {
                name: name.into(),
                style: Style::Line,
                points: pts,
            });
        }
    };
    add("used (MemTotal - MemAvailable)", &|s| {
        Some(get(s, "MemTotal")?.saturating_sub(get(s, "MemAvailable")?))
    });
    add("free (MemFree)", &|s| get(s, "MemFree"));
    add("page cache (Cached)", &|s| get(s, "Cached"));
    add("anonymous (AnonPages)", &|s| get(s, "AnonPages"));
    add("dirty + writeback", &|s| {
        Some(get(s, "Dirty")? + get(s, "Writeback").unwrap_or(0))
    });
    TimeChart {
        title: format!(
            "memory use over time (/proc/meminfo, {} snapshots)",
            snaps.len()
        ),
        x: (0.0, ax.wall_ns() as f64 / 1e9),
        left: Axis {
            label: "memory".into(),
            kind: ValueKind::Bytes,
            scale: Scale::Linear,
        },
        left_series: series,
        right: None,
        bands,
    }
}
