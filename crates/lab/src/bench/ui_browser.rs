//! `kstate bench ui --browser`: the page itself, end to end in headless Chromium. Each
//! interaction is made as a user makes it (mouse and keys through the DevTools protocol,
//! over a pipe: no other program needed) and timed from the input to the page settled
//! (every request answered and drawn, `kstateUi.settled()`); each is the first (cold) of
//! its kind in the run. Beside each: the DOM's size after it, and the time `kstate`'s CLI
//! takes for the same question in the same run (its nearest command).
//!
//!   first view   navigation to the timeline drawn (overview, tracks, their summaries)
//!   all panels   ... to every panel filled in
//!   brush        a drag across a tenth of the timeline: every panel for that window
//!   key click    the first key of the first panel: a filter for every panel
//!   inout        "Inside vs outside" for the window
//!   back         the browser's Back (to the key click's view)
//!   zoom         "zoom to window": the timeline and the overview at the window
//!   wheel zoom   Ctrl+wheel over the timeline (narrower than a bucket: re-read exact)
//!   pan          the D key on the timeline
//!   slice click  a click on the busiest thread's row: the slice and its events
//!   list scroll  the event list scrolled to its end: the next page of events
//!   search       a comm typed into the search box

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

use crate::Error;

fn err(msg: String) -> Error {
    Error::failed(msg)
}

/// Chromium driven over `--remote-debugging-pipe` (fd 3 in, fd 4 out, messages ended by
/// NUL), one page attached.
struct Browser {
    child: Child,
    to: File,
    from: File,
    buf: Vec<u8>,
    next: u64,
    session: Option<String>,
    _profile: PathBuf,
}

/// A pipe's two ends (read, write), closed on exec.
fn pipe() -> Result<(RawFd, RawFd), Error> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(err(format!("pipe: {}", std::io::Error::last_os_error())));
    }
    Ok((fds[0], fds[1]))
}

impl Browser {
    fn launch(chromium: &Path, width: u32, height: u32) -> Result<Browser, Error> {
        let profile = std::env::temp_dir().join(format!("kstate-bench-ui-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile)
            .map_err(|e| err(format!("{}: {e}", profile.display())))?;
        let (to_r, to_w) = pipe()?;
        let (from_r, from_w) = pipe()?;
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: between fork and exec only async-signal-safe calls (dup2) are made.
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way first: either end may itself be fd 3 or 4.
                let a = libc::fcntl(to_r, libc::F_DUPFD, 10);
                let b = libc::fcntl(from_w, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| {
            err(format!(
                "cannot run {} (install Debian's chromium): {e}",
                chromium.display()
            ))
        })?;
        // SAFETY: the fds are ours, open, and each owned by exactly one File from here.
        let (to, from) = unsafe {
            libc::close(to_r);
            libc::close(from_w);
            (File::from_raw_fd(to_w), File::from_raw_fd(from_r))
        };
        let mut b = Browser {
            child,
            to,
            from,
            buf: Vec::new(),
            next: 0,
            session: None,
            _profile: profile,
        };
        let t = b.call("Target.createTarget", json!({"url": "about:blank"}))?;
        let target = t["targetId"].as_str().unwrap_or_default().to_string();
        let s = b.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        )?;
        b.session = s["sessionId"].as_str().map(str::to_string);
        b.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        )?;
        Ok(b)
    }

    /// One DevTools command and its result (events in between are passed over).
    fn call(&mut self, method: &str, params: Value) -> Result<Value, Error> {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| err(e.to_string()))?;
        bytes.push(0);
        self.to
            .write_all(&bytes)
            .map_err(|e| err(format!("chromium's pipe: {e}")))?;
        loop {
            let m = self.message()?;
            if m["id"].as_u64() == Some(id) {
                if let Some(e) = m.get("error") {
                    return Err(err(format!("chromium: {method}: {e}")));
                }
                return Ok(m["result"].clone());
            }
        }
    }

    /// The next message, waiting at most two minutes.
    fn message(&mut self) -> Result<Value, Error> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == 0) {
                let m: Vec<u8> = self.buf.drain(..=end).collect();
                return serde_json::from_slice(&m[..m.len() - 1])
                    .map_err(|e| err(format!("chromium sent bad JSON: {e}")));
            }
            let mut pfd = libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&self.from),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pfd, 1, 120_000) };
            if n == 0 {
                return Err(err("chromium did not answer within 2 minutes".into()));
            }
            let mut chunk = [0u8; 1 << 16];
            let k = self
                .from
                .read(&mut chunk)
                .map_err(|e| err(format!("chromium's pipe: {e}")))?;
            if k == 0 {
                return Err(err("chromium exited".into()));
            }
            self.buf.extend_from_slice(&chunk[..k]);
        }
    }

    /// Evaluates `js` in the page (awaiting a promise); its value.
    fn eval(&mut self, js: &str) -> Result<Value, Error> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "awaitPromise": true, "returnByValue": true}),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(err(format!("in the page: {js}: {e}")));
        }
        Ok(r["result"]["value"].clone())
    }

    fn mouse(&mut self, kind: &str, x: f64, y: f64, extra: Value) -> Result<(), Error> {
        let mut p = json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1});
        if let (Some(p), Some(e)) = (p.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        if kind == "mouseMoved" {
            p["button"] = json!("none");
        }
        self.call("Input.dispatchMouseEvent", p).map(drop)
    }

    fn click(&mut self, x: f64, y: f64) -> Result<(), Error> {
        self.mouse("mousePressed", x, y, json!({}))?;
        self.mouse("mouseReleased", x, y, json!({}))
    }

    fn key(&mut self, key: &str) -> Result<(), Error> {
        for kind in ["keyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "text": key, "code": format!("Key{}", key.to_uppercase())}),
            )?;
        }
        Ok(())
    }

    /// Waits for the page to settle (every request answered and drawn).
    fn settled(&mut self) -> Result<(), Error> {
        self.eval("kstateUi.settled()").map(drop)
    }

    fn dom(&mut self) -> Result<u64, Error> {
        Ok(self
            .eval("document.getElementsByTagName('*').length")?
            .as_u64()
            .unwrap_or(0))
    }

    /// The centre of the first element `selector` finds, scrolled into sight.
    fn centre(&mut self, selector: &str) -> Result<(f64, f64), Error> {
        let v = self.eval(&format!(
            "(() => {{ const e = document.querySelector({s}); if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            s = json!(selector)
        ))?;
        match (v[0].as_f64(), v[1].as_f64()) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(err(format!("the page has no {selector}"))),
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._profile);
    }
}

/// One interaction's figures.
pub struct Row {
    pub name: &'static str,
    pub browser: f64,
    pub dom: u64,
    pub cli: Option<f64>,
    pub cli_what: String,
}

/// Times `kstate ARGS` (output discarded).
fn cli(exe: &Path, args: &[String]) -> Result<f64, Error> {
    let t = Instant::now();
    let o = Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| err(e.to_string()))?;
    if !o.success() {
        return Err(err(format!("kstate {} failed", args.join(" "))));
    }
    Ok(t.elapsed().as_secs_f64())
}

/// What the page ran on and what it took.
pub struct Report {
    pub ready: f64,
    pub rows: Vec<Row>,
    pub analyzers: Vec<String>,
    pub span: f64,
}

/// Drives the page for `file` served by `kstate` at `url` (the server started `ready`
/// seconds before it printed its URL).
pub fn run(
    kstate: &Path,
    file: &Path,
    url: &str,
    ready: f64,
    chromium: &Path,
) -> Result<Report, Error> {
    let mut b = Browser::launch(chromium, 1500, 1100)?;
    let mut rows = Vec::new();
    let t = Instant::now();
    b.call("Page.enable", json!({}))?;
    b.call("Page.navigate", json!({"url": url}))?;
    b.eval("new Promise(r => { const tick = () => (window.kstateUi && kstateUi.tl && kstateUi.tl.drawn > 0) ? r(true) : setTimeout(tick, 5); tick(); })")?;
    let first = t.elapsed().as_secs_f64();
    let dom = b.dom()?;
    b.eval("new Promise(r => { const tick = () => { const p = [...document.querySelectorAll('.panel')]; (p.length && p.every(x => x.dataset.state === 'ready' || x.dataset.state === 'error')) ? r(true) : setTimeout(tick, 5); }; tick(); })")?;
    b.settled()?;
    let panels = t.elapsed().as_secs_f64();
    let meta = b.eval("kstateUi.meta.files[0]")?;
    let span =
        (meta["end"].as_u64().unwrap_or(1) - meta["start"].as_u64().unwrap_or(0)) as f64 / 1e9;
    let analyzers: Vec<String> = meta["analyzers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["name"].as_str().map(str::to_string))
        .collect();
    let f = file.display().to_string();
    let s = |x: &str| x.to_string();
    let each = |extra: &[&str]| -> Result<f64, Error> {
        let mut sum = 0.0;
        for a in &analyzers {
            let mut args = vec![s("analyze"), a.clone(), f.clone()];
            args.extend(extra.iter().map(|x| x.to_string()));
            sum += cli(kstate, &args)?;
        }
        Ok(sum)
    };
    let info = cli(kstate, &[s("info"), f.clone()])?;
    let all = each(&[])?;
    rows.push(Row {
        name: "first view",
        browser: first,
        dom,
        cli: Some(info),
        cli_what: "kstate info".into(),
    });
    rows.push(Row {
        name: "all panels",
        browser: panels,
        dom: b.dom()?,
        cli: Some(info + all),
        cli_what: "kstate info + analyze NAME, each".into(),
    });
    // A tenth of the recording, a third of the way in.
    let (w0, w1) = (span * 0.33, span * 0.43);
    let win = format!("{w0:.9}:{w1:.9}");
    let timed = |b: &mut Browser,
                 act: &mut dyn FnMut(&mut Browser) -> Result<(), Error>|
     -> Result<(f64, u64), Error> {
        b.settled()?;
        let t = Instant::now();
        act(b)?;
        b.settled()?;
        let dt = t.elapsed().as_secs_f64();
        Ok((dt, b.dom()?))
    };
    // The brush: a drag across the timeline's plot.
    let xy = b.eval(&format!(
        "(() => {{ const c = document.getElementById('tl-canvas'); c.scrollIntoView({{block: 'center'}}); const r = c.getBoundingClientRect(); const g = kstateUi.tl.geom; return [r.left + g.X({w0}), r.left + g.X({w1}), r.top + 60]; }})()"
    ))?;
    let (x0, x1, y) = (
        xy[0].as_f64().unwrap_or(0.0),
        xy[1].as_f64().unwrap_or(0.0),
        xy[2].as_f64().unwrap_or(0.0),
    );
    let (dt, dom) = timed(&mut b, &mut |b| {
        b.mouse("mousePressed", x0, y, json!({}))?;
        for i in 1..=5 {
            b.mouse(
                "mouseMoved",
                x0 + (x1 - x0) * i as f64 / 5.0,
                y,
                json!({"buttons": 1}),
            )?;
        }
        b.mouse("mouseReleased", x1, y, json!({}))
    })?;
    let brush_cli = each(&["--window", &win])?;
    rows.push(Row {
        name: "brush",
        browser: dt,
        dom,
        cli: Some(brush_cli),
        cli_what: format!("analyze NAME --window {win}, each"),
    });
    // A key: the first panel's first.
    let first_panel = analyzers.first().cloned().unwrap_or_default();
    let key = b.eval(&format!(
        "document.querySelector('#panel-{first_panel} td.key a')?.textContent"
    ))?;
    let key = key.as_str().unwrap_or_default().to_string();
    let (kx, ky) = b.centre(&format!("#panel-{first_panel} td.key a"))?;
    let (dt, dom) = timed(&mut b, &mut |b| b.click(kx, ky))?;
    rows.push(Row {
        name: "key click",
        browser: dt,
        dom,
        cli: Some(cli(
            kstate,
            &[
                s("analyze"),
                first_panel.clone(),
                f.clone(),
                s("--window"),
                win.clone(),
                s("--key"),
                key.clone(),
            ],
        )?),
        cli_what: format!("analyze {first_panel} --window --key {key}"),
    });
    let (mx, my) = b.centre("#modes button[data-mode='inout']")?;
    let (dt, dom) = timed(&mut b, &mut |b| b.click(mx, my))?;
    let io_cli = brush_cli + each(&["--not-window", &win])?;
    rows.push(Row {
        name: "inout",
        browser: dt,
        dom,
        cli: Some(io_cli),
        cli_what: "analyze NAME --window and --not-window, each".into(),
    });
    let (dt, dom) = timed(&mut b, &mut |b| {
        b.eval("new Promise(r => { addEventListener('popstate', () => r(true), { once: true }); history.back(); })")
            .map(drop)
    })?;
    rows.push(Row {
        name: "back",
        browser: dt,
        dom,
        cli: None,
        cli_what: "-".into(),
    });
    let (zx, zy) = b.centre("#zoomsel")?;
    let (dt, dom) = timed(&mut b, &mut |b| b.click(zx, zy))?;
    let dump_win = |a: f64, z: f64| -> Result<f64, Error> {
        let start = meta["start"].as_u64().unwrap_or(0) as f64 / 1e9;
        cli(
            kstate,
            &[
                s("dump"),
                f.clone(),
                s("--from"),
                format!("{:.6}", start + a),
                s("--to"),
                format!("{:.6}", start + z),
            ],
        )
    };
    rows.push(Row {
        name: "zoom",
        browser: dt,
        dom,
        cli: Some(dump_win(w0, w1)?),
        cli_what: "dump --from --to (the window's events)".into(),
    });
    // Ctrl+wheel, eight notches in at the timeline's middle: a view of 1/6 of the window.
    let (cx, cy) = b.centre("#tl-canvas")?;
    let (dt, dom) = timed(&mut b, &mut |b| {
        for _ in 0..8 {
            b.call(
                "Input.dispatchMouseEvent",
                json!({"type": "mouseWheel", "x": cx + 100.0, "y": cy, "deltaX": 0, "deltaY": -100, "modifiers": 2}),
            )?;
        }
        Ok(())
    })?;
    let view = b.eval("kstateUi.view")?;
    let (v0, v1) = (
        view[0].as_f64().unwrap_or(0.0),
        view[1].as_f64().unwrap_or(0.0),
    );
    rows.push(Row {
        name: "wheel zoom",
        browser: dt,
        dom,
        cli: Some(dump_win(v0, v1)?),
        cli_what: format!("dump --from --to ({:.1} ms)", (v1 - v0) * 1e3),
    });
    b.click(cx, 40.0_f64.max(cy - 200.0))?;
    let (dt, dom) = timed(&mut b, &mut |b| {
        b.eval("document.getElementById('tl-canvas').focus()")?;
        b.key("d")
    })?;
    rows.push(Row {
        name: "pan",
        browser: dt,
        dom,
        cli: Some(dump_win(v0 + (v1 - v0) * 0.15, v1 + (v1 - v0) * 0.15)?),
        cli_what: "dump --from --to".into(),
    });
    // The busiest thread's first row, in the middle of the view.
    let at = b.eval("(() => { const it = kstateUi.tl.items.filter(i => i.type === 'track' && i.t.kind === 'thread').sort((a, b) => b.t.busy_ns - a.t.busy_ns)[0]; if (!it) return null; const c = document.getElementById('tl-canvas'); const r = c.getBoundingClientRect(); const sc = document.getElementById('tl-scroll'); sc.scrollTop = Math.max(0, it.y - 40); const g = kstateUi.tl.geom; return [r.left + (g.x0 + g.x1) / 2, r.top + 22 + it.y - sc.scrollTop + it.rows[0].y + 3]; })()")?;
    if let (Some(x), Some(y)) = (at[0].as_f64(), at[1].as_f64()) {
        b.settled()?;
        let (dt, dom) = timed(&mut b, &mut |b| b.click(x, y))?;
        rows.push(Row {
            name: "slice click",
            browser: dt,
            dom,
            cli: None,
            cli_what: "-".into(),
        });
    }
    let (dt, dom) = timed(&mut b, &mut |b| {
        b.eval("(() => { const s = document.getElementById('ev-scroll'); s.scrollIntoView(); s.scrollTop = s.scrollHeight; })()")
            .map(drop)
    })?;
    rows.push(Row {
        name: "list scroll",
        browser: dt,
        dom,
        cli: None,
        cli_what: "-".into(),
    });
    let comm = b.eval("(kstateUi.tl.tracks.filter(t => t.kind === 'thread').sort((a, b) => b.busy_ns - a.busy_ns)[0] || {}).comm || 'x'")?;
    let comm = comm.as_str().unwrap_or("x").to_string();
    let (sx, sy) = b.centre("#tl-search")?;
    let (dt, dom) = timed(&mut b, &mut |b| {
        b.click(sx, sy)?;
        b.call("Input.insertText", json!({"text": comm})).map(drop)
    })?;
    rows.push(Row {
        name: "search",
        browser: dt,
        dom,
        cli: None,
        cli_what: "-".into(),
    });
    Ok(Report {
        ready,
        rows,
        analyzers,
        span,
    })
}
