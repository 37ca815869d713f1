//! `kstate cachesim --sets -- CMD`: CMD under valgrind's lackey (`--trace-mem=yes`), its
//! address trace read from a pipe as it is written (never stored: it is gigabytes for a
//! second of run time) into [`kstate_analyze::cache::sets`], which charges each data
//! access to its instruction and judges each site's spread over one cache level's sets.

use std::io::BufReader;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, ExitCode};

use kstate_analyze::cache::sets::{read_lackey, Detector, Symbols};
use kstate_analyze::cache::{Geometry, Level};
use kstate_format::{Error, ErrorKind};
use serde_json::json;

use super::cachesim::{cache_spec, usage, valgrind_version, Args};

fn level(args: &Args) -> Result<(Level, String), Error> {
    if let Some(c) = &args.cache {
        let spec = cache_spec("cache", c)?;
        let n: Vec<u64> = spec.split(',').filter_map(|x| x.parse().ok()).collect();
        let l = Level::new(args.level, n[0], n[1], n[2])
            .ok_or_else(|| usage(format!("--cache {c}: fewer bytes than one set of lines")))?;
        return Ok((l, "--cache".into()));
    }
    let g = Geometry::read(&args.sysfs)?;
    let l = g.require(args.level)?;
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

pub fn run(args: &Args) -> Result<ExitCode, Error> {
    if args.command.is_empty() {
        return Err(usage(
            "give the command to check after --, e.g. kstate cachesim --sets -- ./prog",
        ));
    }
    let (lvl, source) = level(args)?;
    let version = valgrind_version(&args.valgrind)?;
    let (r, w) = pipe()?;
    let fd = {
        use std::os::fd::AsRawFd;
        w.as_raw_fd()
    };
    let mut child = Command::new(&args.valgrind)
        .args(["--tool=lackey", "--trace-mem=yes", "-v", "-v"])
        .arg(format!("--log-fd={fd}"))
        .arg("--")
        .args(&args.command)
        .spawn()
        .map_err(|e| usage(format!("running {}: {e}", args.valgrind.display())))?;
    drop(w);
    let mut d = Detector::new(lvl);
    let read = read_lackey(BufReader::new(std::fs::File::from(r)), &mut d);
    let status = child
        .wait()
        .map_err(|e| Error::new(ErrorKind::Io, None, format!("waiting for valgrind: {e}")))?;
    let trace = read?;
    let cmd = args.command.join(" ");
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
            "`{cmd}`: {why}; its {} data accesses are not reported, as a failed run's figures would be passed off as the program's{}{}",
            d.accesses,
            if said.is_empty() { "" } else { "; valgrind said:\n  " },
            said.into_iter().rev().collect::<Vec<_>>().join("\n  ")
        )));
    }
    let syms = Symbols::new(&trace.objects);
    let all = d.findings(args.min_lines);
    let flagged = all.iter().filter(|f| f.flagged).count();
    let shown: Vec<_> = if args.top == 0 {
        all.iter().collect()
    } else {
        all.iter().take(args.top.max(flagged)).collect()
    };
    if args.json {
        let v = json!({
            "simulated": true,
            "simulator": "lackey",
            "valgrind": version,
            "command": cmd,
            "cache": {"level": lvl.level, "size": lvl.size, "ways": lvl.ways, "line": lvl.line,
                      "sets": lvl.sets, "from": source},
            "instructions": trace.instructions,
            "data_accesses": d.accesses,
            "sites_seen": d.sites(),
            "sites": shown.iter().map(|f| json!({
                "site": syms.name(f.ip), "ip": format!("{:#x}", f.ip),
                "accesses": f.accesses, "lines": f.lines, "sets_used": f.used_sets,
                "sets_if_even": f.even_sets, "max_lines_per_set": f.max_per_set,
                "stride": f.stride, "flagged": f.flagged, "colours": f.colours,
                "capped": f.capped,
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "SIMULATED cache sets (valgrind lackey address trace, {version}), not this machine's counters:"
    );
    println!("  {} (from {source})", lvl.describe());
    println!("command: {cmd}");
    println!(
        "{} instructions, {} data accesses by {} sites; {} sites with at least {} lines, {flagged} flagged\n",
        trace.instructions,
        d.accesses,
        d.sites(),
        all.len(),
        args.min_lines
    );
    println!(
        "{:>10} {:>8} {:>9} {:>9} {:>8} {:>8}  site",
        "accesses", "lines", "sets used", "if even", "max/set", "stride"
    );
    for f in &shown {
        println!(
            "{:>10} {:>8} {:>9} {:>9} {:>8} {:>8}  {}{}{}",
            f.accesses,
            f.lines,
            f.used_sets,
            f.even_sets,
            f.max_per_set,
            f.stride,
            syms.name(f.ip),
            if f.flagged {
                format!(
                    "\n{:>57}* piles into few sets: colour it {} ways",
                    "", f.colours
                )
            } else {
                String::new()
            },
            if f.capped { " (line count capped)" } else { "" },
        );
    }
    if flagged == 0 {
        println!("\nno site piles into few sets");
    }
    Ok(ExitCode::SUCCESS)
}
