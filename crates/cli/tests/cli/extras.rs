//! kstate's own sections in a real trace.dat: written next to the schedviz capture's
//! events, they come back from `Trace::open` as written, trace-cmd reads the file exactly
//! as it reads the same file without them, and `kstate info` reports them.

use crate::support;

use support::run_on;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kstate_format::sections::{
    self, ids, parse_ring_stats, Process, Recording, RingStats, SysinfoWriter,
};
use kstate_format::writer::{write_from_capture, Compression, TraceWriter, WriterConfig};
use kstate_format::Trace;
use serde_json::{json, Value};

fn schedviz_capture(dir: &Path) -> PathBuf {
    let out = dir.join("schedviz");
    std::fs::create_dir_all(&out).unwrap();
    let tgz = support::fixture("schedviz/test.tar.gz");
    assert!(tgz.is_file(), "fixture {} is missing", tgz.display());
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&tgz)
        .arg("-C")
        .arg(&out)
        .status()
        .expect("run tar");
    assert!(st.success(), "extracting the schedviz fixture failed");
    out
}

fn config(compression: Compression) -> WriterConfig {
    let mut cfg = WriterConfig::new(4096);
    cfg.compression = compression;
    cfg.uname = Some("Linux test 6.x".into());
    cfg.version = Some("kstate test".into());
    cfg
}

/// The four sections, from this machine where there is something real to take.
struct Sections {
    recording: Recording,
    processes: Vec<Process>,
    sysinfo: Vec<u8>,
    sysinfo_count: u64,
    ring: Vec<RingStats>,
}

fn sections() -> Sections {
    let recording = Recording {
        tool: "kstate 0.1.0".into(),
        command: vec![
            "kstate".into(),
            "record".into(),
            "-e".into(),
            "sched".into(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "sleep 1; echo 'done'".into(),
        ],
        workload: vec!["sh".into(), "-c".into(), "sleep 1; echo 'done'".into()],
        hostname: "test-host\nwith newline".into(),
        clock: "mono".into(),
        // 2023-11-14T22:13:20.5Z minus the start timestamp below.
        wall_offset_ns: Some(1_700_000_000_500_000_000 - 259_445_000_000_000),
        start_ts: 259_445_000_000_000,
        stop_ts: 259_447_250_000_000,
        buffer_kib_per_cpu: 4096,
        events: vec![
            "sched:sched_switch".into(),
            "sched:sched_wakeup".into(),
            "sched:sched_wakeup_new".into(),
            "sched:sched_migrate_task".into(),
        ],
        missing_events: vec!["sched:sched_nonexistent".into()],
        cut_short: None,
        filters: vec!["sched:sched_switch:prev_pid != 0".into()],
        pids: vec![],
        sysinfo_interval_ms: 50,
        workload_pid: Some(31337),
    };
    let mut processes = vec![
        Process {
            pid: 1,
            tgid: 1,
            ppid: 0,
            comm: "systemd".into(),
        },
        Process {
            pid: 4242,
            tgid: 4240,
            ppid: 1,
            comm: "Web Content\\x ".into(),
        },
    ];
    let me = std::process::id() as i32;
    processes.push(Process {
        pid: me,
        tgid: me,
        ppid: std::os::unix::process::parent_id() as i32,
        comm: std::fs::read_to_string("/proc/self/comm")
            .unwrap()
            .trim_end()
            .into(),
    });
    let mut w = SysinfoWriter::new(Vec::new());
    for i in 0..3u64 {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        w.snapshot(
            259_445_000_000_000 + i * 50_000_000,
            &std::fs::read("/proc/meminfo").unwrap(),
            &std::fs::read("/proc/vmstat").unwrap(),
        )
        .unwrap();
    }
    let sysinfo_count = w.snapshots();
    let sysinfo = w.into_inner().unwrap();
    let ring = (0..2)
        .map(|cpu| {
            let p = format!("/sys/kernel/tracing/per_cpu/cpu{cpu}/stats");
            let text = std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            parse_ring_stats(cpu, &text).unwrap()
        })
        .collect();
    Sections {
        recording,
        processes,
        sysinfo,
        sysinfo_count,
        ring,
    }
}

/// The capture as trace.dat, written page by page like `write_from_capture` does, with
/// the given kstate options added.
fn write_with(cap: &Path, out: &Path, compression: Compression, options: &[(u16, Vec<u8>)]) {
    let capture = Trace::open(cap).unwrap();
    let mut cfg = config(compression);
    cfg.page_size = capture.layout.page_size;
    cfg.clock = capture.clock.clone();
    cfg.cpu_count = Some(capture.cpu_count);
    let mut w = TraceWriter::create(out, cfg).unwrap();
    w.header_page(&std::fs::read(cap.join("formats/header_page")).unwrap())
        .unwrap();
    let mut events: Vec<PathBuf> = std::fs::read_dir(cap.join("formats/sched"))
        .unwrap()
        .map(|e| e.unwrap().path().join("format"))
        .filter(|p| p.is_file())
        .collect();
    events.sort();
    assert!(events.len() >= 4, "{events:?}");
    for f in events {
        w.event_format("sched", &std::fs::read(f).unwrap());
    }
    for (id, payload) in options {
        w.extra_option(*id, payload).unwrap();
    }
    for (i, cd) in capture.cpu_data.iter().enumerate() {
        let mut src = capture.pages(i).unwrap();
        let mut cw = w.cpu_writer(cd.cpu).unwrap();
        while src.advance().unwrap() {
            cw.write_page(src.page()).unwrap();
        }
        cw.finish().unwrap();
    }
    w.finish().unwrap();
}

fn report(file: &Path) -> (String, String) {
    let out = Command::new("trace-cmd")
        .args(["report", "-i"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run trace-cmd (apt-get install trace-cmd; never skipped): {e}")
        });
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "trace-cmd report {} failed: {stderr}",
        file.display()
    );
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// Lines of `trace-cmd report` that are events: `comm-pid [cpu] secs.nsecs: event: ...`.
fn event_lines(report: &str) -> usize {
    report
        .lines()
        .filter(|l| {
            l.split_once(" [")
                .and_then(|(_, r)| r.split_once("] "))
                .is_some_and(|(cpu, r)| {
                    cpu.trim().parse::<u32>().is_ok()
                        && r.trim_start()
                            .split_once(": ")
                            .is_some_and(|(ts, _)| ts.contains('.'))
                })
        })
        .count()
}

fn info_json(file: &Path) -> (Value, Output) {
    let o = run_on(&["info", "--json"], file);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "info --json is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (v, o)
}

fn all_options(s: &Sections) -> Vec<(u16, Vec<u8>)> {
    vec![
        (ids::RECORDING, s.recording.encode()),
        (ids::PROCESSES, sections::encode_processes(&s.processes)),
        (ids::SYSINFO, s.sysinfo.clone()),
        (ids::RING_STATS, sections::encode_ring_stats(&s.ring)),
    ]
}

#[test]
fn sections_survive_a_trace_dat_and_trace_cmd_ignores_them() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = schedviz_capture(tmp.path());
    let s = sections();
    let options = all_options(&s);
    for compression in [Compression::None, Compression::Zstd] {
        let plain = tmp.path().join(format!("plain-{compression:?}.dat"));
        let with = tmp.path().join(format!("with-{compression:?}.dat"));
        write_with(&cap, &plain, compression, &[]);
        write_with(&cap, &with, compression, &options);

        // (a) The reader gives them back as written.
        let t = Trace::open(&with).unwrap();
        for (id, payload) in &options {
            assert_eq!(t.extra(*id), Some(payload.as_slice()), "option {id:#x}");
        }
        assert_eq!(
            Recording::decode(t.extra(ids::RECORDING).unwrap()).unwrap(),
            s.recording
        );
        assert_eq!(
            sections::decode_processes(t.extra(ids::PROCESSES).unwrap()).unwrap(),
            s.processes
        );
        assert_eq!(
            sections::decode_ring_stats(t.extra(ids::RING_STATS).unwrap()).unwrap(),
            s.ring
        );
        let snaps: Vec<_> = sections::sysinfo_snapshots(t.extra(ids::SYSINFO).unwrap())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(snaps.len() as u64, s.sysinfo_count);
        assert_eq!(snaps[2].ts, 259_445_100_000_000);
        assert!(snaps[2].get("meminfo.MemTotal").unwrap() > 0);
        assert_eq!(Trace::open(&plain).unwrap().extra(ids::RECORDING), None);

        // (b) trace-cmd reads the same events, quietly.
        let (a, a_err) = report(&plain);
        let (b, b_err) = report(&with);
        assert_eq!(a_err.trim(), "", "{compression:?}");
        assert_eq!(b_err.trim(), "", "{compression:?}: trace-cmd complains");
        let n = event_lines(&b);
        assert!(n > 1000, "{compression:?}: {n} events");
        assert_eq!(event_lines(&a), n, "{compression:?}");
        assert_eq!(a, b, "{compression:?}");
        // ... and as many as kstate's own converter gives.
        let conv = tmp.path().join(format!("conv-{compression:?}.dat"));
        write_from_capture(&Trace::open(&cap).unwrap(), &conv, config(compression)).unwrap();
        assert_eq!(event_lines(&report(&conv).0), n, "{compression:?}");

        // (c) kstate info --json reports them.
        let (v, o) = info_json(&with);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = &s.recording;
        assert_eq!(
            v["recording"],
            json!({
                "tool": r.tool, "command": r.command, "workload": r.workload,
                "hostname": r.hostname, "clock": r.clock, "wall_offset_ns": r.wall_offset_ns,
                "start_ts": r.start_ts, "stop_ts": r.stop_ts,
                "buffer_kib_per_cpu": r.buffer_kib_per_cpu, "events": r.events,
                "missing_events": r.missing_events, "filters": r.filters, "pids": r.pids,
                "sysinfo_interval_ms": r.sysinfo_interval_ms,
                "workload_pid": r.workload_pid,
            })
        );
        assert_eq!(v["processes"], json!(s.processes.len()));
        assert_eq!(v["sysinfo_snapshots"], json!(3));
        let ring: Vec<Value> = s
            .ring
            .iter()
            .map(|r| {
                json!({
                    "cpu": r.cpu, "entries": r.entries, "overrun": r.overrun,
                    "commit_overrun": r.commit_overrun, "bytes": r.bytes,
                    "dropped_events": r.dropped_events, "read_events": r.read_events,
                })
            })
            .collect();
        assert_eq!(v["ring_stats"], json!(ring));
        assert_eq!(v["errors"], json!([]));
        assert_eq!(v["events"], json!(n));

        // Without the sections: none of the new keys, and otherwise the same report.
        let (p, po) = info_json(&plain);
        assert!(po.status.success());
        for k in ["recording", "processes", "sysinfo_snapshots", "ring_stats"] {
            assert!(p.get(k).is_none(), "{k} in {p}");
        }
        let mut v2 = v.clone();
        for k in [
            "recording",
            "processes",
            "sysinfo_snapshots",
            "ring_stats",
            "file",
        ] {
            v2.as_object_mut().unwrap().remove(k);
        }
        let mut p2 = p.clone();
        p2.as_object_mut().unwrap().remove("file");
        assert_eq!(v2, p2);
    }
}

#[test]
fn info_text_shows_the_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = schedviz_capture(tmp.path());
    let s = sections();
    let with = tmp.path().join("with.dat");
    write_with(&cap, &with, Compression::None, &all_options(&s));
    let o = run_on(&["info"], &with);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    for want in [
        "\nrecording:\n",
        "  tool:        kstate 0.1.0\n",
        "  command:     kstate record -e sched -- sh -c 'sleep 1; echo '\\''done'\\'''\n",
        "  workload:    sh -c 'sleep 1; echo '\\''done'\\''' (pid 31337)\n",
        "  host:        test-host\\nwith newline\n",
        "  clock:       mono\n",
        "  started:     2023-11-14T22:13:20.500000000Z\n",
        "  duration:    2.250000 s (259445.000000000 .. 259447.250000000)\n",
        "  buffer:      4096 KiB per CPU\n",
        "  events:      4 enabled: sched:sched_switch, sched:sched_wakeup, ",
        "  missing:     sched:sched_nonexistent\n",
        "  filters:     sched:sched_switch:prev_pid != 0\n",
        "  pids:        all (system-wide)\n",
        "  sysinfo:     3 snapshots, every 50 ms\n",
        "  processes:   3 (at start, and traced tasks found later)\n",
        "  ring buffer at stop:\n",
    ] {
        assert!(text.contains(want), "no {want:?} in:\n{text}");
    }
    for r in &s.ring {
        let row = format!(
            "    {:>4} {:>12} {:>12} {:>14} {:>12} {:>12}\n",
            r.cpu, r.entries, r.overrun, r.commit_overrun, r.dropped_events, r.read_events
        );
        assert!(text.contains(&row), "no {row:?} in:\n{text}");
    }
    // The block sits between the summary and the per-CPU table.
    let (rec, per_cpu) = (
        text.find("\nrecording:").unwrap(),
        text.find("\nper CPU:").unwrap(),
    );
    assert!(text.find("\nlost:").unwrap() < rec && rec < per_cpu);
}

/// A damaged section: info reports everything else, names the section and the byte in
/// it, and exits 2; never a panic.
#[test]
fn damaged_sections_are_errors_not_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = schedviz_capture(tmp.path());
    let s = sections();
    let mut sysinfo_cut = s.sysinfo.clone();
    sysinfo_cut.truncate(sysinfo_cut.len() - 3);
    let mut options = vec![
        (
            ids::RECORDING,
            b"kstate-recording 1\nstart_ts soon\n".to_vec(),
        ),
        (ids::PROCESSES, sections::encode_processes(&s.processes)),
        (ids::SYSINFO, sysinfo_cut),
        (ids::RING_STATS, b"nonsense".to_vec()),
    ];
    let bad = tmp.path().join("bad.dat");
    write_with(&cap, &bad, Compression::None, &options);
    let (v, o) = info_json(&bad);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(v["recording"], Value::Null);
    assert_eq!(v["processes"], json!(3));
    assert_eq!(v["sysinfo_snapshots"], Value::Null);
    assert_eq!(v["ring_stats"], Value::Null);
    assert!(v["events"].as_u64().unwrap() > 1000);
    assert_eq!(v["truncated"], json!(false));
    let errors: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let path = bad.display().to_string();
    assert!(errors[0].starts_with(&format!(
        "{path}: kstate recording section (option 0x6b00), byte 28 of its 33 bytes: start_ts"
    )));
    assert!(
        errors[1].contains("kstate sysinfo section (option 0x6b02), byte ")
            && !errors[1].contains("sysinfo section: "),
        "{}",
        errors[1]
    );
    assert!(errors[1].contains("truncated?"), "{}", errors[1]);
    assert!(errors[2].starts_with(&format!(
        "{path}: kstate ring stats section (option 0x6b03), byte 0 of its 8 bytes: "
    )));
    for e in &errors {
        assert!(stderr.contains(e), "{e} not in {stderr}");
    }
    // Text output too, with the damage shown where the values would be.
    let o = run_on(&["info"], &bad);
    assert_eq!(o.status.code(), Some(2));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("\nrecording:\n  (damaged, see the error)\n"),
        "{text}"
    );
    assert!(text.contains("  sysinfo:     (damaged, see the error)\n"));
    assert!(text.contains("  processes:   3 (at start, and traced tasks found later)\n"));
    assert!(text.contains("  ring buffer: (damaged, see the error)\n"));

    // An unknown future version is refused the same way.
    options[0].1 = b"kstate-recording 2\ntool x\n".to_vec();
    let newer = tmp.path().join("newer.dat");
    write_with(&cap, &newer, Compression::None, &options[..1]);
    let o = run_on(&["info"], &newer);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("kstate-recording version 2; this kstate reads version 1"),
        "{err}"
    );
}
