//! `kstate report host.dat guest.dat` and `kstate ui host.dat guest.dat`: a host and its
//! guest on the host's clock. trace-cmd cannot record a guest here, so both are live
//! recordings of this machine and the guest's is rewritten by kstate's writer with the
//! TIME_SHIFT and TSC2NSEC options `trace-cmd record -A` writes (as host_guest.rs
//! does for `dump`). `trace-cmd report -i host.dat -i guest.dat` (Debian 3.1.6), run at
//! test time, says what each machine's numbers must be: its events, its system calls
//! (enter/exit pairs of one thread, as the syscall analyzer pairs them), and its first and
//! last event on the host's clock. The report and the page are loaded in Debian's
//! headless Chromium; screenshots are left in target/tmp/host-guest-shots. Needs root,
//! tracefs, trace-cmd and chromium; never skips.

use crate::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kstate_format::timeshift::{Sample, FLAG_INTERPOLATE};
use kstate_format::writer::{write_from_trace, WriterConfig};
use kstate_format::{TimeShift, Trace};
use support::KSTATE;

/// First and last timestamps of a file.
fn span(file: &Path) -> (i64, i64) {
    let info = support::kstate_json(&["info".as_ref(), "--json".as_ref(), file.as_os_str()]);
    let ts = |k: &str| info[k].as_i64().unwrap_or_else(|| panic!("{k} in {info}"));
    (ts("first_ts"), ts("last_ts"))
}

/// `src` rewritten as a guest's recording whose first event lands `lands_at` ns after
/// `host_start` on the host's clock: TSC2NSEC 3/2 and, per CPU, three interpolated clock
/// samples whose offsets drift apart a little (as a real guest's TSC does).
fn make_guest(src: &Path, host_start: i64, lands_at: i64, out: &Path) {
    let mut t = Trace::open(src).unwrap();
    let (first, last) = span(src);
    let base = (host_start + lands_at) / 3 * 2 - first;
    let step = (last - first) / 2;
    let shift = TimeShift {
        peer_trace_id: 0x6b73_7461_7465,
        flags: FLAG_INTERPOLATE,
        cpus: (0..t.cpu_limit() as i64)
            .map(|cpu| {
                (0..3)
                    .map(|j| Sample {
                        time: first + j * step,
                        offset: base + j * if cpu % 2 == 0 { 37 } else { -29 },
                        scaling: 1,
                        fraction: 0,
                    })
                    .collect()
            })
            .collect(),
    };
    t.clock = Some("x86-tsc".into());
    t.clock_map.mult = 3;
    t.clock_map.shift = 1;
    t.time_shift = Some(std::sync::Arc::new(shift));
    write_from_trace(&t, out, WriterConfig::new(t.layout.page_size), None).unwrap();
}

/// What `trace-cmd report -t -R -i host -i guest` says of each file: events, system-call
/// pairs (an exit closes its thread's open enter of the same number; a second enter
/// replaces the first), first and last timestamp.
#[derive(Debug, Default, Clone, PartialEq)]
struct PerFile {
    events: u64,
    syscalls: u64,
    first: u64,
    last: u64,
}

fn trace_cmd_per_file(files: &[&Path]) -> HashMap<String, PerFile> {
    let mut cmd = Command::new("trace-cmd");
    cmd.args(["report", "-t", "-R"]);
    for f in files {
        cmd.arg("-i").arg(f);
    }
    let out = cmd
        .output()
        .expect("run trace-cmd (apt-get install trace-cmd)");
    assert!(
        out.status.success(),
        "trace-cmd report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut per: HashMap<String, PerFile> = HashMap::new();
    let mut open: HashMap<(String, i64), i64> = HashMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(": ") else {
            continue;
        };
        let Some(h) = support::tracecmd::parse_header(rest) else {
            continue;
        };
        let name = name.trim().to_string();
        let f = per.entry(name.clone()).or_default();
        if f.events == 0 {
            f.first = h.ts_ns;
        }
        f.events += 1;
        f.last = h.ts_ns;
        let id = || -> i64 { support::tcline::num(h.rest, "id") };
        match h.event {
            "sys_enter" => {
                open.insert((name, h.pid), id());
            }
            "sys_exit" if open.remove(&(name, h.pid)) == Some(id()) => f.syscalls += 1,
            _ => {}
        }
    }
    per
}

/// The numbers the report gives per machine: (role, events, first, last) from the
/// summary's machine table, and each machine's syscall samples from its section.
fn report_numbers(html: &str) -> Vec<(String, PerFile)> {
    let attr = |row: &str, name: &str| -> String {
        let k = format!("{name}=\"");
        let i = row.find(&k).unwrap_or_else(|| panic!("no {name} in {row}")) + k.len();
        row[i..].split('"').next().unwrap().to_string()
    };
    let mut v = Vec::new();
    for (i, row) in html.split("<tr data-machine=").skip(1).enumerate() {
        let row = &format!("data-machine={}", row.split('>').next().unwrap());
        let section = format!("id=\"m{i}-an-syscall\"");
        let s = html
            .find(&section)
            .unwrap_or_else(|| panic!("no {section} in the report"));
        let note = &html[s..];
        let samples = note
            .split(" samples (")
            .next()
            .and_then(|x| x.rsplit("; ").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no sample count in {}", &note[..300]));
        v.push((
            attr(row, "data-machine"),
            PerFile {
                events: attr(row, "data-events").parse().unwrap(),
                syscalls: samples,
                first: attr(row, "data-first-ns").parse().unwrap(),
                last: attr(row, "data-last-ns").parse().unwrap(),
            },
        ));
    }
    v
}

fn chromium(profile: &Path, extra: &[&str], url: &str) -> std::process::Output {
    let out = support::chromium(profile, extra, url);
    assert!(out.status.success(), "chromium failed: {out:?}");
    out
}

/// A host recording and a guest made from another recording, landing a third of the way
/// into the host's.
fn host_and_guest(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let host = dir.join("host.dat");
    let plain = dir.join("plain.dat");
    let guest = dir.join("guest.dat");
    let data = dir.join("fsync.out");
    let d = data.to_str().unwrap();
    support::record_workload("sched,syscall", &["fsync", "40", d], true, &host);
    support::record_workload("sched,syscall", &["fsync", "15", d], true, &plain);
    let (h0, h1) = span(&host);
    make_guest(&plain, h0, (h1 - h0) / 3, &guest);
    (host, guest, plain)
}

fn shots() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-guest-shots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn report_of_a_host_and_its_guest_matches_trace_cmd_per_machine() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (host, guest, plain) = host_and_guest(tmp.path());
    // Two recordings of which the second is no guest's: refused, naming it (exit 2, bad
    // input), nothing written.
    let html_path = tmp.path().join("r.html");
    let bad = support::run(&[
        "report".as_ref(),
        host.as_os_str(),
        plain.as_os_str(),
        "-o".as_ref(),
        html_path.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: is not a guest's recording of",
            plain.display()
        )),
        "{err}"
    );
    assert!(!html_path.exists());
    let dir = tmp.path().join("out");
    let out = support::run(&[
        "report".as_ref(),
        host.as_os_str(),
        guest.as_os_str(),
        "-o".as_ref(),
        html_path.as_os_str(),
        "--dir".as_ref(),
        dir.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // --dir: each machine's analyses, as kstate analyze prints them for its file.
    for (sub, file) in [("host", &host), ("guest1", &guest)] {
        let written = std::fs::read_to_string(dir.join(sub).join("syscall.csv")).unwrap();
        let analyze = support::kstate(&[
            "analyze".as_ref(),
            "syscall".as_ref(),
            "--format".as_ref(),
            "csv".as_ref(),
            file.as_os_str(),
        ]);
        assert_eq!(written, analyze, "{sub}/syscall.csv");
    }
    let html = std::fs::read_to_string(&html_path).unwrap();
    std::fs::copy(&html_path, shots().join("report.html")).unwrap();
    let tc = trace_cmd_per_file(&[&host, &guest]);
    let ours = report_numbers(&html);
    println!("report: {ours:?}\ntrace-cmd: {tc:?}");
    // Every part of the page can be linked to: no id names two of them.
    let mut ids: Vec<&str> = html
        .split(" id=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    let all = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), all, "an id repeats in the report");
    let names = ["host.dat", "guest.dat"];
    assert_eq!(ours.len(), 2, "two machines");
    for ((role, got), (want_role, file)) in
        ours.iter().zip([("host", names[0]), ("guest 1", names[1])])
    {
        assert_eq!(role, want_role);
        let want = tc
            .iter()
            .find(|(k, _)| k.ends_with(file))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("trace-cmd printed no {file} lines: {:?}", tc.keys()));
        assert!(want.syscalls > 10, "{file}: {} system calls", want.syscalls);
        assert_eq!(got, &want, "{role} ({file}): report against trace-cmd");
    }
    // The guest really is moved into the host's time: it starts inside the host's
    // recording, after its start (its own raw clock is nowhere near).
    let (h, g) = (&ours[0].1, &ours[1].1);
    assert!(
        g.first > h.first && g.first < h.last,
        "guest starts at {} (host {}..{})",
        g.first,
        h.first,
        h.last
    );
    // Findings name their machine, in the report and on the terminal.
    let items: Vec<&str> = html.split("<li data-machine=\"").skip(1).collect();
    assert!(!items.is_empty(), "no findings");
    for li in &items {
        let (role, rest) = li.split_once("\">").unwrap();
        let text = rest.split("</span><span>").nth(1).unwrap_or("");
        assert!(text.starts_with(&format!("{role}: ")), "{role}: {text}");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("%  host: ") || stdout.contains("%  guest 1: "),
        "{stdout}"
    );

    // In Chromium: every section, both machines' lanes on the timeline, no console error.
    let url = format!("file://{}", html_path.display());
    let dom = chromium(&tmp.path().join("p1"), &["--dump-dom"], &url);
    let dom = String::from_utf8_lossy(&dom.stdout);
    for id in [
        "summary",
        "timeline",
        "m0",
        "m1",
        "m0-an-syscall",
        "m1-an-syscall",
        "m1-an-runq",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "section {id} missing"
        );
    }
    // A CPU has a busy lane when it switched at all: a quiet CPU 0 (the fsyncs all on
    // CPU 1 while other tests run) has none, so any CPU's lane will do per machine.
    for role in ["host", "guest 1"] {
        assert!(
            (0..8).any(|c| dom.contains(&format!("data-lane=\"{role} cpu{c} busy\""))),
            "no busy lane for {role}"
        );
    }
    for lane in ["host system calls", "guest 1 system calls"] {
        assert!(
            dom.contains(&format!("data-lane=\"{lane}\"")),
            "lane {lane} missing"
        );
    }
    // The guest's row of the timeline spans its first to last event on the host's clock.
    let span = format!(
        "class=\"span\" data-first-ns=\"{}\" data-last-ns=\"{}\"",
        g.first, g.last
    );
    assert!(dom.contains(&span), "no {span}");
    let shot = shots().join("report-top.png");
    chromium(
        &tmp.path().join("p2"),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1600",
        ],
        &url,
    );
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
}

/// A `kstate ui` server, stopped when dropped.
struct Server {
    child: std::process::Child,
    url: String,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Server {
    /// Starts `kstate ui ARGS`; returns it and what it printed before the URL.
    fn start(args: &[&std::ffi::OsStr]) -> (Server, String) {
        use std::io::BufRead;
        let mut child = Command::new(KSTATE)
            .arg("ui")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("cannot start kstate ui");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        // Stopped by its Drop whatever happens next.
        let mut server = Server {
            child,
            url: String::new(),
            out,
        };
        let mut said = String::new();
        loop {
            let mut line = String::new();
            assert!(
                server.out.read_line(&mut line).unwrap() > 0,
                "kstate ui printed no URL: {said}"
            );
            if let Some(url) = line
                .split_whitespace()
                .find(|w| w.starts_with("http://127.0.0.1:"))
            {
                server.url = url.to_string();
                return (server, said);
            }
            said.push_str(&line);
        }
    }
}

/// What `kstate ui ARGS` printed on stderr until it served.
fn ui_stderr(args: &[&std::ffi::OsStr]) -> String {
    use std::io::BufRead;
    let mut child = Command::new(KSTATE)
        .arg("ui")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start kstate ui");
    let mut line = String::new();
    let read = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(read.is_ok_and(|n| n > 0), "kstate ui did not serve");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ui_shows_a_host_and_its_guest_on_one_axis() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (host, guest, plain) = host_and_guest(tmp.path());
    let tc = trace_cmd_per_file(&[&host, &guest]);
    let expect: Vec<serde_json::Value> = ["host.dat", "guest.dat"]
        .iter()
        .map(|n| {
            let f = tc.iter().find(|(k, _)| k.ends_with(n)).unwrap().1;
            serde_json::json!({"events": f.events, "first": f.first, "last": f.last})
        })
        .collect();
    let (machines, said) = Server::start(&[host.as_os_str(), guest.as_os_str()]);
    assert!(
        said.contains("a host and its guests on the host's clock (host: ")
            && said.contains(&format!("guest 1: {}", guest.display())),
        "{said}"
    );
    let (ab, said) = Server::start(&[host.as_os_str(), plain.as_os_str()]);
    assert!(said.is_empty(), "{said}");
    let (forced, _) = Server::start(&["--compare".as_ref(), host.as_os_str(), guest.as_os_str()]);
    // The guest given first: compared A/B, and the terminal says why it is not one axis.
    let why = ui_stderr(&[guest.as_os_str(), host.as_os_str()]);
    assert!(
        why.contains("comparing A with B, not a host and its guest: ")
            && why.contains("is a guest's recording"),
        "{why}"
    );
    // Three files that are not a host and its guests: refused, naming the odd one.
    let bad = support::run(&[
        "ui".as_ref(),
        host.as_os_str(),
        guest.as_os_str(),
        plain.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&bad.stderr);
    // Files that cannot be shown together are the arguments' fault: 2, as for `report`.
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: is not a guest's recording of",
            plain.display()
        )),
        "{err}"
    );

    let py = support::python_venv("uivenv", &["playwright"], "playwright.sync_api");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/host_guest_ui.py");
    let out = Command::new(py)
        .arg(script)
        .arg(KSTATE)
        .arg(shots())
        .arg(&machines.url)
        .arg(&guest)
        .arg(&ab.url)
        .arg(&forced.url)
        .arg(serde_json::Value::Array(expect).to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
