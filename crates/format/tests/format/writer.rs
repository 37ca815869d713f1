//! trace.dat files written by kstate must be read by trace-cmd exactly as kstate reads the
//! raw pages they came from: same events per CPU, same first and last timestamps, and no
//! complaints. The pages come from the running kernel (a private tracefs instance) and
//! from the schedviz capture fixture.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kstate_format::page::PageRecords;
use kstate_format::writer::{
    write_from_capture, Compression, TraceWriter, WriterConfig, KSTATE_OPTION_IDS,
};
use kstate_format::{ErrorKind, Trace};

const TRACEFS: &str = "/sys/kernel/tracing";

/// Events per CPU with the first and last timestamp (ns).
type CpuStats = BTreeMap<u32, (u64, u64, u64)>;

fn add(stats: &mut CpuStats, cpu: u32, ts: u64) {
    let e = stats.entry(cpu).or_insert((0, ts, ts));
    e.0 += 1;
    e.1 = e.1.min(ts);
    e.2 = e.2.max(ts);
}

fn trace_cmd() -> &'static str {
    let ok = Command::new("trace-cmd")
        .arg("--version")
        .output()
        .map(|o| !o.stdout.is_empty() || !o.stderr.is_empty())
        .unwrap_or(false);
    assert!(
        ok,
        "trace-cmd is not installed; these tests check written files with it: apt-get install trace-cmd"
    );
    "trace-cmd"
}

/// Runs `trace-cmd report -t -R` and returns (stdout, stderr).
fn report(file: &Path) -> (String, String) {
    let out = Command::new(trace_cmd())
        .args(["report", "-t", "-R", "-i"])
        .arg(file)
        .output()
        .expect("run trace-cmd report");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "trace-cmd report {} failed: {stderr}",
        file.display()
    );
    (stdout, stderr)
}

/// Event lines look like `  comm-pid  [003] 1234.567890123: event: fields`; other lines
/// (the `cpus=N` banner, `CPU:N [EVENTS DROPPED]`) do not have `[cpu] secs.nsecs:`.
fn parse_event_line(line: &str) -> Option<(u32, u64, &str)> {
    let open = line.find(" [")?;
    let rest = &line[open + 2..];
    let close = rest.find(']')?;
    let cpu = rest[..close].parse::<u32>().ok()?;
    let rest = rest[close + 1..].trim_start();
    let colon = rest.find(": ")?;
    let (secs, frac) = rest[..colon].split_once('.')?;
    if frac.len() != 9 {
        return None;
    }
    let ts = secs.parse::<u64>().ok()? * 1_000_000_000 + frac.parse::<u64>().ok()?;
    Some((cpu, ts, &rest[colon + 2..]))
}

fn report_stats(stdout: &str) -> CpuStats {
    let mut stats = CpuStats::new();
    for line in stdout.lines() {
        if let Some((cpu, ts, _)) = parse_event_line(line) {
            add(&mut stats, cpu, ts);
        }
    }
    stats
}

/// What kstate's own reader finds in the capture's raw pages.
fn raw_stats(capture: &Trace) -> CpuStats {
    let mut stats = CpuStats::new();
    for (i, cd) in capture.cpu_data.iter().enumerate() {
        let mut pages = capture.pages(i).unwrap();
        while pages.advance().unwrap() {
            let (_, recs) = PageRecords::new(pages.page(), &capture.layout).unwrap();
            for r in recs {
                let (ts, _) = r.unwrap();
                add(&mut stats, cd.cpu, capture.clock_map.to_ns(ts));
            }
        }
    }
    stats
}

fn tracefs() -> &'static Path {
    let p = Path::new(TRACEFS);
    if !p.join("instances").is_dir() {
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status();
    }
    assert!(
        p.join("instances").is_dir(),
        "tracefs is not available at {TRACEFS} and could not be mounted (need root)"
    );
    p
}

/// A private tracefs instance, removed however the test ends.
struct Instance {
    dir: PathBuf,
}

impl Instance {
    fn new() -> Instance {
        let dir = tracefs()
            .join("instances")
            .join(format!("kstate-writer-test-{}", std::process::id()));
        if dir.exists() {
            let _ = std::fs::remove_dir(&dir);
        }
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        Instance { dir }
    }
    fn write(&self, file: &str, value: &str) {
        let p = self.dir.join(file);
        std::fs::write(&p, value).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let _ = std::fs::write(self.dir.join("events/enable"), "0");
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

const EVENTS: [&str; 3] = [
    "sched/sched_switch",
    "raw_syscalls/sys_enter",
    "raw_syscalls/sys_exit",
];

/// Records a short workload in a private instance and saves it in the rawdir layout.
fn capture_running_kernel(dest: &Path) {
    let inst = Instance::new();
    inst.write("buffer_size_kb", "1024");
    for ev in EVENTS {
        inst.write(&format!("events/{ev}/enable"), "1");
    }
    inst.write("tracing_on", "1");
    for _ in 0..5 {
        Command::new("/bin/true").status().expect("run /bin/true");
    }
    for _ in 0..200 {
        let _ = std::fs::metadata("/");
    }
    inst.write("tracing_on", "0");

    let events = inst.dir.join("events");
    std::fs::create_dir_all(dest.join("events")).unwrap();
    for f in ["header_page", "header_event"] {
        copy_tracefs_file(&events.join(f), &dest.join("events").join(f));
    }
    for ev in EVENTS {
        let d = dest.join("events").join(ev);
        std::fs::create_dir_all(&d).unwrap();
        copy_tracefs_file(&events.join(ev).join("format"), &d.join("format"));
    }
    copy_tracefs_file(&inst.dir.join("trace_clock"), &dest.join("trace_clock"));
    copy_tracefs_file(
        &tracefs().join("saved_cmdlines"),
        &dest.join("saved_cmdlines"),
    );

    let page_size = {
        let hp = read_tracefs_file(&events.join("header_page"));
        kstate_format::PageLayout::parse(&hp, kstate_format::Endian::Little, None)
            .unwrap()
            .page_size
    };
    for cpu_dir in std::fs::read_dir(inst.dir.join("per_cpu")).unwrap() {
        let cpu_dir = cpu_dir.unwrap().path();
        let name = cpu_dir.file_name().unwrap().to_owned();
        let out = dest.join("per_cpu").join(&name);
        std::fs::create_dir_all(&out).unwrap();
        let data = read_pipe_raw(&cpu_dir.join("trace_pipe_raw"), page_size);
        std::fs::write(out.join("trace_pipe_raw"), data).unwrap();
    }
    // `inst` drops here, after every tracefs file of it is closed.
}

/// tracefs files report size 0 and some (eventfs's header_page) return EOF after a
/// partial read, so `std::fs::read` (a small first read) and `std::fs::copy` truncate them:
/// read with one large buffer.
fn read_tracefs_file(path: &Path) -> Vec<u8> {
    let mut f = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut all = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read {}: {e}", path.display()),
        }
    }
    all
}

fn copy_tracefs_file(from: &Path, to: &Path) {
    let data = read_tracefs_file(from);
    assert!(!data.is_empty(), "{} is empty", from.display());
    std::fs::write(to, data).unwrap_or_else(|e| panic!("write {}: {e}", to.display()));
}

/// trace_pipe_raw blocks when empty; non-blocking page-sized reads stop at EAGAIN.
fn read_pipe_raw(path: &Path, page_size: usize) -> Vec<u8> {
    // O_NONBLOCK on Linux's generic ABI (x86, arm, arm64, riscv, ...).
    const O_NONBLOCK: i32 = 0o4000;
    let mut f: File = OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut all = Vec::new();
    let mut page = vec![0u8; page_size];
    loop {
        match f.read(&mut page) {
            Ok(0) => break,
            Ok(n) => {
                assert_eq!(n, page_size, "{}: short page read", path.display());
                all.extend_from_slice(&page);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read {}: {e}", path.display()),
        }
    }
    all
}

fn config(compression: Compression) -> WriterConfig {
    let mut cfg = WriterConfig::new(4096);
    cfg.compression = compression;
    cfg.uname = Some("Linux test 6.x".into());
    cfg.version = Some("kstate test".into());
    cfg
}

#[test]
fn kernel_capture_reads_the_same_in_trace_cmd() {
    trace_cmd();
    let tmp = tempfile::tempdir().unwrap();
    let cap_dir = tmp.path().join("capture");
    capture_running_kernel(&cap_dir);
    let capture = Trace::open(&cap_dir).unwrap();
    let want = raw_stats(&capture);
    let total: u64 = want.values().map(|s| s.0).sum();
    assert!(total >= 20, "workload produced only {total} events");

    for compression in [Compression::None, Compression::Zstd] {
        let out = tmp.path().join(format!("kernel-{compression:?}.dat"));
        write_from_capture(&capture, &out, config(compression)).unwrap();
        assert!(
            !names_in(tmp.path()).iter().any(|n| n.ends_with(".tmp")),
            "a temporary file was left"
        );
        let (stdout, stderr) = report(&out);
        assert_eq!(
            stderr.trim(),
            "",
            "trace-cmd report stderr ({compression:?})"
        );
        assert_eq!(
            report_stats(&stdout),
            want,
            "{compression:?}: trace-cmd (count, first ns, last ns) per CPU vs raw pages"
        );
        for ev in ["sched_switch:", "sys_enter:", "sys_exit:"] {
            assert!(stdout.contains(ev), "{compression:?}: no {ev} in report");
        }
    }
}

/// A file with a kstate option in it: trace-cmd must read it as if it were not there.
#[test]
fn trace_cmd_skips_kstate_options() {
    trace_cmd();
    let tmp = tempfile::tempdir().unwrap();
    let cap = schedviz_capture(tmp.path());
    let capture = Trace::open(&cap).unwrap();
    let plain = tmp.path().join("plain.dat");
    write_from_capture(&capture, &plain, config(Compression::Zstd)).unwrap();

    let with_extra = tmp.path().join("extra.dat");
    let mut w = TraceWriter::create(&with_extra, config(Compression::Zstd)).unwrap();
    w.header_page(&std::fs::read(cap.join("formats/header_page")).unwrap())
        .unwrap();
    for ev in [
        "sched_switch",
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_migrate_task",
    ] {
        let f = cap.join("formats/sched").join(ev).join("format");
        w.event_format("sched", &std::fs::read(f).unwrap());
    }
    w.extra_option(*KSTATE_OPTION_IDS.start(), b"kstate extra payload\0")
        .unwrap();
    w.extra_option(*KSTATE_OPTION_IDS.end(), &[0xff; 300])
        .unwrap();
    let mut src = File::open(cap.join("traces/cpu0")).unwrap();
    w.cpu_data(0, &mut src).unwrap();
    w.finish().unwrap();

    let dump = Command::new(trace_cmd())
        .args(["dump", "--options", "-i"])
        .arg(&with_extra)
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    let skipped: Vec<&str> = dump
        .lines()
        .filter(|l| l.contains("Unknown option"))
        .collect();
    assert_eq!(skipped.len(), 2, "{dump}");
    for id in [KSTATE_OPTION_IDS.start(), KSTATE_OPTION_IDS.end()] {
        assert!(
            skipped
                .iter()
                .any(|l| l.trim_start().starts_with(&format!("{id} "))),
            "kstate option {id} not seen by trace-cmd dump: {dump}"
        );
    }
    let (a, a_err) = report(&plain);
    let (b, b_err) = report(&with_extra);
    assert_eq!(
        b_err.trim(),
        "",
        "trace-cmd complains about the kstate option"
    );
    assert_eq!(a_err.trim(), "");
    assert_eq!(a, b);
    assert!(report_stats(&b)[&0].0 > 1000);
}

fn schedviz_capture(dir: &Path) -> PathBuf {
    let out = dir.join("schedviz");
    std::fs::create_dir_all(&out).unwrap();
    let st = Command::new("tar")
        .arg("xzf")
        .arg(kstate_testdata::path("schedviz/test.tar.gz"))
        .arg("-C")
        .arg(&out)
        .status()
        .expect("run tar");
    assert!(st.success(), "extracting the schedviz fixture failed");
    out
}

#[test]
fn schedviz_capture_converts() {
    trace_cmd();
    let tmp = tempfile::tempdir().unwrap();
    let cap = schedviz_capture(tmp.path());
    let capture = Trace::open(&cap).unwrap();
    let switch = capture.events.find("sched:sched_switch").unwrap().id;
    let mut raw_switches = 0u64;
    for i in 0..capture.cpu_data.len() {
        let mut pages = capture.pages(i).unwrap();
        while pages.advance().unwrap() {
            let (_, recs) = PageRecords::new(pages.page(), &capture.layout).unwrap();
            for r in recs {
                let (_, data) = r.unwrap();
                if u16::from_le_bytes([data[0], data[1]]) as u32 == switch {
                    raw_switches += 1;
                }
            }
        }
    }
    assert!(raw_switches > 1000);

    for compression in [Compression::None, Compression::Zstd] {
        let out = tmp.path().join(format!("schedviz-{compression:?}.dat"));
        write_from_capture(&capture, &out, config(compression)).unwrap();
        let (stdout, stderr) = report(&out);
        assert_eq!(stderr.trim(), "", "{compression:?}");
        let switches = stdout
            .lines()
            .filter_map(parse_event_line)
            .filter(|(_, _, rest)| rest.starts_with("sched_switch:"))
            .count() as u64;
        assert_eq!(switches, raw_switches, "{compression:?}");
        assert_eq!(
            report_stats(&stdout),
            raw_stats(&capture),
            "{compression:?}"
        );
    }
}

/// A full disk: the error says so, names the file, and no partial file is left.
#[test]
fn disk_full_is_reported_and_cleaned_up() {
    struct Mount(PathBuf);
    impl Drop for Mount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "mounting a small tmpfs failed (the tests need root)");
    let _m = Mount(mnt.clone());

    let out = mnt.join("full.dat");
    let mut w = TraceWriter::create(&out, config(Compression::None)).unwrap();
    let page = vec![0u8; 4096];
    let mut err = None;
    {
        let mut cw = w.cpu_writer(0).unwrap();
        for _ in 0..1024 {
            if let Err(e) = cw.write_page(&page) {
                err = Some(e);
                break;
            }
        }
        if err.is_none() {
            err = cw.finish().err();
        }
    }
    let err = match err {
        Some(e) => {
            // A later finish must refuse, too.
            let again = w.finish().unwrap_err();
            assert!(again.msg.contains("No space left"), "{again}");
            e
        }
        None => w.finish().unwrap_err(),
    };
    assert_eq!(err.kind, ErrorKind::Io);
    assert_eq!(err.path.as_deref(), Some(out.as_path()));
    assert!(err.to_string().contains("No space left"), "{err}");
    assert!(
        names_in(&mnt).iter().all(|n| !n.ends_with(".tmp")),
        "partial file left behind"
    );
    assert!(!out.exists());
}

/// An abandoned CPU makes finish fail and removes the temporary file.
#[test]
fn unfinished_cpu_fails_finish() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.dat");
    let mut w = TraceWriter::create(&out, config(Compression::Zstd)).unwrap();
    {
        let mut cw = w.cpu_writer(1).unwrap();
        cw.write_page(&[0u8; 4096]).unwrap();
        // dropped without finish
    }
    let e = w.finish().unwrap_err();
    assert!(e.msg.contains("CPU 1"), "{e}");
    assert!(names_in(tmp.path()).is_empty(), "a temporary file was left");
    assert!(!out.exists());
}

/// The names in a directory, to check the writer left no temporary file.
fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}
