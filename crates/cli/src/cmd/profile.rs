//! `kstate profile FILE`: where the CPU samples of `kstate record --sample` fell, per
//! symbol (like `perf report --stdio --no-children`), and who calls a symbol or what it
//! calls; cut by the analyzers' filters.

use std::path::PathBuf;
use std::process::ExitCode;

use kstate_analyze::filter::{parse_window, Filters, WindowSpec};
use kstate_analyze::profile::annotate::{self, Annotation};
use kstate_analyze::profile::compare::{self, Thresholds};
use kstate_analyze::profile::{self, CallView, Profile};
use kstate_format::Error;

use crate::{print, timefmt};

const AFTER_HELP: &str = "\
--flame -o F.svg writes a flame graph of the selected samples' stacks instead of the
report (kernel frames end in _[k]).

Shares are by sample period, as perf weighs them (with cpu-clock all periods are equal, so
shares are sample shares). Kernel symbols come from the kallsyms in the recording; user
symbols from the mapped files' ELF symbol tables (or their /usr/lib/debug/.build-id files)
as they are now on this machine: a file whose build id differs from the recorded one gives
`[build-id mismatch]`, not wrong names.

--callers SYMBOL counts, over the samples with SYMBOL on their stack, the function that
called it (innermost occurrence); --callees SYMBOL the function it was calling, `[self]`
when it was running itself. User call chains follow frame pointers: code built without
them loses its caller frames (as with perf record -g).

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
    /// Only samples in FROM:TO
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    window: Option<WindowSpec>,
    /// Only samples outside FROM:TO
    #[arg(long, value_parser = parse_window, value_name = "FROM:TO")]
    not_window: Option<WindowSpec>,
    /// Only these processes (comma-separated)
    #[arg(long, value_delimiter = ',')]
    pid: Vec<i32>,
    /// Only these threads (comma-separated)
    #[arg(long, value_delimiter = ',')]
    tid: Vec<i32>,
    /// Only tasks with this comm (comma-separated)
    #[arg(long, value_delimiter = ',')]
    comm: Vec<String>,
    /// Only samples taken on these CPUs (comma-separated)
    #[arg(long, value_delimiter = ',')]
    cpu: Vec<u32>,
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
        filters: Filters {
            window: args.window,
            not_window: args.not_window,
            pids: args.pid.clone(),
            tids: args.tid.clone(),
            comms: args.comm.clone(),
            cpus: args.cpu.clone(),
            ..Filters::default()
        },
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
            rate(&p)
        );
        kstate_format::output::write(out, profile::flame::svg(&p.folded, &title))
            .map_err(|e| Error::io(out, e))?;
        eprintln!(
            "kstate profile: flame graph of {} samples in {}",
            p.samples,
            out.display()
        );
        return Ok(ExitCode::SUCCESS);
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
    for w in &p.warnings {
        eprintln!("kstate profile: warning: {w}");
    }
    if args.details.is_some() {
        let ann: Vec<Annotation> = p
            .details
            .iter()
            .map(|h| annotate::annotate(&trace, h))
            .collect();
        if args.json {
            let mut j = json_value(&p, &opts.filters);
            j["details"] = ann.iter().map(|a| details_json(&p, a)).collect();
            println!("{j}");
        } else {
            print_text(&p, &opts.filters, args.top);
            for a in &ann {
                print_details(&p, a);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        println!("{}", json(&p, &opts.filters));
    } else {
        print_text(&p, &opts.filters, args.top);
    }
    Ok(ExitCode::SUCCESS)
}

fn compare_events(
    args: &Args,
    trace: &kstate_format::Trace,
    opts: profile::Options,
) -> Result<ExitCode, Error> {
    let t = Thresholds::checked(args.ratio, args.min_share)?;
    let [a, b] = args.compare_events.as_slice() else {
        return Err(Error::new(
            kstate_format::ErrorKind::Unsupported,
            None,
            format!(
                "--compare-events takes two events, A,B (e.g. cache-misses,cache-references); got {}",
                args.compare_events.join(",")
            ),
        ));
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
    for w in pa.warnings.iter().chain(&pb.warnings) {
        eprintln!("kstate profile: warning: {w}");
    }
    let c = compare::compare(&pb.counts(), &[pa.counts()], t);
    let mut header = vec![format!(
        "{}: sampled events, clock {}",
        args.file.display(),
        pa.clock
    )];
    for p in [&pa, &pb] {
        header.push(format!(
            "{}: {} samples selected (of {} in the file), {} lost",
            rate(p),
            p.samples,
            p.total_samples,
            p.lost
        ));
    }
    for (k, v) in opts.filters.describe() {
        header.push(format!("{k}: {v}"));
    }
    let events: Vec<serde_json::Value> = [&pa, &pb]
        .iter()
        .map(|p| {
            serde_json::json!({
                "event": p.event, "freq_hz": p.freq, "period": p.period, "samples": p.samples,
                "samples_in_file": p.total_samples, "lost": p.lost,
            })
        })
        .collect();
    let filters: serde_json::Map<String, serde_json::Value> = opts
        .filters
        .describe()
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    let extra = serde_json::json!({
        "file": args.file.display().to_string(),
        "simulated": false,
        "events": events,
        "filters": filters,
    });
    print::comparison(&c, &header, "Image", extra, args.json, args.top);
    Ok(ExitCode::SUCCESS)
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

fn pct(_: &Profile, n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

fn rate(p: &Profile) -> String {
    match (p.freq, p.period) {
        (Some(hz), _) => format!("{} at {hz} Hz", p.event),
        (_, Some(per)) => format!("{} every {per} events", p.event),
        _ => p.event.clone(),
    }
}

fn print_text(p: &Profile, f: &Filters, top: usize) {
    println!("# {}, clock {}", rate(p), p.clock);
    println!(
        "# {} samples selected (of {} in the file), {} lost; kernel {:.1}%, user {:.1}%",
        p.samples,
        p.total_samples,
        p.lost,
        pct(p, p.kernel_samples, p.samples),
        pct(p, p.user_samples, p.samples)
    );
    println!("# user chains: {}", p.chains.describe());
    if let (Some(a), Some(b)) = (p.first_ts, p.last_ts) {
        println!(
            "# time: {} .. {} (+{} .. +{} from trace start)",
            timefmt::fmt_secs(a),
            timefmt::fmt_secs(b),
            timefmt::fmt_secs(a.saturating_sub(p.trace_start)),
            timefmt::fmt_secs(b.saturating_sub(p.trace_start))
        );
    }
    for (k, v) in f.describe() {
        println!("# {k}: {v}");
    }
    if !p.details.is_empty() {
        return;
    }
    if let Some(v) = &p.callers {
        print_view(p, v, "callers", "Caller");
        return;
    }
    if let Some(v) = &p.callees {
        print_view(p, v, "callees", "Callee");
        return;
    }
    println!("#");
    println!(
        "# {:>8} {:>11} {:>8}  {:<8} {:<24} Symbol",
        "Overhead", "Cumulative", "Samples", "Kind", "Image"
    );
    let mut cum = 0.0;
    let n = if top == 0 { p.rows.len() } else { top };
    for r in p.rows.iter().take(n) {
        let share = p.share(r.period);
        cum += share;
        let mark = if r.sym.kind.is_kernel() { "[k]" } else { "[.]" };
        println!(
            "  {:>7.2}% {:>10.2}% {:>8}  {:<8} {:<24} {mark} {}",
            share,
            cum,
            r.samples,
            r.sym.kind.name(),
            r.sym.image,
            r.sym.name
        );
    }
    if p.rows.len() > n {
        println!("# ({} more symbols; --top 0 shows all)", p.rows.len() - n);
    }
}

fn print_view(p: &Profile, v: &CallView, what: &str, col: &str) {
    println!(
        "# {what} of {}: {} samples with it on the stack ({:.2}% of the selected), {} with it running",
        v.symbol,
        v.samples,
        pct(p, v.samples, p.samples),
        v.self_samples
    );
    println!("#");
    println!(
        "# {:>7} {:>7}  {:<8} {:<24} {col}",
        "Samples", "%", "Kind", "Image"
    );
    for (s, n) in &v.rows {
        println!(
            "  {:>7} {:>6.2}%  {:<8} {:<24} {}",
            n,
            pct(p, *n, v.samples),
            if s.image.is_empty() {
                "-"
            } else {
                s.kind.name()
            },
            if s.image.is_empty() { "-" } else { &s.image },
            s.name
        );
    }
}

fn print_details(p: &Profile, a: &Annotation) {
    println!("#");
    println!(
        "# {} in {} ({}{}): {} samples, {:.2}% of the selected",
        a.sym.name,
        a.sym.image,
        a.sym.kind.name(),
        a.sym
            .path
            .as_deref()
            .map(|x| format!(" {x}"))
            .unwrap_or_default(),
        a.samples,
        pct(p, a.samples, p.samples)
    );
    if let (Some(start), Some(size)) = (a.start, a.size) {
        let src = a.source.as_deref().map(|s| format!(", code read from {s}"));
        println!("# {start:#x}, {size} bytes{}", src.unwrap_or_default());
    }
    if let Some(why) = &a.no_text {
        println!("# no instruction text: {why}");
    }
    if a.unplaced > 0 {
        println!(
            "# {} samples at addresses outside the file's segments",
            a.unplaced
        );
    }
    println!("#");
    println!(
        "# {:>18} {:>8} {:>8} {:>7}  Instruction",
        "Address", "Offset", "Samples", "%"
    );
    for l in &a.lines {
        println!(
            "  {:>18} {:>8} {:>8} {:>6.2}%  {}",
            format!("{:#x}", l.addr),
            l.offset.map_or("?".into(), |o| format!("+{o:#x}")),
            l.samples,
            pct(p, l.samples, a.samples),
            l.text.as_deref().unwrap_or("-")
        );
    }
}

fn details_json(p: &Profile, a: &Annotation) -> serde_json::Value {
    serde_json::json!({
        "symbol": a.sym.name,
        "image": a.sym.image,
        "path": a.sym.path,
        "kind": a.sym.kind.name(),
        "samples": a.samples,
        "percent": pct(p, a.samples, p.samples),
        "unplaced_samples": a.unplaced,
        "start": a.start,
        "size": a.size,
        "code_source": a.source,
        "no_text": a.no_text,
        "instructions": a.lines.iter().map(|l| serde_json::json!({
            "address": l.addr,
            "offset": l.offset,
            "samples": l.samples,
            "percent": pct(p, l.samples, a.samples),
            "bytes": l.bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "text": l.text,
        })).collect::<Vec<_>>(),
    })
}

fn view_json(p: &Profile, v: &CallView) -> serde_json::Value {
    serde_json::json!({
        "symbol": v.symbol,
        "samples": v.samples,
        "self_samples": v.self_samples,
        "rows": v.rows.iter().map(|(s, n)| serde_json::json!({
            "symbol": s.name,
            "image": s.image,
            "kind": s.kind.name(),
            "samples": n,
            "percent": pct(p, *n, v.samples),
        })).collect::<Vec<_>>(),
    })
}

fn json(p: &Profile, f: &Filters) -> String {
    json_value(p, f).to_string()
}

fn json_value(p: &Profile, f: &Filters) -> serde_json::Value {
    let mut cum = 0.0;
    let rows: Vec<serde_json::Value> = p
        .rows
        .iter()
        .map(|r| {
            let share = p.share(r.period);
            cum += share;
            serde_json::json!({
                "symbol": r.sym.name,
                "image": r.sym.image,
                "path": r.sym.path,
                "kind": r.sym.kind.name(),
                "samples": r.samples,
                "period": r.period,
                "percent": share,
                "cumulative_percent": cum,
            })
        })
        .collect();
    let filters: serde_json::Map<String, serde_json::Value> = f
        .describe()
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    serde_json::json!({
        "event": p.event,
        "freq_hz": p.freq,
        "period": p.period,
        "clock": p.clock,
        "samples_in_file": p.total_samples,
        "lost": p.lost,
        "samples": p.samples,
        "total_period": p.total_period,
        "kernel_samples": p.kernel_samples,
        "user_samples": p.user_samples,
        "trace_start": p.trace_start,
        "first_ts": p.first_ts,
        "last_ts": p.last_ts,
        "filters": filters,
        "symbols": rows,
        "callers": p.callers.as_ref().map(|v| view_json(p, v)),
        "callees": p.callees.as_ref().map(|v| view_json(p, v)),
        "warnings": p.warnings,
        "user_chains": {"cfi": p.chains.cfi, "frame_pointers": p.chains.fp, "cut": p.chains.cut},
    })
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
    let a = profile::profile(&super::open(&args.before)?, &opts)?;
    let b = profile::profile(&super::open(&args.after)?, &opts)?;
    let rows = profile::diff(&a, &b);
    if args.json {
        let j: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "symbol": r.name,
                    "image": r.image,
                    "kind": r.kind.name(),
                    "before_samples": r.before_samples,
                    "after_samples": r.after_samples,
                    "before_percent": r.before_percent,
                    "after_percent": r.after_percent,
                    "delta_percent": r.after_percent - r.before_percent,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "before": {"file": args.before.display().to_string(), "event": a.event,
                           "samples": a.samples, "lost": a.lost, "total_period": a.total_period},
                "after": {"file": args.after.display().to_string(), "event": b.event,
                          "samples": b.samples, "lost": b.lost, "total_period": b.total_period},
                "symbols": j,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "# before: {}: {} samples of {}, {} lost",
        args.before.display(),
        a.samples,
        rate(&a),
        a.lost
    );
    println!(
        "# after:  {}: {} samples of {}, {} lost ({:+.1}% samples)",
        args.after.display(),
        b.samples,
        rate(&b),
        b.lost,
        if a.samples > 0 {
            (b.samples as f64 - a.samples as f64) * 100.0 / a.samples as f64
        } else {
            0.0
        }
    );
    if a.event != b.event {
        println!("# warning: different events ({} vs {})", a.event, b.event);
    }
    println!("#");
    println!(
        "# {:>8} {:>8} {:>8} {:>9} {:>9}  {:<24} Symbol",
        "Before", "After", "Delta", "Samples", "Samples", "Image"
    );
    let n = if args.top == 0 { rows.len() } else { args.top };
    for r in rows.iter().take(n) {
        println!(
            "  {:>7.2}% {:>7.2}% {:>+7.2}% {:>9} {:>9}  {:<24} {}",
            r.before_percent,
            r.after_percent,
            r.after_percent - r.before_percent,
            r.before_samples,
            r.after_samples,
            r.image,
            r.name
        );
    }
    if rows.len() > n {
        println!("# ({} more symbols; --top 0 shows all)", rows.len() - n);
    }
    Ok(ExitCode::SUCCESS)
}
