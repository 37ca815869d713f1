//! `kstate ui`: the browser front end. A small HTTP server bound to 127.0.0.1 serves one
//! page (embedded in the binary: HTML, CSS and hand-written canvas charts, no network)
//! and answers its questions by asking the engine ([`api`]); it runs no analysis of its
//! own. Every URL carries a random access token (other local users cannot read the
//! trace); a wrong one gets 403. Bad input (a file that does not parse, a malformed URL)
//! is answered with a message the page shows; the server keeps serving. The server is
//! axum on a multi-threaded tokio runtime ([`server`]): questions are answered side by
//! side, one analysis pass per core at a time.

mod api;
mod assets;
mod cache;
mod charts_api;
mod error;
mod launch;
mod memo;
mod overview;
mod params;
mod server;
mod span;
mod supersede;
mod timeline_api;
mod why_api;

pub use error::Error;

use std::path::PathBuf;
use std::sync::Arc;

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
    let cores = kstate_analyze::slices::threads(None).unwrap_or(1);
    let app = Arc::new(App::new(files, layout.clone(), cores));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores.max(2))
        .enable_all()
        .build()
        .map_err(|e| Error::System(format!("starting the server's threads: {e}")))?;
    let std_listener =
        std::net::TcpListener::bind(("127.0.0.1", opts.port)).map_err(|e| Error::Listen {
            port: opts.port,
            source: e,
        })?;
    let port = std_listener
        .local_addr()
        .map_err(|e| Error::System(format!("the server has no address: {e}")))?
        .port();
    std_listener
        .set_nonblocking(true)
        .map_err(|e| Error::System(format!("the listening socket: {e}")))?;
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
    // The browser gets a file holding the URL, never the URL on its command line.
    let redirect = match opts.open {
        false => None,
        true => {
            match launch::RedirectFile::create(&url) {
                Ok(f) => {
                    if let Err(e) = std::process::Command::new("xdg-open").arg(f.path()).spawn() {
                        eprintln!(
                        "kstate ui: cannot launch a browser (xdg-open: {e}); open the URL above"
                    );
                    }
                    Some(f)
                }
                Err(e) => {
                    eprintln!("kstate ui: cannot write the browser's redirect file ({e}); open the URL above");
                    None
                }
            }
        }
    };
    // Engine work the page will ask for first (the timeline's summaries), started now.
    app.warm_up();
    // As many passes at once as the machine has cores, not as were free at the start: the
    // server lives long, and started beside a busy build it ran one panel at a time for
    // good, a 12 ms runq panel answering in 0.37-0.47 s behind the syscall panel's pass.
    let shared = Arc::new(server::Shared::new(
        app,
        token,
        kstate_format::cores::all_cores(),
    ));
    let served: std::io::Result<()> = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        // On a signal the server stops at once: a pass being computed is not waited for.
        tokio::select! {
            r = axum::serve(listener, server::router(shared)) => r,
            _ = stopped() => Ok(()),
        }
    });
    drop(redirect);
    // Requests still being answered are not waited for.
    runtime.shutdown_background();
    served.map_err(|e| Error::System(format!("serving: {e}")))
}

/// Ctrl-C or SIGTERM: the server stops (and removes its redirect file).
async fn stopped() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut i), Ok(mut t)) => {
            tokio::select! {
                _ = i.recv() => {}
                _ = t.recv() => {}
            }
        }
        // No signal handling: serve until killed.
        _ => std::future::pending().await,
    }
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
