//! How a run is asked for: presentation, buckets, filters, and the task names keys print with.

use kstate_format::Trace;

use crate::filter::Filters;
use crate::fxmap::FxMap;

/// How results are presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Stat,
    Dist(Buckets),
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buckets {
    Log2,
    Log10,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// One of the analyzer's `INFO.by` names; `None` for its default.
    pub by: Option<String>,
    pub mode: Mode,
    pub filters: Filters,
    /// Thread id -> thread-group id, where the trace records them (tracefs `saved_tgids`).
    pub tgids: FxMap<i32, i32>,
    /// Time-series step in ns, for analyzers that report per interval (`microstate`).
    pub interval: Option<u64>,
    /// The file's pages, indexed once by a front end that asks many questions of it: a
    /// pass then skips the pages it would read for nothing ([`kstate_format::stream::page_index`]).
    pub pages: Option<std::sync::Arc<kstate_format::stream::page_index::PageIndex>>,
    /// Threads a pass may use ([`crate::slices`], [`crate::piped`]); 1 reads the file
    /// in one pass on this thread.
    pub threads: usize,
    /// Stop at the first event of the analyzer's (a probe of whether it applies, see
    /// [`crate::Source::applies`]): the outcome covers that event only.
    pub probe: bool,
}

impl Config {
    pub fn new(mode: Mode) -> Config {
        Config {
            by: None,
            mode,
            filters: Filters::default(),
            tgids: FxMap::default(),
            interval: None,
            pages: None,
            threads: 1,
            probe: false,
        }
    }
}

/// Task names and thread groups, as far as the trace tells them: seeded from the saved
/// cmdlines (and tgids), from the process table kstate records with a trace (its
/// PROCESSES section), and kept current by analyzers that see comms or clones in events.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tasks {
    comms: FxMap<i32, [u8; 16]>,
    tgids: FxMap<i32, i32>,
}

impl Tasks {
    pub fn new(trace: &Trace, tgids: &FxMap<i32, i32>) -> Tasks {
        let mut t = Tasks {
            comms: FxMap::default(),
            tgids: tgids.clone(),
        };
        for (pid, c) in &trace.comms {
            t.set_comm(*pid, c.as_bytes());
        }
        // kstate recordings: the process table taken when recording started. Threads
        // that start later are learned from events (task:task_newtask) where recorded.
        if let Some(b) = trace.extra(kstate_format::sections::ids::PROCESSES) {
            if let Ok(ps) = kstate_format::sections::decode_processes(b) {
                for p in ps {
                    if p.pid > 0 && p.tgid > 0 {
                        t.tgids.entry(p.pid).or_insert(p.tgid);
                    }
                }
            }
        }
        t
    }
    /// Forgets the names seeded from the file, for a pass over a later time slice: what
    /// it then holds was learned from its own events, and overlays the earlier slices'
    /// names ([`Tasks::overlay`]).
    pub(crate) fn forget_comms(&mut self) {
        self.comms.clear();
    }
    /// The names `later` learned replace these, as they would have in one pass.
    pub(crate) fn overlay(&mut self, later: Tasks) {
        self.comms.extend(later.comms);
    }
    /// Records that thread `tid` belongs to thread group `tgid`.
    pub fn set_tgid(&mut self, tid: i32, tgid: i32) {
        self.tgids.insert(tid, tgid);
    }
    /// task_newtask in `parent` made `child` with `clone_flags`: a thread joins the
    /// parent's group, a process leads its own. A parent whose group is unknown predates
    /// the trace and is taken to lead its own group.
    pub fn new_task(&mut self, parent: i32, child: i32, clone_flags: u64) {
        const CLONE_THREAD: u64 = 0x0001_0000;
        let group = if clone_flags & CLONE_THREAD != 0 {
            match self.tgid(parent) {
                Some(g) => g,
                None => {
                    self.set_tgid(parent, parent);
                    parent
                }
            }
        } else {
            child
        };
        if child > 0 {
            self.set_tgid(child, group);
        }
    }
    /// Records `tid`'s name (a `char[16]` field, NUL-padded or not).
    #[inline]
    pub fn set_comm(&mut self, tid: i32, comm: &[u8]) {
        let mut c = [0u8; 16];
        let n = comm
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(comm.len())
            .min(16);
        c[..n].copy_from_slice(&comm[..n]);
        match self.comms.get_mut(&tid) {
            Some(old) => *old = c,
            None => {
                self.comms.insert(tid, c);
            }
        }
    }
    /// Whether the name of `tid` is known (idle's always is).
    pub fn knows(&self, tid: i32) -> bool {
        tid == 0 || self.comms.contains_key(&tid)
    }

    pub fn comm(&self, tid: i32) -> String {
        if tid == 0 {
            return "<idle>".into();
        }
        match self.comms.get(&tid) {
            Some(c) => {
                let n = c.iter().position(|&b| b == 0).unwrap_or(16);
                String::from_utf8_lossy(&c[..n]).into_owned()
            }
            None => "<...>".into(),
        }
    }
    #[inline]
    pub(super) fn comm_is(&self, tid: i32, want: &str) -> bool {
        self.comm(tid) == want
    }
    /// The thread group of `tid` if the trace recorded it.
    pub fn tgid(&self, tid: i32) -> Option<i32> {
        self.tgids.get(&tid).copied()
    }
    pub fn knows_tgids(&self) -> bool {
        !self.tgids.is_empty()
    }
    /// `comm-tid`, as trace-cmd prints tasks.
    pub fn label(&self, tid: i32) -> String {
        format!("{}-{}", self.comm(tid), tid)
    }
}
