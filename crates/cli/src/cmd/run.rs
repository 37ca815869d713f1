//! `kstate run`: record a command system-wide, analyze it with every analyzer that applies,
//! and leave a directory with the recording, the analyses, the charts and report.html.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::Error;
use kstate_record::cpu_time;
use kstate_record::Options;
use kstate_render::html::RunInfo;
use kstate_render::rundir;

#[derive(clap::Args)]
#[command(after_help = concat!("\
Records with the given presets (default perf) system-wide while CMD runs, then writes DIR:
  kstate.dat            the recording (trace-cmd trace.dat v7)
  NAME.csv, NAME.json   per analyzer that applies: kstate analyze NAME --format csv|json
  NAME.dist.csv/.json   kstate analyze NAME --dist --buckets log10
  NAME.log.svg/.png     samples over time; NAME.levels: queue lengths over time
  NAME.stat.svg/.png    count bars, avg/max/min lines; NAME.dist: histogram
  memory.svg/.png       /proc/meminfo over time
  findings.txt          every finding, ranked
  report.html           one self-contained page: summary, findings, a section per analyzer
and prints the wall time, the CPU split (user/system/idle/iowait, from /proc/stat before
and after), lost events and the five findings that explain the most time.
With no CMD, runs kstate's demo workload (system calls, fsync'd writes, a contended lock,
more runnable threads than CPUs, child processes).

Examples:
  kstate run                                  # the demo
  kstate run -- dd if=/dev/zero of=big bs=1M count=512 oflag=direct
  kstate run -e perf,syscall -o out -- make -j8

", super::exit_status::exit_status_help!(), "

", kstate_views::ranking_help!()))]
pub struct Args {
    /// Events: presets or SYSTEM[:EVENT] as for kstate record; repeat or separate with
    /// commas [default: perf]
    #[arg(short, long = "event", value_name = "SPEC")]
    events: Vec<String>,
    /// Output directory [default: kstate-CMD-YYYYMMDD-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Memory snapshot interval in milliseconds (0: off)
    #[arg(long = "sysinfo-interval", value_name = "MS", default_value_t = 250,
          value_parser = kstate_args::int::<u64>(kstate_args::SYSINFO_MS))]
    sysinfo_interval: u64,
    /// Ring-buffer size per CPU, in KiB
    #[arg(short = 'b', long = "buffer", value_name = "KIB", default_value_t = kstate_record::DEFAULT_BUFFER_KIB,
          value_parser = kstate_args::int::<u64>(kstate_args::BUFFER_KIB))]
    buffer_kib: u64,
    /// The command to run (default: the built-in demo)
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

fn stamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i128)
        .unwrap_or(0);
    // 2026-11-22T05:30:00.000000000Z -> 20261122-053000
    let iso = crate::timefmt::fmt_utc(secs * 1_000_000_000).unwrap_or_default();
    let digits: String = iso.chars().take(19).filter(char::is_ascii_digit).collect();
    if digits.len() == 14 {
        format!("{}-{}", &digits[..8], &digits[8..])
    } else {
        secs.to_string()
    }
}

fn default_dir(command: &[String]) -> PathBuf {
    let name = command
        .first()
        .map(|c| {
            Path::new(c)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| c.clone())
        })
        .unwrap_or_else(|| "demo".into());
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from(format!("kstate-{name}-{}", stamp()))
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| default_dir(&args.command));
    super::split::refuse_symlink(&dir)?;
    if dir.exists() {
        let empty = std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            return Err(Error::Usage(format!(
                "{}: the output directory exists and is not empty; name another with -o",
                dir.display()
            )));
        }
    }
    let created = !dir.exists();
    std::fs::create_dir_all(&dir).map_err(|e| Error::output(&dir, e))?;
    let demo = args.command.is_empty();
    let command = if demo {
        let exe =
            std::env::current_exe().map_err(|e| Error::system(Path::new("/proc/self/exe"), e))?;
        vec![
            exe.display().to_string(),
            "workload".into(),
            "demo".into(),
            "--dir".into(),
            dir.display().to_string(),
        ]
    } else {
        args.command.clone()
    };
    let dat = dir.join("kstate.dat");
    let mut opts = Options::new(dat.clone());
    if !args.events.is_empty() {
        opts.events = args.events.clone();
    }
    opts.all = true;
    opts.command = command.clone();
    opts.sysinfo_interval_ms = args.sysinfo_interval;
    opts.buffer_kib = args.buffer_kib;
    opts.argv = std::env::args().collect();
    // Nothing was recorded: leave no empty directory that looks like a run.
    let fail = |e: kstate_record::error::Error| {
        eprintln!("kstate run: {e}");
        if created {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(ExitCode::from(Error::from(e).exit_code()))
    };
    // Mistakes in the arguments are refused (exit 2) before the recording is announced.
    if let Err(e) = kstate_record::check::arguments(&opts)
        .and_then(|()| kstate_record::check::event_names(&opts.events))
    {
        return fail(e);
    }
    let mut notify = |m: &str| eprintln!("kstate: {m}");
    eprintln!(
        "kstate: recording {} ({} system-wide) into {}",
        if demo {
            "the demo workload".to_string()
        } else {
            command.join(" ")
        },
        opts.events.join(","),
        dir.display()
    );
    let before = cpu_time::read(None);
    let t = Instant::now();
    let summary = match kstate_record::record(&opts, &mut notify) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let wall = t.elapsed().as_secs_f64();
    let after = cpu_time::read(None);
    let cpu = before.zip(after).and_then(|(a, b)| b.since(&a).split());

    let source = super::source(&dat)?;
    let label = source.label().to_string();
    let r = kstate_views::survey::of(&source);
    let exit = summary.workload_status.map(|s| s.to_string());
    let shown: Vec<String> = if demo {
        vec!["kstate workload demo".into()]
    } else {
        command.clone()
    };
    let info = RunInfo {
        command: shown.clone(),
        wall_s: summary.duration_ns as f64 / 1e9,
        cpu,
        exit: exit.clone(),
    };
    let files = rundir::write_outputs(&r, &dir, &label)?;
    rundir::write_html(&r, Some(&info), &dir.join("report.html"))?;

    println!("kstate run: {}", shown.join(" "));
    println!(
        "  wall time   {:.3} s recorded ({wall:.3} s with kstate's setup and file writing)",
        summary.duration_ns as f64 / 1e9
    );
    match cpu {
        Some(c) => println!(
            "  CPU         user {:.1}%  system {:.1}%  idle {:.1}%  iowait {:.1}%  (all CPUs, /proc/stat)",
            c.user * 100.0,
            c.system * 100.0,
            c.idle * 100.0,
            c.iowait * 100.0
        ),
        None => println!("  CPU         (no /proc/stat)"),
    }
    let lost = summary.lost();
    println!(
        "  events      {} recorded, {} lost{}",
        summary.events(),
        lost,
        if lost > 0 {
            " (*** some analyses are incomplete; try a larger --buffer ***)"
        } else {
            ""
        }
    );
    println!(
        "  analyzers   {} applied{}",
        r.analyses.len(),
        if r.skipped.is_empty() {
            String::new()
        } else {
            format!(
                "; left out for lack of events: {}",
                r.skipped
                    .iter()
                    .map(|s| s.info.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    rundir::print_findings(&r, 5);
    println!(
        "  report      {} ({} other files in {})",
        dir.join("report.html").display(),
        files.len() + 1,
        dir.display()
    );
    if summary.disk_full.is_some() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(super::exit_status::failed(summary.workload_status).unwrap_or(ExitCode::SUCCESS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names() {
        let d = default_dir(&["/usr/bin/dd".into(), "x".into()]);
        let s = d.display().to_string();
        assert!(s.starts_with("kstate-dd-"), "{s}");
        assert_eq!(s.len(), "kstate-dd-20261122-053000".len(), "{s}");
    }
}
