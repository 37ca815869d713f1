//! `blkqueue`: requests in flight per device and direction over time (LKST's blkqueue).
//!
//! Events: block:block_rq_insert/issue/complete (block_rq_requeue where recorded);
//! requests are identified as in `biotime` (device, first sector, direction; see
//! `block.rs`).
//!
//! The length (`--by`):
//! - `queue` (default): requests inserted or issued and not yet completed: waiting in the
//!   I/O scheduler or at the device. A request enters at its insert (or at its issue when
//!   it was issued without one) and leaves at its completion; a requeued request stays.
//! - `device`: requests issued and not yet completed (the device's queue depth). A
//!   requeue takes the request off the device until it is issued again.
//!
//! Requests already in flight when the trace starts are unknown: lengths are lower
//! bounds until those complete (their completions count as unmatched). When events were
//! lost, the requests in flight are forgotten and every length restarts from 0 (a lower
//! bound again); the number of such restarts is reported.
//!
//! Output:
//! - `--log`: a row per change: time, key, the new length (`len=N`), and the task that
//!   submitted the request that entered or left (not the task interrupted by the
//!   completion).
//! - `--stat`: the table `queue` per key: `changes` (in the selected time), `avg_len`
//!   (the length averaged over
//!   the analysed time, weighted by how long each length lasted; a key counts as 0 before
//!   its first request), `max_len`, `requeues` (requests the driver handed back because
//!   the device was busy); keys idle throughout the selected time are left out. The main rows are what each arriving request found:
//!   the length just after it entered, itself included (count = requests that entered,
//!   avg/max/percentiles of that length); `--dist` shows their histogram.
//!   Key: `0000fe00-W(vda)` (see `block.rs`).
//!
//! Memory: one entry per request in flight and one per key.

use kstate_format::Trace;

use super::block::{DevNames, Role, Rq, RqEvents};
use crate::analyzer::{
    Analyzer, Cell, Info, Kind, Missing, Out, Sample, Table, Tasks, Traits, Unit,
};
use crate::fxmap::FxMap;
use kstate_format::stream::merge::Event;

#[derive(Debug, Clone, Default)]
struct Level {
    len: u64,
    since: u64,
    /// Integral of len over the selected time, in request-ns.
    area: u128,
    max: u64,
    /// Changes seen (any time), and those in the selected time.
    seen: u64,
    changes: u64,
    /// Requests the driver handed back (device busy) in the selected time.
    requeues: u64,
}

pub struct BlkQueue {
    device: bool,
    rq: RqEvents,
    /// Requests counted in a length now, and the task that submitted each.
    counted: FxMap<Rq, i32>,
    levels: FxMap<u64, Level>,
    names: DevNames,
    first: Option<u64>,
    loss_gen: u64,
    restarts: u64,
}

impl BlkQueue {
    fn change(&mut self, rq: Rq, up: bool, tid: i32, cpu: u32, out: &mut Out) {
        let now = out.now();
        let sel = out.sel();
        let key = rq.key();
        let l = self.levels.entry(key).or_default();
        if l.seen > 0 {
            l.area += l.len as u128 * sel.overlap_ns(l.since, now) as u128;
        }
        l.since = now;
        l.seen += 1;
        if up {
            l.len += 1;
        } else {
            l.len = l.len.saturating_sub(1);
        }
        if sel.contains(now) {
            l.max = l.max.max(l.len);
            l.changes += 1;
        }
        let len = l.len;
        let kind = if out.is_log() {
            Kind::Level
        } else if up {
            Kind::Dur
        } else {
            return;
        };
        out.emit(Sample {
            start: now,
            value: len,
            key,
            tid,
            cpu,
            flag: false,
            kind,
        });
    }

    fn enter(&mut self, rq: Rq, ev: &Event<'_>, out: &mut Out) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.counted.entry(rq) {
            e.insert(ev.pid());
            self.change(rq, true, ev.pid(), ev.cpu, out);
        }
    }

    fn leave(&mut self, rq: Rq, ev: &Event<'_>, out: &mut Out) -> bool {
        if let Some(tid) = self.counted.remove(&rq) {
            self.change(rq, false, tid, ev.cpu, out);
            true
        } else {
            false
        }
    }

    /// Events were lost: what is in flight is unknown; start again from nothing.
    fn restart(&mut self, out: &mut Out) {
        let now = out.now();
        let sel = out.sel();
        for l in self.levels.values_mut() {
            if l.seen > 0 {
                l.area += l.len as u128 * sel.overlap_ns(l.since, now) as u128;
            }
            l.since = now;
            l.len = 0;
        }
        self.counted.clear();
        self.restarts += 1;
    }
}

impl Analyzer for BlkQueue {
    const INFO: Info = Info {
        name: "blkqueue",
        about: "block requests in flight per device and direction over time (queue length)",
        needs: "block:block_rq_insert + block:block_rq_issue + block:block_rq_complete",
        preset: "bio",
        by: &[
            (
                "queue",
                "device + direction; inserted or issued, not completed",
            ),
            ("device", "device + direction; issued, not completed"),
        ],
        flag_column: None,
        value: "queue length (--stat/--dist: on each request's arrival, itself included)",
        unit: Unit::Count("len"),
        traits: Traits::DEFAULT,
        run: crate::piped::drive_piped::<BlkQueue>,
        live: Some(crate::analyzer::live::<BlkQueue>),
    };

    fn bind(trace: &Trace, by: &str) -> Result<(Self, Vec<u32>), Missing> {
        let mut missing = Vec::new();
        let Some(rq) = RqEvents::bind(trace, &mut missing) else {
            return Err(Missing::events(missing));
        };
        let ids = rq.ids.clone();
        Ok((
            BlkQueue {
                device: by == "device",
                rq,
                counted: FxMap::default(),
                levels: FxMap::default(),
                names: DevNames::new(trace),
                first: None,
                loss_gen: 0,
                restarts: 0,
            },
            ids,
        ))
    }

    fn event(&mut self, ev: &Event<'_>, out: &mut Out) {
        self.first.get_or_insert(ev.ts);
        let mark = out.mark();
        if mark.gen != self.loss_gen {
            self.loss_gen = mark.gen;
            self.restart(out);
        }
        let (role, rq) = self.rq.decode(ev.id, ev.payload, ev.endian);
        match role {
            Role::Insert if !self.device => self.enter(rq, ev, out),
            Role::Issue => self.enter(rq, ev, out),
            Role::Requeue => {
                if out.sel().contains(ev.ts) {
                    self.levels.entry(rq.key()).or_default().requeues += 1;
                }
                if self.device {
                    self.leave(rq, ev, out);
                }
            }
            Role::Complete if !self.leave(rq, ev, out) => out.unmatched(),
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Out) -> u64 {
        let now = out.now();
        let sel = out.sel();
        for l in self.levels.values_mut() {
            if l.seen > 0 {
                l.area += l.len as u128 * sel.overlap_ns(l.since, now) as u128;
                l.since = now;
            }
        }
        self.counted.len() as u64
    }

    fn key_name(&self, key: u64, _tasks: &Tasks) -> String {
        self.names.key_name(key)
    }

    fn tables(&mut self, out: &Out) -> Vec<Table> {
        let span = self.first.map_or(0, |f| out.sel().overlap_ns(f, out.now()));
        let mut rows: Vec<(String, &Level)> = self
            .levels
            .iter()
            // Keys with nothing in flight and no change in the selected time are left out.
            .filter(|(_, l)| l.changes > 0 || l.area > 0 || l.requeues > 0)
            .map(|(k, l)| (self.names.key_name(*k), l))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let rows = rows
            .into_iter()
            .map(|(key, l)| {
                let avg = if span > 0 {
                    l.area as f64 / span as f64
                } else {
                    0.0
                };
                vec![
                    Cell::Text(key),
                    Cell::Int(l.changes),
                    Cell::Float((avg * 1e6).round() / 1e6),
                    Cell::Int(l.max),
                    Cell::Int(l.requeues),
                ]
            })
            .collect();
        let what = if self.device {
            "issued, not completed"
        } else {
            "inserted or issued, not completed"
        };
        let restarts = if self.restarts > 0 {
            format!(
                "; restarted from 0 after {} losses of events",
                self.restarts
            )
        } else {
            String::new()
        };
        vec![Table {
            name: "queue",
            title: format!(
                "requests in flight ({what}) per device and direction, averaged over the analysed time (lower bound at start{restarts})"
            ),
            columns: vec!["key", "changes", "avg_len", "max_len", "requeues"],
            rows,
        }]
    }
}
