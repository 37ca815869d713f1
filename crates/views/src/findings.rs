//! Findings: statements about a recording, each with the share of its wall time it
//! explains, ranked largest first. The rules are [`ranking_help!`]'s text, which `kstate
//! run --help` and `kstate report --help` print.

use crate::survey::Survey;
use crate::timeline::{covered, KeyTrack, TimeAxis, BINS};
use kstate_analyze::analyzer::Unit;

/// How findings are ranked; `kstate run --help` and `kstate report --help` end with it.
#[macro_export]
macro_rules! ranking_help {
    () => {
        "\
Findings and how they are ranked:
  Each finding names a set of intervals (system calls, waits, block requests, ...) or the
  time a level (run-queue length, requests in flight) stayed high. Its share is the part
  of the recording's wall time during which at least one of those intervals was in
  progress (or the level was high), measured on 1000 equal time bins: a bin counts
  min(bin width, time the intervals cover in it). When the recording names the command
  (kstate run, kstate record -- CMD), an analyzer that saw any of the command's threads
  (its process and every thread and child it forked) counts only theirs. Findings are
  listed by share, largest first. The rules, the same for every analyzer:
    top keys    each analyzer's three keys with the largest total time (not proc: a
                lifetime is not time spent);
    clusters    a key's slow samples (>= 10 x its median and >= 1 ms), when there are two or
                more and all fall within half the recording: \"N samples >= X, all
                between A s and B s\" (the window is shaded in every time chart); the
                three largest shares per analyzer;
    saturation  a level whose peak is 2 or more: the time it stayed >= max(2, L), L the
                level it held for the median of the time it was not empty.
  The same waits seen by several analyzers (a futex call, offcpu S, microstate LCK) count
  once: a top-key finding covering nearly the same bins as a higher one of another
  analyzer (within 10 %) is folded into it and named at its end.
  Times in findings are seconds from the start of the recording, as on the charts' x axis."
    };
}

/// Cluster findings kept per analyzer (the largest shares).
const CLUSTERS_PER_ANALYZER: usize = 3;

/// A statement about the recording, with the share of wall time it explains.
#[derive(Debug, Clone)]
pub struct Finding {
    pub analyzer: &'static str,
    pub key: String,
    pub text: String,
    /// 0..=1 of the recording's wall time.
    pub share: f64,
    /// Seconds on the common axis, for windows worth shading.
    pub window: Option<(f64, f64)>,
    /// Per bin, how much of it the finding's intervals cover (top-key findings): lets the
    /// same waits seen by several analyzers count once.
    pub cover: Option<Vec<f32>>,
}

fn pct(x: f64) -> String {
    if x >= 0.095 {
        format!("{:.0}%", x * 100.0)
    } else if x >= 0.001 {
        format!("{:.1}%", x * 100.0)
    } else {
        format!("{:.2}%", x * 100.0)
    }
}

/// Secs on the axis for text: `12.3 s`.
fn at(ax: &TimeAxis, ts: u64) -> String {
    let s = ax.secs(ts);
    if ax.wall_ns() >= 10_000_000_000 {
        format!("{s:.1} s")
    } else {
        format!("{s:.3} s")
    }
}

/// The findings, ranked (see the module documentation).
pub fn rank(r: &Survey) -> Vec<Finding> {
    let ax = r.axis;
    let wall = ax.wall_ns() as f64;
    let mut out = Vec::new();
    for a in &r.analyses {
        let info = a.info;
        let unit = info.unit;
        let restricted = a.track.restricted();
        let who = if restricted {
            " (the command's threads)"
        } else {
            ""
        };
        // Lifetimes are not time spent on anything.
        if unit == Unit::Ns && info.traits.time_spent {
            // The three largest totals: of the command's threads where restricted.
            let mut top: Vec<(&KeyTrack, u64, u64, u64, &Vec<f32>)> = if restricted {
                a.track
                    .keys
                    .iter()
                    .filter(|k| !k.level && k.count_wl > 0)
                    .map(|k| (k, k.count_wl, k.total_wl, k.max_wl, &k.cover_wl))
                    .collect()
            } else {
                a.stat
                    .rows
                    .iter()
                    .filter_map(|row| {
                        let k = a.track.get(&row.key)?;
                        Some((k, row.agg.count, row.agg.total, row.agg.max, &k.cover_all))
                    })
                    .collect()
            };
            top.sort_by(|x, y| y.2.cmp(&x.2).then_with(|| x.0.key.cmp(&y.0.key)));
            for (k, count, total, max, cov) in top.into_iter().take(3) {
                let row = k;
                let share = covered(cov, &ax) / wall;
                out.push(Finding {
                    analyzer: info.name,
                    key: row.key.clone(),
                    text: format!(
                        "{} {}={}{who}: {} {}, {} in all, longest {}; one in progress {} of the time",
                        info.name,
                        a.stat.by,
                        row.key,
                        count,
                        if count == 1 { "sample" } else { "samples" },
                        unit.fmt(total),
                        unit.fmt(max),
                        pct(share)
                    ),
                    share,
                    window: None,
                    cover: Some(cov.clone()),
                });
            }
            let mut clusters = Vec::new();
            for k in &a.track.keys {
                let slow = if restricted {
                    k.slow_wl.as_ref()
                } else {
                    k.slow_all.as_ref()
                };
                let Some(s) = slow else { continue };
                let span = s.last_end.saturating_sub(s.first);
                if s.count < 2 || span as f64 > wall * 0.5 {
                    continue;
                }
                let share = covered(&s.cover, &ax) / wall;
                clusters.push(Finding {
                    analyzer: info.name,
                    key: k.key.clone(),
                    text: format!(
                        "{} {}{who}: {} samples >= {} (longest {}), all between {} and {}",
                        info.name,
                        k.key,
                        s.count,
                        unit.fmt(k.slow_threshold),
                        unit.fmt(s.max),
                        at(&ax, s.first),
                        at(&ax, s.last_end)
                    ),
                    share,
                    window: Some((ax.secs(s.first), ax.secs(s.last_end))),
                    cover: None,
                });
            }
            clusters.sort_by(|a, b| b.share.total_cmp(&a.share));
            out.extend(clusters.into_iter().take(CLUSTERS_PER_ANALYZER));
        }
        for k in a.track.keys.iter().filter(|k| k.level && k.peak >= 2) {
            // The level it usually held while not empty (time-weighted median): a short
            // burst to a high peak does not hide a queue that stayed full.
            // Times saturate: one damaged time near the end of time makes them huge.
            let time_from = |l: u64| {
                k.level_time
                    .range(l..)
                    .fold(0u64, |s, (_, t)| s.saturating_add(*t))
            };
            let busy = time_from(1);
            let mut acc = 0u64;
            let median = k
                .level_time
                .range(1..)
                .find(|(_, t)| {
                    acc = acc.saturating_add(**t);
                    acc >= busy - busy / 2
                })
                .map_or(0, |(l, _)| *l);
            let thr = 2.max(median);
            let t = time_from(thr);
            if t == 0 {
                continue;
            }
            let share = t as f64 / wall;
            let bins: Vec<usize> = (0..BINS).filter(|i| k.max[*i] >= thr).collect();
            let window = match (bins.first(), bins.last()) {
                (Some(a), Some(b)) => Some((
                    *a as f64 * ax.bin_ns() / 1e9,
                    (*b + 1) as f64 * ax.bin_ns() / 1e9,
                )),
                _ => None,
            };
            let when = window
                .map(|(a, b)| {
                    if ax.wall_ns() >= 10_000_000_000 {
                        format!(", between {a:.1} s and {b:.1} s")
                    } else {
                        format!(", between {a:.3} s and {b:.3} s")
                    }
                })
                .unwrap_or_default();
            out.push(Finding {
                analyzer: info.name,
                key: k.key.clone(),
                text: format!(
                    "{} {}: {} >= {} (peak {}) for {:.3} s, {} of the time{when}",
                    info.name,
                    k.key,
                    info.traits.level,
                    thr,
                    k.peak,
                    t as f64 / 1e9,
                    pct(share)
                ),
                share,
                window,
                cover: None,
            });
        }
    }
    out.sort_by(|a, b| {
        b.share
            .partial_cmp(&a.share)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.text.cmp(&b.text))
    });
    merge_same_time(out)
}

/// The same waits often show up in several analyzers (a thread blocked in a futex call is
/// the syscall analyzer's `futex`, offcpu's `S` and microstate's `LCK`): a finding whose
/// intervals cover nearly the same bins as a higher-ranked finding of another analyzer
/// (the covered amounts differ by at most 10 %) is folded into it, named at its end.
fn merge_same_time(found: Vec<Finding>) -> Vec<Finding> {
    let mut kept: Vec<Finding> = Vec::new();
    let mut also: Vec<Vec<String>> = Vec::new();
    'next: for f in found {
        if let Some(c) = &f.cover {
            for (i, k) in kept.iter().enumerate() {
                let Some(kc) = &k.cover else { continue };
                if k.analyzer == f.analyzer {
                    continue;
                }
                let (mut diff, mut base) = (0f64, 0f64);
                for (a, b) in c.iter().zip(kc) {
                    diff += (a - b).abs() as f64;
                    base += a.max(*b) as f64;
                }
                if base > 0.0 && diff <= 0.10 * base {
                    also[i].push(format!("{} {}", f.analyzer, f.key));
                    continue 'next;
                }
            }
        }
        kept.push(f);
        also.push(Vec::new());
    }
    for (k, a) in kept.iter_mut().zip(also) {
        if !a.is_empty() {
            k.text
                .push_str(&format!(" (the same time as: {})", a.join(", ")));
        }
    }
    kept
}
