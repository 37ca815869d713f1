//! Oracle comparison: `kstate dump` against `trace-cmd report -t -R`
//! (Debian trace-cmd 3.1.6, libtraceevent 1.7.1) on the external fixtures.
//!
//! trace-cmd is run at test time; if it is missing the tests fail with an
//! install hint (a skipped oracle test checks nothing).
//!
//! * `tracecmd_output_parses_completely` checks the trace-cmd parser itself:
//!   every line of every fixture's report is understood.
//! * `dump_json_matches_trace_cmd`: same events in the same order
//!   (ts, cpu, pid, event), same count per event name, and — except for
//!   `bprint`, whose argument buffer is decoded later — every field value
//!   equal to trace-cmd's after the normalisation in `common/normalize.rs`.
//! * `dump_text_matches_trace_cmd_columns`: kstate's raw-field text (`--raw`),
//!   parsed with the same parser, has the same (ts, cpu, pid, event) columns.
//! * `dump_filter_*`: `--events`, `--cpu`, `--pid`, `--from/--to` against the
//!   same filter applied to trace-cmd's lines.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use support::tracecmd::{self, EventLine};
use support::*;

/// A fixture's name as in [`FIXTURES`]: its trace's directory and the file (the originals
/// and their v7 copies are kept in different places).
fn rel(file: &Path) -> String {
    let parts: Vec<_> = file.iter().collect();
    parts[parts.len().saturating_sub(2)..]
        .iter()
        .collect::<std::path::PathBuf>()
        .display()
        .to_string()
}

/// Runs `check` on every fixture and reports all failures together.
fn for_each_fixture(check: impl Fn(&Path) -> Result<(), String>) {
    let failures: Vec<String> = fixture_paths()
        .iter()
        .filter_map(|f| check(f).err().map(|e| format!("[{}] {e}", rel(f))))
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn tracecmd_output_parses_completely() {
    let mut reports = BTreeMap::new();
    for_each_fixture(|file| {
        let o = oracle(file);
        let r = &o.report;
        if !r.unparsed.is_empty() {
            return Err(format!(
                "{} unparsed trace-cmd lines, first: {:?}",
                r.unparsed.len(),
                &r.unparsed[..r.unparsed.len().min(5)]
            ));
        }
        // None of these fixtures has a multi-line value; a continuation here
        // would mean a misparsed line.
        if r.continuation_lines != 0 {
            return Err(format!("{} continuation lines", r.continuation_lines));
        }
        if r.events.is_empty() {
            return Err("no events".into());
        }
        if o.formats.len() == 0 || o.kallsyms.len() == 0 {
            return Err("no formats or no kallsyms from trace-cmd dump".into());
        }
        let total_lines = o.report_text.lines().count();
        let accounted =
            r.events.len() + r.lost.len() + r.info.len() + usize::from(r.cpus.is_some());
        if total_lines != accounted {
            return Err(format!("{total_lines} lines but {accounted} accounted for"));
        }
        for e in &r.events {
            let fmt = o.formats.resolve(e);
            if !e.split_by_format || fmt.is_none() {
                return Err(format!(
                    "line {} not split by the format of `{}`: {}",
                    e.line_no, e.event, e.text
                ));
            }
            if let Some(c) = r.cpus {
                if e.cpu >= c {
                    return Err(format!("line {}: cpu {} >= cpus={c}", e.line_no, e.cpu));
                }
            }
        }
        if let Some(w) = r.events.windows(2).find(|w| w[1].ts_ns < w[0].ts_ns) {
            return Err(format!(
                "trace-cmd output not in time order at line {}: {}",
                w[1].line_no, w[1].text
            ));
        }
        eprintln!(
            "{}: {} lines, {} events, {} lost-event lines, cpus={:?}, {} formats, {} kallsyms, big_endian={}; per event: {:?}",
            rel(file),
            total_lines,
            r.events.len(),
            r.lost.len(),
            r.cpus,
            o.formats.len(),
            o.kallsyms.len(),
            o.big_endian,
            r.counts()
        );
        Ok(())
    });
    // The v6, v7-none and v7-zstd files of one trace are the same trace.
    for file in fixture_paths() {
        let dir = file.parent().unwrap().to_path_buf();
        let o = oracle(&file);
        let keys: Vec<_> = o
            .report
            .events
            .iter()
            .map(|e| (key_of_line(e), e.fields.clone()))
            .collect();
        if let Some(prev) = reports.insert(dir, (rel(&file), keys.clone())) {
            assert!(
                prev.1 == keys,
                "trace-cmd reports of {} and {} differ",
                prev.0,
                rel(&file)
            );
        }
    }
}

/// `kstate dump FILE ARGS...`.
fn dump(file: &Path, args: &[&str]) -> String {
    let mut a: Vec<&std::ffi::OsStr> = vec!["dump".as_ref(), file.as_os_str()];
    a.extend(args.iter().map(|s| std::ffi::OsStr::new(*s)));
    kstate(&a)
}

fn json_keys(events: &[JsonEvent]) -> Vec<(Key, String)> {
    events
        .iter()
        .map(|e| {
            (
                key_of_json(e),
                format!("kstate line {}: {}", e.line_no, e.text),
            )
        })
        .collect()
}

/// Events whose field values are not compared (the key columns are).
const VALUES_NOT_COMPARED: [&str; 1] = ["bprint"];

/// The normalisation accepts every value trace-cmd prints in the fixtures:
/// each value, turned back into the JSON kstate must print for it, compares
/// equal. (Runs without `kstate dump`; guards the oracle against printing
/// conventions it does not understand.)
#[test]
fn normaliser_accepts_every_trace_cmd_value() {
    for_each_fixture(|file| {
        let o = oracle(file);
        let ctx = o.ctx();
        let mut how: BTreeMap<String, usize> = BTreeMap::new();
        for e in &o.report.events {
            let fmt = o
                .formats
                .resolve(e)
                .ok_or_else(|| format!("no format for line {}", e.line_no))?;
            for (name, text) in &e.fields {
                let field = fmt.field(name).ok_or("field not in format")?;
                let conv = fmt.conversions.get(name);
                let kind = normalize::expected_kind(field, conv);
                *how.entry(format!(
                    "{}.{name}: {kind:?} {}",
                    e.event,
                    conv.map_or("raw", |c| c.spec.as_str())
                ))
                .or_insert(0) += 1;
                let json = normalize::json_from_text(field, conv, text, &ctx).ok_or_else(|| {
                    format!(
                        "line {}: cannot interpret {name}=`{text}`: {}",
                        e.line_no, e.text
                    )
                })?;
                match normalize::compare_field(field, conv, &json, text, &ctx) {
                    normalize::Verdict::Match => {}
                    v => {
                        return Err(format!(
                            "line {}: {name}=`{text}` vs {json}: {v:?}",
                            e.line_no
                        ))
                    }
                }
            }
        }
        eprintln!("{}: fields printed as {how:?}", rel(file));
        Ok(())
    });
}

fn check_json(file: &Path) -> Result<(), String> {
    let o = oracle(file);
    let events = parse_ndjson(&dump(file, &["--json"]));
    compare_keys(
        "dump --json",
        &oracle_keys(o, |_| true),
        &json_keys(&events),
    )?;

    let ctx = o.ctx();
    let mut mismatches = Vec::new();
    let mut n_mismatching_events = 0;
    let mut unverified = 0;
    let mut compared = 0;
    for (i, (line, ev)) in o.report.events.iter().zip(&events).enumerate() {
        if VALUES_NOT_COMPARED.contains(&line.event.as_str()) {
            continue;
        }
        let fmt = o.formats.resolve(line).ok_or_else(|| {
            format!(
                "no format for trace-cmd line {}: {}",
                line.line_no, line.text
            )
        })?;
        let d = normalize::compare_event(fmt, line, &ev.fields, &ctx);
        compared += line.fields.len();
        unverified += d.unverified.len();
        if !d.mismatches.is_empty() {
            n_mismatching_events += 1;
            if mismatches.len() < 3 {
                mismatches.push(format!(
                    "event index {i} ({}):\n  trace-cmd line {}: {}\n  kstate line {}: {}\n    {}",
                    line.event,
                    line.line_no,
                    line.text,
                    ev.line_no,
                    ev.text,
                    d.mismatches.join("\n    ")
                ));
            }
        }
    }
    eprintln!(
        "{}: {} events, {compared} field values compared, {unverified} not verifiable",
        rel(file),
        events.len()
    );
    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "field values differ in {n_mismatching_events} events; first ones:\n{}",
            mismatches.join("\n")
        ))
    }
}

#[test]
fn dump_json_matches_trace_cmd() {
    for_each_fixture(check_json);
}

#[test]
fn dump_text_matches_trace_cmd_columns() {
    for_each_fixture(|file| {
        let o = oracle(file);
        let out = dump(file, &["--raw"]);
        let r = tracecmd::parse_report(&out, &o.formats);
        if !r.unparsed.is_empty() {
            return Err(format!(
                "{} kstate text lines not in trace-cmd's `COMM-PID [CPU] SECS.NSECS: EVENT: ...` form, first: {:?}",
                r.unparsed.len(),
                &r.unparsed[..r.unparsed.len().min(3)]
            ));
        }
        let actual: Vec<(Key, String)> = r
            .events
            .iter()
            .map(|e| {
                (
                    key_of_line(e),
                    format!("kstate line {}: {}", e.line_no, e.text),
                )
            })
            .collect();
        compare_keys("dump (text)", &oracle_keys(o, |_| true), &actual)
    });
}

/// `kstate dump FILE --json ARGS` against trace-cmd's lines filtered by `keep`.
fn check_filter(
    file: &Path,
    args: &[String],
    keep: impl Fn(&EventLine) -> bool,
) -> Result<(), String> {
    let o = oracle(file);
    let expected = oracle_keys(o, keep);
    if expected.is_empty() {
        return Err(format!(
            "filter {args:?} selects no trace-cmd event; the test would be vacuous"
        ));
    }
    let mut a = vec!["--json"];
    a.extend(args.iter().map(String::as_str));
    let events = parse_ndjson(&dump(file, &a));
    compare_keys(
        &format!("dump --json {}", args.join(" ")),
        &expected,
        &json_keys(&events),
    )
}

#[test]
fn dump_filter_events() {
    for_each_fixture(|file| {
        check_filter(file, &["--events".into(), "sched_switch".into()], |e| {
            e.event == "sched_switch"
        })
    });
}

#[test]
fn dump_filter_cpu() {
    for_each_fixture(|file| check_filter(file, &["--cpu".into(), "2".into()], |e| e.cpu == 2));
}

#[test]
fn dump_filter_pid() {
    for_each_fixture(|file| {
        // The busiest non-idle task of the trace.
        let mut per_pid: BTreeMap<i64, usize> = BTreeMap::new();
        for e in oracle(file).report.events.iter().filter(|e| e.pid != 0) {
            *per_pid.entry(e.pid).or_insert(0) += 1;
        }
        let (&pid, _) = per_pid
            .iter()
            .max_by_key(|(p, n)| (**n, -**p))
            .ok_or("no non-idle events")?;
        check_filter(file, &["--pid".into(), pid.to_string()], |e| e.pid == pid)
    });
}

/// A time strictly between two distinct event timestamps near `idx`, so the
/// window test does not depend on whether the bounds are inclusive.
fn time_between_events(events: &[EventLine], idx: usize) -> Option<u64> {
    (idx.max(1)..events.len())
        .map(|i| (events[i - 1].ts_ns, events[i].ts_ns))
        .find(|(a, b)| b - a >= 2)
        .map(|(a, b)| a + (b - a) / 2)
}

#[test]
fn dump_filter_time_window() {
    for_each_fixture(|file| {
        let ev = &oracle(file).report.events;
        let from = time_between_events(ev, ev.len() / 3).ok_or("no gap for --from")?;
        let to = time_between_events(ev, 2 * ev.len() / 3).ok_or("no gap for --to")?;
        let args = [
            "--from".to_string(),
            tracecmd::format_timestamp(from),
            "--to".to_string(),
            tracecmd::format_timestamp(to),
        ];
        check_filter(file, &args, |e| from <= e.ts_ns && e.ts_ns <= to)
    });
}
