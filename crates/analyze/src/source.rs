//! The engine's front door: a [`Source`] (a recording opened for analysis) answers a
//! [`Query`] (one analyzer, its keying, mode, filters, sort and top) with an [`Outcome`],
//! or surveys itself with every analyzer that applies ([`Source::survey`]). The CLI, the
//! browser UI and the fleet summarizer all ask through here, so that the same question
//! gives the same numbers whichever front end asks it.

use std::path::Path;
use std::sync::Arc;

use kstate_format::Trace;

use crate::analyzer::{sort_rows, AnyPass, Config, LogSink, Mode, NoLog, Outcome};
use crate::error::Error;
use crate::filter::Filters;
use crate::fxmap::FxMap;
use crate::{analyzers, Info};
use kstate_format::stream::page_index::PageIndex;

/// A recording opened for analysis: the trace, and what analyses need beside it (the
/// thread-group ids a raw capture saved next to its pages).
pub struct Source {
    trace: Trace,
    label: String,
    tgids: FxMap<i32, i32>,
    pages: Option<Arc<PageIndex>>,
}

impl Source {
    /// Opens a trace.dat (v6/v7), a perf.data, a raw tracefs capture directory or a kstate
    /// Parquet directory (with the `parquet` feature). Errors name the file, the offset
    /// and the problem.
    pub fn open(path: &Path) -> Result<Source, Error> {
        let trace = Trace::open(path)?;
        Ok(Source::new(trace, path.display().to_string()))
    }

    /// A trace opened elsewhere; `label` names it in results (usually its path).
    pub fn new(trace: Trace, label: String) -> Source {
        let tgids = Source::saved_tgids(&trace);
        Source {
            trace,
            label,
            tgids,
            pages: None,
        }
    }

    /// Thread id -> thread-group id that a raw capture saved beside its pages (empty for
    /// other files). A Parquet directory's trace path is its host directory, where
    /// convert put them.
    pub fn saved_tgids(trace: &Trace) -> FxMap<i32, i32> {
        match trace.path.is_dir() {
            true => saved_tgids(&trace.path),
            false => FxMap::default(),
        }
    }

    /// Indexes the file's pages (one walk over them) so that later passes skip the pages
    /// they would read for nothing: worth it for a front end that asks many questions of
    /// one file (`kstate ui`), not for one question. Results stay the same, except that a
    /// window query of a `window_local` analyzer counts only the events around the window
    /// (its outcome says so in a note), which it does with or without this call (see
    /// [`Source::run`]).
    pub fn index_pages(&mut self) -> Result<(), Error> {
        self.pages = Some(Arc::new(PageIndex::build(&self.trace)?));
        Ok(())
    }

    /// The page index, once [`Source::index_pages`] made it.
    pub fn pages(&self) -> Option<&Arc<PageIndex>> {
        self.pages.as_ref()
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// The name results carry (the path as the user gave it).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Thread id -> thread-group id where the capture saved them (empty otherwise).
    pub fn tgids(&self) -> &FxMap<i32, i32> {
        &self.tgids
    }

    /// Runs one analyzer. `--stat` and `--dist` rows come back sorted and cut to
    /// `query.top`; `--log` rows go to `log` as pairs complete (and the outcome holds the
    /// counts, losses and notes of the pass).
    pub fn run(&self, query: &Query, log: &mut dyn LogSink) -> Result<Outcome, Error> {
        query.check()?;
        let mut cfg = query.config(&self.tgids);
        cfg.pages = self.pages.clone().or_else(|| self.window_index(query));
        let mut o = (query.analyzer.run)(&self.trace, &cfg, log)?;
        if query.mode != Mode::Log {
            let sort = query.sort.as_deref().unwrap_or("total");
            sort_rows(&mut o.rows, sort, query.analyzer.flag_column, query.top)
                .map_err(Error::Query)?;
        }
        Ok(o)
    }

    /// A window query of a `window_local` analyzer reads only around the window when the
    /// pages are indexed, and its counts (events read, pairs outside the filters,
    /// unmatched, open) then cover that stretch. So that one question gives one answer
    /// whichever front end asks it, such a query indexes the pages even when the front
    /// end did not ask for it (`kstate analyze syscall --window`): the index costs a walk
    /// of the record headers, cheaper than decoding every event of the whole file.
    /// (An index that cannot be made leaves the pass to read everything and report the
    /// damage where it meets it.)
    fn window_index(&self, query: &Query) -> Option<Arc<PageIndex>> {
        let f = &query.filters;
        if !query.analyzer.traits.window_local || f.window.is_none() || f.not_window.is_some() {
            return None;
        }
        PageIndex::build(&self.trace).ok().map(Arc::new)
    }

    /// Whether `info` applies to this file (what its statistics pass would say, without
    /// the pass): the error the pass would return when the file's formats lack its events
    /// or it holds none of them, else `Ok`. The pass reads up to the analyzer's first
    /// event (over the page index, where made: past the pages without its events).
    /// Damage further on is reported by the passes that meet it, as any pass does.
    pub fn applies(&self, info: &'static Info) -> Result<(), Error> {
        let mut cfg = Config::new(Mode::Stat);
        cfg.tgids = self.tgids.clone();
        cfg.pages = self.pages.clone();
        cfg.probe = true;
        (info.run)(&self.trace, &cfg, &mut NoLog)?;
        Ok(())
    }

    /// A pass of `query`'s analyzer that the caller feeds from its own time-ordered merge
    /// (several analyzers over one read of the file), with the event ids it wants.
    pub fn start(&self, query: &Query) -> Result<(Box<dyn AnyPass>, Vec<u32>), Error> {
        query.check()?;
        let live = query
            .analyzer
            .live
            .ok_or_else(|| Error::Query(format!("{} cannot share a pass", query.analyzer.name)))?;
        Ok(live(&self.trace, &query.config(&self.tgids))?)
    }

    /// [`Source::run`] for a statistics or distribution query, which streams no rows.
    pub fn aggregate(&self, query: &Query) -> Result<Outcome, Error> {
        self.run(query, &mut NoLog)
    }
}

/// One question to one analyzer.
#[derive(Debug, Clone)]
pub struct Query {
    pub analyzer: &'static Info,
    /// One of the analyzer's `by` names; `None` for its default.
    pub by: Option<String>,
    pub mode: Mode,
    pub filters: Filters,
    /// Per-interval results in ns, for analyzers whose `traits.per_interval` is set.
    pub interval: Option<u64>,
    /// Column to sort statistics rows by (default: total).
    pub sort: Option<String>,
    /// Only the first N rows.
    pub top: Option<usize>,
    /// Threads the analysis may use ([`crate::slices`]); the results are the same.
    pub threads: usize,
}

impl Query {
    /// A statistics query to the analyzer called `name`.
    pub fn new(name: &str) -> Result<Query, Error> {
        let analyzer = analyzers::find(name).ok_or_else(|| {
            let names: Vec<&str> = analyzers::ALL.iter().map(|a| a.name).collect();
            Error::Query(format!(
                "no analyzer {name:?}; there are: {}",
                names.join(", ")
            ))
        })?;
        Ok(Query::of(analyzer))
    }

    /// A statistics query to `analyzer`.
    pub fn of(analyzer: &'static Info) -> Query {
        Query {
            analyzer,
            by: None,
            mode: Mode::Stat,
            filters: Filters::default(),
            interval: None,
            sort: None,
            top: None,
            threads: 1,
        }
    }

    /// The query in `mode`.
    pub fn mode(mut self, mode: Mode) -> Query {
        self.mode = mode;
        self
    }

    /// The query keyed by `by` (one of the analyzer's keyings; `None` for its default).
    pub fn keyed(mut self, by: Option<&str>) -> Query {
        self.by = by.map(str::to_string);
        self
    }

    /// The query restricted by `filters`.
    pub fn filters(mut self, filters: Filters) -> Query {
        self.filters = filters;
        self
    }

    /// The combinations no analyzer can answer, refused before any event is read.
    pub fn check(&self) -> Result<(), Error> {
        if let (Some(a), Some(b)) = (self.filters.min, self.filters.max) {
            if a > b {
                return Err(Error::Query("--min is larger than --max".into()));
            }
        }
        if self.interval.is_some() && !self.analyzer.traits.per_interval {
            return Err(Error::Query(format!(
                "--interval applies to microstate, not {}",
                self.analyzer.name
            )));
        }
        Ok(())
    }

    /// The keying in effect: `by`, or the analyzer's default.
    pub fn by(&self) -> &str {
        self.by.as_deref().unwrap_or(self.analyzer.by[0].0)
    }

    pub(crate) fn config(&self, tgids: &FxMap<i32, i32>) -> Config {
        let mut cfg = Config::new(self.mode);
        cfg.by = self.by.clone();
        cfg.filters = self.filters.clone();
        cfg.interval = self.interval;
        cfg.threads = self.threads;
        cfg.tgids = tgids.clone();
        cfg
    }
}

/// tid -> tgid from a raw capture's saved_tgids ("TID TGID" lines), if present.
fn saved_tgids(dir: &Path) -> FxMap<i32, i32> {
    let mut m = FxMap::default();
    if let Ok(text) = std::fs::read_to_string(dir.join("saved_tgids")) {
        for line in text.lines() {
            let mut w = line.split_whitespace();
            if let (Some(Ok(t)), Some(Ok(g))) = (w.next().map(str::parse), w.next().map(str::parse))
            {
                if g != 0 {
                    m.insert(t, g);
                }
            }
        }
    }
    m
}
