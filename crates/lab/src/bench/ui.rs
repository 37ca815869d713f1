//! `kstate bench ui`: how long `kstate ui` takes to answer each interaction on one file,
//! and with `--browser`, the page itself in headless Chromium ([`super::ui_browser`]);
//! asked over HTTP as the page asks (one request after another), next to the equivalent
//! `kstate analyze` commands and, where the file has system calls, `trace-cmd report`
//! piped into an awk script that pairs them (what a user without kstate would run). With
//! `--baseline BIN` another kstate binary answers the same interactions in the same run
//! (e.g. main before a change), so before and after share the machine's load.
//!
//! Each interaction is timed as every request the page makes for it (app.js's update()),
//! one after another as the page sends them, not only the panel that changed: the
//! browser waits for all of them. (Answers the server has cached come back at once, as
//! they do for the page.)
//!   meta     api/meta: the page's first view (files, range, which analyzers apply)
//!   open     api/meta + each panel + the overview lanes: the first view filled in
//!   window   a brushed window (a tenth of the trace, moved on each run): every panel's
//!            statistics and distribution (the overview is redrawn, not re-read)
//!   again    the same window once more (answered from the cache)
//!   filter   a click on a key (the first panel's largest) inside the window: the
//!            overview lanes (a syscall key narrows their system-call lane) and every
//!            panel (the server derives the key's rows from the window's cached ones)
//!   fresh    the same key on a tenth of the trace not asked before (a pasted link, or
//!            a cache that forgot it): the pass the filter row was spared
//!   inout    "inside vs outside" for the window: what-changed-most over every analyzer,
//!            then each panel's comparison and its two distributions
//!   zoom     "zoom to window": the overview lanes for the window, at 1200 bins, and
//!            every panel

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use crate::Error;
use serde_json::{json, Value};

#[derive(clap::Args)]
pub struct Args {
    /// A recording (make an 11 M-event one with scripts/make-bench-trace, or `kstate
    /// record` a system-call storm)
    file: PathBuf,
    /// Another kstate binary to time the same way, in the same run
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Windows asked for (each a new tenth of the trace): the first (cold) answer is
    /// reported, and the fastest of the others (warm)
    #[arg(long, default_value_t = 3, value_parser = kstate_args::int::<u32>(1..=9))]
    runs: u32,
    /// Time the page end to end in headless Chromium instead (each interaction's first
    /// answer, the DOM's size, the CLI's time for the same question)
    #[arg(long)]
    browser: bool,
    /// The Chromium --browser runs
    #[arg(long, default_value = "/usr/bin/chromium", value_name = "PATH")]
    chromium: PathBuf,
    /// Skip the trace-cmd comparison
    #[arg(long)]
    no_peer: bool,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
}

fn err(msg: String) -> Error {
    Error::failed(msg)
}

/// A `kstate ui` server, stopped when dropped.
struct Server {
    child: Child,
    /// host:port and the path prefix with the token.
    addr: String,
    prefix: String,
}

impl Server {
    fn start(kstate: &Path, file: &Path) -> Result<Server, Error> {
        let mut child = Command::new(kstate)
            .arg("ui")
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("cannot run {}: {e}", kstate.display())))?;
        let mut line = String::new();
        let out = child.stdout.take().expect("piped");
        let _ = BufReader::new(out).read_line(&mut line);
        let url = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
            .map(str::to_string);
        let Some((addr, prefix)) = url.as_deref().and_then(|u| u.split_once('/')) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err(format!(
                "{} ui printed no URL: {line:?}",
                kstate.display()
            )));
        };
        Ok(Server {
            addr: addr.to_string(),
            prefix: format!("/{prefix}"),
            child,
        })
    }

    /// One request, its JSON answer.
    fn get(&self, path: &str) -> Result<Value, Error> {
        let mut s = TcpStream::connect(&self.addr).map_err(|e| err(e.to_string()))?;
        write!(
            s,
            "GET {}{path} HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.prefix, self.addr
        )
        .map_err(|e| err(e.to_string()))?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).map_err(|e| err(e.to_string()))?;
        let text = String::from_utf8_lossy(&resp);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        if head.split_whitespace().nth(1) != Some("200") {
            return Err(err(format!(
                "kstate ui answered {path} with {}: {body}",
                head.lines().next().unwrap_or("")
            )));
        }
        serde_json::from_str(body).map_err(|e| err(format!("{path}: invalid JSON: {e}")))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// CPU seconds the server has used (user + system): on a shared machine, what an
    /// answer cost it whatever else ran.
    fn cpu(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name in parentheses; utime and stime are 14 and 15.
        let rest = stat.rsplit_once(')').map_or("", |r| r.1);
        let f: Vec<f64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / hz
    }

    /// Wall and CPU seconds of `f`'s requests.
    fn timed<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<(Cost, T), Error> {
        let (c, t) = (self.cpu(), Instant::now());
        let v = f()?;
        let cost = Cost {
            wall: t.elapsed().as_secs_f64(),
            cpu: self.cpu() - c,
        };
        Ok((cost, v))
    }
}

/// What one interaction cost the server.
#[derive(Default, Clone, Copy)]
struct Cost {
    wall: f64,
    cpu: f64,
}

impl Cost {
    fn add(self, o: Cost) -> Cost {
        Cost {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
        }
    }
    fn min(self, o: Cost) -> Cost {
        if o.wall < self.wall {
            o
        } else {
            self
        }
    }
}

/// What each interaction cost on one server (the fastest of the runs).
#[derive(Default, Clone, Copy)]
struct Times {
    meta: Cost,
    open: Cost,
    window: Cost,
    again: Cost,
    filter: Cost,
    fresh: Cost,
    inout: Cost,
    zoom: Cost,
}

/// What the file holds, as the first server saw it.
struct Shape {
    names: Vec<String>,
    span: f64,
    /// The key the filter rows click (`&key=...`), of the first run's window.
    key: String,
}

fn window(span: f64, run: u32) -> String {
    tenth(span, 0.30 + 0.15 * run as f64)
}

/// A window of the same length that no other row asks for.
fn fresh_window(span: f64, run: u32) -> String {
    tenth(span, 0.35 + 0.15 * run as f64)
}

fn tenth(span: f64, at: f64) -> String {
    let from = span * at;
    format!("{:.9}:{:.9}", from, from + span * 0.1)
}

fn panels(s: &Server, names: &[String], extra: &str) -> Result<(), Error> {
    for n in names {
        s.get(&format!("api/panel?a={n}&mode=stat{extra}"))?;
        s.get(&format!("api/panel?a={n}&mode=dist{extra}"))?;
    }
    Ok(())
}

/// Every panel with a key filter on the first (the page's panels after a key click: the
/// others ask what they asked before).
fn panels_keyed(s: &Server, names: &[String], extra: &str, key: &str) -> Result<(), Error> {
    for (i, n) in names.iter().enumerate() {
        let k = if i == 0 { key } else { "" };
        panels(s, std::slice::from_ref(n), &format!("{extra}{k}"))?;
    }
    Ok(())
}

/// "Inside vs outside" for window `w` as the page asks it (loadChanges, then each
/// panelCompare).
fn inout(s: &Server, names: &[String], w: &str, key: &str) -> Result<(), Error> {
    s.get(&format!("api/compare?a=*&kind=inout&metric=p99&window={w}"))?;
    for (i, n) in names.iter().enumerate() {
        let k = if i == 0 { key } else { "" };
        s.get(&format!(
            "api/compare?a={n}&kind=inout&metric=p99&window={w}{k}"
        ))?;
        s.get(&format!("api/panel?a={n}&mode=dist&not_window={w}{k}"))?;
        s.get(&format!("api/panel?a={n}&mode=dist&window={w}{k}"))?;
    }
    Ok(())
}

/// A key [`enc`] encoded, decoded.
fn dec(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match (b[i], s.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16))) {
            (b'%', Some(Ok(x))) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes a key for a URL.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The first run's times (cold: what a user waits for), and the fastest of the later
/// runs' (warm), if any.
fn time_server(
    kstate: &Path,
    file: &Path,
    runs: u32,
) -> Result<(Times, Option<Times>, Shape), Error> {
    let s = Server::start(kstate, file)?;
    let (t_meta, meta) = s.timed(|| s.get("api/meta"))?;
    let f = &meta["files"][0];
    if let Some(e) = f["error"].as_str() {
        return Err(err(format!("{}: {e}", file.display())));
    }
    let names: Vec<String> = f["analyzers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["name"].as_str().map(str::to_string))
        .collect();
    let span = (f["end"].as_u64().unwrap_or(1) - f["start"].as_u64().unwrap_or(0)) as f64 / 1e9;
    let whole = format!("api/lanes?from=0&to={span:.9}&w=1200");
    let (t_open, _) = s.timed(|| {
        s.get(&whole)?;
        panels(&s, &names, "")
    })?;
    let mut cold: Option<Times> = None;
    let mut best: Option<Times> = None;
    let mut first_key = None;
    for run in 0..runs {
        let w = window(span, run);
        let extra = format!("&window={w}");
        let (window, _) = s.timed(|| panels(&s, &names, &extra))?;
        let (again, _) = s.timed(|| panels(&s, &names, &extra))?;
        let first = names.first().cloned().unwrap_or_default();
        let rows = s.get(&format!("api/panel?a={first}&mode=stat{extra}"))?;
        let key = rows["rows"][0]["key"]
            .as_str()
            .map_or(String::new(), |k| format!("&key={}", enc(k)));
        first_key.get_or_insert(key.clone());
        // The page sends the syscall panel's key with the lanes; other panels' it keeps.
        let lane_key = if first == "syscall" { key.as_str() } else { "" };
        let (filter, _) = s.timed(|| {
            s.get(&format!("{whole}{lane_key}"))?;
            panels_keyed(&s, &names, &extra, &key)
        })?;
        let fresh_extra = format!("&window={}", fresh_window(span, run));
        let (fresh, _) = s.timed(|| {
            s.get(&format!("{whole}{lane_key}"))?;
            panels_keyed(&s, &names, &fresh_extra, &key)
        })?;
        let (inout, _) = s.timed(|| inout(&s, &names, &w, &key))?;
        let (lo, hi) = w.split_once(':').expect("a window");
        let (zoom, _) = s.timed(|| {
            s.get(&format!("api/lanes?from={lo}&to={hi}&w=1200{lane_key}"))?;
            panels_keyed(&s, &names, &extra, &key)
        })?;
        let t = Times {
            meta: t_meta,
            open: t_meta.add(t_open),
            window,
            again,
            filter,
            fresh,
            inout,
            zoom,
        };
        if cold.is_none() {
            cold = Some(t);
            continue;
        }
        best = Some(match best {
            None => t,
            Some(b) => Times {
                meta: b.meta,
                open: b.open,
                window: b.window.min(t.window),
                again: b.again.min(t.again),
                filter: b.filter.min(t.filter),
                fresh: b.fresh.min(t.fresh),
                inout: b.inout.min(t.inout),
                zoom: b.zoom.min(t.zoom),
            },
        });
    }
    let key = first_key.unwrap_or_default();
    Ok((cold.expect("runs >= 1"), best, Shape { names, span, key }))
}

/// `kstate analyze` doing the work of the window, filter and inside-vs-outside
/// interactions (the first analyzer's key-filtered statistics in the window; each
/// analyzer's statistics with --window and with --not-window).
fn time_cli(file: &Path, shape: &Shape) -> Result<(f64, f64, f64), Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let w = window(shape.span, 0);
    let run_with = |args: &[&str], flag: &str| -> Result<f64, Error> {
        let t = Instant::now();
        let o = Command::new(&exe)
            .arg("analyze")
            .args(args)
            .arg(file)
            .args([flag, &w, "--format", "json"])
            .stderr(Stdio::null())
            .output()
            .map_err(|e| err(e.to_string()))?;
        if !o.status.success() {
            return Err(err(format!("kstate analyze {} failed", args.join(" "))));
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let run = |args: &[&str]| run_with(args, "--window");
    let mut window = 0.0;
    let mut inout = 0.0;
    for n in &shape.names {
        inout += run(&[n])? + run_with(&[n], "--not-window")?;
        window += run(&[n])? + run(&[n, "--dist", "--buckets", "log10"])?;
    }
    let key = shape.key.strip_prefix("&key=").map(dec);
    let filter = match (shape.names.first(), &key) {
        (Some(n), Some(k)) => run(&[n, "--key", k])?,
        (Some(n), None) => run(&[n])?,
        (None, _) => 0.0,
    };
    Ok((window, filter, inout))
}

/// `trace-cmd report | awk` pairing system calls over the file (it reads it all
/// whatever the window).
fn time_peer(file: &Path) -> Result<f64, Error> {
    let script = format!(
        "trace-cmd report -t -R -i '{}' | awk '{}' > /dev/null",
        file.display().to_string().replace('\'', "'\\''"),
        super::AWK_SYSCALL
    );
    super::require("trace-cmd", "trace-cmd")?;
    let t = Instant::now();
    let o = super::pipeline(&script)
        .status()
        .map_err(|e| err(e.to_string()))?;
    if !o.success() {
        return Err(err("trace-cmd report | awk failed".into()));
    }
    Ok(t.elapsed().as_secs_f64())
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    if a.browser {
        return browser(&exe, &a);
    }
    let (now, warm, shape) = time_server(&exe, &a.file, a.runs)?;
    let base = match &a.baseline {
        Some(b) => Some(time_server(b, &a.file, a.runs)?.0),
        None => None,
    };
    let (cli_window, cli_filter, cli_inout) = time_cli(&a.file, &shape)?;
    let peer = if a.no_peer || !shape.names.iter().any(|n| n == "syscall") {
        None
    } else {
        Some(time_peer(&a.file)?)
    };
    type Pick = fn(&Times) -> Cost;
    let picks: [(&str, Pick, Option<f64>); 8] = [
        ("meta", |t| t.meta, None),
        ("open", |t| t.open, None),
        ("window", |t| t.window, Some(cli_window)),
        ("again", |t| t.again, Some(cli_window)),
        ("filter", |t| t.filter, Some(cli_filter)),
        ("fresh", |t| t.fresh, Some(cli_filter)),
        ("inout", |t| t.inout, Some(cli_inout)),
        ("zoom", |t| t.zoom, None),
    ];
    let warm_of = |pick: Pick, n: &str| match n {
        // One open and one meta per server: no warm figure.
        "meta" | "open" => None,
        _ => warm.as_ref().map(pick),
    };
    if a.json {
        let out = json!({
            "file": a.file.display().to_string(),
            "analyzers": shape.names,
            "seconds": shape.span,
            "interactions": picks.iter().map(|(n, pick, c)| {
                let k = pick(&now);
                json!({
                    "interaction": n, "ui": k.wall, "ui_cpu": k.cpu,
                    "ui_warm": warm_of(*pick, n).map(|w| w.wall),
                    "baseline_ui": base.as_ref().map(|b| pick(b).wall),
                    "baseline_ui_cpu": base.as_ref().map(|b| pick(b).cpu),
                    "kstate_analyze": c,
                })
            }).collect::<Vec<_>>(),
            "trace_cmd_report_awk": peer,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("plain values")
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "file:      {} ({:.3} s; panels: {})",
        a.file.display(),
        shape.span,
        shape.names.join(", ")
    );
    println!(
        "{:<8} {:>26} {:>17} {:>15}",
        "", "kstate ui", "baseline ui", "kstate analyze"
    );
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>15}",
        "", "first", "cpu", "warm", "first", "cpu", "wall"
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    for (n, pick, c) in picks {
        let k = pick(&now);
        println!(
            "{n:<8} {:>8.3} {:>8.3} {:>8} {:>8} {:>8} {:>15}",
            k.wall,
            k.cpu,
            f(warm_of(pick, n).map(|w| w.wall)),
            f(base.as_ref().map(|b| pick(b).wall)),
            f(base.as_ref().map(|b| pick(b).cpu)),
            f(c)
        );
    }
    if let Some(p) = peer {
        println!("peer:     trace-cmd report | awk pairing system calls over the file: {p:.3} s");
    }
    println!(
        "seconds; first: the first (cold) answer, warm: the fastest of the {} windows after it; cpu: the server's CPU for it; each interaction: every request the page makes for it",
        a.runs.saturating_sub(1)
    );
    Ok(ExitCode::SUCCESS)
}

/// `--browser`: the page in headless Chromium.
fn browser(exe: &Path, a: &Args) -> Result<ExitCode, Error> {
    let t = Instant::now();
    let s = Server::start(exe, &a.file)?;
    let ready = t.elapsed().as_secs_f64();
    let url = format!("http://{}{}", s.addr, s.prefix);
    let r = super::ui_browser::run(exe, &a.file, &url, ready, &a.chromium)?;
    if a.json {
        let out = json!({
            "file": a.file.display().to_string(),
            "analyzers": r.analyzers,
            "seconds": r.span,
            "server_ready": r.ready,
            "interactions": r.rows.iter().map(|x| json!({
                "interaction": x.name, "browser": x.browser, "dom_nodes": x.dom,
                "kstate_cli": x.cli, "kstate_cli_command": x.cli_what,
            })).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("plain values")
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "file:      {} ({:.3} s; panels: {}); server ready (URL printed) after {:.3} s",
        a.file.display(),
        r.span,
        r.analyzers.join(", "),
        r.ready
    );
    println!(
        "{:<12} {:>10} {:>9} {:>10}  kstate CLI command",
        "", "browser s", "DOM", "CLI s"
    );
    for x in &r.rows {
        println!(
            "{:<12} {:>10.3} {:>9} {:>10}  {}",
            x.name,
            x.browser,
            x.dom,
            x.cli.map_or("-".into(), |c| format!("{c:.3}")),
            x.cli_what
        );
    }
    println!(
        "browser: the first (cold) time of each interaction, from the input to the page settled (every request answered and drawn), headless Chromium; DOM: elements after it"
    );
    Ok(ExitCode::SUCCESS)
}
