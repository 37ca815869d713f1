//! Running a command under valgrind for `kstate cachesim`: cachegrind's simulated caches
//! (its output file, read by `kstate_lab::cachegrind`) and lackey's address trace (read as it
//! is written into a [`Detector`]). The front end keeps only its arguments and printing.

use std::io::BufReader;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use kstate_format::{Error, ErrorKind};

use crate::sets::{read_lackey, Detector, Trace};
use crate::{Geometry, Level};

/// A refusal of what the user asked (a missing valgrind, a bad cache size, a failed run).
pub fn usage(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unsupported, None, msg.into())
}

/// `SIZE,ASSOC,LINE`, checked here so that a typo is not a valgrind usage message.
pub fn cache_spec(opt: &str, v: &str) -> Result<String, Error> {
    let n: Vec<Option<u64>> = v.split(',').map(|x| x.trim().parse().ok()).collect();
    match n.as_slice() {
        [Some(s), Some(a), Some(l)] if *s > 0 && *a > 0 && *l > 0 => Ok(format!("{s},{a},{l}")),
        _ => Err(usage(format!(
            "--{opt} {v:?}: expected SIZE,ASSOC,LINE in bytes, e.g. 32768,8,64"
        ))),
    }
}

/// valgrind's version line, which also proves it is valgrind.
pub fn version(valgrind: &Path) -> Result<String, Error> {
    let out = Command::new(valgrind)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => usage(format!(
                "{} not found: kstate cachesim runs the command under valgrind's cachegrind; install valgrind (Debian/Ubuntu: apt-get install valgrind) or give --valgrind PATH",
                valgrind.display()
            )),
            _ => usage(format!("running {} --version: {e}", valgrind.display())),
        })?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !v.starts_with("valgrind-") {
        return Err(usage(format!(
            "{} does not look like valgrind (`--version` printed {:?}, {})",
            valgrind.display(),
            v.lines().next().unwrap_or(""),
            out.status
        )));
    }
    Ok(v)
}

/// A cachegrind run: the command, and the simulated caches where not this CPU's.
pub struct CachegrindRun<'a> {
    pub valgrind: &'a Path,
    /// `SIZE,ASSOC,LINE` as the user gave them (checked by [`cache_spec`]).
    pub d1: Option<&'a str>,
    pub ll: Option<&'a str>,
    pub command: &'a [String],
}

/// What a cachegrind run left.
pub struct Simulated {
    /// cachegrind's output file, for `kstate_lab::cachegrind::parse`.
    pub text: String,
    pub version: String,
    pub status: ExitStatus,
}

/// No gdbserver: its FIFOs in $TMPDIR would outlive a killed run, and kstate never
/// attaches a debugger.
const NO_VGDB: &str = "--vgdb=no";

/// An anonymous in-memory file (memfd) for valgrind's output, closed on exec except in
/// the valgrind child. No name in any directory: nothing for another user to plant a link
/// at (valgrind opens its files with O_TRUNC, as root; issue 24), and nothing left
/// behind when kstate is interrupted or killed, which a scratch directory was.
fn memfd(name: &str) -> Result<std::fs::File, Error> {
    let c = std::ffi::CString::new(name).expect("no NUL in a constant");
    // SAFETY: a NUL-terminated name; the descriptor returned is owned below.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::new(
            ErrorKind::Io,
            None,
            format!("memfd_create: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// A memfd's whole text.
fn text_of(f: &mut std::fs::File) -> std::io::Result<String> {
    use std::io::{Read, Seek};
    let mut s = String::new();
    f.seek(std::io::SeekFrom::Start(0))?;
    f.read_to_string(&mut s)?;
    Ok(s)
}

/// Runs the command under cachegrind and returns its output file's text. `warn` is given
/// valgrind's warnings about the simulation (e.g. the LL cache it had to adjust), each
/// without its `==PID==` prefix, as soon as the run ends (also when it then fails).
pub fn cachegrind(run: &CachegrindRun, mut warn: impl FnMut(&str)) -> Result<Simulated, Error> {
    if run.command.is_empty() {
        return Err(usage(
            "give the command to simulate after --, e.g. kstate cachesim -- ./prog (or --input FILE)",
        ));
    }
    let version = version(run.valgrind)?;
    let (mut log, mut out) = (memfd("valgrind.log")?, memfd("cachegrind.out")?);
    let fds = [log.as_raw_fd(), out.as_raw_fd()];
    let mut cmd = Command::new(run.valgrind);
    // cachegrind takes its output as a path: the child's own view of the memfd.
    cmd.arg("--tool=cachegrind")
        .arg(NO_VGDB)
        .arg("--cache-sim=yes")
        .arg(format!("--cachegrind-out-file=/proc/self/fd/{}", fds[1]))
        .arg(format!("--log-fd={}", fds[0]));
    if let Some(d1) = run.d1 {
        cmd.arg(format!("--D1={}", cache_spec("d1", d1)?));
    }
    if let Some(ll) = run.ll {
        cmd.arg(format!("--LL={}", cache_spec("ll", ll)?));
    }
    cmd.arg("--").args(run.command);
    // SAFETY: fcntl is async-signal-safe; it clears close-on-exec on the two memfds in
    // the child only.
    unsafe {
        cmd.pre_exec(move || {
            for fd in fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let status = cmd
        .status()
        .map_err(|e| usage(format!("running {}: {e}", run.valgrind.display())))?;
    let log_text = text_of(&mut log).unwrap_or_default();
    for l in log_text.lines().filter(|l| l.contains("warning:")) {
        warn(l.trim_start_matches(|c: char| c == '-' || c == '=' || c.is_ascii_digit()));
    }
    let text = text_of(&mut out).map_err(|e| e.to_string());
    let text = text.and_then(|t| match t.is_empty() {
        true => Err("it is empty".to_string()),
        false => Ok(t),
    });
    let text = text.map_err(|e| {
        let tail: Vec<&str> = log_text.lines().rev().take(8).collect();
        usage(format!(
            "cachegrind wrote no output ({e}); valgrind exited with {status}{}",
            if tail.is_empty() {
                String::new()
            } else {
                format!(
                    ", saying:\n  {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
                )
            }
        ))
    })?;
    Ok(Simulated {
        text,
        version,
        status,
    })
}

/// The cache level `--sets` checks: `cache` (`SIZE,ASSOC,LINE`, given as `--cache`) or
/// level `level` of the geometry under `sysfs`; with where it came from, for the header.
pub fn level(cache: Option<&str>, level: u32, sysfs: &Path) -> Result<(Level, String), Error> {
    if let Some(c) = cache {
        let spec = cache_spec("cache", c)?;
        let n: Vec<u64> = spec.split(',').filter_map(|x| x.parse().ok()).collect();
        let l = Level::new(level, n[0], n[1], n[2])
            .ok_or_else(|| usage(format!("--cache {c}: fewer bytes than one set of lines")))?;
        return Ok((l, "--cache".into()));
    }
    let g = Geometry::read(sysfs)?;
    let l = g.require(level)?;
    Ok((l, g.source.display().to_string()))
}

/// A pipe whose write end the child inherits (as `fd`) and whose read end it does not.
fn pipe() -> Result<(OwnedFd, OwnedFd), Error> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors, which are owned below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), 0) } != 0 {
        return Err(Error::new(
            ErrorKind::Io,
            None,
            format!("pipe: {}", std::io::Error::last_os_error()),
        ));
    }
    // SAFETY: fresh descriptors nobody else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: setting close-on-exec on our own read end.
    unsafe { libc::fcntl(fds[0], libc::F_SETFD, libc::FD_CLOEXEC) };
    Ok((r, w))
}

/// What a lackey run gave: every data access charged to its site in the detector, and
/// what else lackey said (the objects, to name the sites).
pub struct Lackey {
    pub detector: Detector,
    pub trace: Trace,
    pub version: String,
}

/// Runs `command` under valgrind's lackey (`--trace-mem=yes`), its address trace read
/// from a pipe as it is written (never stored: it is gigabytes for a second of run time)
/// into a [`Detector`] of `lvl`. A run that fails is refused: a failed run's figures
/// would be passed off as the program's.
pub fn lackey(valgrind: &Path, command: &[String], lvl: Level) -> Result<Lackey, Error> {
    let version = version(valgrind)?;
    let (r, w) = pipe()?;
    let mut child = Command::new(valgrind)
        .args(["--tool=lackey", NO_VGDB, "--trace-mem=yes", "-v", "-v"])
        .arg(format!("--log-fd={}", w.as_raw_fd()))
        .arg("--")
        .args(command)
        .spawn()
        .map_err(|e| usage(format!("running {}: {e}", valgrind.display())))?;
    drop(w);
    let mut d = Detector::new(lvl);
    let read = read_lackey(BufReader::new(std::fs::File::from(r)), &mut d);
    let status = child
        .wait()
        .map_err(|e| Error::new(ErrorKind::Io, None, format!("waiting for valgrind: {e}")))?;
    let trace = read?;
    if !status.success() || trace.instructions == 0 {
        let said: Vec<&str> = trace
            .messages
            .iter()
            .rev()
            .filter(|m| {
                m.trim_start_matches(|c: char| c == '=' || c.is_ascii_digit())
                    .trim()
                    .len()
                    > 1
            })
            .take(6)
            .map(String::as_str)
            .collect();
        let why = match status.code() {
            Some(127) if trace.instructions == 0 => {
                "valgrind could not start it (exit status 127: not found or not executable; valgrind's message is above)".to_string()
            }
            Some(c) => format!("it exited with status {c} under valgrind"),
            None => format!("it ended by {status} under valgrind"),
        };
        return Err(usage(format!(
            "`{}`: {why}; its {} data accesses are not reported, as a failed run's figures would be passed off as the program's{}{}",
            command.join(" "),
            d.accesses,
            if said.is_empty() { "" } else { "; valgrind said:\n  " },
            said.into_iter().rev().collect::<Vec<_>>().join("\n  ")
        )));
    }
    Ok(Lackey {
        detector: d,
        trace,
        version,
    })
}
