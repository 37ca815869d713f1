//! A virtual machine's guest recording beside its host's, on one timeline: the guest's
//! file carries trace-cmd's TIME_SHIFT (per-CPU guest-to-host clock samples) and TSC2NSEC
//! options, which `trace-cmd record -A` writes but which cannot be recorded here. So the
//! guest file is a real recording (a shared fixture) rewritten by kstate's writer with
//! those options added, and `trace-cmd report` (Debian 3.1.6), run at test time, says
//! what every timestamp must be: alone, and merged with a host recording as
//! `trace-cmd report -i host.dat -i guest.dat`.

use crate::support;

use std::path::{Path, PathBuf};

use kstate_format::timeshift::{Sample, FLAG_INTERPOLATE};
use kstate_format::writer::{write_from_trace, WriterConfig};
use kstate_format::{TimeShift, Trace};

fn fixture(name: &str) -> PathBuf {
    let p = support::fixture(name);
    assert!(p.is_file(), "fixture {} is missing", p.display());
    p
}

/// First and last raw timestamps of a file whose clock needs no mapping.
fn span(file: &Path) -> (i64, i64) {
    let info = support::kstate_json(&["info".as_ref(), "--json".as_ref(), file.as_os_str()]);
    let ts = |k: &str| info[k].as_i64().unwrap_or_else(|| panic!("{k} in {info}"));
    (ts("first_ts"), ts("last_ts"))
}

/// Writes `guest` again with a TSC2NSEC of 3/2 and, for all CPUs but the last, clock
/// samples that put it `lands_at` ns after the host's start: offsets that differ per CPU
/// and drift between samples (interpolated), one CPU with a single sample, one whose
/// guest clock runs at 3/4 rate between samples (scaling 3, 2 fraction bits).
fn make_guest(guest: &Path, host_start: i64, lands_at: i64, out: &Path) -> TimeShift {
    let mut t = Trace::open(guest).unwrap();
    let (first, last) = span(guest);
    // After the shift, TSC2NSEC multiplies by 3/2: aim the shifted raw time at 2/3 of
    // the host time wanted.
    let base = (host_start + lands_at) / 3 * 2 - first;
    let cpus = t.cpu_limit() as usize - 1;
    let step = (last - first) / 4;
    let mut shift = TimeShift {
        peer_trace_id: 0x6b73_7461_7465,
        flags: FLAG_INTERPOLATE,
        cpus: Vec::new(),
    };
    for cpu in 0..cpus {
        let n = if cpu == 1 { 1 } else { 5 };
        let drift = if cpu % 2 == 0 { 37_001 } else { -52_999 };
        shift.cpus.push(
            (0..n)
                .map(|j| Sample {
                    time: first + j * step + 1_000 * cpu as i64,
                    offset: base + 3_000_000 * cpu as i64 + j * drift,
                    scaling: if cpu == 2 { 3 } else { 1 },
                    fraction: if cpu == 2 { 2 } else { 0 },
                })
                .collect(),
        );
    }
    // CPU 2's guest clock is scaled to 3/4: move its offsets so that it lands too.
    for s in &mut shift.cpus[2] {
        s.offset += first / 4;
    }
    // A guest's clock is the TSC (trace-cmd prints it in seconds once TSC2NSEC maps it).
    t.clock = Some("x86-tsc".into());
    t.clock_map.mult = 3;
    t.clock_map.shift = 1;
    t.time_shift = Some(std::sync::Arc::new(shift.clone()));
    write_from_trace(&t, out, WriterConfig::new(t.layout.page_size), None).unwrap();
    shift
}

/// `trace-cmd report -t` of several files, as `-i A -i B`.
fn trace_cmd_report(files: &[&Path]) -> String {
    let mut cmd = std::process::Command::new("trace-cmd");
    cmd.args(["report", "-t"]);
    for f in files {
        cmd.arg("-i").arg(f);
    }
    let out = cmd
        .output()
        .expect("run trace-cmd (apt-get install trace-cmd)");
    assert!(
        out.status.success(),
        "trace-cmd report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn kstate_dump(files: &[&Path]) -> String {
    let mut args = vec!["dump".as_ref(), "--ns".as_ref()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    support::kstate(&args)
}

/// Line by line; the first differences are shown.
fn assert_same(what: &str, ours: &str, theirs: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), theirs.lines().collect());
    let bad: Vec<String> = a
        .iter()
        .zip(&b)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .take(5)
        .map(|(i, (x, y))| format!("line {}:\n  kstate:    {x}\n  trace-cmd: {y}", i + 1))
        .collect();
    assert!(bad.is_empty(), "{what}:\n{}", bad.join("\n"));
    assert_eq!(a.len(), b.len(), "{what}: line counts");
}

/// The timestamp column (ns, `-t`) of every event line.
fn timestamps(report: &str) -> Vec<u64> {
    report
        .lines()
        .filter_map(|l| {
            let (head, _) = l.split_once("]")?;
            let rest = l[head.len() + 1..].trim_start();
            support::tracecmd::parse_timestamp(rest.split(':').next()?)
        })
        .collect()
}

#[test]
fn guest_time_shift_matches_trace_cmd_alone_and_beside_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let host = fixture("lisa-rtapp/trace.v7-none.dat");
    let plain = fixture("lisa-sched_load/trace.v7-none.dat");
    let guest = dir.path().join("guest.dat");
    let (host_start, host_end) = span(&host);
    let shift = make_guest(&plain, host_start, 2_000_000_000, &guest);

    // Alone: every line as trace-cmd prints it, timestamps included.
    let ours = kstate_dump(&[&guest]);
    let theirs = trace_cmd_report(&[&guest]);
    assert_same("guest alone", &ours, &theirs);
    let moved = timestamps(&theirs);
    assert_eq!(moved.len(), timestamps(&kstate_dump(&[&plain])).len());
    assert!(moved.len() > 1000, "{} events", moved.len());
    // The shift really moved the guest into the host's time: the test cannot pass on
    // untouched timestamps.
    let inside = moved
        .iter()
        .filter(|&&t| (host_start as u64..=host_end as u64).contains(&t))
        .count();
    assert!(
        inside * 2 > moved.len(),
        "{inside} of {} guest events land inside the host's recording",
        moved.len()
    );

    // Beside the host: one timeline, each line prefixed with its file's name.
    let ours = kstate_dump(&[&host, &guest]);
    let theirs = trace_cmd_report(&[&host, &guest]);
    assert_same("host and guest", &ours, &theirs);
    let names: Vec<&str> = theirs
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(n, _)| n.trim()))
        .collect();
    let switches = names.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        switches >= 20,
        "host and guest events interleave ({switches} switches)"
    );

    // NDJSON names each event's file, with the timestamps trace-cmd printed.
    let json = support::kstate(&[
        "dump".as_ref(),
        "--json".as_ref(),
        host.as_os_str(),
        guest.as_os_str(),
    ]);
    let objs: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ts: Vec<u64> = objs.iter().map(|o| o["ts"].as_u64().unwrap()).collect();
    assert_eq!(ts, timestamps(&theirs));
    let files: Vec<&str> = objs.iter().map(|o| o["file"].as_str().unwrap()).collect();
    let event_files: Vec<&str> = theirs
        .lines()
        .filter(|l| !l.contains(": cpus="))
        .filter_map(|l| l.split_once(": ").map(|(n, _)| n.trim()))
        .collect();
    assert_eq!(files, event_files);

    // `info` says the file is time-shifted, and how.
    let info = support::kstate(&["info".as_ref(), guest.as_os_str()]);
    let samples: usize = shift.cpus.iter().map(Vec::len).sum();
    assert!(
        info.contains(&format!(
            "time shift:  guest clock mapped to its host's (TIME_SHIFT: {} CPUs, {samples} samples",
            shift.cpus.len()
        )),
        "{info}"
    );
    assert!(
        info.contains("(count * 3) >> 1 (TSC2NSEC option)"),
        "{info}"
    );
    let json = support::kstate_json(&["info".as_ref(), "--json".as_ref(), guest.as_os_str()]);
    assert_eq!(json["time_shifted"], true);

    // kstate's own rewrite keeps the options: `split` (compressed, for good measure)
    // gives per-CPU files that read as trace-cmd reads them.
    let parts = dir.path().join("parts");
    support::kstate(&[
        "split".as_ref(),
        "--per-cpu".as_ref(),
        "--zstd".as_ref(),
        "-o".as_ref(),
        parts.as_os_str(),
        guest.as_os_str(),
    ]);
    let cpu2 = parts.join("cpu2.dat");
    let ours = kstate_dump(&[&cpu2]);
    assert_same(
        "CPU 2 of the guest, split",
        &ours,
        &trace_cmd_report(&[&cpu2]),
    );
    assert!(timestamps(&ours).len() > 100);
}

#[test]
fn several_files_need_each_event_in_one_of_them() {
    let host = fixture("lisa-rtapp/trace.v7-none.dat");
    let other = fixture("lisa-sched_load/trace.v7-none.dat");
    let out = support::run(&[
        "dump".as_ref(),
        "--events".as_ref(),
        "no_such_event".as_ref(),
        host.as_os_str(),
        other.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no event \"no_such_event\""));
    // A name need only be in one of the files; what is printed is what trace-cmd
    // prints of that event for both. (trace-cmd's -F applies to one input only, so its
    // merged report is filtered here.)
    let theirs: String = trace_cmd_report(&[&host, &other])
        .lines()
        .filter(|l| l.contains(" sched_switch: ") || l.contains(" sched_load_se: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(theirs.contains(" sched_load_se: ") && theirs.lines().count() > 1000);
    assert_same(
        "sched_switch (both files) and sched_load_se (only the second)",
        &kstate_dump_events(&[&host, &other], "sched_switch,sched_load_se"),
        &theirs,
    );
}

/// `kstate dump --ns --events EVENTS FILES...` without the `cpus=` header lines.
fn kstate_dump_events(files: &[&Path], events: &str) -> String {
    let mut args = vec!["dump", "--ns", "--events", events];
    let paths: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(paths.iter().map(String::as_str));
    support::kstate(&args)
        .lines()
        .filter(|l| !l.contains(": cpus="))
        .map(|l| format!("{l}\n"))
        .collect()
}
