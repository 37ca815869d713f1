//! The page's questions and their answers. Every number comes from the engine: panels are
//! `kstate_render::stat` / `dist` / the `--log` writer over [`Source::aggregate`] (byte for
//! byte what `kstate analyze NAME --format json` prints for the same filters); comparisons
//! are [`kstate_views::compare`] rendered by `kstate_render::compare` (what `kstate
//! compare --format json` prints); lanes are [`kstate_views::lanes`]. Only the lanes'
//! JSON shape is this crate's own.
//!
//! Endpoints (GET, below the token):
//! - `api/meta`: the files, their time range (first to last event) and the analyzers that
//!   apply to each, found without an analysis pass where the file's pages are indexed;
//!   with a host and its guests (`layout: machines`), each file's machine, events, first
//!   and last event (host clock), and one time range shared by all.
//! - `api/panel?f=FILE&a=NAME&mode=stat|dist|log&FILTERS[&sort=COL][&top=N]`.
//! - `api/compare?kind=ab|inout&a=NAME|*&FILTERS[&f=FILE]`: `ab` compares file 0 (A) with
//!   file 1 (B); `inout` compares outside the window (A) with inside it (B) in file f.
//! - `api/lanes?f=FILE&from=S&to=S&w=BINS&FILTERS`: the overview's lanes, S seconds from
//!   the first event.

use std::io::Write;

use kstate_analyze::analyzer::{Buckets, Mode, Outcome};
use kstate_analyze::filter::{Filters, WindowSpec};
use kstate_analyze::{analyzers, Info, Query, Source};
use kstate_format::value::write_json_str;
use kstate_render::{Format, LogWriter, Meta};
use kstate_views::compare::{compare_outcomes, nothing_in_common, Comparison, Rules, Unmatched};
use kstate_views::lanes::{Lane, Overview, Span, ROWS_PER_DECADE};
use kstate_views::machines::{self, Extent, Role};

use std::sync::Arc;

use crate::memo::Memo;
use crate::params::{filters_key, Params};
use crate::supersede::Ticket;

/// Rows of the `--log` panel (the longest samples).
const LOG_TOP: usize = 20;

/// One recording given on the command line.
pub struct File {
    pub label: String,
    source: Result<Source, String>,
    /// Analyzers that apply (their statistics pass succeeds), found when the server starts.
    applies: Option<Vec<&'static Info>>,
    skipped: Vec<(&'static str, String)>,
    /// First event and last event analysed (trace clock ns); with a host and its guests,
    /// the first and last of all machines, so that their lanes share one axis.
    pub(crate) range: (u64, u64),
    /// Its events, first and last (host clock), for a host and its guests.
    extent: Option<Extent>,
}

impl File {
    /// Indexes the pages of a file that opened: every question after that skips the
    /// pages it would read for nothing. (An index that cannot be made leaves the passes
    /// to read everything, and to report the damage where they meet it.)
    pub fn open(label: String, mut source: Result<Source, String>) -> File {
        if let Ok(s) = &mut source {
            let _ = s.index_pages();
        }
        File {
            label,
            source,
            applies: None,
            skipped: Vec::new(),
            range: (0, 1),
            extent: None,
        }
    }

    pub fn source(&self) -> Option<&Source> {
        self.source.as_ref().ok()
    }
}

/// The files and the answers kept about them, shared by the server's threads: the files
/// are surveyed when the server starts and read-only after, the caches lock only to look
/// up and to store (never during a pass).
pub struct App {
    pub files: Vec<File>,
    /// A host and its guests (their roles, in file order), shown on one time axis.
    roles: Option<Vec<Role>>,
    /// Why the host's and guests' files could not be put on one axis.
    layout_error: Option<String>,
    outcomes: Memo<Arc<Outcome>>,
    lanes: Memo<Arc<Vec<u8>>>,
    /// Each file's timeline summaries, by file number.
    pub(crate) tracks: Memo<Arc<kstate_views::tracks::Tracks>>,
    /// Each file's overview summary, by file number.
    pub(crate) summaries: Memo<Arc<kstate_views::lanes::Summary>>,
    /// CPU profiles of a file's samples, by file and filters.
    pub(crate) profiles: Memo<Arc<kstate_views::profile::Profile>>,
    /// Threads an analysis pass may use.
    threads: usize,
}

/// An answer: status and JSON body.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    fn ok(body: Vec<u8>) -> Answer {
        Answer { status: 200, body }
    }
    pub fn bad(msg: &str) -> Answer {
        Answer {
            status: 400,
            body: format!("{{\"error\":{}}}", js(msg)).into_bytes(),
        }
    }
    /// A newer request of the same slot came: this one is not answered (204, no content:
    /// not an error for the page, which moved on).
    pub fn superseded() -> Answer {
        Answer {
            status: 204,
            body: Vec::new(),
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// A JSON string.
pub fn js(s: &str) -> String {
    let mut v = Vec::new();
    write_json_str(s, &mut v);
    String::from_utf8(v).expect("JSON text is UTF-8")
}

/// Inside vs outside: the filters of the rest of the recording (those of `filters` but
/// for its window, which they leave out), and the window.
pub(crate) fn outside(filters: &Filters) -> Result<(Filters, WindowSpec), String> {
    let Some(w) = filters.window else {
        return Err("inside vs outside needs a window: brush a time range".into());
    };
    let mut outside = filters.clone();
    outside.window = None;
    outside.not_window = Some(w);
    Ok((outside, w))
}

/// The one pass that answers a panel's statistics, its distribution and comparisons: a
/// `--dist --buckets log10` outcome holds every statistic of `--stat` as well (the same
/// rows, aggregated the same way, plus decimal buckets), so one pass over the trace
/// serves the three and the cache holds one outcome for them.
pub(crate) fn stat_query(name: &str, filters: Filters) -> Result<Query, String> {
    let mut q = Query::new(name).map_err(|e| e.to_string())?;
    q.filters = filters;
    q.mode = Mode::Dist(Buckets::Log10);
    Ok(q)
}

impl App {
    /// Surveys every file (which analyzers apply, its time range) and, for a host and its
    /// guests, puts them on one axis: all before the first request, so that requests only
    /// read the files.
    pub fn new(files: Vec<File>, roles: Option<Vec<Role>>, threads: usize) -> App {
        let mut app = App {
            files,
            roles,
            layout_error: None,
            outcomes: Memo::new(512, 256 << 20),
            lanes: Memo::new(64, 64 << 20),
            tracks: Memo::new(16, usize::MAX),
            summaries: Memo::new(16, usize::MAX),
            profiles: Memo::new(32, 128 << 20),
            threads: threads.max(1),
        };
        for f in 0..app.files.len() {
            app.survey(f);
        }
        app.layout_error = app.share().err();
        app
    }

    /// Work the page asks for first, started before it asks: each file's timeline
    /// summaries and overview summary, each built on a thread of its own.
    pub fn warm_up(self: &Arc<Self>) {
        for f in 0..self.files.len() {
            if self.files[f].source().is_some() {
                let app = self.clone();
                std::thread::spawn(move || {
                    let _ = app.tracks_of(f);
                });
                let app = self.clone();
                std::thread::spawn(move || {
                    let _ = app.summary_of(f);
                });
            }
        }
    }

    /// Whether `endpoint` runs analysis passes (one per core at a time).
    pub fn is_pass(endpoint: &str) -> bool {
        matches!(endpoint, "panel" | "compare" | "hist" | "flame" | "why")
    }

    pub fn answer(&self, endpoint: &str, params: &Params, ticket: &Ticket) -> Answer {
        let r = match endpoint {
            "meta" => Ok(self.meta()),
            "panel" => self.panel(params),
            "compare" => self.compare(params),
            "lanes" => self.lanes(params),
            "tracks" => self.tracks_json(params),
            "timeline" => self.timeline(params, ticket),
            "slice" => self.slice_at(params, ticket),
            "events" => self.events(params, ticket),
            "wakeups" => self.wakeups(params, ticket),
            "why" => self.why_lane(params),
            "hist" => self.hist(params),
            "flame" => self.flame(params),
            _ => Err(format!("no such request: {endpoint}")),
        };
        match r {
            Ok(body) => Answer::ok(body),
            Err(e) => Answer::bad(&e),
        }
    }

    pub(crate) fn file(&self, params: &Params) -> Result<usize, String> {
        let f: usize = match params.get("f") {
            None => 0,
            Some(s) => s
                .parse()
                .map_err(|_| format!("f: {s:?} is not a file number"))?,
        };
        self.file_at(f)
    }

    pub(crate) fn file_at(&self, f: usize) -> Result<usize, String> {
        let file = self
            .files
            .get(f)
            .ok_or_else(|| format!("there is no file {f} (the server has {})", self.files.len()))?;
        if let Err(e) = &file.source {
            return Err(format!("{}: {e}", file.label));
        }
        if let Some(e) = &self.layout_error {
            return Err(e.clone());
        }
        Ok(f)
    }

    /// A host and its guests: every file's range becomes the one that holds all of their
    /// events (host clock), so that lanes and windows share one axis.
    fn share(&mut self) -> Result<(), String> {
        if self.roles.is_none() {
            return Ok(());
        }
        let (mut lo, mut hi) = (u64::MAX, 0);
        for file in &mut self.files {
            let source = file.source.as_ref().map_err(|e| e.clone())?;
            file.extent = machines::extent(source).map_err(|e| format!("{}: {e}", file.label))?;
            if let Some(x) = file.extent {
                lo = lo.min(x.first);
                hi = hi.max(x.last);
            }
        }
        if lo == u64::MAX {
            lo = 0;
        }
        for file in &mut self.files {
            file.range = (lo, hi.max(lo + 1));
        }
        Ok(())
    }

    /// The outcome of one query, cached (and computed once however many ask at once).
    pub(crate) fn outcome(&self, f: usize, q: &Query) -> Result<Arc<Outcome>, String> {
        let key = format!(
            "{f}|{}|{:?}|{}|{:?}|{:?}",
            q.analyzer.name,
            q.mode,
            filters_key(&q.filters),
            q.sort,
            q.top
        );
        self.outcomes.get_or(
            &key,
            |o| 4096 + o.rows.len() * 3000,
            || {
                // Derived only for analyzers that run the shared pass (those with a live
                // form; sysinfo reads snapshots its own way and notes each key missing),
                // and not with `top`, which cuts the rows before a key could be picked
                // out of them.
                let derivable = !q.filters.keys.is_empty()
                    && q.mode != Mode::Log
                    && q.top.is_none()
                    && q.analyzer.is_live();
                let o = if !derivable {
                    let source = self.files[f].source.as_ref().map_err(|e| e.clone())?;
                    let mut q = q.clone();
                    q.threads = self.threads;
                    source.aggregate(&q).map_err(|e| e.to_string())?
                } else {
                    self.keyed(f, q)?
                };
                Ok(Arc::new(o))
            },
        )
    }

    /// A key filter's outcome from the same query's unkeyed one (usually cached): a pass
    /// drops the rows of other keys only after aggregating (`Pass::take_rows`), counting
    /// their samples as filtered out, and nothing else in the outcome depends on the key.
    /// So a key click, and inside vs outside with a key filter, read the trace no more
    /// (11 M events: a whole pass, 0.6-1.2 s, saved per side).
    fn keyed(&self, f: usize, q: &Query) -> Result<Outcome, String> {
        let mut all = q.clone();
        all.filters.keys.clear();
        let mut o = (*self.outcome(f, &all)?).clone();
        let mut dropped = 0;
        o.rows.retain(|r| {
            let keep = q.filters.keys.contains(&r.key);
            if !keep {
                dropped += r.agg.count;
            }
            keep
        });
        o.counts.selected -= dropped;
        o.counts.filtered += dropped;
        Ok(o)
    }

    /// Which analyzers apply to file `f`, and its time range. With a page index, each
    /// analyzer is probed to its first event ([`Source::applies`]: the same verdict and
    /// message as its statistics pass) and the range is the file's first and last event,
    /// from the index: no pass over the trace, so the page's first view waits for none
    /// (11 M system-call events: 2 ms, against 1.5 s for every analyzer's pass). Its
    /// panels then ask for their passes, one after another.
    fn survey(&mut self, f: usize) {
        if self.files[f].applies.is_some() {
            return;
        }
        let Ok(source) = &self.files[f].source else {
            return;
        };
        let Some((first, last)) = source.pages().and_then(|p| p.event_span()) else {
            return self.survey_passes(f);
        };
        let mut applies = Vec::new();
        let mut skipped = Vec::new();
        for info in analyzers::ALL {
            match source.applies(info) {
                Ok(()) => applies.push(info),
                Err(e) => skipped.push((info.name, first_line(&e.to_string()))),
            }
        }
        let file = &mut self.files[f];
        file.range = (first, last.max(first + 1));
        file.applies = Some(applies);
        file.skipped = skipped;
    }

    /// [`App::survey`] for a file without a page index (Parquet builds its pages on
    /// demand): each analyzer's unfiltered statistics, cached for its panel; the range
    /// from the first event to the last any of them read.
    fn survey_passes(&mut self, f: usize) {
        let mut applies = Vec::new();
        let mut skipped = Vec::new();
        let (mut lo, mut hi) = (u64::MAX, 0);
        for info in analyzers::ALL {
            let q = stat_query(info.name, Filters::default()).expect("analyzer of ALL");
            match self.outcome(f, &q) {
                Ok(o) => {
                    applies.push(info);
                    if let Some(t) = o.trace_start {
                        lo = lo.min(t);
                    }
                    if let Some((_, b)) = o.span {
                        hi = hi.max(b);
                    }
                }
                Err(e) => skipped.push((info.name, first_line(&e))),
            }
        }
        let file = &mut self.files[f];
        if lo == u64::MAX {
            lo = 0;
        }
        file.range = (lo, hi.max(lo + 1));
        file.applies = Some(applies);
        file.skipped = skipped;
    }

    fn meta(&self) -> Vec<u8> {
        let mut s = format!(
            "{{\"layout\":{},\"layout_error\":{},\"files\":[",
            js(if self.roles.is_some() {
                "machines"
            } else {
                "files"
            }),
            self.layout_error.as_ref().map_or("null".into(), |e| js(e))
        );
        for (i, file) in self.files.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!("{{\"label\":{}", js(&file.label)));
            if let Some(role) = self.roles.as_ref().and_then(|r| r.get(i)) {
                s.push_str(&format!(",\"machine\":{}", js(&role.to_string())));
                if let Some(x) = file.extent {
                    s.push_str(&format!(
                        ",\"events\":{},\"first\":{},\"last\":{}",
                        x.events, x.first, x.last
                    ));
                }
            }
            match &file.source {
                Err(e) => s.push_str(&format!(",\"error\":{}}}", js(e))),
                Ok(src) => {
                    let an: Vec<String> = file
                        .applies
                        .iter()
                        .flatten()
                        .map(|a| {
                            format!(
                                "{{\"name\":{},\"about\":{},\"by\":{},\"value\":{},\"unit\":{},\"level\":{},\"snapshots\":{}}}",
                                js(a.name),
                                js(a.about),
                                js(a.by[0].0),
                                js(a.value),
                                js(a.unit.suffix()),
                                js(a.traits.level),
                                a.traits.snapshots
                            )
                        })
                        .collect();
                    let sk: Vec<String> = file
                        .skipped
                        .iter()
                        .map(|(n, w)| format!("{{\"analyzer\":{},\"why\":{}}}", js(n), js(w)))
                        .collect();
                    // What kstate watch did and saw, for markers on the time axis.
                    let log: Vec<String> = kstate_views::survey::watch_log(src.trace())
                        .iter()
                        .map(|e| {
                            format!(
                                "{{\"ts\":{},\"kind\":{},\"text\":{}}}",
                                e.ts,
                                js(&e.kind),
                                js(&e.text)
                            )
                        })
                        .collect();
                    s.push_str(&format!(
                        ",\"error\":null,\"start\":{},\"end\":{},\"cpus\":{},\"samples\":{},\"analyzers\":[{}],\"skipped\":[{}],\"watch_log\":[{}]}}",
                        file.range.0,
                        file.range.1,
                        src.trace().cpu_count,
                        kstate_views::profile::tree::has_samples(src.trace()),
                        an.join(","),
                        sk.join(","),
                        log.join(",")
                    ));
                }
            }
        }
        s.push_str("]}");
        s.into_bytes()
    }

    fn panel(&self, p: &Params) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        let mut q = stat_query(p.need("a")?, p.filters()?)?;
        let mode = p.get("mode").unwrap_or("stat");
        match mode {
            "stat" | "dist" => {}
            "log" => q.mode = Mode::Log,
            m => return Err(format!("mode: {m:?} is not stat, dist or log")),
        }
        q.sort = p.get("sort").map(str::to_string);
        q.top = p
            .get("top")
            .map(|_| p.number("top", "a number", None))
            .transpose()?;
        q.check().map_err(|e| e.to_string())?;
        let meta = Meta {
            file: self.files[f].label.clone(),
            filters: q.filters.describe(),
        };
        let mut out = Vec::new();
        match (q.mode, mode) {
            (Mode::Log, _) => {
                // The longest samples, as `kstate analyze NAME --log --sort value --top 20`.
                let source = self.files[f].source.as_ref().map_err(|e| e.clone())?;
                let order = kstate_render::sorted::LogOrder::parse("value")?;
                let mut sorted = kstate_render::sorted::SortedLog::new(order, LOG_TOP);
                let o = source.run(&q, &mut sorted).map_err(|e| e.to_string())?;
                let mut w = LogWriter::start_ordered(
                    &mut out,
                    Format::Json,
                    q.analyzer,
                    q.by(),
                    &meta,
                    &order.describe(LOG_TOP),
                )
                .map_err(|e| e.to_string())?;
                sorted.drain_into(&mut w).map_err(|e| e.to_string())?;
                w.finish(&o, &meta).map_err(|e| e.to_string())?;
            }
            (_, "dist") => {
                let o = self.outcome(f, &q)?;
                kstate_render::dist(&o, &meta, Buckets::Log10, Format::Json, &mut out)
                    .map_err(|e| e.to_string())?;
            }
            _ => {
                let o = self.outcome(f, &q)?;
                kstate_render::stat(&o, &meta, Format::Json, &mut out)
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(out)
    }

    fn compare(&self, p: &Params) -> Result<Vec<u8>, String> {
        let filters = p.filters()?;
        let inout = p.get("kind") == Some("inout");
        let (sides, labels) = match p.get("kind").unwrap_or("ab") {
            "ab" => {
                if self.files.len() < 2 {
                    return Err("A/B comparison needs two files: kstate ui A B".into());
                }
                let (a, b) = (self.file_at(0)?, self.file_at(1)?);
                (
                    [(a, filters.clone()), (b, filters)],
                    [self.files[a].label.clone(), self.files[b].label.clone()],
                )
            }
            "inout" => {
                let f = self.file(p)?;
                let (outside, w) = outside(&filters)?;
                (
                    [(f, outside), (f, filters)],
                    [format!("outside {w}"), format!("inside {w}")],
                )
            }
            k => return Err(format!("kind: {k:?} is not ab or inout")),
        };
        // What applies to each side: for every analyzer ("*"), what the files' surveys
        // found; for one, whether its passes succeed (below).
        let mut has: [Vec<&str>; 2] = Default::default();
        let names: Vec<&'static str> = match p.need("a")? {
            "*" => {
                for (side, h) in has.iter_mut().enumerate() {
                    let applies = self.files[sides[side].0].applies.iter().flatten();
                    *h = applies.map(|x| x.name).collect();
                }
                has[0]
                    .iter()
                    .copied()
                    .filter(|x| has[1].contains(x))
                    .collect()
            }
            n => vec![Query::new(n).map_err(|e| e.to_string())?.analyzer.name],
        };
        let one = p.get("a") != Some("*");
        let mut rules = Rules::default();
        if inout {
            rules.rank_by = &kstate_views::compare::RATES;
            rules.per_second = true;
            rules.same_recording = true;
        }
        let lengths = self.lengths(&sides, inout);
        if let Some(m) = p.get("metric") {
            rules.metric = kstate_views::compare::Metric::parse(m)?;
        }
        let mut diffs = Vec::new();
        let mut unmatched = Vec::new();
        for name in names {
            let qa = stat_query(name, sides[0].1.clone())?;
            let qb = stat_query(name, sides[1].1.clone())?;
            let (ra, rb) = (self.outcome(sides[0].0, &qa), self.outcome(sides[1].0, &qb));
            for (side, ok) in [ra.is_ok(), rb.is_ok()].into_iter().enumerate() {
                if ok && one {
                    has[side].push(name);
                }
            }
            match (ra, rb) {
                (Ok(a), Ok(b)) => diffs.push(compare_outcomes(&a, &b, &rules, lengths)),
                (Err(e), _) | (_, Err(e)) => unmatched.push(Unmatched {
                    analyzer: name,
                    why: e.lines().next().unwrap_or("").to_string(),
                }),
            }
        }
        if diffs.is_empty() {
            return Err(nothing_in_common([&labels[0], &labels[1]], &has));
        }
        let c = Comparison::new(&labels[0], &labels[1], rules, diffs, unmatched);
        let mut out = Vec::new();
        kstate_render::compare::comparison(&c, Format::Json, &mut out)
            .map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// How long each side of a comparison lasted (ns), as `kstate compare` measures it
    /// ([`kstate_views::compare::length`]); outside a window, the rest of the file.
    fn lengths(&self, sides: &[(usize, Filters); 2], inout: bool) -> Option<(u64, u64)> {
        let length = |(f, filters): &(usize, Filters), window| {
            let source = self.files[*f].source()?;
            kstate_views::compare::length(source, if window { filters.window } else { None })
        };
        if inout {
            let inside = length(&sides[1], true)?;
            let outside = length(&sides[1], false)?.checked_sub(inside)?;
            return (outside > 0).then_some((outside, inside));
        }
        length(&sides[0], true).zip(length(&sides[1], true))
    }

    fn lanes(&self, p: &Params) -> Result<Vec<u8>, String> {
        let f = self.file(p)?;
        // Out of the recording: refused, not wrapped around (or drawn empty).
        let (from, to) = self.span_params(f, p)?;
        let bins: usize = p.number("w", "a number of bins", None)?;
        let mut filters = p.filters()?;
        filters.window = None;
        filters.not_window = None;
        let key = format!("{f}|{from}|{to}|{bins}|{}", filters_key(&filters));
        let body = self.lanes.get_or(
            &key,
            |b| b.len(),
            || {
                let start = self.files[f].range.0;
                let span = Span::new(from, to, bins).map_err(|e| e.to_string())?;
                let source = self.files[f].source.as_ref().map_err(|e| e.clone())?;
                let summary = self.summary_of(f)?;
                let o = summary
                    .overview(source, span, &filters)
                    .map_err(|e| e.to_string())?;
                Ok(Arc::new(lanes_json(&o, start)))
            },
        )?;
        Ok((*body).clone())
    }
}

fn lanes_json(o: &Overview, start: u64) -> Vec<u8> {
    let mut w = Vec::new();
    let lanes = |w: &mut Vec<u8>, name: &str, v: &[Lane]| {
        let _ = write!(w, ",{}:[", js(name));
        for (i, l) in v.iter().enumerate() {
            let vals: Vec<String> = l
                .values
                .iter()
                .map(|x| format!("{}", (x * 1000.0).round() / 1000.0))
                .collect();
            let _ = write!(
                w,
                "{}{{\"name\":{},\"peak\":{:.3},\"peak_at\":{:.9},\"values\":[{}]}}",
                if i > 0 { "," } else { "" },
                js(&l.name),
                l.peak.0,
                l.peak.1.saturating_sub(start) as f64 / 1e9,
                vals.join(",")
            );
        }
        let _ = write!(w, "]");
    };
    let _ = write!(
        w,
        "{{\"from\":{:.9},\"to\":{:.9},\"bins\":{}",
        o.span.from.saturating_sub(start) as f64 / 1e9,
        o.span.to.saturating_sub(start) as f64 / 1e9,
        o.span.bins
    );
    lanes(&mut w, "busy", &o.busy);
    lanes(&mut w, "runq", &o.runq);
    lanes(&mut w, "blk", &o.blk);
    lanes(&mut w, "lost", &o.lost);
    match &o.syscalls {
        None => {
            let _ = write!(w, ",\"syscalls\":null");
        }
        Some(s) => {
            let cells: Vec<String> = s
                .cells
                .iter()
                .map(|(b, r, n)| format!("[{b},{r},{n}]"))
                .collect();
            let longest: Vec<String> = s
                .longest
                .iter()
                .map(|l| match l {
                    Some((v, k)) => format!("[{v},{}]", js(k)),
                    None => "null".into(),
                })
                .collect();
            let _ = write!(
                w,
                ",\"syscalls\":{{\"row0\":{},\"rows\":{},\"rows_per_decade\":{},\"calls\":{},\"cells\":[{}],\"longest\":[{}]}}",
                s.row0,
                s.rows,
                ROWS_PER_DECADE,
                s.calls,
                cells.join(","),
                longest.join(",")
            );
        }
    }
    let missing: Vec<String> = o.missing.iter().map(|m| js(m)).collect();
    let _ = write!(w, ",\"missing\":[{}]}}", missing.join(","));
    w
}
