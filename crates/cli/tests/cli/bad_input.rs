//! Damaged input: one clear error naming the file, the byte offset and the problem, exit
//! status 2, never a panic.

use crate::support;

use support::{fixture, run_on, KSTATE};

use std::path::Path;
use std::process::{Command, Output};

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
        let o = run_on(cmd, &f);
        // What the file is, in words, rather than the bytes that did not match.
        assert_bad(
            &o,
            &f,
            "not a trace: an ELF file (a program, library or core dump); expected trace.dat, \
             perf.data or a capture directory",
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
        let o = run_on(&["info"], &f);
        assert_bad(&o, &f, "offset");
        if cut > data_start {
            // The event data is cut: info still reports what it read and says so.
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("TRUNCATED"), "cut at {cut}: {out}");
            let o = run_on(&["info", "--json"], &f);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["truncated"], true);
            assert!(v["events"].as_u64().unwrap() > 0);
        }
        let o = run_on(&["dump"], &f);
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
        let o = run_on(&[cmd], dir.path());
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
    let o = run_on(&["dump"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("event id 99"), "{}", stderr(&o));
    // The good event before it was printed (after trace-cmd's `cpus=N` line).
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.starts_with("cpus=1\n"), "{out}");
    let o = run_on(&["info", "--json"], dir.path());
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
    let o = run_on(&["info"], dir.path());
    assert_bad(&o, &f, "offset 25 ");
    assert!(stderr(&o).contains("bad number"), "{}", stderr(&o));
}

#[test]
fn good_capture_reads_cleanly() {
    let dir = capture_with_page(&page(32, &[7, 7]), None);
    let o = run_on(&["dump", "--json"], dir.path());
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
        assert_bad(&run_on(cmd, &f), &f, "attribute size 0 is implausible");
    }
}

/// Runs kstate with its address space limited to 1 GiB, so that a table sized by a damaged
/// number aborts instead of taking the machine's memory.
fn kstate_bounded(args: &[&str], file: &Path) -> Output {
    Command::new("prlimit")
        .arg(format!("--as={}", 1u64 << 30))
        .arg(KSTATE)
        .args(args)
        .arg(file)
        .output()
        .expect("prlimit (util-linux) runs")
}

/// Where a perf.data's samples (of its first attribute) hold the field of sample_type bit
/// `bit`, from the record's start, given the bits of the 8-byte fields before it.
fn sample_field(d: &[u8], bit: u32, before: &[u32]) -> usize {
    let u64_at = |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
    let sample_type = u64_at(u64_at(24) as usize + 24);
    assert!(sample_type & (1 << bit) != 0, "perf records field {bit}");
    8 + 8 * before
        .iter()
        .filter(|&&b| sample_type & (1 << b) != 0)
        .count()
}

/// The offsets of a perf.data's SAMPLE records, in file order.
fn perf_samples(d: &[u8]) -> Vec<usize> {
    let u64_at = |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap()) as usize;
    let (mut at, end) = (u64_at(40), u64_at(40) + u64_at(48));
    let mut samples = Vec::new();
    while at < end {
        let kind = u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
        let size = u16::from_le_bytes(d[at + 6..at + 8].try_into().unwrap()) as usize;
        if kind == 9 {
            samples.push(at);
        }
        at += size.max(8);
    }
    samples
}

/// Writes `value` at `field` (from [`sample_field`]) of the first `n` SAMPLE records.
fn damage_samples(d: &mut [u8], n: usize, field: usize, value: &[u8]) {
    let samples = perf_samples(d);
    assert!(samples.len() >= n, "only {} samples", samples.len());
    for at in &samples[..n] {
        d[at + field..at + field + value.len()].copy_from_slice(value);
    }
}

/// A perf.data sample whose CPU number is damaged must not size per-CPU tables (a table
/// of a billion CPUs took the machine's memory): the record is named as the problem.
#[test]
fn perf_data_sample_with_impossible_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sys.data");
    support::perf_record(
        &f,
        &["-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit"],
        false,
        &["true"],
    );
    let mut d = std::fs::read(&f).unwrap();
    // IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID come before CPU.
    let cpu = sample_field(&d, 7, &[16, 0, 1, 2, 3, 6, 9]);
    damage_samples(&mut d, 1, cpu, &989_855_745u32.to_le_bytes());
    std::fs::write(&f, &d).unwrap();
    for cmd in [&["analyze", "syscall", "--stat"][..], &["info"][..]] {
        let o = kstate_bounded(cmd, &f);
        assert_bad(&o, &f, "CPU 989855745");
    }
}

/// A perf.data header whose data size reaches past the end of u64 (found by the tracedat
/// fuzz target from a seed recording: the offset plus the size overflowed): the file is
/// named as cut there, and what lies in it is read.
#[test]
fn perf_data_with_a_data_size_past_the_end_of_u64() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sys.data");
    support::perf_record(&f, &["-e", "raw_syscalls:*"], false, &["true"]);
    let mut d = std::fs::read(&f).unwrap();
    // The header's data section: offset at byte 40, size at byte 48.
    d[48..56].copy_from_slice(&(u64::MAX - 300).to_le_bytes());
    std::fs::write(&f, &d).unwrap();
    for cmd in [&["info"][..], &["dump"][..]] {
        assert_bad(&run_on(cmd, &f), &f, "runs past the end of the");
    }
    // The event descriptions lie after the data section, out of reach: an analysis that
    // finds none of its events names the damage as what may hide them, not only the
    // events as never recorded.
    let o = run_on(&["analyze", "syscall", "--stat"], &f);
    assert_bad(&o, &f, "has no raw_syscalls:sys_enter");
    assert_bad(&o, &f, "the file is damaged, which may hide them");
    assert_bad(&o, &f, "runs past the end of the");
}

/// A perf.data sample whose time is damaged to near the end of time: `classify` sums each
/// CPU's busy time up to the last event, which then overflowed (a panic, found by the
/// `analyze` fuzz target from a real recording); the totals stop at their largest instead.
#[test]
fn perf_data_sample_at_the_end_of_time() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sched.data");
    support::perf_record(
        &f,
        &[
            "-a",
            "-e",
            "sched:sched_switch,raw_syscalls:sys_enter,raw_syscalls:sys_exit",
        ],
        false,
        &["sh", "-c", "for i in 1 2 3; do ls / >/dev/null; done"],
    );
    let mut d = std::fs::read(&f).unwrap();
    // IDENTIFIER, IP and TID come before TIME.
    let time = sample_field(&d, 2, &[16, 0, 1]);
    damage_samples(&mut d, 2, time, &(u64::MAX - 1000).to_le_bytes());
    std::fs::write(&f, &d).unwrap();
    let o = kstate_bounded(&["classify", "--json"], &f);
    assert!(
        o.status.success(),
        "classify of a sample at the end of time: {}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.is_object(), "classify --json gives its verdict: {v}");
}

/// perf.data samples whose periods are damaged to near 2^64: `kstate profile` sums the
/// periods (of all samples, of each function), which then overflowed (a panic, found by
/// the `samples` fuzz target from a real recording); the sums stop at their largest.
#[test]
fn perf_data_samples_with_periods_near_the_end_of_u64() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("clock.data");
    support::perf_record(
        &f,
        &["-e", "cpu-clock", "-F", "2000"],
        false,
        &["dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=300"],
    );
    let mut d = std::fs::read(&f).unwrap();
    // IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID and CPU come before PERIOD.
    let period = sample_field(&d, 8, &[16, 0, 1, 2, 3, 6, 9, 7]);
    damage_samples(&mut d, 2, period, &(u64::MAX - 1000).to_le_bytes());
    std::fs::write(&f, &d).unwrap();
    let o = kstate_bounded(&["profile", "--json"], &f);
    assert!(o.status.success(), "profile: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.is_object(), "profile --json gives its table: {v}");
}

/// A trace.dat page whose time is damaged to near the end of time: the report's findings
/// sum the time each run queue spent at each length, and took the median of those
/// sums, which then overflowed (a panic, found by the `analyze` fuzz target from a real
/// capture); the sums stop at their largest instead.
#[test]
fn trace_dat_page_at_the_end_of_time() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("demo.dat");
    // The demo runs more threads than there are CPUs: the run queues grow.
    support::record_workload(
        "sched",
        &["demo", "--dir", dir.path().to_str().unwrap()],
        false,
        &f,
    );
    let info = support::kstate_json(&["info".as_ref(), "--json".as_ref(), f.as_os_str()]);
    let page = info["page_size"].as_u64().unwrap() as usize;
    let cpus = info["per_cpu"].as_array().unwrap();
    let ts = |k: &str| -> Vec<u64> { cpus.iter().filter_map(|c| c[k].as_u64()).collect() };
    let from = ts("first_ts").into_iter().min().unwrap() - 1_000_000_000;
    let to = ts("last_ts").into_iter().max().unwrap();
    // Pages start at multiples of the page size, with their time first; the last such is
    // the last page of the last CPU.
    let mut d = std::fs::read(&f).unwrap();
    let last = (0..d.len() / page)
        .rev()
        .map(|k| k * page)
        .find(|&at| (from..=to).contains(&u64::from_le_bytes(d[at..at + 8].try_into().unwrap())))
        .expect("a page header in the file");
    d[last..last + 8].copy_from_slice(&(u64::MAX - (1 << 40)).to_le_bytes());
    std::fs::write(&f, &d).unwrap();
    let html = dir.path().join("report.html");
    let o = kstate_bounded(&["report", "-o", html.to_str().unwrap()], &f);
    assert!(
        o.status.success(),
        "report of a page at the end of time: {}",
        stderr(&o)
    );
}

/// A capture directory holding `records` (event id, payload after the common fields) on
/// CPU 0, with sched_switch (id 1) and sched_wakeup (id 2) formats as the kernel writes them.
fn sched_capture(records: &[(u16, Vec<u8>)]) -> tempfile::TempDir {
    let common = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";
    let switch = format!("name: sched_switch\nID: 1\nformat:\n{common}\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\nprint fmt: \"x\"\n");
    let wakeup = format!("name: sched_wakeup\nID: 2\nformat:\n{common}\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n\nprint fmt: \"x\"\n");
    let mut p = vec![0u8; 4096];
    p[..8].copy_from_slice(&1000u64.to_le_bytes());
    let mut at = 16;
    for (id, body) in records {
        let len = 8 + body.len();
        assert!(len % 4 == 0 && len / 4 <= 28);
        p[at..at + 4].copy_from_slice(&((len as u32 / 4) | (10 << 5)).to_le_bytes());
        p[at + 4..at + 6].copy_from_slice(&id.to_le_bytes());
        p[at + 8..at + 12].copy_from_slice(&4242i32.to_le_bytes());
        p[at + 12..at + 4 + len].copy_from_slice(body);
        at += 4 + len;
    }
    p[8..16].copy_from_slice(&((at - 16) as u64).to_le_bytes());
    let dir = capture_with_page(&p, None);
    for (name, text) in [("sched_switch", switch), ("sched_wakeup", wakeup)] {
        let ev = dir.path().join("events/sched").join(name);
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(ev.join("format"), text).unwrap();
    }
    dir
}

/// A sched_wakeup whose target_cpu is damaged is reported with its place in the file, and
/// the run-queue table does not grow to that CPU number.
#[test]
fn wakeup_onto_an_impossible_cpu() {
    let mut switch = vec![0u8; 56];
    switch[16..20].copy_from_slice(&1i32.to_le_bytes()); // prev_pid
    switch[48..52].copy_from_slice(&2i32.to_le_bytes()); // next_pid
    let mut wakeup = vec![0u8; 28];
    wakeup[16..20].copy_from_slice(&3i32.to_le_bytes()); // pid
    wakeup[24..28].copy_from_slice(&0x7fff_fff0i32.to_le_bytes()); // target_cpu
    let dir = sched_capture(&[(1, switch), (2, wakeup)]);
    let f = dir.path().join("per_cpu/cpu0/trace_pipe_raw");
    let o = kstate_bounded(&["analyze", "runq", "--stat"], dir.path());
    let err = stderr(&o);
    assert!(
        !err.contains("panicked") && o.status.code().is_some(),
        "{err}"
    );
    assert!(
        err.contains(&f.display().to_string()) && err.contains("offset 0 "),
        "names the page: {err}"
    );
    assert!(err.contains("target_cpu 2147483632"), "{err}");
}

/// Exit statuses by class (kstate --help): a trace that is missing is bad input (2); a
/// good trace whose report cannot be written is a failure of the system (1).
#[test]
fn exit_status_says_whose_fault_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such.dat");
    assert_bad(&run_on(&["info"], &missing), &missing, "No such file");

    let good = fixture("lisa-sched_load/trace.dat");
    let unwritable = dir.path().join("no-such-dir").join("r.html");
    let o = Command::new(KSTATE)
        .arg("report")
        .arg(&good)
        .arg("-o")
        .arg(&unwritable)
        .output()
        .expect("kstate runs");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains(&unwritable.display().to_string()), "{err}");
}
