//! For the tests of analyzers that run in time slices ([`crate::slices::Sliced`]):
//! random runs of switches, wake-ups and migrations among a few tasks on a few CPUs, cut
//! at every place, whose slices joined must give the one pass's results: tasks switched
//! in on several CPUs at once, switched out twice, woken twice, running where no traced
//! switch put them (the inference of [`super::sched::IdleExits`]), switched from and to
//! themselves, moved while queued or not.

use kstate_format::{Endian, Lost, Trace};

use crate::analyzer::{Config, Counts, Mode, NoLog, Pass};
use crate::slices::Sliced;
use kstate_format::stream::merge::{Event, LossMark};

const CPUS: u64 = 3;
const TIDS: u64 = 5;

/// Task `i` of the run (0 is idle); the ids share slots of [`super::sched::Switched`]'s cache.
fn tid(i: u64) -> u64 {
    4 * i
}

/// Only the formats are used: the records are made here.
pub fn formats() -> Trace {
    let path = kstate_testdata::path("lisa-sched_load/trace.dat");
    let mut trace = Trace::open(&path).unwrap();
    assert_eq!(trace.layout.endian, Endian::Little);
    // The runs' CPUs: a slice knows every CPU's task once each has switched in it.
    trace.cpu_count = CPUS as u32;
    trace
}

pub struct Rec {
    ts: u64,
    cpu: u32,
    id: u32,
    payload: Vec<u8>,
}

/// A record of event `name` by task `pid`, its fields set to `values`.
fn record(trace: &Trace, name: &str, pid: i32, values: &[(&str, u64)]) -> (u32, Vec<u8>) {
    let f = trace.events.find(name).unwrap();
    let size = f.fields.iter().map(|x| x.offset + x.size).max().unwrap();
    let mut p = vec![0u8; size];
    p[..2].copy_from_slice(&(f.id as u16).to_le_bytes());
    p[4..8].copy_from_slice(&pid.to_le_bytes());
    for (n, v) in values {
        let x = f.field(n).unwrap();
        if x.type_name.starts_with("char") {
            let comm = format!("t{v}");
            p[x.offset..x.offset + comm.len()].copy_from_slice(comm.as_bytes());
        } else {
            p[x.offset..x.offset + x.size].copy_from_slice(&v.to_le_bytes()[..x.size]);
        }
    }
    (f.id, p)
}

/// Event `name` by task `pid` at `ts` on `cpu`, its fields set to `values`.
pub fn rec(trace: &Trace, ts: u64, cpu: u32, name: &str, pid: i32, values: &[(&str, u64)]) -> Rec {
    let (id, payload) = record(trace, name, pid, values);
    Rec {
        ts,
        cpu,
        id,
        payload,
    }
}

/// The tables of one pass over `recs`.
pub fn tables<A: Sliced>(trace: &Trace, by: &str, recs: &[Rec]) -> Vec<crate::analyzer::Table> {
    let p = pass::<A>(trace, by, recs, true);
    p.finish(trace, &mut NoLog).unwrap().tables
}

/// `n` random switches and wake-ups (and, with `migrations`, sched_migrate_task) on a
/// few CPUs among a few tasks (0 is idle).
pub fn random_run(trace: &Trace, seed: u64, n: usize, migrations: bool) -> Vec<Rec> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut on: Vec<u64> = vec![0; CPUS as usize];
    (0..n)
        .map(|i| {
            // Now and then a task is named anew (as by exec): names are learned as the
            // pass goes, and a waker is named as it was at its wake-up.
            let renamed = rnd(8) == 0;
            let name = |t: u64| if renamed && t != 0 { t + 1000 } else { t };
            let cpu = rnd(CPUS);
            let (id, payload) = match rnd(if migrations { 4 } else { 3 }) {
                0 => {
                    let wakee = tid(1 + rnd(TIDS - 1));
                    let values = [
                        ("pid", wakee),
                        ("comm", name(wakee)),
                        ("target_cpu", rnd(CPUS)),
                    ];
                    let waker = on[cpu as usize] as i32;
                    record(trace, "sched:sched_wakeup", waker, &values)
                }
                3 => {
                    let task = tid(1 + rnd(TIDS - 1));
                    let values = [("pid", task), ("comm", name(task)), ("dest_cpu", rnd(CPUS))];
                    record(trace, "sched:sched_migrate_task", 0, &values)
                }
                _ => {
                    // The CPU's task switches out, or one no traced switch put there.
                    let prev = match rnd(2) {
                        0 => tid(rnd(TIDS)),
                        _ => on[cpu as usize],
                    };
                    let next = tid(rnd(TIDS));
                    on[cpu as usize] = next;
                    let values = [
                        ("prev_pid", prev),
                        ("prev_comm", name(prev)),
                        ("prev_state", rnd(3)),
                        ("next_pid", next),
                        ("next_comm", name(next)),
                    ];
                    record(trace, "sched:sched_switch", prev as i32, &values)
                }
            };
            Rec {
                ts: 1000 * (i as u64 + 1),
                cpu: cpu as u32,
                id,
                payload,
            }
        })
        .collect()
}

fn pass<A: Sliced>(trace: &Trace, by: &str, recs: &[Rec], first: bool) -> Pass<A> {
    let mut cfg = Config::new(Mode::Stat);
    // `by` may end in `@FROM:TO`, a window in seconds.
    let (by, window) = by.split_once('@').unwrap_or((by, ""));
    cfg.by = Some(by.into());
    if !window.is_empty() {
        cfg.filters.window = Some(crate::filter::parse_window(window).unwrap());
    }
    let (mut p, _) = Pass::<A>::new(trace, &cfg, || Ok(Some(0))).unwrap();
    if !first {
        p.forget_comms();
        p.analyzer_mut().record_heads();
    }
    for r in recs {
        let ev = Event {
            ts: r.ts,
            cpu: r.cpu,
            id: r.id,
            payload: &r.payload,
            endian: Endian::Little,
            lost_before: Lost::None,
            loss: LossMark { gen: 0, open: 0 },
        };
        assert_eq!(p.event(&ev, &mut NoLog).unwrap(), None);
    }
    p
}

/// What the outcome tells, in an order that does not depend on when keys were met.
fn results<A: Sliced>(trace: &Trace, p: Pass<A>) -> (String, Counts) {
    let o = p.finish(trace, &mut NoLog).unwrap();
    let mut rows: Vec<String> = o
        .rows
        .iter()
        .map(|r| format!("{} {:?}", r.key, r.agg))
        .collect();
    rows.sort();
    rows.extend(o.tables.iter().map(|t| format!("{t:?}")));
    (rows.join("\n"), o.counts)
}

/// Checks that `recs` cut into two slices at each place, and into three, give the one
/// pass's results; returns the one pass's counts.
pub fn slices_match_one_pass<A: Sliced>(
    trace: &Trace,
    by: &str,
    recs: &[Rec],
    seed: u64,
) -> Counts {
    let one = results(trace, pass::<A>(trace, by, recs, true));
    for cut in 1..recs.len() {
        let cuts = [vec![0, cut, recs.len()], {
            let c2 = (cut + 7 + seed as usize) % recs.len();
            let mut c = vec![0, cut.min(c2), cut.max(c2), recs.len()];
            c.dedup();
            c
        }];
        for c in cuts {
            let mut all = pass::<A>(trace, by, &recs[..c[1]], true);
            for w in c[1..].windows(2) {
                let next = pass::<A>(trace, by, &recs[w[0]..w[1]], false);
                all.join(next);
            }
            let many = results(trace, all);
            assert_eq!(one, many, "seed {seed} by {by}, slices at {c:?}");
        }
    }
    one.1
}
