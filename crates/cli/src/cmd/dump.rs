//! `kstate dump`: every event in global time order, as `trace-cmd report` prints it, as raw
//! fields (`--raw`), or as NDJSON. The formatting is kstate-format's `print_fmt`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::slices::Seams;
use kstate_format::print_fmt::{report_header, TextFormatter};
use kstate_format::stream::merge::{FileMerge, IdFilter, Merger};
use kstate_format::value::{write_json_str, PrintSpec};
use kstate_format::{ErrorKind, EventFormat, Trace};

use crate::timefmt::{fmt_secs, parse_secs};

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat (v6/v7) files or raw tracefs capture directories; several (a host and
    /// its guests) print on one timeline, each line prefixed with its file's name, as
    /// `trace-cmd report -i host.dat -i guest.dat`
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// NDJSON: one {"ts","cpu","pid","event","fields","text"} object per line (and
    /// "file" when several files are given)
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
    /// Threads to format with (default: the cores no other task is running on as the
    /// command starts), a perf.data's scan at open included; the output is the same byte
    /// for byte. Several files, --cpu, lost events and function-tracer events use one
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// How a perf.data's samples are read (hidden: tests and `bench analyze` compare
    /// the older ways with the direct one)
    #[arg(long, hide = true, value_parser = ["direct", "pages", "sorted"])]
    perf_read: Option<String>,
    /// Bytes of pages per slice when formatting on several threads (tests cut small
    /// traces)
    #[arg(long, hide = true, default_value_t = SLICE_BYTES)]
    slice_bytes: usize,
    /// Say on standard error how the threads' part went: slices, and slices printed again
    #[arg(long, hide = true)]
    slice_stats: bool,
}

/// An event's format and the print conversion of each of its fields.
type FormatAndSpecs<'t> = (&'t EventFormat, Vec<Option<PrintSpec>>);

/// What printing one file's events needs.
struct Input<'t> {
    trace: &'t Trace,
    /// Per id: the format and its fields' print conversions, resolved once.
    formats: Vec<Option<FormatAndSpecs<'t>>>,
    text: TextFormatter<'t>,
    /// The line prefix when several files are printed (`NAME: `, names right-aligned as
    /// trace-cmd aligns them), else empty.
    prefix: String,
    name: String,
}

impl<'t> Input<'t> {
    fn new(trace: &'t Trace, args: &Args, name: &str, prefix: String) -> Input<'t> {
        Input {
            trace,
            formats: (0..trace.events.id_limit() as u32)
                .map(|id| {
                    trace.events.get(id).map(|f| {
                        let specs = if args.raw {
                            f.print_specs()
                        } else {
                            Vec::new()
                        };
                        (f, specs)
                    })
                })
                .collect(),
            text: TextFormatter::new(trace, args.ns),
            prefix,
            name: name.to_string(),
        }
    }
}

/// What one event did to the output.
enum Step {
    /// Printed, or passed over by a filter.
    Next,
    /// Past `--to`: nothing later prints.
    End,
    /// The event has no format: the output stops there.
    Failed(kstate_format::Error),
}

/// Prints `ev` of `input`'s file into `line` as the arguments ask.
fn step(
    input: &mut Input,
    ev: &kstate_format::stream::merge::Event,
    args: &Args,
    several: bool,
    line: &mut Vec<u8>,
) -> Step {
    if args.from.is_some_and(|f| ev.ts < f) {
        return Step::Next;
    }
    if args.to.is_some_and(|t| ev.ts > t) {
        return Step::End;
    }
    let pid = ev.pid();
    if args.pid.is_some_and(|p| p != pid) {
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
    if args.json {
        let file = several.then_some(input.name.as_str());
        json_line(line, ev, pid, fmt, &mut input.text, file);
    } else {
        line.extend_from_slice(input.prefix.as_bytes());
        if args.raw {
            text_line(line, ev, pid, fmt, specs, input.trace);
        } else {
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

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let threads = super::threads(args.threads)?;
    let opts = super::open_options(Some(threads), args.perf_read.as_deref());
    let traces = args
        .files
        .iter()
        .map(|f| super::open_with(f, &opts))
        .collect::<Result<Vec<_>, _>>()?;
    if let [trace] = &traces[..] {
        if trace.cpu_data.is_empty() && trace.perf.is_some() {
            return samples(trace, &args);
        }
    }
    let filters = id_filters(&traces, &args.events)?;
    let cpus = (!args.cpu.is_empty()).then_some(args.cpu.as_slice());
    let mut mergers = Vec::new();
    for (trace, filter) in traces.iter().zip(&filters) {
        // perf.data's CPUs are decoded on threads of their own (pages are cut into slices
        // below instead).
        mergers.push(Merger::threaded(trace, cpus, filter.clone(), threads)?);
    }
    let several = traces.len() > 1;
    let names: Vec<String> = args
        .files
        .iter()
        .map(|f| {
            f.file_name()
                .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into())
        })
        .collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let mut inputs: Vec<Input> = traces
        .iter()
        .zip(&names)
        .map(|(trace, name)| {
            let prefix = if several {
                format!("{name:>width$}: ")
            } else {
                String::new()
            };
            Input::new(trace, &args, name, prefix)
        })
        .collect();
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut line = Vec::with_capacity(1 << 17);
    if !args.json && !args.raw {
        for i in &inputs {
            line.extend_from_slice(i.prefix.as_bytes());
            line.extend_from_slice(report_header(i.trace).as_bytes());
        }
    }
    let mut failure = traces.iter().find_map(|t| t.damage().next().cloned());
    // Events the threads printed already (when they stopped for something only the one
    // pass prints right, the pass goes on from there).
    let mut printed = 0u64;
    if failure.is_none() && threads > 1 && !several && args.cpu.is_empty() {
        match parallel(
            &traces[0],
            &filters[0],
            &args,
            threads,
            &mut inputs[0],
            &mut line,
            &mut out,
        ) {
            Parallel::Unsuited => {}
            Parallel::Done(f) => {
                failure = f;
                mergers.clear();
            }
            Parallel::Stdout(e) => return stdout_closed(e),
            Parallel::GoOn { events } => printed = events,
        }
    }
    let mut merge = FileMerge::new(mergers);
    loop {
        let (f, ev) = match merge.next() {
            Ok(Some(x)) => x,
            Ok(None) => break,
            Err(e) => {
                // Stop at the first damaged page: what was printed is all in order, and the
                // exit status says it is not the whole trace.
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
        let ev = if !args.json && !args.raw && inputs[f].text.needs_next(ev.id) {
            entry.extend_from_slice(ev.payload);
            let ev = kstate_format::stream::merge::Event {
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
        match step(&mut inputs[f], &ev, &args, several, &mut line) {
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
    let mut raw_events = Vec::new();
    for i in &inputs {
        for (name, (n, why)) in i.text.unsupported() {
            raw_events.push(format!("{name} {n} ({why})"));
        }
    }
    if !raw_events.is_empty() {
        eprintln!(
            "kstate dump: printed as raw fields (print format not evaluated): {}",
            raw_events.join(", ")
        );
    }
    // A format refused as damaged is bad input: said after the output, which printed its
    // events as raw fields.
    let mut damaged = false;
    for i in &inputs {
        for e in i.text.format_errors() {
            eprintln!("kstate: {e}");
            damaged = true;
        }
    }
    match failure {
        None if damaged => Ok(ExitCode::from(2)),
        None => Ok(ExitCode::SUCCESS),
        Some(e) => Err(e.into()),
    }
}

/// How the threads' part of a dump ended.
enum Parallel {
    /// The dump cannot be cut into slices: the one pass prints it all.
    Unsuited,
    /// Printed to the end (or to `--to`, or to an event without a format: the failure).
    Done(Option<kstate_format::Error>),
    /// Standard output failed.
    Stdout(std::io::Error),
    /// A slice met what only the one pass prints right (a CPU's events out of time
    /// order, function-tracer events): it goes on after the `events` events printed so
    /// far.
    GoOn { events: u64 },
}

/// Slices of about this many bytes of pages: the 4 MiB window a page source maps at a
/// time (a smaller slice still maps and populates a whole window). About 10 MB of text
/// waits per slice made and not yet written.
const SLICE_BYTES: usize = 4 << 20;

/// One slice formatted on a worker thread.
enum SliceOut {
    Done {
        text: Vec<u8>,
        /// Events the slice's walk delivered (printed or filtered).
        events: u64,
        state: Box<kstate_format::print_fmt::SliceState>,
        end: Option<Step>,
        /// Where the slice began and ended in each CPU's stream.
        seams: Box<Seams>,
    },
    Cannot,
}

/// Prints the events of one file on `threads` threads: time slices formatted side by side
/// ([`kstate_analyze::slices::ordered`]), written in order. The text is the one pass's:
/// a slice's lines depend on earlier events only through comms the sched plugins learnt,
/// and a slice whose lines used a comm learnt before it is printed again here, by the
/// formatter that has taken in every slice before ([`TextFormatter::slice_agrees`]).
fn parallel(
    trace: &Trace,
    filter: &IdFilter,
    args: &Args,
    threads: usize,
    input: &mut Input,
    line: &mut Vec<u8>,
    out: &mut impl Write,
) -> Parallel {
    use kstate_analyze::slices::{ordered, ShortSlices};
    let Some(slices) = ShortSlices::plan(trace, args.slice_bytes) else {
        return Parallel::Unsuited;
    };
    // The function plugin indents by call stacks learnt event by event: a slice holding
    // such events is left to the one pass (which has seen none before it).
    let function = trace.events.find("ftrace:function").map(|f| f.id);
    // A function graph entry prints with the record after it, which may be in the next
    // slice: the one pass prints from there.
    let graph = trace.events.find("ftrace:funcgraph_entry").map(|f| f.id);
    // Prints slice `k` with `input`'s formatter as it stands.
    let print_slice = |input: &mut Input, k: usize, text: &mut Vec<u8>| {
        let Ok(mut walk) = slices.walk(trace, filter.clone(), k) else {
            return None;
        };
        let (mut events, mut end) = (0u64, None);
        loop {
            match walk.next() {
                Ok(Some(ev)) => {
                    if Some(ev.id) == function || Some(ev.id) == graph {
                        return None;
                    }
                    events += 1;
                    match step(input, &ev, args, false, text) {
                        Step::Next => {}
                        s => {
                            end = Some(s);
                            break;
                        }
                    }
                }
                Ok(None) => break,
                Err(_) => return None,
            }
        }
        Some((events, end, Box::new(walk.seams().ok()?)))
    };
    let mut result = Parallel::Done(None);
    let (mut events, mut again) = (0u64, 0usize);
    let mut before: Option<Seams> = None;
    let name = input.name.clone();
    // Text buffers go back and forth between the threads (no fresh pages per slice).
    let spare: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    let take = || {
        spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    };
    ordered(
        slices.len(),
        threads,
        // One slice waiting beside each thread's: the writer never starves, and the text
        // held stays a few slices' worth.
        threads + 1,
        || Input::new(trace, args, &name, String::new()),
        |w, k| {
            w.text.start_slice();
            let mut text = take();
            match print_slice(w, k, &mut text) {
                Some((events, end, seams)) => SliceOut::Done {
                    text,
                    events,
                    state: Box::new(w.text.end_slice()),
                    end,
                    seams,
                },
                None => SliceOut::Cannot,
            }
        },
        |k, slice| {
            let SliceOut::Done {
                text,
                events: n,
                state,
                mut end,
                seams,
            } = slice
            else {
                result = Parallel::GoOn { events };
                return false;
            };
            // A slice that does not begin where the one before ended (a CPU's pages out
            // of time order) holds other events than the one pass's next ones.
            if before.as_ref().is_some_and(|b: &Seams| !b.meet(&seams)) {
                result = Parallel::GoOn { events };
                return false;
            }
            before = Some(*seams);
            if input.text.slice_agrees(&state) {
                input.text.absorb_slice(*state);
                // Straight to the output, after what waits in `line`.
                let written = out.write_all(line).and_then(|_| out.write_all(&text));
                line.clear();
                let mut text = text;
                text.clear();
                spare.lock().unwrap_or_else(|e| e.into_inner()).push(text);
                if let Err(e) = written {
                    result = Parallel::Stdout(e);
                    return false;
                }
            } else {
                // Printed again by the formatter that knows what came before.
                again += 1;
                let mut redo = take();
                match print_slice(input, k, &mut redo) {
                    Some((_, e, _)) => end = e,
                    None => {
                        // Nothing of this slice is printed: the one pass goes on at it.
                        result = Parallel::GoOn { events };
                        return false;
                    }
                }
                line.extend_from_slice(&redo);
                redo.clear();
                spare.lock().unwrap_or_else(|e| e.into_inner()).push(redo);
            }
            events += n;
            if line.len() >= 1 << 16 {
                if let Err(e) = out.write_all(line) {
                    result = Parallel::Stdout(e);
                    return false;
                }
                line.clear();
            }
            match end {
                None | Some(Step::Next) => true,
                Some(Step::End) => false,
                Some(Step::Failed(e)) => {
                    result = Parallel::Done(Some(e));
                    false
                }
            }
        },
    );
    if args.slice_stats {
        eprintln!(
            "kstate dump: {} slices, {again} printed again",
            slices.len()
        );
    }
    result
}

/// `--events` resolved in each file. With one file an unknown name is an error; with
/// several (a host and its guests record different events) a name need only be in one.
fn id_filters(traces: &[Trace], names: &[String]) -> Result<Vec<IdFilter>, Error> {
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

/// A perf.data's samples in file order, as `perf script` prints them without symbols:
/// `COMM PID/TID [CPU] TIME: PERIOD EVENT: IP`, and with a call chain its addresses below,
/// one a line, and an empty line. `--json`: one object per sample.
fn samples(trace: &Trace, args: &Args) -> Result<ExitCode, Error> {
    use kstate_format::perf::decode::{record, PerfRecord, RecordSource, CONTEXT_MAX};
    use kstate_symbols::Comms;
    let pf = trace.perf.as_deref().expect("a perf.data");
    let headers = pf.events();
    for e in &args.events {
        if !headers.iter().any(|h| h.event == *e) {
            let have: Vec<&str> = headers.iter().map(|h| h.event.as_str()).collect();
            return Err(Error::Input(
                kstate_format::Error::unsupported(
                    None,
                    format!(
                        "no event {e:?} in this perf.data; it has {}",
                        have.join(", ")
                    ),
                )
                .in_file(&trace.path),
            ));
        }
    }
    let wanted: Vec<bool> = headers
        .iter()
        .map(|h| args.events.is_empty() || args.events.contains(&h.event))
        .collect();
    let comms = Comms::of_samples(trace)?.expect("a perf.data has samples");
    let (from, to) = (args.from.unwrap_or(0), args.to.unwrap_or(u64::MAX));
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut line: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut closed = None;
    let walk = pf.visit(&mut |r| {
        if r.kind != record::SAMPLE || !wanted[r.event] {
            return Ok(());
        }
        let PerfRecord::Sample(s) = r.parse(headers)? else {
            return Ok(());
        };
        if s.time < from
            || s.time > to
            || (!args.cpu.is_empty() && !args.cpu.contains(&s.cpu))
            || args.pid.is_some_and(|p| p != s.pid as i32)
        {
            return Ok(());
        }
        let comm = comms.get(s.tid, s.time).unwrap_or(":-1");
        let event = &headers[r.event].event;
        let chain = s.callchain.iter().filter(|&&a| a < CONTEXT_MAX);
        if args.json {
            let _ = write!(
                line,
                "{{\"ts\":{},\"cpu\":{},\"pid\":{},\"tid\":{},\"comm\":",
                s.time, s.cpu, s.pid, s.tid
            );
            write_json_str(comm, &mut line);
            line.extend_from_slice(b",\"event\":");
            write_json_str(event, &mut line);
            let _ = write!(
                line,
                ",\"period\":{},\"ip\":{},\"callchain\":[",
                s.period, s.ip
            );
            for (i, a) in chain.enumerate() {
                let _ = write!(line, "{}{a}", if i > 0 { "," } else { "" });
            }
            line.extend_from_slice(b"]}\n");
        } else {
            let _ = writeln!(
                line,
                "{comm:>16} {:>7}/{:<7} [{:03}] {}: {:>10} {event}: {:16x}",
                s.pid,
                s.tid,
                s.cpu,
                fmt_secs(s.time),
                s.period,
                s.ip
            );
            if !s.callchain.is_empty() {
                for a in chain {
                    let _ = writeln!(line, "\t{a:16x}");
                }
                line.push(b'\n');
            }
        }
        if line.len() >= 1 << 16 {
            if let Err(e) = out.write_all(&line) {
                closed = Some(e);
                return Err(kstate_format::Error::new(
                    ErrorKind::Io,
                    None,
                    "stdout closed",
                ));
            }
            line.clear();
        }
        Ok(())
    });
    if let Some(e) = closed {
        return stdout_closed(e);
    }
    if let Err(e) = out.write_all(&line).and_then(|_| out.flush()) {
        return stdout_closed(e);
    }
    walk?;
    match &trace.truncated {
        None => Ok(ExitCode::SUCCESS),
        Some(e) => Err(e.clone().into()),
    }
}

/// Reading into `head` or a closed pager is not an error.
fn stdout_closed(e: std::io::Error) -> Result<ExitCode, Error> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::Stdout(e))
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
                return Err(Error::Input(
                    kstate_format::Error::unsupported(
                        None,
                        format!("no event {n:?} in this trace{hint}"),
                    )
                    .in_file(&trace.path),
                ));
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
    ev: &kstate_format::stream::merge::Event,
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
    ev: &kstate_format::stream::merge::Event,
    pid: i32,
    fmt: &EventFormat,
    text: &mut TextFormatter,
    file: Option<&str>,
) {
    out.push(b'{');
    if let Some(f) = file {
        out.extend_from_slice(b"\"file\":");
        write_json_str(f, out);
        out.push(b',');
    }
    let _ = write!(
        out,
        "\"ts\":{},\"cpu\":{},\"pid\":{},\"event\":",
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
    if text.write_message(&mut msg, ev.ts, ev.cpu, ev.id, ev.payload, ev.endian) {
        if msg.last() == Some(&b'\n') {
            msg.pop();
        }
        write_json_str(&String::from_utf8_lossy(&msg), out);
    } else {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"}\n");
}
