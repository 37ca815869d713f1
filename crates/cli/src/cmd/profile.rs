//! `kstate profile FILE`: where the CPU samples of `kstate record --sample` fell, per
//! symbol (like `perf report --stdio --no-children`), and who calls a symbol or what it
//! calls; cut by the analyzers' filters.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_analyze::filter::{parse_window, Filters, WindowSpec};
use kstate_format::Trace;
use kstate_views::profile::annotate::{self, Annotation};
use kstate_views::profile::compare::{self, Thresholds};
use kstate_views::profile::{self, Profile};

use kstate_render::profile as render;

use crate::print;

const AFTER_HELP: &str = "\
--flame -o F.svg writes a flame graph of the selected samples' stacks instead of the
report (kernel frames end in _[k]).

Shares are by sample period, as perf weighs them (with cpu-clock all periods are equal, so
shares are sample shares). Kernel symbols come from the kallsyms in the recording; user
symbols from the mapped files' ELF symbol tables (or their /usr/lib/debug/.build-id files)
as they are now on this machine, or where a file is gone or its build id differs from the
recorded one, from perf's build-id cache (~/.debug); C++ and Rust names demangled as perf
shows them (no parameters, no hash). Code with no symbol (a stripped file, or a file gone)
is named by file and address, `app+0x12ba` where perf report says `0x12ba` (the address
objdump and addr2line take; the file offset when the file cannot be read); a build id that
differs with no copy in the cache gives `[build-id mismatch]`, never a wrong name.

--callers SYMBOL counts, over the samples with SYMBOL on their stack, the function that
called it (innermost occurrence); --callees SYMBOL the function it was calling, `[self]`
when it was running itself. User call chains are unwound through the mapped files' DWARF
CFI from the stack copy each sample carries (`kstate record --stack-bytes`, as with perf
--call-graph dwarf), so code without frame pointers keeps its callers; code without CFI is
walked through frame pointers, and without a stack copy (--stack-bytes 0) the kernel's
frame-pointer chain is used (code built without them then loses caller frames, as with
perf record -g). The header counts the chains unwound by CFI, by frame pointers, and cut
short (stack copy too small, file gone, corrupt CFI: cut, never a guessed caller).

--compare-events A,B puts each symbol's share of event A next to its share of event B (a
recording with both: `kstate record --sample A --sample B`) and flags (*) the symbols whose
A share is at least --ratio times their B share and at least --min-share %: with
cache-misses,cache-references the cache polluters (a function with 63 % of the misses in
7 % of the accesses), with page-faults,cpu-clock the functions that fault far more than
they run. Rows: the flagged first, then by the largest share of either event (--top N). `kstate cachesim -- CMD` gives the same table from a simulated cache where the
machine has no PMU.

--details SYMBOL gives the samples per instruction of SYMBOL (where samples landed on it
as the running function), with the instruction as objdump prints it (AT&T syntax):
addresses are the ELF file's symbol addresses for user code (compare with `objdump -d`),
the running kernel's for kernel code. The function is decoded from its start; user code
is read from the mapped file, kernel code from /proc/kcore when the kernel running here
is the recorded one (same symbol addresses). Otherwise, and on non-x86 builds, the counts
are per sampled address and the output says why there is no text.

Times: --window/--not-window take FROM:TO from the first event of the trace (as the
analyzers do), or @ABSOLUTE trace-clock times.

Examples:
  kstate record --sample -o p.dat -- ./myprog
  kstate profile p.dat
  kstate profile --callers memcpy --window 1.5:2 p.dat
  kstate record --sample page-faults:1 --sample cpu-clock -o m.dat -- ./myprog
  kstate profile --compare-events page-faults,cpu-clock m.dat
  kstate profile --details __memmove_avx_unaligned_erms p.dat";

#[derive(clap::Args)]
#[command(after_help = AFTER_HELP)]
#[command(mut_arg("window", |a| a.help("Only samples in FROM:TO")))]
#[command(mut_arg("not_window", |a| a.help("Only samples outside FROM:TO")))]
#[command(mut_arg("cpu", |a| a.help("Only samples taken on these CPUs (comma-separated)")))]
pub struct Args {
    /// A recording made with `kstate record --sample`
    file: PathBuf,
    /// Who calls SYMBOL, with counts
    #[arg(long, value_name = "SYMBOL")]
    callers: Option<String>,
    /// What SYMBOL calls, with counts
    #[arg(long, value_name = "SYMBOL")]
    callees: Option<String>,
    /// Samples per instruction of SYMBOL, with the disassembled instruction
    #[arg(long, value_name = "SYMBOL", conflicts_with_all = ["callers", "callees", "flame"])]
    details: Option<String>,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Write a flame graph (SVG) of the selected samples' stacks to -o FILE
    #[arg(long, requires = "output")]
    flame: bool,
    /// Where --flame writes
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Only the N largest symbols (0: all)
    #[arg(long, value_name = "N", default_value_t = 50)]
    top: usize,
    #[command(flatten)]
    filter: kstate_args::FilterArgs,
    /// The sampled event to report, when the recording has several [default: its first]
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
    /// Each symbol's share of event A next to its share of event B, flagging symbols with
    /// far more than their share of A (e.g. cache-misses,cache-references)
    #[arg(long, value_name = "A,B", value_delimiter = ',', num_args = 1,
          conflicts_with_all = ["callers", "callees", "flame", "event"])]
    compare_events: Vec<String>,
    /// --compare-events flags a symbol whose A share is at least RATIO times its B share
    #[arg(long, value_name = "RATIO", default_value_t = Thresholds::default().ratio)]
    ratio: f64,
    /// ... and at least PCT % of A (fewer are noise)
    #[arg(long, value_name = "PCT", default_value_t = Thresholds::default().min_share)]
    min_share: f64,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let trace = super::open(&args.file)?;
    let opts = profile::Options {
        filters: args.filter.filters(),
        callers: args.callers.clone(),
        callees: args.callees.clone(),
        event: args.event.clone(),
        folded: args.flame,
        details: args.details.clone(),
    };
    if !args.compare_events.is_empty() {
        return compare_events(&args, &trace, opts);
    }
    let p = profile::profile(&trace, &opts)?;
    if let (true, Some(out)) = (args.flame, &args.output) {
        let title = format!(
            "{}: {} samples of {}",
            args.file.display(),
            p.samples,
            render::rate(&p)
        );
        kstate_format::output::write(out, kstate_render::flame::svg(&p.folded, &title))
            .map_err(|e| Error::output(out, e))?;
        eprintln!(
            "kstate profile: flame graph of {} samples in {}",
            p.samples,
            out.display()
        );
        return Ok(damage_status(&[&trace]));
    }
    for v in [&p.callers, &p.callees].into_iter().flatten() {
        if v.samples == 0 && p.samples > 0 {
            eprintln!(
                "kstate profile: no selected sample has {} on its stack{}",
                v.symbol,
                similar(&p, &v.symbol)
            );
        }
    }
    if let (Some(name), true) = (&args.details, p.details.is_empty() && p.samples > 0) {
        eprintln!(
            "kstate profile: no selected sample was taken in {name}{}",
            similar(&p, name)
        );
    }
    print_warnings(&[&trace], &p.warnings);
    if args.details.is_some() {
        let ann: Vec<Annotation> = p
            .details
            .iter()
            .map(|h| annotate::annotate(&trace, h))
            .collect();
        if args.json {
            let mut j = render::json(&p, &opts.filters);
            j["details"] = ann.iter().map(|a| render::details_json(&p, a)).collect();
            println!("{j}");
        } else {
            print!("{}", render::text(&p, &opts.filters, args.top));
            for a in &ann {
                print!("{}", render::details_text(&p, a));
            }
        }
        return Ok(damage_status(&[&trace]));
    }
    if args.json {
        println!("{}", render::json(&p, &opts.filters));
    } else {
        print!("{}", render::text(&p, &opts.filters, args.top));
    }
    Ok(damage_status(&[&trace]))
}

/// The warnings the profiles gave, each once, but for a file's damage: that is reported
/// after the output, as the error it is ([`damage_status`]).
fn print_warnings<'a>(traces: &[&Trace], warnings: impl IntoIterator<Item = &'a String>) {
    let damage: Vec<&String> = traces
        .iter()
        .flat_map(|t| t.damage())
        .map(|e| &e.msg)
        .collect();
    let mut said: Vec<&String> = Vec::new();
    for w in warnings {
        if !damage.contains(&w) && !said.contains(&w) {
            eprintln!("kstate profile: warning: {w}");
            said.push(w);
        }
    }
}

/// After the output, which covers what the files held before any damage: the damage as
/// an error naming the file and offset, and exit status 2, as `analyze` does. (A profile
/// of a cut perf.data exited 0 with a warning.)
fn damage_status(traces: &[&Trace]) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for e in traces.iter().flat_map(|t| t.damage()) {
        eprintln!("kstate: {e}");
        status = ExitCode::from(crate::EXIT_BAD_INPUT);
    }
    status
}

fn compare_events(
    args: &Args,
    trace: &kstate_format::Trace,
    opts: profile::Options,
) -> Result<ExitCode, Error> {
    let t = Thresholds::checked(args.ratio, args.min_share)?;
    let [a, b] = args.compare_events.as_slice() else {
        return Err(Error::Usage(format!(
            "--compare-events takes two events, A,B (e.g. cache-misses,cache-references); got {}",
            args.compare_events.join(",")
        )));
    };
    let of = |e: &str| {
        profile::profile(
            trace,
            &profile::Options {
                event: Some(e.to_string()),
                ..opts.clone()
            },
        )
    };
    let (pa, pb) = (of(a)?, of(b)?);
    print_warnings(&[trace], pa.warnings.iter().chain(&pb.warnings));
    let c = compare::compare(&pb.counts(), &[pa.counts()], t);
    let file = args.file.display().to_string();
    let (header, extra) = render::comparison_header(&file, &pa, &pb, &opts.filters);
    print::comparison(&c, &header, "Image", extra, args.json, args.top);
    Ok(damage_status(&[trace]))
}

/// ` (similar: a, b)` for names of the profile containing `name`, or nothing.
fn similar(p: &Profile, name: &str) -> String {
    let like: Vec<&str> = p
        .rows
        .iter()
        .map(|r| r.sym.name.as_str())
        .filter(|n| n.contains(name))
        .take(5)
        .collect();
    if like.is_empty() {
        String::new()
    } else {
        format!(" (similar: {})", like.join(", "))
    }
}

// ---------------------------------------------------------------------------------------
// kstate diff

#[derive(clap::Args)]
#[command(after_help = "\
Symbols are matched by name and image (the file's base name, so a rebuilt binary at another
path still matches). Rows are sorted by the change in share, largest first; --json gives
every row. Filters apply to both recordings, windows from each one's own start.")]
pub struct DiffArgs {
    /// The recording before (made with --sample)
    before: PathBuf,
    /// The recording after
    after: PathBuf,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// Only the N largest changes (0: all)
    #[arg(long, value_name = "N", default_value_t = 30)]
    top: usize,
    /// Only samples in FROM:TO
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    window: Option<WindowSpec>,
    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pid: Vec<i32>,
    /// Only tasks with this comm (comma-separated)
    #[arg(long, value_delimiter = ',')]
    comm: Vec<String>,
    /// Only samples taken on these CPUs (comma-separated)
    #[arg(long, value_delimiter = ',')]
    cpu: Vec<u32>,
}

pub fn diff(args: DiffArgs) -> Result<ExitCode, Error> {
    let opts = profile::Options {
        filters: Filters {
            window: args.window,
            pids: args.pid.clone(),
            comms: args.comm.clone(),
            cpus: args.cpu.clone(),
            ..Filters::default()
        },
        ..profile::Options::default()
    };
    let (before_trace, after_trace) = (super::open(&args.before)?, super::open(&args.after)?);
    let a = profile::profile(&before_trace, &opts)?;
    let b = profile::profile(&after_trace, &opts)?;
    let traces = [&before_trace, &after_trace];
    print_warnings(&traces, a.warnings.iter().chain(&b.warnings));
    let rows = profile::diff(&a, &b);
    let (before, after) = (
        args.before.display().to_string(),
        args.after.display().to_string(),
    );
    if args.json {
        println!("{}", render::diff_json(&before, &a, &after, &b, &rows));
    } else {
        print!(
            "{}",
            render::diff_text(&before, &a, &after, &b, &rows, args.top)
        );
    }
    Ok(damage_status(&traces))
}
