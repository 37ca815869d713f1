//! `kstate dump --threads N` prints what one thread prints, byte for byte: on every external
//! fixture (v6, v7, v7 with zstd) and on a recording made here, in each output form and under each filter, with
//! slices cut small enough that every file is many of them (`--slice-bytes`, hidden), and
//! with the lines that lean on comms learnt in earlier slices printed again
//! (`--slice-stats` says how many). Needs root and tracefs for the recording.

use crate::support;

use std::path::Path;

use support::{kstate, ok};

/// `kstate dump FILE ARGS` on `threads` threads in small slices: stdout, and the slice
/// statistics (slices, slices printed again) when the threads ran.
fn dump(file: &Path, args: &[&str], threads: &str) -> (Vec<u8>, Option<(u64, u64)>) {
    let f = file.to_str().unwrap();
    let mut all = vec!["dump", f, "--threads", threads, "--slice-bytes", "16384"];
    all.push("--slice-stats");
    all.extend_from_slice(args);
    let out = ok(&all);
    let err = String::from_utf8_lossy(&out.stderr);
    // "kstate dump: N slices, M printed again"
    let stats = err.lines().find_map(|l| {
        let rest = l.strip_prefix("kstate dump: ")?;
        let (n, rest) = rest.split_once(" slices, ")?;
        let m = rest.strip_suffix(" printed again")?;
        Some((n.parse().ok()?, m.parse().ok()?))
    });
    (out.stdout, stats)
}

/// The filters to try on `file`: none, one process, the middle third of the time, and two
/// events — taken from the file's own events.
fn filters(file: &Path) -> Vec<Vec<String>> {
    let events = support::parse_ndjson(&kstate(&["dump", "--json", file.to_str().unwrap()]));
    assert!(
        events.len() > 100,
        "{} holds too few events",
        file.display()
    );
    let mid = &events[events.len() / 2];
    let pid = mid.pid.to_string();
    let secs = |ts: u64| format!("{}.{:09}", ts / 1_000_000_000, ts % 1_000_000_000);
    let (from, to) = (
        secs(events[events.len() / 3].ts),
        secs(events[2 * events.len() / 3].ts),
    );
    vec![
        vec![],
        vec!["--pid".into(), pid],
        vec!["--from".into(), from, "--to".into(), to],
        vec!["--events".into(), "sched_switch,sched_wakeup".into()],
    ]
}

/// Every form and filter on `file`: the threads print what one thread prints, and they
/// did run. Returns the most slices printed again in one run.
fn same_on(file: &Path) -> u64 {
    let mut again = 0;
    for form in [&[][..], &["--json"], &["--raw"], &["--ns"]] {
        for filter in filters(file) {
            let mut args: Vec<&str> = form.to_vec();
            args.extend(filter.iter().map(String::as_str));
            let (one, none) = dump(file, &args, "1");
            assert_eq!(none, None, "one thread cuts no slices");
            let (two, stats) = dump(file, &args, "2");
            let (slices, printed_again) =
                stats.unwrap_or_else(|| panic!("{}: the threads did not run", file.display()));
            assert!(slices >= 2, "{slices} slices");
            assert!(
                one == two,
                "{} {args:?}: two threads printed other text than one",
                file.display()
            );
            again = again.max(printed_again);
        }
    }
    again
}

#[test]
fn threads_print_what_one_thread_prints_on_the_fixtures() {
    let mut again = 0;
    for file in support::fixture_paths() {
        again = again.max(same_on(&file));
    }
    // Some slices of these traces print pids whose names a sched event taught earlier:
    // those slices were printed again, and the text above is still the one thread's.
    assert!(again > 0);
}

#[test]
fn threads_print_what_one_thread_prints_on_a_recording() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = tmp.path().join("fork.dat");
    support::record_workload("sched,syscall", &["fork", "50", "--ms", "5"], true, &file);
    same_on(&file);
    // More threads than cores, and the default, print the same.
    let (one, _) = dump(&file, &[], "1");
    let (three, stats) = dump(&file, &[], "3");
    assert!(stats.is_some() && one == three);
    let plain = kstate(&["dump", file.to_str().unwrap()]);
    assert!(plain.as_bytes() == one.as_slice());
}
