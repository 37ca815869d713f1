//! The page's charts: a key's distribution on bars that fit its values (one side, or two
//! on the same bars), and flame graphs of the CPU samples in the selection (one file's, or
//! A's and B's in one differential tree). The numbers are the engine's: the statistics
//! outcome a panel already holds ([`kstate_views::hist_fit`]), and the profile `kstate
//! profile` makes ([`kstate_views::profile`], folded as for `--flame`).
//!
//! Endpoints (GET, below the token):
//! - `api/hist?kind=one|ab|inout&f=FILE&a=NAME&key=KEY&FILTERS[&bars=N]`: `{unit, scale,
//!   exact, bars: [[lo, hi], ...], sides: [{label, count, counts: [...]}]}`.
//! - `api/flame?kind=one|ab&f=FILE&FILTERS`: `{event, samples: [A, B], frames, tree}` with
//!   tree `[name, samples A, samples B, [children...]]` (B's are 0 for one file).

use std::fmt::Write;
use std::sync::Arc;

use kstate_analyze::filter::Filters;
use kstate_analyze::stats::Agg;
use kstate_analyze::Query;
use kstate_views::hist_fit::{self, Scale};
use kstate_views::profile::tree::{self, Frame};
use kstate_views::profile::{self, Profile};

use crate::api::{js, outside, stat_query, App};
use crate::params::{filters_key, Params};

/// Bars a distribution chart gets at most (by default).
const BARS: usize = 24;

/// Frames narrower than this share of the samples are summed into `[other]`.
const MIN_SHARE: f64 = 1.0 / 1500.0;

impl App {
    pub(crate) fn hist(&self, p: &Params) -> Result<Vec<u8>, String> {
        let filters = p.filters()?;
        let name = Query::new(p.need("a")?)
            .map_err(|e| e.to_string())?
            .analyzer
            .name;
        let key = p.need("key")?;
        let bars: usize = p.number("bars", "a number of bars", Some(BARS))?;
        let sides: Vec<(String, usize, Filters)> = match p.get("kind").unwrap_or("one") {
            "one" => vec![(String::new(), self.file(p)?, filters)],
            "ab" => vec![
                ("A".into(), self.file_at(0)?, filters.clone()),
                ("B".into(), self.file_at(1)?, filters),
            ],
            "inout" => {
                let f = self.file(p)?;
                let (outside, _) = outside(&filters)?;
                vec![
                    ("outside".into(), f, outside),
                    ("inside".into(), f, filters),
                ]
            }
            k => return Err(format!("kind: {k:?} is not one, ab or inout")),
        };
        let mut aggs: Vec<(String, Agg)> = Vec::new();
        let mut unit = "";
        for (label, f, filters) in sides {
            let o = self.outcome(f, &stat_query(name, filters)?)?;
            unit = o.info.unit.suffix();
            let agg = o
                .rows
                .iter()
                .find(|r| r.key == key)
                .map(|r| r.agg.clone())
                .unwrap_or_default();
            aggs.push((label, agg));
        }
        let mut all = Agg::default();
        for (_, a) in &aggs {
            all.merge(a);
        }
        let (scale, bars, mut exact) = hist_fit::fit(&all, bars);
        let mut sides = Vec::new();
        for (label, a) in &aggs {
            let (counts, ex) = hist_fit::recount(a, &bars);
            exact &= ex;
            sides.push(format!(
                "{{\"label\":{},\"count\":{},\"counts\":[{}]}}",
                js(label),
                a.count,
                counts
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        let scale = match scale {
            Scale::Values => "values",
            Scale::Linear => "linear",
            Scale::Log => "log",
        };
        let bars: Vec<String> = bars
            .iter()
            .map(|b| format!("[{},{}]", b.lo, b.hi))
            .collect();
        Ok(format!(
            "{{\"key\":{},\"unit\":{},\"scale\":\"{scale}\",\"exact\":{exact},\"bars\":[{}],\"sides\":[{}]}}",
            js(key),
            js(unit),
            bars.join(","),
            sides.join(",")
        )
        .into_bytes())
    }

    /// The profile of file `f`'s samples `filters` select (cached).
    fn profile_of(&self, f: usize, filters: &Filters) -> Result<Arc<Profile>, String> {
        let key = format!("{f}|{}", filters_key(filters));
        self.profiles.get_or(
            &key,
            |p| 4096 + p.folded.len() * 200,
            || {
                let source = self.files[f].source().ok_or("no source")?;
                let opts = profile::Options {
                    filters: filters.clone(),
                    folded: true,
                    ..profile::Options::default()
                };
                profile::profile(source.trace(), &opts)
                    .map(Arc::new)
                    .map_err(|e| format!("{}: {e}", self.files[f].label))
            },
        )
    }

    pub(crate) fn flame(&self, p: &Params) -> Result<Vec<u8>, String> {
        let mut filters = p.filters()?;
        // Keys belong to the analyzers' panels, not to samples.
        filters.keys.clear();
        filters.min = None;
        filters.max = None;
        let (a, b) = match p.get("kind").unwrap_or("one") {
            "one" => (self.profile_of(self.file(p)?, &filters)?, None),
            "ab" => (
                self.profile_of(self.file_at(0)?, &filters)?,
                Some(self.profile_of(self.file_at(1)?, &filters)?),
            ),
            k => return Err(format!("kind: {k:?} is not one or ab")),
        };
        let t = match &b {
            None => tree::tree(&a.folded, MIN_SHARE),
            Some(b) => tree::diff_tree(&a.folded, &b.folded, MIN_SHARE),
        };
        let mut s = String::with_capacity(1 << 16);
        frame_json(&t, &mut s);
        Ok(format!(
            "{{\"event\":{},\"samples\":[{},{}],\"frames\":{},\"tree\":{s}}}",
            js(&a.event),
            a.samples,
            b.as_ref().map_or(0, |b| b.samples),
            t.len()
        )
        .into_bytes())
    }
}

fn frame_json(f: &Frame, out: &mut String) {
    let _ = write!(out, "[{},{},{},[", js(&f.name), f.samples[0], f.samples[1]);
    for (i, c) in f.children.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        frame_json(c, out);
    }
    out.push_str("]]");
}
