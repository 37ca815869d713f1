//! `kstate dump`: every event in global time order, as `trace-cmd report` prints it, as raw
//! fields (`--raw`), or as NDJSON. The formatting is kstate-format's `print_fmt`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use kstate_analyze::merge::{IdFilter, Merger};
use kstate_format::print_fmt::{report_header, TextFormatter};
use kstate_format::value::{write_json_str, PrintSpec};
use kstate_format::{Error, ErrorKind, EventFormat, Trace};

use crate::timefmt::{fmt_secs, parse_secs};

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat (v6/v7) file or raw tracefs capture directory
    file: PathBuf,
    /// NDJSON: one {"ts","cpu","pid","event","fields","text"} object per line
    #[arg(long, conflicts_with = "raw")]
    json: bool,
    /// Each event's raw fields (name=value, as `trace-cmd report -R`) instead of its message
    #[arg(long)]
    raw: bool,
    /// Timestamps in nanoseconds (as `trace-cmd report -t`) instead of microseconds
    #[arg(long)]
    ns: bool,
    /// Only these events (names or SYSTEM:NAME), comma-separated
    #[arg(long, value_delimiter = ',')]
    events: Vec<String>,
    /// Only these CPUs, comma-separated
    #[arg(long, value_delimiter = ',')]
    cpu: Vec<u32>,
    /// Only events recorded in this process (common_pid)
    #[arg(long)]
    pid: Option<i32>,
    /// Start time in seconds, as printed (inclusive)
    #[arg(long, value_parser = parse_secs, value_name = "SECS")]
    from: Option<u64>,
    /// End time in seconds, as printed (inclusive)
    #[arg(long, value_parser = parse_secs, value_name = "SECS")]
    to: Option<u64>,
}

/// An event's format and the print conversion of each of its fields.
type FormatAndSpecs<'t> = (&'t EventFormat, Vec<Option<PrintSpec>>);

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let trace = super::open(&args.file)?;
    let filter = id_filter(&trace, &args.events)?;
    let cpus = (!args.cpu.is_empty()).then_some(args.cpu.as_slice());
    let mut merger = Merger::new(&trace, cpus, filter)?;
    // Per id: the format and its fields' print conversions, resolved once.
    let formats: Vec<Option<FormatAndSpecs>> = (0..trace.events.id_limit() as u32)
        .map(|id| {
            trace.events.get(id).map(|f| {
                (
                    f,
                    if args.raw {
                        f.print_specs()
                    } else {
                        Vec::new()
                    },
                )
            })
        })
        .collect();
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut line = Vec::with_capacity(1 << 17);
    let mut text = TextFormatter::new(&trace, args.ns);
    if !args.json && !args.raw {
        if let Err(e) = out.write_all(report_header(&trace).as_bytes()) {
            return stdout_closed(e);
        }
    }
    let (from, to) = (args.from.unwrap_or(0), args.to.unwrap_or(u64::MAX));
    let mut failure = trace.truncated.clone();
    loop {
        let ev = match merger.next() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => {
                // Stop at the first damaged page: what was printed is all in order, and the
                // exit status says it is not the whole trace.
                failure = Some(e);
                break;
            }
        };
        if ev.ts < from {
            continue;
        }
        if ev.ts > to {
            break;
        }
        let pid = ev.pid();
        if args.pid.is_some_and(|p| p != pid) {
            continue;
        }
        let known = formats.get(ev.id as usize).and_then(Option::as_ref);
        let Some((fmt, specs)) = known else {
            failure = Some(
                Error::new(
                    ErrorKind::Corrupt,
                    None,
                    format!(
                        "event id {} on CPU {} at {} has no format",
                        ev.id,
                        ev.cpu,
                        fmt_secs(ev.ts)
                    ),
                )
                .in_file(&trace.path),
            );
            break;
        };
        if args.json {
            json_line(&mut line, &ev, pid, fmt, &mut text);
        } else if args.raw {
            text_line(&mut line, &ev, pid, fmt, specs, &trace);
        } else {
            text.write_line(
                &mut line,
                ev.ts,
                ev.cpu,
                ev.id,
                ev.payload,
                ev.endian,
                ev.lost_before,
            );
        }
        // Lines collect in one buffer written 64 KiB at a time (no second copy per line).
        if line.len() >= 1 << 16 {
            if let Err(e) = out.write_all(&line) {
                return stdout_closed(e);
            }
            line.clear();
        }
    }
    if let Err(e) = out.write_all(&line) {
        return stdout_closed(e);
    }
    if let Err(e) = out.flush() {
        return stdout_closed(e);
    }
    let raw_events: Vec<String> = text
        .unsupported()
        .iter()
        .map(|(name, (n, why))| format!("{name} {n} ({why})"))
        .collect();
    if !raw_events.is_empty() {
        eprintln!(
            "kstate dump: printed as raw fields (print format not evaluated): {}",
            raw_events.join(", ")
        );
    }
    match failure {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => Err(e),
    }
}

/// Reading into `head` or a closed pager is not an error.
fn stdout_closed(e: std::io::Error) -> Result<ExitCode, Error> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::new(
            ErrorKind::Io,
            None,
            format!("writing output: {e}"),
        ))
    }
}

/// Resolves `--events` names to ids; an unknown name is an error listing near matches.
pub fn id_filter(trace: &Trace, names: &[String]) -> Result<IdFilter, Error> {
    if names.is_empty() {
        return Ok(IdFilter::all());
    }
    let mut ids = Vec::new();
    for n in names {
        match trace.events.find(n) {
            Some(ev) => ids.push(ev.id),
            None => {
                let stem = n.rsplit(':').next().unwrap_or(n);
                let mut near: Vec<String> = trace
                    .events
                    .iter()
                    .filter(|e| e.name.contains(stem) || stem.contains(e.name.as_str()))
                    .map(|e| format!("{}:{}", e.system, e.name))
                    .collect();
                near.truncate(8);
                let hint = if near.is_empty() {
                    String::new()
                } else {
                    format!("; near matches: {}", near.join(", "))
                };
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    None,
                    format!("no event {n:?} in this trace{hint}"),
                )
                .in_file(&trace.path));
            }
        }
    }
    Ok(IdFilter::only(ids))
}

fn comm(trace: &Trace, pid: i32) -> &str {
    if pid == 0 {
        return "<idle>";
    }
    trace.comms.get(&pid).map(String::as_str).unwrap_or("<...>")
}

fn text_line(
    out: &mut Vec<u8>,
    ev: &kstate_analyze::merge::Event,
    pid: i32,
    fmt: &EventFormat,
    specs: &[Option<PrintSpec>],
    trace: &Trace,
) {
    let _ = write!(
        out,
        "{:>16}-{:<5} [{:03}] {}: {}:",
        comm(trace, pid),
        pid,
        ev.cpu,
        fmt_secs(ev.ts),
        fmt.name
    );
    // trace-cmd pads "name:" to 22 columns, then a space.
    out.resize(
        out.len() + 22usize.saturating_sub(fmt.name.len() + 1) + 1,
        b' ',
    );
    for (i, f) in fmt.fields.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        f.write_raw_text(
            ev.payload,
            ev.endian,
            trace.long_size,
            specs.get(i).and_then(Option::as_ref),
            out,
        );
    }
    out.push(b'\n');
}

fn json_line(
    out: &mut Vec<u8>,
    ev: &kstate_analyze::merge::Event,
    pid: i32,
    fmt: &EventFormat,
    text: &mut TextFormatter,
) {
    let _ = write!(
        out,
        "{{\"ts\":{},\"cpu\":{},\"pid\":{},\"event\":",
        ev.ts, ev.cpu, pid
    );
    write_json_str(&fmt.name, out);
    out.extend_from_slice(b",\"fields\":{");
    for (i, f) in fmt.fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json_str(&f.name, out);
        out.push(b':');
        f.value(ev.payload, ev.endian).write_json(out);
    }
    out.extend_from_slice(b"},\"text\":");
    let mut msg = Vec::new();
    if text.write_message(&mut msg, ev.cpu, ev.id, ev.payload, ev.endian) {
        if msg.last() == Some(&b'\n') {
            msg.pop();
        }
        write_json_str(&String::from_utf8_lossy(&msg), out);
    } else {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"}\n");
}
