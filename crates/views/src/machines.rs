//! A host's recording and its guests' read together on the host's clock, as `trace-cmd
//! report -i host.dat -i guest.dat` does: a guest's file carries trace-cmd's TIME_SHIFT
//! option, which the reader applies, so its events are already in host time; here every
//! machine is surveyed on one time axis that holds them all (so the charts of the host
//! and of each guest line up), the overview's lanes are binned over that axis, and the
//! findings of all machines are ranked together, each naming its machine.

use std::fmt;

use kstate_format::Trace;

use crate::findings::Finding;
use crate::lanes::{overview, Overview, Span};
use crate::survey::{self, Survey};
use crate::timeline::{TimeAxis, BINS};
use kstate_analyze::filter::Filters;
use kstate_analyze::{Error, Source};
use kstate_format::stream::merge::{IdFilter, Merger};

/// Which machine a recording is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Host,
    /// The n-th guest (from 1), in the order given.
    Guest(usize),
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Host => f.write_str("host"),
            Role::Guest(n) => write!(f, "guest {n}"),
        }
    }
}

/// Whether a recording is a guest's: its clock is mapped to a host's (TIME_SHIFT).
pub fn is_guest(trace: &Trace) -> bool {
    trace.time_shift.as_ref().is_some_and(|t| t.is_active())
}

/// The roles of recordings given as a host and its guests: the first must be on its own
/// clock, every other must carry a TIME_SHIFT to its host's. The error says which file
/// breaks the rule, for a front end to show (or to fall back on, as `kstate ui A B`
/// compares two files that are not a host and its guest).
pub fn roles(traces: &[(&str, &Trace)]) -> Result<Vec<Role>, String> {
    let Some(((host, first), guests)) = traces.split_first() else {
        return Err("no recording given".into());
    };
    if guests.is_empty() {
        return Err("a host needs at least one guest recording beside it".into());
    }
    if is_guest(first) {
        return Err(format!(
            "{host}: is a guest's recording (its clock is mapped to its host's by a \
             TIME_SHIFT option); give the host's recording first"
        ));
    }
    let mut roles = vec![Role::Host];
    for (i, (name, t)) in guests.iter().enumerate() {
        if !is_guest(t) {
            return Err(format!(
                "{name}: is not a guest's recording of {host} (it has no TIME_SHIFT option \
                 mapping its clock to its host's, as trace-cmd record -A writes)"
            ));
        }
        roles.push(Role::Guest(i + 1));
    }
    Ok(roles)
}

/// A recording's events: how many, and the first and last (on the host's clock for a
/// guest's), as `trace-cmd report` prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub events: u64,
    pub first: u64,
    pub last: u64,
}

/// One pass over every event of `source` (over its page index, where it has one).
pub fn extent(source: &Source) -> Result<Option<Extent>, Error> {
    let trace = source.trace();
    let mut m = match source.pages() {
        Some(index) => Merger::indexed(trace, IdFilter::all(), index, None)?,
        None => Merger::new(trace, None, IdFilter::all())?,
    };
    let mut x: Option<Extent> = None;
    while let Some(ev) = m.next()? {
        let e = x.get_or_insert(Extent {
            events: 0,
            first: ev.ts,
            last: ev.ts,
        });
        e.events += 1;
        e.last = ev.ts;
    }
    Ok(x)
}

/// One machine's recording, surveyed on the shared axis.
pub struct Machine {
    pub role: Role,
    pub survey: Survey,
    /// The overview's lanes over the shared axis ([`BINS`] bins), or why there are none.
    pub lanes: Result<Overview, String>,
}

/// A finding of one machine; its text starts with the machine's name.
pub struct MachineFinding {
    pub machine: usize,
    pub finding: Finding,
}

/// A host and its guests on one time axis (host clock).
pub struct Machines {
    pub axis: TimeAxis,
    pub machines: Vec<Machine>,
    /// Every machine's findings, ranked together by share of the shared axis.
    pub findings: Vec<MachineFinding>,
}

/// Surveys `sources` (a host, then its guests; see [`roles`]) on one axis.
pub fn survey(sources: &[Source]) -> Result<Machines, Error> {
    let named: Vec<(&str, &Trace)> = sources.iter().map(|s| (s.label(), s.trace())).collect();
    let roles = roles(&named).map_err(Error::Query)?;
    let stats: Vec<survey::Stats> = sources.iter().map(survey::stats).collect();
    let axis = TimeAxis {
        t0: stats.iter().map(|s| s.axis.t0).min().unwrap_or(0),
        t1: stats.iter().map(|s| s.axis.t1).max().unwrap_or(1),
    };
    let span = Span::new(axis.t0, axis.t1.max(axis.t0 + 1), BINS)?;
    let mut machines = Vec::new();
    for ((source, stats), role) in sources.iter().zip(stats).zip(roles) {
        let survey = stats.finish(source, axis);
        let lanes = overview(source, span, &Filters::default()).map_err(|e| e.to_string());
        machines.push(Machine {
            role,
            survey,
            lanes,
        });
    }
    let mut findings: Vec<MachineFinding> = machines
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m.survey.findings.iter().map(move |f| {
                let mut finding = f.clone();
                finding.text = format!("{}: {}", m.role, f.text);
                MachineFinding {
                    machine: i,
                    finding,
                }
            })
        })
        .collect();
    findings.sort_by(|a, b| b.finding.share.total_cmp(&a.finding.share));
    Ok(Machines {
        axis,
        machines,
        findings,
    })
}
