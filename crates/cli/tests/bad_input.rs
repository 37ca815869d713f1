//! Damaged input: one clear error naming the file, the byte offset and the problem, exit
//! status 2, never a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/external")
        .join(rel)
}

fn kstate(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kstate"))
        .args(args)
        .arg(file)
        .output()
        .expect("kstate runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit 2, no panic, and an error line that names the file and an offset.
fn assert_bad(o: &Output, file: &Path, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(&file.display().to_string()),
        "error does not name the file: {err}"
    );
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

#[test]
fn wrong_magic() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("not-a-trace.dat");
    std::fs::write(&f, b"\x7fELF this is not a trace file at all").unwrap();
    for cmd in [&["info"][..], &["dump"][..]] {
        let o = kstate(cmd, &f);
        assert_bad(&o, &f, "offset 0");
        assert!(
            stderr(&o).to_lowercase().contains("magic"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn truncated_trace_dat() {
    let src = std::fs::read(fixture("lisa-sched_load/trace.dat")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Inside the metadata (mostly kallsyms in this file), and inside the CPU data, which
    // `trace-cmd dump --flyrecord` places in the last 200,704 bytes.
    let data_start = src.len() - 200_704;
    for cut in [
        100usize,
        3000,
        src.len() / 2,
        src.len() - 150_000,
        src.len() - 1000,
    ] {
        let f = dir.path().join(format!("cut-{cut}.dat"));
        std::fs::write(&f, &src[..cut]).unwrap();
        let o = kstate(&["info"], &f);
        assert_bad(&o, &f, "offset");
        if cut > data_start {
            // The event data is cut: info still reports what it read and says so.
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("TRUNCATED"), "cut at {cut}: {out}");
            let o = kstate(&["info", "--json"], &f);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["truncated"], true);
            assert!(v["events"].as_u64().unwrap() > 0);
        }
        let o = kstate(&["dump"], &f);
        assert_eq!(o.status.code(), Some(2), "dump of a file cut at {cut}");
    }
}

/// A capture directory with one hand-made event format and one hand-made page.
fn capture_with_page(page: &[u8], format_text: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("header_page"),
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n",
    )
    .unwrap();
    let ev = d.join("events/test/tick");
    std::fs::create_dir_all(&ev).unwrap();
    let fmt = format_text.unwrap_or(
        "name: tick\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:int n;\toffset:8;\tsize:4;\tsigned:1;\n",
    );
    std::fs::write(ev.join("format"), fmt).unwrap();
    let cpu = d.join("per_cpu/cpu0");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("trace_pipe_raw"), page).unwrap();
    dir
}

/// One page holding one 12-byte event (type_len 3, delta 10) per id.
fn page(commit: u64, ids: &[u16]) -> Vec<u8> {
    let mut p = vec![0u8; 4096];
    p[..8].copy_from_slice(&1000u64.to_le_bytes());
    p[8..16].copy_from_slice(&commit.to_le_bytes());
    for (i, id) in ids.iter().enumerate() {
        let at = 16 + i * 16;
        p[at..at + 4].copy_from_slice(&(3u32 | (10 << 5)).to_le_bytes());
        p[at + 4..at + 6].copy_from_slice(&id.to_le_bytes());
        p[at + 8..at + 12].copy_from_slice(&4242i32.to_le_bytes());
    }
    p
}

#[test]
fn commit_overrunning_the_page() {
    let dir = capture_with_page(&page(5000, &[7]), None);
    let f = dir.path().join("per_cpu/cpu0/trace_pipe_raw");
    for cmd in ["info", "dump"] {
        let o = kstate(&[cmd], dir.path());
        assert_bad(&o, &f, "overruns the page");
        assert!(
            stderr(&o).contains("offset 8 "),
            "commit field is at offset 8: {}",
            stderr(&o)
        );
    }
}

#[test]
fn event_id_without_format() {
    let dir = capture_with_page(&page(32, &[7, 99]), None);
    let o = kstate(&["dump"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("event id 99"), "{}", stderr(&o));
    // The good event before it was printed (after trace-cmd's `cpus=N` line).
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.starts_with("cpus=1\n"), "{out}");
    let o = kstate(&["info", "--json"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unknown_event_ids"], 1);
    assert_eq!(v["event_counts"]["tick"], 1);
}

#[test]
fn format_file_that_does_not_parse() {
    let dir = capture_with_page(
        &page(16, &[7]),
        Some("name: tick\nID: 7\nformat:\n\tfield:int n;\toffset:eight;\tsize:4;\n"),
    );
    let f = dir.path().join("events/test/tick/format");
    let o = kstate(&["info"], dir.path());
    assert_bad(&o, &f, "offset 25 ");
    assert!(stderr(&o).contains("bad number"), "{}", stderr(&o));
}

#[test]
fn good_capture_reads_cleanly() {
    let dir = capture_with_page(&page(32, &[7, 7]), None);
    let o = kstate(&["dump", "--json"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["ts"], 1010);
    assert_eq!(lines[1]["ts"], 1020);
    assert_eq!(lines[0]["pid"], 4242);
    assert_eq!(lines[0]["event"], "tick");
    assert_eq!(lines[0]["fields"]["n"], 0);
}

/// A perf.data header whose attribute size is 0 (found by the tracedat fuzz target: the
/// perf.data parsing crate divided by it).
#[test]
fn perf_data_with_zero_attribute_size() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("zero-attr.data");
    let mut h = vec![0u8; 104];
    h[..8].copy_from_slice(b"PERFILE2");
    h[8..16].copy_from_slice(&104u64.to_le_bytes()); // header size
    h[24..32].copy_from_slice(&104u64.to_le_bytes()); // attributes at the end, empty
    std::fs::write(&f, &h).unwrap();
    for cmd in [&["info"][..], &["dump"][..]] {
        assert_bad(&kstate(cmd, &f), &f, "attribute size 0 is implausible");
    }
}
