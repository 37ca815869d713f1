//! `biotime`: block request time per device and direction (LKST's biotime).
//!
//! Events: block:block_rq_issue and block:block_rq_complete (block:block_rq_insert for
//! queue time, block:block_rq_requeue where recorded). Requests are paired by device,
//! first sector and direction (see `block.rs`; flushes by device).
//!
//! Value (`--by`):
//! - `issue` (default): issue -> complete, the time at the device (driver and hardware).
//! - `insert`: insert -> complete, the time in the I/O scheduler's queue plus at the
//!   device. A request issued without an insert (no scheduler, flushes) counts from its
//!   issue: it never waited in a queue.
//!
//! Both keyings measure exactly the same requests: those whose issue was seen. A
//! completion without a seen issue (the request was issued before the recording began,
//! or a flush's original request that the flush machinery completes without issuing it)
//! is counted as unmatched, never given an invented start. A requeued request keeps its
//! insert time and is measured from its last issue.
//!
//! Key: device and direction, LKST-style: `0000fe00-W(vda)` (see `block.rs`).
//! Flag column `errors`: completions with a non-zero error. The task of a sample is the
//! one that inserted (or issued) the request, so `--pid`/`--comm` select the submitter.
//!
//! Memory: one entry per request in flight. Requests merged into another after their
//! insert never complete under their own sector and stay open (reported at the end as
//! open pairs); a later request on the same sector replaces one and counts it unmatched.

use kstate_format::Trace;

use super::block::{DevNames, Role, RqEvents};
use super::sched::bytes;
use crate::analyzer::{Analyzer, Info, Kind, Missing, Out, Sample, Tasks, Traits, Unit};
use crate::pair::Pairs;
use kstate_format::stream::merge::{Event, LossMark};

#[derive(Debug, Clone, Copy)]
struct Req {
    /// Time and loss mark of the (latest) issue, once issued.
    issue: Option<(u64, LossMark)>,
    tid: i32,
}

pub struct BioTime {
    by_insert: bool,
    rq: RqEvents,
    pairs: Pairs<super::block::Rq, Req>,
    names: DevNames,
}

impl Analyzer for BioTime {
    const INFO: Info = Info {
        name: "biotime",
        about: "block request time per device and direction (issue or insert to complete)",
        needs: "block:block_rq_issue + block:block_rq_complete (block_rq_insert for --by insert)",
        preset: "bio",
        by: &[
            (
                "issue",
                "device + direction; time from issue to complete (at the device)",
            ),
            (
                "insert",
                "device + direction; time from insert to complete (queue + device)",
            ),
        ],
        flag_column: Some("errors"),
        value: "request time",
        unit: Unit::Ns,
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<BioTime>,
        live: Some(crate::analyzer::live::<BioTime>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let Some(rq) = RqEvents::bind(trace, &mut missing) else {
            return Err(Missing::events(missing));
        };
        let ids = rq.ids.clone();
        Ok((
            BioTime {
                by_insert: by == "insert",
                rq,
                pairs: Pairs::default(),
                names: DevNames::new(trace),
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        let (role, rq) = self.rq.decode(ev.id, ev.payload, ev.endian);
        let tid = ev.pid();
        if matches!(role, Role::Insert | Role::Issue) {
            if let Some(c) = self.rq.fields(ev.id).and_then(|f| f.comm) {
                out.tasks.set_comm(tid, bytes(ev.payload, c));
            }
        }
        match role {
            Role::Insert => match self.pairs.get_mut(rq) {
                // Inserted again after a requeue: keeps its first insert.
                Some(o) if o.v.issue.is_none() => {}
                // A new request where one was issued and never completed.
                _ => self.pairs.begin(rq, ev.cpu, Req { issue: None, tid }, out),
            },
            Role::Issue => {
                let now = (out.now(), out.mark());
                match self.pairs.get_mut(rq) {
                    Some(o) if o.v.issue.is_none() => o.v.issue = Some(now),
                    _ => self.pairs.begin(
                        rq,
                        ev.cpu,
                        Req {
                            issue: Some(now),
                            tid,
                        },
                        out,
                    ),
                }
            }
            Role::Requeue => {
                if let Some(o) = self.pairs.get_mut(rq) {
                    o.v.issue = None;
                }
            }
            Role::Complete => {
                let Some(o) = self.pairs.end(rq) else {
                    out.unmatched();
                    return;
                };
                let Some((its, imark)) = o.v.issue else {
                    out.unmatched();
                    return;
                };
                let error = self
                    .rq
                    .fields(ev.id)
                    .and_then(|f| f.error)
                    .and_then(|f| f.get_i64(ev.payload, ev.endian))
                    .unwrap_or(0);
                let (start, mark) = if self.by_insert {
                    (o.start, o.mark)
                } else {
                    (its, imark)
                };
                out.pair(
                    mark,
                    Sample {
                        start,
                        value: ev.ts.saturating_sub(start),
                        key: rq.key(),
                        tid: o.v.tid,
                        cpu: o.cpu,
                        flag: error != 0,
                        kind: Kind::Dur,
                    },
                );
            }
            Role::None => {}
        }
    }

    fn finish(&mut self, _out: &mut Out) -> u64 {
        self.pairs.len() as u64
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        self.names.key_name(key)
    }
}
