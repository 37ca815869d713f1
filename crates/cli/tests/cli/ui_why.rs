//! The critical path in `kstate ui` (issue 36): a thread's path as a lane of the timeline,
//! in a real browser (Debian's headless Chromium through Playwright, as ui_timeline.rs),
//! on the chain of waits `kstate workload why-chain` builds (A asks B on a pipe; B blocks
//! on a mutex C holds while sleeping, then writes and fsyncs), recorded system-wide here
//! (why.rs's recording). The page's lane is checked against `kstate why --tid A --window
//! FROM:TO --format json` on the same file and window (tests/cli/ui_why.py): its totals,
//! every segment it draws as the walk gave it, the runs it merged under a pixel, and the
//! hops it draws as arrows against the CLI's tree. Screenshots land in
//! target/tmp/ui-why-shots.

use crate::support;

use std::path::Path;

use support::ui::{run_browser, UiServer};
use support::KSTATE;

#[test]
fn critical_path_lane_in_chromium() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("chain.dat");
    let timed = crate::why::record_chain("why", 150, &file);
    let tid = |k: &str| timed[0][k].as_i64().unwrap();
    let server = UiServer::start(&[&file], &[]);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-why-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let py = support::python_venv("uivenv", &["playwright"], "playwright.sync_api");
    let (a, b, c) = (tid("a_tid"), tid("b_tid"), tid("c_tid"));
    let args = [a, b, c].map(|t| t.to_string());
    let report = run_browser(
        &py,
        "ui_why.py",
        &[
            KSTATE.as_ref(),
            shots.as_os_str(),
            server.url.as_ref(),
            file.as_os_str(),
            args[0].as_ref(),
            args[1].as_ref(),
            args[2].as_ref(),
        ],
    );
    // The hops the chain is made of are on the lane: B woke A, C woke B.
    let hops = report["hops"].as_array().unwrap();
    for (from, to) in [(b, a), (c, b)] {
        assert!(
            hops.iter()
                .any(|h| h[0].as_i64() == Some(from) && h[1].as_i64() == Some(to)),
            "no hop {from} -> {to} among {hops:?}"
        );
    }
}
