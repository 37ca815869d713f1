//! A `kstate ui` server for the UI tests: started on files, its URL read from the line
//! it prints, stopped when dropped; and plain HTTP/1.0 requests to it.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};

use super::KSTATE;

pub struct UiServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT/TOKEN/`.
    pub url: String,
    pub addr: String,
    pub token: String,
    /// Open until the server stops (it writes nothing more).
    _out: BufReader<ChildStdout>,
}

impl UiServer {
    /// `kstate ui ARGS` with `env` added.
    pub fn start<S: AsRef<OsStr>>(args: &[S], env: &[(&str, &OsStr)]) -> UiServer {
        let mut cmd = Command::new(KSTATE);
        cmd.arg("ui").args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start kstate ui");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        out.read_line(&mut line).expect("kstate ui's output");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("kstate ui printed no URL: {line:?}"))
            .to_string();
        let (addr, token) = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .split_once('/')
            .expect("host/token");
        UiServer {
            addr: addr.to_string(),
            token: token.to_string(),
            url,
            child,
            _out: out,
        }
    }

    /// Status, headers and body of `GET path`.
    pub fn get(&self, path: &str) -> (u16, String, String) {
        get(&self.addr, path)
    }
}

impl Drop for UiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` from `addr` (host:port): status, headers, body.
pub fn get(addr: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).expect("kstate ui listens");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).expect("answer");
    let text = String::from_utf8_lossy(&resp).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {head}"));
    (status, head.to_string(), body.to_string())
}

/// Runs the browser half of a UI test (`tests/cli/SCRIPT`, Playwright for Python) with `py`
/// and `args`: the report it prints (JSON), or the test fails with its output.
pub fn run_browser(py: &std::path::Path, script: &str, args: &[&OsStr]) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli")
        .join(script);
    let out = Command::new(py)
        .arg(path)
        .args(args)
        .output()
        .expect("cannot run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{script} printed no report ({e}): {stdout}"))
}
