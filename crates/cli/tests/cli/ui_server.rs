//! `kstate ui`'s server without a browser, on a recording made here: files that cannot
//! be read stop it before it serves (exit 2); the printed URL without its final slash is
//! redirected; `--open` never puts the token on a command line; times outside the
//! recording are refused; a request superseded by a newer one of its slot is dropped;
//! `meta` is answered while an analysis pass runs; every overview lane follows the
//! filters (CPU busy against the thread's own switches, from `kstate dump`).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::ui::{get, UiServer};
use support::{record_workload, KSTATE};

/// The JSON answer of `api/Q` and its status.
fn api(s: &UiServer, q: &str) -> (u16, serde_json::Value) {
    let (status, _, body) = s.get(&format!("/{}/api/{q}", s.token));
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
    (status, v)
}

/// Scheduling and system calls of the demo workload.
fn recording(dir: &Path) -> PathBuf {
    let f = dir.join("demo.dat");
    record_workload("sched,syscall", &["demo"], false, &f);
    f
}

#[test]
fn files_that_cannot_be_read_exit_2_before_serving() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let not_a_dir = dir.path().join("plain");
    std::fs::write(&not_a_dir, "x").unwrap();
    for missing in [dir.path().join("missing.dat"), not_a_dir.join("trace.dat")] {
        let o = Command::new(KSTATE)
            .arg("ui")
            .arg(&missing)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", missing.display());
        assert!(err.contains(&missing.display().to_string()), "{err}");
        assert!(
            o.stdout.is_empty(),
            "it served: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

#[test]
fn the_server_answers_as_a_daily_tool_needs() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = recording(dir.path());
    let s = UiServer::start(&[file.as_os_str()], &[]);
    let t = &s.token;

    // The URL as printed but for its final slash: sent on, the page and its scripts load.
    let (status, head, _) = s.get(&format!("/{t}"));
    assert_eq!(status, 308, "{head}");
    assert!(head.contains(&format!("location: /{t}/")), "{head}");
    let (status, head, body) = s.get(&format!("/{t}/"));
    assert_eq!(status, 200, "{head}");
    for script in [
        "util.js",
        "app.js",
        "timeline.js",
        "events.js",
        "flame.js",
        "panels.js",
    ] {
        assert!(
            body.contains(&format!("src=\"{script}\"")),
            "{script} not in the page"
        );
        let (status, head, _) = s.get(&format!("/{t}/{script}"));
        assert_eq!(status, 200, "{script}: {head}");
        assert!(head.contains("text/javascript"), "{script}: {head}");
    }
    assert_eq!(s.get("/0123/").0, 403);

    // Times outside the recording: refused, not wrapped around to an empty span.
    let (status, v) = api(&s, "lanes?from=18446744000&to=18446744073&w=100");
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("outside the recording"),
        "{v}"
    );
    let (status, _) = api(&s, "timeline?from=0&to=1e9&w=100&rows=cpu:0.0");
    assert_eq!(status, 400);
    let (status, v) = api(&s, "timeline?from=0.2&to=0.1&w=100&rows=cpu:0.0");
    assert_eq!(status, 400, "{v}");

    // A request whose slot saw a newer one is dropped (204, no content) before it is
    // computed.
    let (status, _) = api(&s, "meta?slot=p1:panel-syscall&seq=5");
    assert_eq!(status, 200);
    let (status, head, body) = s.get(&format!(
        "/{t}/api/panel?a=syscall&slot=p1:panel-syscall&seq=4"
    ));
    assert_eq!((status, body.as_str()), (204, ""), "{head}");
    // Another page's slot of the same name is its own.
    let (status, _) = api(&s, "panel?a=syscall&slot=p2:panel-syscall&seq=1");
    assert_eq!(status, 200);
    let (status, _) = api(&s, "panel?a=syscall&slot=p1:panel-syscall&seq=6");
    assert_eq!(status, 200);

    // meta is answered while a pass runs (one request no longer holds the others):
    // asked after the pass began, it comes back before it.
    let addr = s.addr.clone();
    let pass = format!("/{t}/api/panel?a=microstate&mode=log&window=0:1000");
    let (tx, rx) = std::sync::mpsc::channel();
    let tx2 = tx.clone();
    let slow = std::thread::spawn(move || {
        get(&addr, &pass);
        tx.send("pass").unwrap();
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    let addr = s.addr.clone();
    let meta = format!("/{t}/api/meta");
    let quick = std::thread::spawn(move || {
        get(&addr, &meta);
        tx2.send("meta").unwrap();
    });
    let first = rx.recv().unwrap();
    slow.join().unwrap();
    quick.join().unwrap();
    assert_eq!(first, "meta", "meta waited for the pass");
}

/// Per CPU, the time thread `tid` ran there in [from, to], from its switches as `kstate
/// dump --json` gives them.
fn ran(file: &Path, tid: i64, from: u64, to: u64) -> std::collections::BTreeMap<u64, u64> {
    let evs = support::dump(file, "sched_switch");
    let mut since: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut total: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut last = from;
    for e in evs {
        let (ts, cpu) = (e["ts"].as_u64().unwrap(), e["cpu"].as_u64().unwrap());
        last = ts;
        let f = &e["fields"];
        if let Some(s) = since.remove(&cpu) {
            let (a, b) = (s.max(from), ts.min(to));
            *total.entry(cpu).or_default() += b.saturating_sub(a);
        }
        if f["next_pid"].as_i64() == Some(tid) {
            since.insert(cpu, ts);
        }
    }
    // The lane runs to the last switch read.
    for (cpu, s) in since {
        *total.entry(cpu).or_default() += to.min(last).saturating_sub(s.max(from));
    }
    total
}

#[test]
fn every_lane_follows_the_filters() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = recording(dir.path());
    let s = UiServer::start(&[file.as_os_str()], &[]);
    let (_, meta) = api(&s, "meta");
    let f = &meta["files"][0];
    let (start, end) = (f["start"].as_u64().unwrap(), f["end"].as_u64().unwrap());
    let secs = (end - start) as f64 / 1e9;
    let bins = 200;
    let q = |extra: &str| format!("lanes?from=0&to={secs:.9}&w={bins}{extra}");
    let (_, all) = api(&s, &q(""));
    assert!(all["busy"].as_array().unwrap().len() >= 2, "{all}");
    // One CPU: its lanes only.
    let (_, one) = api(&s, &q("&cpu=1"));
    let names: Vec<&str> = one["busy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu1"]);
    // One thread: busy is the share of each bin it ran, as its own switches say.
    let (_, tracks) = api(&s, "tracks");
    let busiest = tracks["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"] == "thread")
        .max_by_key(|t| t["busy_ns"].as_u64().unwrap())
        .unwrap();
    let tid = busiest["tid"].as_i64().unwrap();
    let (_, mine) = api(&s, &q(&format!("&tid={tid}")));
    let bin_ns = (end - start) as f64 / bins as f64;
    let want = ran(&file, tid, start, end);
    for l in mine["busy"].as_array().unwrap() {
        let cpu: u64 = l["name"].as_str().unwrap()[3..].parse().unwrap();
        let got: f64 = l["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .sum::<f64>()
            * bin_ns;
        let w = *want.get(&cpu).unwrap_or(&0) as f64;
        // The lane rounds each bin's share to 1/1000 of the bin.
        assert!(
            (got - w).abs() <= bins as f64 * bin_ns / 1000.0 + 1.0,
            "cpu{cpu}: lane {got} ns, switches {w} ns"
        );
    }
    assert!(!want.is_empty(), "thread {tid} never ran");
}

#[test]
fn open_gives_the_browser_a_file_not_the_token() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = recording(dir.path());
    // A stand-in for xdg-open: it notes its arguments and the file it was given.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("xdg.log");
    let script = format!(
        "#!/bin/sh\necho \"ARGS $*\" >> {log}\nstat -c 'MODE %a' \"$1\" >> {log}\ncat \"$1\" >> {log}\n",
        log = log.display()
    );
    std::fs::write(bin.join("xdg-open"), script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("xdg-open"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    let mut s = UiServer::start(
        &["--open".as_ref(), file.as_os_str()],
        &[
            ("PATH", path.as_ref()),
            ("XDG_RUNTIME_DIR", runtime.as_os_str()),
        ],
    );
    let mut text = String::new();
    for _ in 0..200 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("</html>") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let args = text
        .lines()
        .find(|l| l.starts_with("ARGS "))
        .unwrap_or_else(|| panic!("xdg-open not run: {text}"));
    assert!(
        !args.contains(&s.token),
        "the token is on xdg-open's command line: {args}"
    );
    assert!(
        text.contains("MODE 600"),
        "the redirect file is readable by others: {text}"
    );
    assert!(
        text.contains(&format!("/{}/", s.token)),
        "the file does not lead to the URL: {text}"
    );
    let opened = PathBuf::from(args.trim_start_matches("ARGS ").trim());
    assert!(opened.starts_with(&runtime), "{}", opened.display());
    // Stopped (SIGTERM), the server removes it.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let st = s.child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert!(!opened.exists(), "{} left behind", opened.display());
}
