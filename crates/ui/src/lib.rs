//! `kstate ui`: the browser front end. A small HTTP server bound to 127.0.0.1 serves one
//! page (embedded in the binary: HTML, CSS and hand-written canvas charts, no network)
//! and answers its questions by asking the engine ([`api`]); it runs no analysis of its
//! own. Every URL carries a random access token (other local users cannot read the
//! trace); a wrong one gets 403. Bad input (a file that does not parse, a malformed URL)
//! is answered with a message the page shows; the server keeps serving.

mod api;
mod cache;
mod error;
mod params;

pub use error::Error;

use std::path::PathBuf;

use api::{App, File};
use kstate_views::machines::{self, Role};

/// What `kstate ui` was asked.
pub struct Options {
    pub files: Vec<PathBuf>,
    /// Two files are an A/B comparison even when the second is the first's guest.
    pub compare: bool,
    /// Port to listen on (0: a free one).
    pub port: u16,
    /// Launch the default browser on the URL.
    pub open: bool,
}

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// A fresh access token: 128 bits from the kernel's random source.
fn token() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Opens the files (keeping the error of any that does not parse, for the page to
/// show), binds, prints the URL and serves until the process is interrupted.
/// `open` turns a path into the engine's source (the CLI's opener: Parquet too).
pub fn serve(
    opts: Options,
    open: impl Fn(&std::path::Path) -> Result<kstate_analyze::Source, String>,
) -> Result<(), Error> {
    let files: Vec<File> = opts
        .files
        .iter()
        .map(|p| File::open(p.display().to_string(), open(p)))
        .collect();
    let layout = layout(&files, opts.compare).map_err(Error::Files)?;
    let mut app = App::new(files, layout.clone());
    let server = tiny_http::Server::http(("127.0.0.1", opts.port)).map_err(|e| Error::Listen {
        port: opts.port,
        source: std::io::Error::other(e),
    })?;
    let port = server
        .server_addr()
        .to_ip()
        .map(|a| a.port())
        .ok_or_else(|| Error::System("the server has no IP address".into()))?;
    let token = token().map_err(|e| Error::System(format!("reading /dev/urandom: {e}")))?;
    let url = format!("http://127.0.0.1:{port}/{token}/");
    // One line, written without panicking: whoever started us may stop reading.
    use std::io::Write;
    let mut out = std::io::stdout();
    if let Some(roles) = &layout {
        let named: Vec<String> = opts
            .files
            .iter()
            .zip(roles)
            .map(|(p, r)| format!("{r}: {}", p.display()))
            .collect();
        let _ = writeln!(
            out,
            "kstate ui: a host and its guests on the host's clock ({}); --compare compares two files instead",
            named.join(", ")
        );
    }
    let _ = writeln!(out, "kstate ui: serving {url} (Ctrl-C stops it)");
    let _ = out.flush();
    if opts.open {
        if let Err(e) = std::process::Command::new("xdg-open").arg(&url).spawn() {
            eprintln!("kstate ui: cannot launch a browser (xdg-open: {e}); open the URL above");
        }
    }
    for req in server.incoming_requests() {
        let (status, ctype, body) = route(&mut app, &token, req.url());
        let mut resp = tiny_http::Response::from_data(body).with_status_code(status);
        for (h, v) in [
            ("Content-Type", ctype),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            (
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:",
            ),
        ] {
            if let Ok(h) = tiny_http::Header::from_bytes(h.as_bytes(), v.as_bytes()) {
                resp.add_header(h);
            }
        }
        let _ = req.respond(resp);
    }
    Ok(())
}

/// How the files are shown: a host and its guests on one time axis (their roles), when
/// every file after the first is a guest's recording mapped to the host's clock and no
/// comparison was asked for; else one file, or two compared (A/B).
fn layout(files: &[File], compare: bool) -> Result<Option<Vec<Role>>, String> {
    let named: Vec<(&str, &kstate_format::Trace)> = files
        .iter()
        .filter_map(|f| f.source().map(|s| (f.label.as_str(), s.trace())))
        .collect();
    let all_open = named.len() == files.len();
    let roles = if files.len() > 1 && !compare && all_open {
        machines::roles(&named)
    } else {
        Err(String::new())
    };
    match roles {
        Ok(r) => Ok(Some(r)),
        Err(why) if files.len() <= 2 => {
            // A guest's file given first (or beside another guest's) is compared A/B;
            // say why it is not the host-and-guest view the user may have meant.
            if !compare && named.iter().any(|(_, t)| machines::is_guest(t)) {
                eprintln!("kstate ui: comparing A with B, not a host and its guest: {why}");
            }
            Ok(None)
        }
        Err(why) if compare || !all_open || why.is_empty() => Err(format!(
            "{} files: kstate ui takes one file, two to compare (A/B), or a host's recording and its guests'",
            files.len()
        )),
        Err(why) => Err(format!(
            "{} files are not a host and its guests: {why}",
            files.len()
        )),
    }
}

/// Status, content type and body for one request URL.
fn route(app: &mut App, token: &str, url: &str) -> (u16, &'static str, Vec<u8>) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let rest = path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(token))
        .and_then(|p| p.strip_prefix('/').or(p.is_empty().then_some("")));
    let Some(rest) = rest else {
        return (
            403,
            "text/plain; charset=utf-8",
            b"403 forbidden: this URL lacks the access token kstate ui printed\n".to_vec(),
        );
    };
    match rest {
        "" | "index.html" => (200, "text/html; charset=utf-8", INDEX.into()),
        "app.js" => (200, "text/javascript; charset=utf-8", APP_JS.into()),
        "app.css" => (200, "text/css; charset=utf-8", APP_CSS.into()),
        _ => match rest.strip_prefix("api/") {
            Some(ep) => {
                let a = app.answer(ep, query);
                (a.status, "application/json", a.body)
            }
            None => (
                404,
                "text/plain; charset=utf-8",
                b"404 not found\n".to_vec(),
            ),
        },
    }
}
