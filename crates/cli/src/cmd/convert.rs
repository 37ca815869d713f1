//! `kstate convert`: a raw capture directory, or a trace.dat rewritten, into a trace.dat
//! v7 that trace-cmd and KernelShark open (`--to dat`, the default), or any trace kstate
//! reads into a format other tools open: Chrome trace-event JSON, Perfetto's protobuf
//! trace, Parquet tables.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_export::{chrome, perfetto};
use kstate_format::writer::{write_from_trace, Compression, WriterConfig};
use kstate_format::Container;

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// trace.dat v7 (trace-cmd, KernelShark) from a raw capture directory, or a trace.dat
    /// rewritten (e.g. one an older kstate wrote that trace-cmd cannot open, see `info`)
    Dat,
    /// Chrome trace-event JSON (Perfetto UI, chrome://tracing)
    ChromeJson,
    /// Perfetto protobuf trace: native CPU scheduling tracks and analyzer slices
    Perfetto,
    /// A directory of Parquet tables (DuckDB, pandas, Spark); the `parquet` feature, on by default
    Parquet,
}

#[derive(clap::Args)]
pub struct Args {
    /// Raw tracefs capture directory or trace.dat for --to dat; for the other targets any
    /// trace kstate reads (trace.dat v6/v7, perf.data, raw capture directory)
    input: PathBuf,
    /// Output file (a directory for --to parquet)
    #[arg(short, long)]
    output: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value = "dat")]
    to: Target,
    /// Compress CPU data and metadata sections with zstd (--to dat)
    #[arg(long)]
    zstd: bool,
    /// Analyzers whose --log rows are added (comma-separated, or "none"); default: every
    /// analyzer whose events the trace holds
    #[arg(long, value_delimiter = ',')]
    analyzers: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let source = super::source(&args.input)?;
    let trace = source.trace();
    match args.to {
        Target::Dat => {}
        Target::ChromeJson => {
            let s = chrome::write(&source, &args.output, &args.analyzers)?;
            let a: Vec<String> = s
                .analyzers
                .iter()
                .map(|(n, rows, tracks)| format!("{n}: {rows} rows on {tracks} tracks"))
                .collect();
            let markers = if s.markers > 0 {
                format!(", {} trace markers", s.markers)
            } else {
                String::new()
            };
            eprintln!(
                "kstate: {}: {} task runs on {} CPUs{markers}{}{}",
                args.output.display(),
                s.runs,
                s.cpus,
                if a.is_empty() { "" } else { "; " },
                a.join(", ")
            );
            return Ok(super::damage::finish(&s.damage));
        }
        Target::Perfetto => {
            let s = perfetto::write(&source, &args.output, &args.analyzers)?;
            eprintln!("kstate: {}: {s}", args.output.display());
            return Ok(super::damage::finish(&s.damage));
        }
        #[cfg(feature = "parquet")]
        Target::Parquet => {
            let s = kstate_export::parquet::write(&source, &args.output, &args.analyzers)?;
            let t: Vec<String> = s.tables.iter().map(|(n, r)| format!("{n} {r}")).collect();
            eprintln!(
                "kstate: {}: {} events; tables (rows): {}",
                s.dir.display(),
                s.events,
                t.join(", ")
            );
            if !s.skipped.is_empty() {
                eprintln!(
                    "kstate: not applicable (events missing): {}",
                    s.skipped.join(", ")
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        #[cfg(not(feature = "parquet"))]
        Target::Parquet => {
            return Err(Error::Usage(
                "this kstate was built without Parquet output: build it with \
                 `cargo build --release --features parquet`"
                    .into(),
            ));
        }
    }
    if !matches!(
        trace.container,
        Container::RawDir | Container::TraceDat { .. }
    ) {
        return Err(Error::Input(
            kstate_format::Error::unsupported(
                None,
                "convert --to dat reads raw capture directories and trace.dat files only (use \
                 --to chrome-json, perfetto or parquet for other traces)",
            )
            .in_file(&args.input),
        ));
    }
    let mut cfg = WriterConfig::new(trace.layout.page_size);
    if args.zstd {
        cfg.compression = Compression::Zstd;
    }
    cfg.version = Some(format!("kstate {}", env!("CARGO_PKG_VERSION")));
    // The events, metadata, clock options and kstate's sections are kept (a trace.dat's
    // instance buffers are not: kstate reads the top-level buffer only).
    write_from_trace(trace, &args.output, cfg, None)?;
    // The pages are copied as they are; what the input lacks, its copy lacks too.
    let damage = kstate_format::damage::scan(trace);
    Ok(super::damage::finish(&damage))
}
