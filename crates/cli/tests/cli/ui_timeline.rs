//! The timeline, the flame graphs and the triage order of `kstate ui` in a real browser
//! (Debian's headless Chromium through Playwright for Python, as tests/ui_browser.rs), on
//! recordings made here: the demo workload with scheduling, system calls, block I/O,
//! interrupts and CPU samples; and a pair, A the demo alone and B the demo beside sixty
//! 20 ms sleeps (the stall). The page's figures are checked against the kstate CLI's
//! (tests/ui_timeline.py): slices against `kstate analyze --log` rows, their events
//! against `kstate dump`, flame graphs against `kstate profile`, the triage order against
//! `kstate compare`. Screenshots of every view land in target/tmp/ui-timeline-shots.

use crate::support;

use std::path::Path;

use support::ui::{run_browser, UiServer};
use support::{record_shell, KSTATE};

#[test]
fn timeline_flame_graphs_and_triage_in_chromium() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let demo = dir.path().join("demo.dat");
    let sample = ["--sample"];
    record_shell(
        "sched,syscall,bio,softirq",
        &sample,
        &format!("exec {KSTATE} workload demo"),
        &demo,
    );
    // The pair: B is A with a stall beside it (three processes of sixty sleeps of 20 ms:
    // about 2.9 s of sleep per second of recording), the system calls only (so that the
    // stall has one key: the sleeps are in offcpu's S too, elsewhere). One sleeper added
    // 0.96 s per second, and on a busy machine the demo's own futex waits varied by 1.2
    // s per second between two runs.
    let a = dir.path().join("a.dat");
    let b = dir.path().join("b.dat");
    record_shell(
        "syscall",
        &sample,
        &format!("exec {KSTATE} workload demo"),
        &a,
    );
    record_shell(
        "syscall",
        &sample,
        &format!(
            "for i in 1 2 3; do {KSTATE} workload sleep 60 20 & done; exec {KSTATE} workload demo"
        ),
        &b,
    );
    let s1 = UiServer::start(&[&demo], &[]);
    let s2 = UiServer::start(&[&a, &b], &[]);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-timeline-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let py = support::python_venv("uivenv", &["playwright"], "playwright.sync_api");
    run_browser(
        &py,
        "ui_timeline.py",
        &[
            KSTATE.as_ref(),
            shots.as_os_str(),
            s1.url.as_ref(),
            demo.as_os_str(),
            s2.url.as_ref(),
            a.as_os_str(),
            b.as_os_str(),
        ],
    );
}
