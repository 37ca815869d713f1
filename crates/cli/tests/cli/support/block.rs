//! Block requests as `trace-cmd report -t -R` shows them, paired by the rules documented
//! in `analyzers/block.rs` and `biotime.rs` (a request is its device, first sector and
//! direction class; flushes: the device alone; a completion measures the request whose
//! issue was seen): the oracle of the block analyzers' tests.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// One block event of `trace-cmd report -t -R`.
#[derive(Debug, Clone)]
pub struct Ev {
    pub ts: u64,
    pub event: String,
    pub dev: u64,
    pub sector: u64,
    pub nr_sector: u64,
    pub rwbs: String,
}

pub fn report(file: &Path) -> Vec<Ev> {
    let out = Command::new("trace-cmd")
        .args(["report", "-t", "-R", "-i"])
        .arg(file)
        .output()
        .expect("trace-cmd is needed by these tests: apt-get install trace-cmd");
    assert!(out.status.success(), "trace-cmd report {}", file.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut evs = Vec::new();
    for line in text.lines() {
        // `comm-pid [cpu] secs.nsecs: event: k=v k=v ...`; the comm may hold spaces.
        let Some(at) = line.find(": block_rq_") else {
            continue;
        };
        let ts_text = line[..at].rsplit(' ').next().unwrap();
        let (s, ns) = ts_text.split_once('.').unwrap();
        assert_eq!(ns.len(), 9, "{line}");
        let ts = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        let rest = &line[at + 2..];
        let (event, fields) = rest.split_once(':').unwrap();
        let kv: HashMap<&str, &str> = fields
            .split_whitespace()
            .filter_map(|t| t.split_once('='))
            .collect();
        let n = |k: &str| -> u64 {
            kv.get(k)
                .unwrap_or_else(|| panic!("no {k} in {line}"))
                .parse()
                .unwrap_or_else(|_| panic!("{k} is not a number in {line}"))
        };
        evs.push(Ev {
            ts,
            event: event.to_string(),
            dev: n("dev"),
            sector: n("sector"),
            nr_sector: n("nr_sector"),
            rwbs: kv.get("rwbs").copied().unwrap_or("").to_string(),
        });
    }
    evs.sort_by_key(|e| e.ts);
    evs
}

/// The operation letter of rwbs (after an optional leading F for preflush).
pub fn op(rwbs: &str) -> char {
    let b: Vec<char> = rwbs.chars().collect();
    match b.as_slice() {
        ['F', c, ..] if "RWDFN".contains(*c) => *c,
        [c, ..] if "RWDFN".contains(*c) => *c,
        _ => 'N',
    }
}

pub type ReqId = (u64, u64, char);

pub fn req_id(e: &Ev) -> ReqId {
    let d = op(&e.rwbs);
    (e.dev, if d == 'F' { u64::MAX } else { e.sector }, d)
}

/// A measured request: (insert-or-issue time, issue time, complete time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Measured {
    pub queued: u64,
    pub issued: u64,
    pub done: u64,
}

/// Requests of direction `dir` on `dev` whose issue and completion are both in the
/// trace, and the completions on `dev`/`dir` without a seen issue.
pub fn requests(evs: &[Ev], dev: u64, dir: char) -> (Vec<Measured>, u64) {
    // id -> (first insert/issue time, issue time if issued)
    let mut open: HashMap<ReqId, (u64, Option<u64>)> = HashMap::new();
    let mut done = Vec::new();
    let mut unmatched = 0;
    for e in evs {
        let id = req_id(e);
        match e.event.as_str() {
            "block_rq_insert" => match open.get(&id) {
                Some((_, None)) => {}
                _ => {
                    open.insert(id, (e.ts, None));
                }
            },
            "block_rq_issue" => match open.get_mut(&id) {
                Some((_, iss @ None)) => *iss = Some(e.ts),
                _ => {
                    open.insert(id, (e.ts, Some(e.ts)));
                }
            },
            "block_rq_requeue" => {
                if let Some((_, iss)) = open.get_mut(&id) {
                    *iss = None;
                }
            }
            "block_rq_complete" => {
                let o = open.remove(&id);
                if id.0 != dev || id.2 != dir {
                    continue;
                }
                match o {
                    Some((q, Some(i))) => done.push(Measured {
                        queued: q,
                        issued: i,
                        done: e.ts,
                    }),
                    _ => unmatched += 1,
                }
            }
            _ => {}
        }
    }
    (done, unmatched)
}

/// The number of requests in flight on `dev`/`dir` (from insert, or issue without one,
/// to complete) after each change: (time, length, whether it was an arrival).
pub fn levels(evs: &[Ev], dev: u64, dir: char) -> Vec<(u64, u64, bool)> {
    let mut counted: std::collections::HashSet<ReqId> = Default::default();
    let mut len = 0u64;
    let mut out = Vec::new();
    for e in evs.iter().filter(|e| e.event.starts_with("block_rq_")) {
        let id = req_id(e);
        let delta: i64 = match e.event.as_str() {
            "block_rq_insert" | "block_rq_issue" if counted.insert(id) => 1,
            "block_rq_complete" if counted.remove(&id) => -1,
            _ => 0,
        };
        if delta == 0 || id.0 != dev || id.2 != dir {
            continue;
        }
        len = (len as i64 + delta) as u64;
        out.push((e.ts, len, delta > 0));
    }
    out
}

/// Requests in flight on `dev`/`dir`: (changes, integral in request-ns over [first, last
/// block_rq event], max, arrivals, that span).
pub fn in_flight(evs: &[Ev], dev: u64, dir: char) -> (u64, u128, u64, u64, u64) {
    let rq: Vec<&Ev> = evs
        .iter()
        .filter(|e| e.event.starts_with("block_rq_"))
        .collect();
    let (first, last) = (rq[0].ts, rq[rq.len() - 1].ts);
    let lv = levels(evs, dev, dir);
    let mut area = 0u128;
    for w in lv.windows(2) {
        area += w[0].1 as u128 * (w[1].0 - w[0].0) as u128;
    }
    if let Some(l) = lv.last() {
        area += l.1 as u128 * (last - l.0) as u128;
    }
    let max = lv.iter().map(|l| l.1).max().unwrap_or(0);
    let arrivals = lv.iter().filter(|l| l.2).count() as u64;
    (lv.len() as u64, area, max, arrivals, last - first)
}

/// The most requests in flight on `dev`/`dir` at any time in [from, to] (the length held
/// when it opens included), and over the whole trace.
pub fn peak_in(evs: &[Ev], dev: u64, dir: char, (from, to): (u64, u64)) -> (u64, u64) {
    let lv = levels(evs, dev, dir);
    let held = lv
        .iter()
        .take_while(|l| l.0 < from)
        .last()
        .map_or(0, |l| l.1);
    let inside = lv
        .iter()
        .filter(|l| (from..=to).contains(&l.0))
        .map(|l| l.1)
        .fold(held, u64::max);
    (inside, lv.iter().map(|l| l.1).max().unwrap_or(0))
}

/// The p99 of `v` by nearest rank (0 for none).
pub fn p99(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    let rank = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied().unwrap_or(0)
}
