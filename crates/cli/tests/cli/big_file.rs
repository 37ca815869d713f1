//! A file with one CPU's data over 2 GiB opens in trace-cmd with the same events as in
//! kstate. Ignored by default: it writes a 2.3 GB file to the temporary directory (and
//! removes it), and refuses to start with less than 15 GB free there. Run it with
//!
//! ```text
//! cargo test --release -p kstate --test cli -- --ignored big_file::
//! ```
//!
//! (a few minutes: trace-cmd prints 39 M lines). Before kstate wrote its metadata ahead
//! of the CPU data, trace-cmd 3.1.6 printed nothing at all for such a file: it reads the
//! event formats' system names with a seek whose result it keeps in an `int`.

use crate::support;

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use kstate_format::writer::{TraceWriter, WriterConfig};
use kstate_format::Trace;

const CPU0_BYTES: u64 = 2_300_000_000;

/// Free bytes where `dir` is, from `df`.
fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .expect("run df");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df's answer")
}

/// CPU 0: the pages of a real recording's busiest CPU again and again, each pass later
/// by the recording's span (page timestamps moved), until it holds `CPU0_BYTES`; CPU 1:
/// those pages once. With `late`, the event formats are given after the CPU data, so
/// they land past 2 GiB as an older kstate wrote them. Returns the number of passes.
fn write_big(src: &Path, out: &Path, late: bool) -> u64 {
    let t = Trace::open(src).unwrap();
    let mut cfg = WriterConfig::new(t.layout.page_size);
    cfg.long_size = t.long_size;
    cfg.endian = t.endian;
    cfg.clock = t.clock.clone();
    let mut w = TraceWriter::create(out, cfg).unwrap();
    w.header_page(t.header_page.as_ref().unwrap()).unwrap();
    if !late {
        for (sys, text) in &t.format_texts {
            w.event_format(sys, text);
        }
    }
    let mut comms: Vec<_> = t.comms.iter().collect();
    comms.sort();
    let c: String = comms.iter().map(|(p, c)| format!("{p} {c}\n")).collect();
    w.cmdlines(c.as_bytes());
    let busiest = (0..t.cpu_data.len())
        .max_by_key(|&i| t.cpu_data[i].file_bytes)
        .unwrap();
    let mut pages = Vec::new();
    let mut p = t.pages(busiest).unwrap();
    while p.advance().unwrap() {
        pages.push(p.page().to_vec());
    }
    let e = t.endian;
    let ts = |pg: &[u8]| e.u64(pg[..8].try_into().unwrap());
    let span = ts(pages.last().unwrap()) - ts(&pages[0]) + 1_000_000;
    let mut cw = w.cpu_writer(0).unwrap();
    let (mut written, mut pass) = (0u64, 0u64);
    while written < CPU0_BYTES {
        for pg in &pages {
            let mut q = pg.clone();
            e.put_uint(&mut q[..8], ts(pg) + pass * span);
            cw.write_page(&q).unwrap();
            written += q.len() as u64;
        }
        pass += 1;
    }
    cw.finish().unwrap();
    let mut cw = w.cpu_writer(1).unwrap();
    for pg in &pages {
        cw.write_page(pg).unwrap();
    }
    cw.finish().unwrap();
    if late {
        for (sys, text) in &t.format_texts {
            w.event_format(sys, text);
        }
    }
    w.finish().unwrap();
    pass
}

/// Event lines a command prints (those with a `[CPU]` column), and a hash of them all.
fn lines_of(cmd: &mut Command) -> (u64, u64) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("run");
    let mut h = DefaultHasher::new();
    let mut n = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.contains("] ") {
            n += 1;
            h.write(line.as_bytes());
        }
    }
    assert!(child.wait().unwrap().success());
    (n, h.finish())
}

#[test]
#[ignore = "writes a 2.3 GB file; run with --ignored (see the file's docs)"]
fn one_cpu_over_2_gib_reads_the_same_in_trace_cmd() {
    let tmp = tempfile::tempdir().unwrap();
    let free = free_bytes(tmp.path());
    assert!(
        free > 15_000_000_000,
        "{} has {free} bytes free; this test needs 15 GB",
        tmp.path().display()
    );
    let big = tmp.path().join("big.dat");
    let src = support::fixture("lisa-sched_load/trace.v7-none.dat");
    let passes = write_big(&src, &big, false);
    assert!(std::fs::metadata(&big).unwrap().len() > CPU0_BYTES);

    let info = support::kstate_json(&["info".as_ref(), "--json".as_ref(), big.as_os_str()]);
    let events = info["events"].as_u64().unwrap();
    let (theirs, their_hash) = lines_of(Command::new("trace-cmd").arg("report").arg(&big));
    assert_eq!(theirs, events, "trace-cmd prints every event kstate counts");
    assert!(theirs > passes * 100, "{theirs} events in {passes} passes");
    let (ours, our_hash) = lines_of(Command::new(support::KSTATE).arg("dump").arg(&big));
    assert_eq!((ours, our_hash), (theirs, their_hash), "the same lines");
    std::fs::remove_file(&big).unwrap();

    // The layout an older kstate wrote, event formats after the data: trace-cmd prints
    // nothing (its limit), `info` says so, and `convert` rewrites it into a file it reads.
    let old = tmp.path().join("old.dat");
    write_big(&src, &old, true);
    let (none, _) = lines_of(Command::new("trace-cmd").arg("report").arg(&old));
    assert_eq!(none, 0, "trace-cmd 3.1.6 reads no event of the old layout");
    let text = support::kstate(&["info".as_ref(), old.as_os_str()]);
    assert!(
        text.contains("trace-cmd:   cannot open this file: its event formats"),
        "{text}"
    );
    let fixed = tmp.path().join("fixed.dat");
    support::kstate(&[
        "convert".as_ref(),
        old.as_os_str(),
        "-o".as_ref(),
        fixed.as_os_str(),
    ]);
    std::fs::remove_file(&old).unwrap();
    let (n, h) = lines_of(Command::new("trace-cmd").arg("report").arg(&fixed));
    assert_eq!(
        (n, h),
        (theirs, their_hash),
        "the rewrite reads as the first file"
    );
}
