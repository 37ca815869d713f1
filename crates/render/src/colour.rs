//! The cache-colouring chart of `kstate bench colour`: measured speed-up against the
//! colour count (one line per worker count), the simulated misses per visit on the right
//! axis, and the model's threshold marked as a narrow band. It draws the figures it is
//! given; the bench measures and simulates.

use crate::svg::{self, Axis, Scale, Series, Style, TimeChart, ValueKind};

#[derive(Debug, Clone, Default)]
pub struct ColourChart {
    pub title: String,
    /// (label, [(colours, speed-up)]) per worker count.
    pub speedups: Vec<(String, Vec<(f64, f64)>)>,
    /// (label, [(colours, misses per visit)]) per simulated cache level.
    pub misses: Vec<(String, Vec<(f64, f64)>)>,
    /// The model's colour count at which the gain saturates.
    pub threshold: f64,
}

pub fn plot(c: &ColourChart) -> String {
    let mut ticks: Vec<f64> = c
        .speedups
        .iter()
        .chain(&c.misses)
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let lo = ticks.first().copied().unwrap_or(1.0);
    let hi = ticks.last().copied().unwrap_or(1.0).max(c.threshold);
    let series = |v: &[(String, Vec<(f64, f64)>)]| -> Vec<Series> {
        v.iter()
            .map(|(name, pts)| Series {
                name: name.clone(),
                style: if pts.len() > 1 {
                    Style::Line
                } else {
                    Style::Points
                },
                points: pts.clone(),
            })
            .collect()
    };
    let chart = TimeChart {
        title: c.title.clone(),
        x: (lo - 0.5, hi + 0.5),
        left: Axis {
            label: "speed-up over no colouring (c = 1)".into(),
            kind: ValueKind::Plain,
            scale: Scale::Linear,
        },
        left_series: series(&c.speedups),
        right: (!c.misses.is_empty()).then(|| {
            (
                Axis {
                    label: "simulated misses per visit".into(),
                    kind: ValueKind::Plain,
                    scale: Scale::Linear,
                },
                series(&c.misses),
            )
        }),
        bands: vec![(
            c.threshold - 0.08,
            c.threshold + 0.08,
            format!("model threshold: c >= {}", c.threshold),
        )],
    };
    svg::xy_chart(&chart, "colours (c)", &ticks, svg::DEFAULT_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_the_threshold_and_draws_every_series() {
        let c = ColourChart {
            title: "t".into(),
            speedups: vec![("1 worker".into(), vec![(1.0, 1.0), (2.0, 1.1), (4.0, 1.5)])],
            misses: vec![("L2".into(), vec![(1.0, 3.0), (2.0, 3.0), (4.0, 0.0)])],
            threshold: 4.0,
        };
        let s = plot(&c);
        assert!(s.contains("model threshold: c &gt;= 4"), "{s}");
        assert!(s.contains("1 worker") && s.contains("L2 (right axis)"));
        assert!(s.contains("colours (c)"));
    }
}
