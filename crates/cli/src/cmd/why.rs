//! `kstate why FILE --tid T`: the critical path of a thread's time: for every nanosecond
//! of its wall time, what it was doing or waiting on, across the threads that woke it,
//! the interrupts that did and the devices they served; `--span` per request; `kstate why
//! A B` two runs side by side. The walk and the views are kstate_analyze's `critical`
//! and `why`; this file reads the options and prints.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::critical::{SpanSpec, WalkQuery, Who, MAX_SEGMENTS};
use kstate_analyze::filter::{parse_window, WindowSpec};
use kstate_views::why::compare::{self as why_compare, Rules, RULES};
use kstate_views::why::{self, Why};

const AFTER_HELP: &str = "\
States: running (on a CPU), runnable (waiting for one; the tasks that held it are named),
sleep (a timer woke it), disk (a block request's completion did: device, queue and device
time), irq and softirq (an interrupt's handler did, by name or vector), net (network
processing did), unknown (the recording does not tell, and says which events are
missing). A wait ended by another thread is that thread's path over the wait, followed
recursively (a chain of any depth; a thread already on the chain cuts it).

Record what it needs with `kstate record -e why -- CMD` (scheduler switches and wake-ups,
interrupts, softirqs, block requests, timer expiries, network receive).

Examples:
  kstate why t.dat --comm server --span marker:begin,end
  kstate why t.dat --tid 4242 --window 1.5:2 --format json
  kstate why t.dat --comm server --flame -o path.svg
  kstate why before.dat after.dat --comm server --span syscall:read

Exit status: 0 when answered; 2 for bad input (a file that does not parse, a thread not
found or not unique, bad options).\n\n";

#[derive(clap::Args)]
#[command(after_help = format!("{AFTER_HELP}{RULES}"))]
pub struct Args {
    /// The recording (trace.dat, perf.data, raw capture or Parquet directory)
    file: PathBuf,
    /// A second recording of the same thing: the two paths side by side, what grew
    file_b: Option<PathBuf>,
    /// The thread (thread id)
    #[arg(long, conflicts_with_all = ["pid", "comm"], required_unless_present_any = ["pid", "comm"])]
    tid: Option<i32>,
    /// The one thread of this process switched in the window
    #[arg(long, conflicts_with = "comm")]
    pid: Option<i32>,
    /// The one thread of this command switched in the window
    #[arg(long)]
    comm: Option<String>,
    /// Only FROM:TO (seconds from the recording's start, or @ABS:@ABS)
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    window: Option<WindowSpec>,
    /// Cut the thread's time into requests: syscall:NAME (entry to exit), marker:BEGIN,END
    /// (trace_marker lines starting with BEGIN and END), or SYSTEM:BEGIN,SYSTEM:END (any two
    /// events: a uprobe and its return probe, a USDT pair)
    #[arg(long, value_parser = SpanSpec::parse, value_name = "SPEC")]
    span: Option<SpanSpec>,
    /// With --span: the slowest N requests shown (the median is shown too)
    #[arg(long, default_value_t = 3, value_name = "N")]
    top: usize,
    /// Output: text (a tree, one line per hop and state) or json
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// Write the path as a flame graph (SVG, folded stacks weighted by ns) to -o FILE
    #[arg(long, requires = "output", conflicts_with = "file_b")]
    flame: bool,
    /// Where --flame writes
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// --format json: the segments listed at most (the latest; the earlier ones are
    /// counted in segments_left_out, and the totals and the tree still hold them)
    #[arg(long, default_value_t = MAX_SEGMENTS, value_name = "N")]
    max_segments: usize,
    /// A and B: the share of a run's wall time (%) a line needs to be ranked
    #[arg(long, default_value_t = 5.0, value_name = "PCT",
          value_parser = kstate_args::float(0.0..=100.0))]
    min_share: f64,
}

fn query(a: &Args, source: &kstate_analyze::Source) -> WalkQuery {
    let who = match (&a.tid, &a.pid, &a.comm) {
        (Some(t), _, _) => Who::Tid(*t),
        (_, Some(p), _) => Who::Pid(*p),
        (_, _, Some(c)) => Who::Comm(c.clone()),
        // clap requires one of them.
        _ => Who::Tid(0),
    };
    let mut q = WalkQuery::new(who);
    q.window = a.window;
    q.span = a.span.clone();
    q.tgids = source.tgids().clone();
    // Only JSON lists segments: the text, the flame graph and two runs side by side
    // need none kept.
    let listed = a.format == "json" && !a.flame && a.file_b.is_none();
    q.max_segments = if listed { a.max_segments } else { 0 };
    q
}

fn answer(a: &Args, file: &std::path::Path) -> Result<Why, Error> {
    let source = super::source(file)?;
    let q = query(a, &source);
    why::view(source.trace(), &q).map_err(|e| match e {
        kstate_analyze::Error::Query(m) => Error::Usage(format!("{}: {m}", file.display())),
        e => Error::from(e),
    })
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    if a.output.is_some() && !a.flame {
        return Err(Error::Usage(
            "-o names where --flame writes: add --flame".into(),
        ));
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    let json = a.format == "json";
    let printed = match &a.file_b {
        Some(fb) => {
            let (wa, wb) = (answer(&a, &a.file)?, answer(&a, fb)?);
            let rules = Rules {
                min_share: a.min_share / 100.0,
            };
            let c = why_compare::compare(
                why_compare::Side::of(&a.file.display().to_string(), &wa),
                why_compare::Side::of(&fb.display().to_string(), &wb),
                rules,
            );
            match json {
                true => writeln!(out, "{}", kstate_render::why::comparison_json(&c)),
                false => kstate_render::why::comparison_text(&c, &mut out),
            }
        }
        None => {
            let w = answer(&a, &a.file)?;
            if let (true, Some(o)) = (a.flame, &a.output) {
                let title = format!(
                    "critical path of {}-{} ({} of wall time)",
                    w.path.comm,
                    w.path.tid,
                    kstate_analyze::filter::fmt_dur(w.path.wall_ns)
                );
                let svg = kstate_render::flame::svg_of(&w.path.folded(), &title, "ns");
                kstate_format::output::write(o, svg)
                    .map_err(|e| Error::Failed(format!("{}: {e}", o.display())))?;
                eprintln!("kstate why: flame graph of the path in {}", o.display());
                return Ok(ExitCode::SUCCESS);
            }
            match json {
                true => writeln!(
                    out,
                    "{}",
                    kstate_render::why::json(&w, &a.file.display().to_string())
                ),
                false => kstate_render::why::text(&w, a.top, &mut out),
            }
        }
    };
    if let Err(e) = printed.and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(Error::Stdout(e));
        }
    }
    Ok(ExitCode::SUCCESS)
}
