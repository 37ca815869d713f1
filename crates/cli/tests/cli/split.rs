//! `kstate split --per-cpu` against trace-cmd: each CPU file reports exactly the lines
//! the whole trace reports for that CPU, timestamps included.

use crate::support;

use std::path::Path;
use std::process::Command;
use support::{trace_cmd_report, KSTATE};

fn report(file: &Path) -> Vec<String> {
    trace_cmd_report(file, &["-t"])
        .lines()
        .filter(|l| !l.starts_with("cpus=") && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn check_split(file: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(KSTATE)
        .args(["split", "--per-cpu", "-o"])
        .arg(dir.path())
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let whole = report(file);
    let mut files = 0;
    let mut lines = 0;
    for ent in std::fs::read_dir(dir.path()).unwrap().flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let cpu: u32 = name
            .strip_prefix("cpu")
            .and_then(|n| n.strip_suffix(".dat"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("unexpected output {name}"));
        let tag = format!("[{cpu:03}]");
        let expect: Vec<&String> = whole.iter().filter(|l| l.contains(&tag)).collect();
        let got = report(&ent.path());
        assert!(!got.is_empty(), "{name} is empty");
        assert_eq!(got.len(), expect.len(), "{name}: line count");
        for (g, e) in got.iter().zip(&expect) {
            assert_eq!(g, *e, "{name}");
        }
        files += 1;
        lines += got.len();
    }
    assert!(files >= 2, "{} CPU files", files);
    assert_eq!(
        lines,
        whole.len(),
        "every event lands in exactly one CPU file"
    );
}

#[test]
fn lisa_trace_splits_per_cpu_like_trace_cmd_reports_it() {
    let f = support::fixture("lisa-sched_load/trace.dat");
    assert!(f.is_file(), "fixture missing: {}", f.display());
    check_split(&f);
}

#[test]
fn kstate_recording_splits_per_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.dat");
    let st = Command::new(KSTATE)
        .args([
            "record",
            "-e",
            "sched",
            "-a",
            "--sysinfo-interval",
            "0",
            "-o",
        ])
        .arg(&rec)
        .args(["--", KSTATE, "workload", "sleep", "20", "5"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    check_split(&rec);
}
