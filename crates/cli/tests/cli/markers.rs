//! Applications' trace markers while kstate records: the kernel fails every write to the
//! top-level trace_marker (EBADF) while any instance that copies markers has its tracing
//! off, so a recorder must never leave its copy on with tracing off, not while it sets up
//! nor while it stops. Its own test binary: a killed recorder elsewhere (record.rs) breaks
//! markers for a few milliseconds, which this test would count.
use crate::support;

use support::ok;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[test]
fn markers_never_fail_while_recordings_start_and_stop() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.dat");
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut written, mut failed) = (0u64, Vec::new());
            while !done.load(Ordering::Relaxed) {
                match std::fs::write("/sys/kernel/tracing/trace_marker", "kstate-marker\n") {
                    Ok(()) => written += 1,
                    Err(e) => failed.push(e.to_string()),
                }
            }
            (written, failed)
        })
    };
    for _ in 0..3 {
        ok(&[
            "record",
            "-e",
            "sched",
            "--duration",
            "0.3",
            "-o",
            out.to_str().unwrap(),
        ]);
    }
    done.store(true, Ordering::Relaxed);
    let (written, failed) = writer.join().unwrap();
    assert!(written > 100, "only {written} markers written");
    assert!(
        failed.is_empty(),
        "{} of {} marker writes failed while recordings started and stopped, first: {}",
        failed.len(),
        written + failed.len() as u64,
        failed[0]
    );
    // The last recording copied them.
    let text = String::from_utf8(ok(&["dump", out.to_str().unwrap()]).stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(" print: ") && l.ends_with("kstate-marker")),
        "no marker in the recording"
    );
}
