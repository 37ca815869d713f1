//! `sysinfo`: the memory-usage time series kstate stores in its recordings (LKST's
//! lkst_fmt_sysinfo): /proc/meminfo and /proc/vmstat snapshots taken every
//! `--sysinfo-interval` milliseconds (the SYSINFO section). It reads no events, so it
//! has its own pass instead of [`crate::analyzer::drive`].
//!
//! Keys: field names, meminfo's bare (`MemFree`, values in bytes: meminfo's kB times
//! 1024) and vmstat's bare (`nr_free_pages`, counts); the prefixed forms
//! (`meminfo.MemFree`, `vmstat.pgfault`) select them too. Without `--key`: MemFree,
//! Cached, Dirty, Writeback, AnonPages, Slab. `--log`: one row per snapshot and field
//! (time, field, value). `--stat`: per field count (snapshots), min, avg, max, p50, p99
//! (the `total` column is the sum of the samples, rarely meaningful). Windows and
//! `--min`/`--max` apply; task and CPU filters do not (snapshots belong to the system).

use std::collections::BTreeMap;

use kstate_format::sections::{ids, sysinfo_snapshots};
use kstate_format::{Error, ErrorKind, Trace};

use crate::analyzer::{
    Buckets, Config, Counts, Info, Kind, LogRow, LogSink, Mode, Outcome, Row, Traits, Unit,
};
use crate::filter::TimeSel;
use crate::stats::Agg;
use kstate_format::stream::merge::{IdFilter, Merger};

pub const INFO: Info = Info {
    name: "sysinfo",
    about: "memory usage over time (/proc/meminfo, /proc/vmstat snapshots in kstate recordings)",
    needs: "a kstate recording made with --sysinfo-interval (no events)",
    preset: "any",
    by: &[("field", "meminfo / vmstat field")],
    flag_column: None,
    value: "value",
    unit: Unit::Bytes,
    traits: Traits {
        snapshots: true,
        ..Traits::DEFAULT
    },
    run,
    live: None,
};

/// Fields shown without --key.
pub const DEFAULT_FIELDS: [&str; 6] = [
    "MemFree",
    "Cached",
    "Dirty",
    "Writeback",
    "AnonPages",
    "Slab",
];

/// `meminfo.MemFree` -> `MemFree`.
fn bare(name: &str) -> &str {
    name.split_once('.').map_or(name, |(_, n)| n)
}

fn run(trace: &Trace, cfg: &Config, log: &mut dyn LogSink) -> Result<Outcome, Error> {
    let Some(data) = trace.extra(ids::SYSINFO) else {
        let kind = ErrorKind::NotApplicable {
            analyzer: INFO.name,
        };
        return Err(Error::new(
            kind,
            None,
            "analyzer sysinfo needs memory snapshots, which only kstate recordings hold; record with `kstate record --sysinfo-interval 1000 ...`",
        )
        .in_file(&trace.path));
    };
    let f = &cfg.filters;
    let wanted: Vec<String> = if f.keys.is_empty() {
        DEFAULT_FIELDS.iter().map(|s| s.to_string()).collect()
    } else {
        f.keys.clone()
    };
    // The first event of the trace anchors relative windows; with no events, the first
    // snapshot does.
    let mut start = Merger::new(trace, None, IdFilter::all())?
        .next()
        .ok()
        .flatten()
        .map(|e| e.ts);
    let mut notes = Vec::new();
    if !(f.pids.is_empty() && f.tids.is_empty() && f.comms.is_empty() && f.cpus.is_empty()) {
        notes.push("task and CPU filters do not apply to system-wide snapshots".to_string());
    }
    let mut sel: Option<TimeSel> = None;
    let (min, max) = (f.min.unwrap_or(0), f.max.unwrap_or(u64::MAX));
    let decades = cfg.mode == Mode::Dist(Buckets::Log10);
    // Per wanted field (in --key order): its aggregate, and whether a snapshot had it.
    let mut aggs: Vec<(String, Agg, bool)> = wanted
        .iter()
        .map(|k| (k.clone(), Agg::default(), false))
        .collect();
    let mut counts = Counts::default();
    let mut errors: Vec<Error> = trace.damage().cloned().collect();
    let (mut first, mut last) = (None, 0u64);
    let mut vmstat = false;
    for snap in sysinfo_snapshots(data) {
        let snap = match snap {
            Ok(s) => s,
            Err(e) => {
                errors.push(e.in_file(&trace.path));
                break;
            }
        };
        counts.events += 1;
        let t0 = *start.get_or_insert(snap.ts);
        let sel = *sel.get_or_insert_with(|| TimeSel {
            include: f.window.map_or((0, u64::MAX), |w| w.resolve(t0)),
            exclude: f.not_window.map(|w| w.resolve(t0)),
        });
        if !sel.contains(snap.ts) {
            continue;
        }
        first.get_or_insert(snap.ts);
        last = snap.ts;
        for (key, agg, seen) in aggs.iter_mut() {
            // A bare name matches meminfo first, then vmstat; a prefixed name exactly.
            let hit = snap
                .values
                .iter()
                .find(|(n, _)| n == key || (n.starts_with("meminfo.") && bare(n) == key))
                .or_else(|| snap.values.iter().find(|(n, _)| bare(n) == key));
            let Some((name, v)) = hit else {
                continue;
            };
            *seen = true;
            vmstat |= name.starts_with("vmstat.");
            if *v < min || *v > max {
                counts.filtered += 1;
                continue;
            }
            counts.selected += 1;
            if cfg.mode == Mode::Log {
                log.row(&LogRow {
                    start: snap.ts,
                    key,
                    value: *v,
                    kind: Kind::Dur,
                    tid: 0,
                    pid: None,
                    comm: "",
                    cpu: 0,
                    flag: false,
                })
                .map_err(|e| Error::new(ErrorKind::Io, None, format!("writing output: {e}")))?;
            } else {
                agg.add(*v, false, decades);
            }
        }
    }
    if counts.events == 0 && errors.is_empty() {
        notes.push("this recording holds no snapshots (--sysinfo-interval 0?)".to_string());
    }
    for (k, _, seen) in &aggs {
        if !seen && counts.events > 0 {
            notes.push(format!("no field {k:?} in the selected snapshots"));
        }
    }
    if vmstat {
        notes.push("vmstat fields are counts (pages, events), not bytes".to_string());
    }
    let rows = aggs
        .into_iter()
        .filter(|(_, a, _)| a.count > 0)
        .map(|(key, agg, _)| Row { key, agg })
        .collect();
    Ok(Outcome {
        info: INFO,
        by: "field",
        rows,
        trace_start: start,
        span: first.map(|f| (f, last)),
        lost: BTreeMap::new(),
        counts,
        tables: Vec::new(),
        notes,
        errors,
    })
}
