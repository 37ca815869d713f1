//! A recording's events as lines of text, in global time order: as `trace-cmd report`
//! prints them, as raw fields (`trace-cmd report -R`), or as NDJSON; a perf.data's samples
//! as `perf script` prints them without symbols ([`samples`]). What `kstate dump` writes.
//! The formatting is kstate-format's `print_fmt`; one file's events are formatted on
//! several threads, in time slices, with the same bytes as one pass ([`parallel`]).
//!
//! The lines go to the writer the caller gives; what the caller should say besides
//! (events printed as raw fields, formats refused as damaged, why the output stops short)
//! comes back in [`Dumped`].

mod lines;
mod parallel;
mod samples;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io::Write;

use kstate_analyze::filter::fmt_secs;
use kstate_format::print_fmt::{report_header, TextFormatter};
use kstate_format::stream::merge::{Event, FileMerge, IdFilter, Merger};
use kstate_format::value::PrintSpec;
use kstate_format::{ErrorKind, EventFormat, Trace};

pub use parallel::SLICE_BYTES;

/// How each event is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Style {
    /// Its message, as `trace-cmd report` prints it (after the report's header).
    Text,
    /// Its raw fields, `name=value`, as `trace-cmd report -R`.
    Raw,
    /// One `{"ts","cpu","pid","event","fields","text"}` object per line (and `"file"`
    /// when several files are dumped); a perf.data's samples one object each.
    Json,
}

/// What to dump: how each event is written, and which events.
#[derive(Clone, Debug)]
pub struct Request {
    pub style: Style,
    /// Timestamps in nanoseconds (as `trace-cmd report -t`) instead of microseconds.
    pub ns: bool,
    /// Only these events (names or SYSTEM:NAME); every one when empty.
    pub events: Vec<String>,
    /// Only these CPUs; every one when empty.
    pub cpus: Vec<u32>,
    /// Only events recorded in this process (common_pid).
    pub pid: Option<i32>,
    /// The first time written, in nanoseconds (inclusive).
    pub from: Option<u64>,
    /// The last time written, in nanoseconds (inclusive).
    pub to: Option<u64>,
    /// Threads to read and format with; the output is the same byte for byte. Several
    /// files, `cpus`, lost events and function-tracer events use one.
    pub threads: usize,
    /// Bytes of pages per slice when formatting on several threads ([`SLICE_BYTES`]).
    pub slice_bytes: usize,
}

/// What the caller may have to say after the lines.
#[derive(Debug, Default)]
pub struct Dumped {
    /// Why the lines stop short of the whole trace (a damaged page, an event without a
    /// format, a truncated perf.data): what was written before is all in order.
    pub failure: Option<kstate_format::Error>,
    /// Events written as raw fields because their print format is not evaluated: the
    /// event's name, how many, and why.
    pub raw_fields: Vec<(String, u64, String)>,
    /// Event formats refused as damaged (their events were written as raw fields).
    pub format_errors: Vec<kstate_format::Error>,
    /// How the threads' part went, when the trace was cut into slices.
    pub slices: Option<SliceCount>,
}

/// Slices formatted on the threads, and how many of them were formatted again in order.
#[derive(Clone, Copy, Debug)]
pub struct SliceCount {
    pub slices: usize,
    pub again: usize,
}

/// Why nothing more is written.
#[derive(Debug)]
pub enum Error {
    /// The trace cannot be dumped as asked (an event that is not in it) or could not be
    /// read where dumping must begin.
    Trace(kstate_format::Error),
    /// The writer refused the lines.
    Write(std::io::Error),
}

impl From<kstate_format::Error> for Error {
    fn from(e: kstate_format::Error) -> Error {
        Error::Trace(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Trace(e) => e.fmt(f),
            Error::Write(e) => write!(f, "writing output: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// An event's format and the print conversion of each of its fields.
type FormatAndSpecs<'t> = (&'t EventFormat, Vec<Option<PrintSpec>>);

/// What writing one file's events needs.
struct Input<'t> {
    trace: &'t Trace,
    /// Per id: the format and its fields' print conversions, resolved once.
    formats: Vec<Option<FormatAndSpecs<'t>>>,
    text: TextFormatter<'t>,
    /// The line prefix when several files are written (`NAME: `, names right-aligned as
    /// trace-cmd aligns them), else empty.
    prefix: String,
    name: String,
}

impl<'t> Input<'t> {
    fn new(trace: &'t Trace, req: &Request, name: &str, prefix: String) -> Input<'t> {
        Input {
            trace,
            formats: (0..trace.events.id_limit() as u32)
                .map(|id| {
                    trace.events.get(id).map(|f| {
                        let specs = if req.style == Style::Raw {
                            f.print_specs()
                        } else {
                            Vec::new()
                        };
                        (f, specs)
                    })
                })
                .collect(),
            text: TextFormatter::new(trace, req.ns),
            prefix,
            name: name.to_string(),
        }
    }
}

/// What one event did to the output.
enum Step {
    /// Written, or passed over by a filter.
    Next,
    /// Past `to`: nothing later is written.
    End,
    /// The event has no format: the output stops there.
    Failed(kstate_format::Error),
}

/// Writes `ev` of `input`'s file into `line` as `req` asks.
fn step(input: &mut Input, ev: &Event, req: &Request, several: bool, line: &mut Vec<u8>) -> Step {
    if req.from.is_some_and(|f| ev.ts < f) {
        return Step::Next;
    }
    if req.to.is_some_and(|t| ev.ts > t) {
        return Step::End;
    }
    let pid = ev.pid();
    if req.pid.is_some_and(|p| p != pid) {
        return Step::Next;
    }
    let known = input.formats.get(ev.id as usize).and_then(Option::as_ref);
    let Some((fmt, specs)) = known else {
        return Step::Failed(
            kstate_format::Error::new(
                ErrorKind::Corrupt,
                None,
                format!(
                    "event id {} on CPU {} at {} has no event format",
                    ev.id,
                    ev.cpu,
                    fmt_secs(ev.ts)
                ),
            )
            .in_file(&input.trace.path),
        );
    };
    match req.style {
        Style::Json => {
            let file = several.then_some(input.name.as_str());
            lines::json_line(line, ev, pid, fmt, &mut input.text, file);
        }
        Style::Raw => {
            line.extend_from_slice(input.prefix.as_bytes());
            lines::text_line(line, ev, pid, fmt, specs, input.trace);
        }
        Style::Text => {
            line.extend_from_slice(input.prefix.as_bytes());
            input.text.write_line(
                line,
                ev.ts,
                ev.cpu,
                ev.id,
                ev.payload,
                ev.endian,
                ev.lost_before,
            );
        }
    }
    Step::Next
}

/// Writes the events of `traces` (named `names`, one each: the line prefix or JSON
/// `"file"` when there are several, a host and its guests on one timeline as `trace-cmd
/// report -i host.dat -i guest.dat` prints them) to `out` as `req` asks, and flushes it.
/// A lone perf.data without tracepoint pages writes its samples ([`samples`]).
pub fn write<W: Write>(
    traces: &[Trace],
    names: &[String],
    req: &Request,
    out: &mut W,
) -> Result<Dumped, Error> {
    if let [trace] = traces {
        if trace.cpu_data.is_empty() && trace.perf.is_some() {
            return samples::write(trace, req, out);
        }
    }
    let threads = req.threads;
    let filters = id_filters(traces, &req.events)?;
    let cpus = (!req.cpus.is_empty()).then_some(req.cpus.as_slice());
    let mut mergers = Vec::new();
    for (trace, filter) in traces.iter().zip(&filters) {
        // perf.data's CPUs are decoded on threads of their own (pages are cut into slices
        // below instead).
        mergers.push(Merger::threaded(trace, cpus, filter.clone(), threads)?);
    }
    let several = traces.len() > 1;
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let mut inputs: Vec<Input> = traces
        .iter()
        .zip(names)
        .map(|(trace, name)| {
            let prefix = if several {
                format!("{name:>width$}: ")
            } else {
                String::new()
            };
            Input::new(trace, req, name, prefix)
        })
        .collect();
    let mut line = Vec::with_capacity(1 << 17);
    if req.style == Style::Text {
        for i in &inputs {
            line.extend_from_slice(i.prefix.as_bytes());
            line.extend_from_slice(report_header(i.trace).as_bytes());
        }
    }
    let mut failure = traces.iter().find_map(|t| t.damage().next().cloned());
    let mut slices = None;
    // Events the threads wrote already (when they stopped for something only the one
    // pass writes right, the pass goes on from there).
    let mut printed = 0u64;
    if failure.is_none() && threads > 1 && !several && req.cpus.is_empty() {
        let (how, count) =
            parallel::write(&traces[0], &filters[0], req, &mut inputs[0], &mut line, out);
        slices = count;
        match how {
            parallel::Parallel::Unsuited => {}
            parallel::Parallel::Done(f) => {
                failure = f;
                mergers.clear();
            }
            parallel::Parallel::Stdout(e) => return Err(Error::Write(e)),
            parallel::Parallel::GoOn { events } => printed = events,
        }
    }
    let mut merge = FileMerge::new(mergers);
    loop {
        let (f, ev) = match merge.next() {
            Ok(Some(x)) => x,
            Ok(None) => break,
            Err(e) => {
                // Stop at the first damaged page: what was written is all in order, and
                // the failure says it is not the whole trace.
                failure = Some(e);
                break;
            }
        };
        if printed > 0 {
            printed -= 1;
            continue;
        }
        // trace-cmd prints a function graph entry whose return comes next as one line.
        let mut entry = Vec::new();
        let ev = if req.style == Style::Text && inputs[f].text.needs_next(ev.id) {
            entry.extend_from_slice(ev.payload);
            let ev = Event {
                payload: &entry,
                ..ev
            };
            let leaf = match merge.peek_file(f) {
                Ok(Some(next)) => inputs[f]
                    .text
                    .is_leaf_return(&entry, next.id, next.payload, next.endian)
                    .then(|| next.payload.to_vec()),
                Ok(None) => None,
                Err(e) => {
                    failure = Some(e);
                    None
                }
            };
            inputs[f].text.set_leaf_return(leaf.as_deref());
            if leaf.is_some() {
                if let Err(e) = merge.skip_file(f) {
                    failure = Some(e);
                }
            }
            ev
        } else {
            ev
        };
        let id = ev.id;
        match step(&mut inputs[f], &ev, req, several, &mut line) {
            Step::Next => {}
            Step::End => break,
            Step::Failed(e) => {
                // Placed at the record's page (the message names its CPU); where the file
                // said already why (a format that does not parse), that is said instead.
                let m = merge.file_mut(f);
                m.count_no_format(id);
                let placed = match m.no_format_errors().into_iter().next() {
                    Some(p) => kstate_format::Error {
                        msg: e.msg,
                        cpu: None,
                        ..p
                    },
                    None => e,
                };
                failure.get_or_insert(placed);
                break;
            }
        }
        // Lines collect in one buffer written 64 KiB at a time (no second copy per line).
        if line.len() >= 1 << 16 {
            out.write_all(&line).map_err(Error::Write)?;
            line.clear();
        }
    }
    out.write_all(&line).map_err(Error::Write)?;
    out.flush().map_err(Error::Write)?;
    let mut raw_fields = Vec::new();
    for i in &inputs {
        for (name, (n, why)) in i.text.unsupported() {
            raw_fields.push((name.clone(), *n, why.clone()));
        }
    }
    let format_errors = inputs
        .iter()
        .flat_map(|i| i.text.format_errors().cloned())
        .collect();
    Ok(Dumped {
        failure,
        raw_fields,
        format_errors,
        slices,
    })
}

/// `events` resolved in each file. With one file an unknown name is an error; with
/// several (a host and its guests record different events) a name need only be in one.
fn id_filters(traces: &[Trace], names: &[String]) -> Result<Vec<IdFilter>, kstate_format::Error> {
    if traces.len() == 1 {
        return Ok(vec![id_filter(&traces[0], names)?]);
    }
    let mut found = vec![false; names.len()];
    let mut filters = Vec::new();
    for t in traces {
        if names.is_empty() {
            filters.push(IdFilter::all());
            continue;
        }
        let mut ids = Vec::new();
        for (n, seen) in names.iter().zip(found.iter_mut()) {
            if let Some(ev) = t.events.find(n) {
                ids.push(ev.id);
                *seen = true;
            }
        }
        filters.push(IdFilter::only(ids));
    }
    if let Some(missing) = names.iter().zip(&found).find(|(_, f)| !**f) {
        // The single-file message, with its near matches, from the first file.
        id_filter(&traces[0], std::slice::from_ref(missing.0))?;
    }
    Ok(filters)
}

/// Resolves event names to ids; an unknown name is an error listing near matches.
fn id_filter(trace: &Trace, names: &[String]) -> Result<IdFilter, kstate_format::Error> {
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
                return Err(kstate_format::Error::unsupported(
                    None,
                    format!("no event {n:?} in this trace{hint}"),
                )
                .in_file(&trace.path));
            }
        }
    }
    Ok(IdFilter::only(ids))
}
