//! The overview's system-call lane as `kstate ui` serves it (from its summary of the
//! recording: one pass, then every span, key and duration filter from memory), against
//! `kstate analyze syscall --log` of the same file binned here: the same calls in the
//! same time bins and duration rows, and the same longest call per bin, for spans of the
//! whole recording, a third, a sliver and the last tenth, at bin counts that do not divide
//! them, with no filter, a key, a shortest duration, a thread and a CPU.

use crate::support;

use std::collections::BTreeMap;

use serde_json::Value;
use support::ui::UiServer;
use support::{kstate_json, record_workload};

/// Duration rows per decade of the scatter (`kstate_views::lanes::ROWS_PER_DECADE`).
const ROWS_PER_DECADE: f64 = 4.0;

fn api(s: &UiServer, q: &str) -> Value {
    let (status, _, body) = s.get(&format!("/{}/api/{q}", s.token));
    assert_eq!(status, 200, "{q}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"))
}

/// A call of the log: start (ns), key, duration (ns), thread, CPU.
type Call = (u64, String, u64, i64, u64);

/// The scatter the lane should hold over [from, to] in `bins`: its cells (bin, row from
/// the lowest used, count), lowest row, calls and longest call per bin, as the server
/// bins them (a call counts in the bin of its start; rows are log10 of the duration).
fn binned(calls: &[Call], from: u64, to: u64, bins: usize) -> Value {
    let bin_ns = (to - from) as f64 / bins as f64;
    let mut cells: BTreeMap<(usize, i64), u64> = BTreeMap::new();
    let mut longest: Vec<Option<(u64, &str)>> = vec![None; bins];
    let mut n = 0;
    for (ts, key, dur, _, _) in calls {
        if *ts < from || *ts > to {
            continue;
        }
        let b = (((ts - from) as f64 / bin_ns) as usize).min(bins - 1);
        let row = (((*dur).max(1) as f64).log10() * ROWS_PER_DECADE).floor() as i64;
        *cells.entry((b, row.clamp(0, 79))).or_default() += 1;
        // The first of equal durations, in the log's (completion) order.
        if longest[b].is_none_or(|(v, _)| *dur > v) {
            longest[b] = Some((*dur, key));
        }
        n += 1;
    }
    let row0 = cells.keys().map(|c| c.1).min().unwrap_or(0);
    serde_json::json!({
        "calls": n,
        "row0": row0,
        "cells": cells.iter().map(|((b, r), c)| serde_json::json!([b, r - row0, c])).collect::<Vec<_>>(),
        "longest": longest.iter().map(|l| match l {
            Some((v, k)) => serde_json::json!([v, k]),
            None => Value::Null,
        }).collect::<Vec<_>>(),
    })
}

/// Seconds with every nanosecond, as the page's `from`/`to` parameters take them.
fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[test]
fn the_syscall_lane_is_the_log_binned_for_every_span_and_filter() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("demo.dat");
    record_workload("sched,syscall", &["demo"], false, &file);
    let log = kstate_json(&[
        "analyze".as_ref(),
        "syscall".as_ref(),
        file.as_os_str(),
        "--log".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let calls: Vec<Call> = log["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let key = r["key"].as_str().unwrap().to_string();
            let (tid, cpu) = (r["tid"].as_i64().unwrap(), r["cpu"].as_u64().unwrap());
            (
                r["ts"].as_u64().unwrap(),
                key,
                r["dur_ns"].as_u64().unwrap(),
                tid,
                cpu,
            )
        })
        .collect();
    // The most frequent call and the thread that made the most, for the filters.
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_tid: BTreeMap<i64, usize> = BTreeMap::new();
    for (_, k, _, tid, _) in &calls {
        *counts.entry(k).or_default() += 1;
        *by_tid.entry(*tid).or_default() += 1;
    }
    let (key, _) = counts.iter().max_by_key(|(_, n)| **n).unwrap();
    let (tid, _) = by_tid.iter().max_by_key(|(_, n)| **n).unwrap();
    let min_ns = 20_000;

    let s = UiServer::start(&[file.as_os_str()], &[]);
    let meta = api(&s, "meta");
    let f = &meta["files"][0];
    let (start, end) = (f["start"].as_u64().unwrap(), f["end"].as_u64().unwrap());
    let len = end - start;
    let spans = [
        (0, len, 1200),
        (len / 3, len / 2, 999),
        (len / 2, len / 2 + len / 2000, 13),
        (len - len / 10, len, 333),
    ];
    for (from, to, bins) in spans {
        for (extra, keep) in [
            (String::new(), &(|_: &Call| true) as &dyn Fn(&Call) -> bool),
            (format!("&key={key}"), &|c: &Call| c.1 == *key),
            (format!("&min={}us", min_ns / 1000), &|c: &Call| {
                c.2 >= min_ns
            }),
            (format!("&tid={tid}"), &|c: &Call| c.3 == *tid),
            ("&cpu=1".to_string(), &|c: &Call| c.4 == 1),
        ] {
            let q = format!("lanes?from={}&to={}&w={bins}{extra}", secs(from), secs(to));
            let sc = &api(&s, &q)["syscalls"];
            let mine: Vec<Call> = calls.iter().filter(|c| keep(c)).cloned().collect();
            let want = binned(&mine, start + from, start + to, bins);
            for field in ["calls", "row0", "cells", "longest"] {
                assert_eq!(sc[field], want[field], "{q}: {field}");
            }
        }
    }
    // The spans held calls (the comparison was not of empty lanes).
    let whole = api(&s, &format!("lanes?from=0&to={}&w=100", secs(len)));
    assert_eq!(
        whole["syscalls"]["calls"].as_u64(),
        Some(calls.len() as u64)
    );
    assert!(calls.len() > 1000, "{} calls", calls.len());
}
