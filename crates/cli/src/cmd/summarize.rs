//! `kstate summarize FILE... -o DIR`: one small Parquet summary per recording (per analyzer
//! and key the statistics and the log-linear histogram, and the recording's facts), for
//! `kstate fleet`, DuckDB or Spark to merge (kstate_views::fleet; the file layout in
//! kstate_export::parquet::summary).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;

#[derive(clap::Args)]
pub struct Args {
    /// Recordings (trace.dat, perf.data, raw capture or Parquet directories)
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Directory the summaries go to (one FILE-ID.summary.parquet per recording; one that
    /// exists is left as it is)
    #[arg(short, long)]
    output: PathBuf,
    /// Analyzers to summarize (comma-separated); default: every one whose events the file has
    #[arg(long, value_delimiter = ',')]
    analyzers: Vec<String>,
    /// Keep one key per thread or process (microstate's comm-tid, runq's comm-pid), as
    /// `kstate analyze` shows them. By default they are merged per command (comm): thread
    /// ids differ from host to host, so a fleet merges commands, not threads, and a
    /// system-wide summary stays small
    #[arg(long)]
    per_thread: bool,
}

#[cfg(not(feature = "parquet"))]
pub fn run(_: Args) -> Result<ExitCode, Error> {
    Err(Error::Usage(
        "this kstate was built without Parquet output: build it with \
         `cargo build --release --features parquet`"
            .into(),
    ))
}

#[cfg(feature = "parquet")]
pub fn run(args: Args) -> Result<ExitCode, Error> {
    use kstate_analyze::Query;
    use kstate_views::fleet;
    let mut infos = Vec::new();
    for name in &args.analyzers {
        infos.push(Query::new(name).map_err(Error::from)?.analyzer);
    }
    let mut failed: Vec<(PathBuf, String)> = Vec::new();
    for file in &args.files {
        let done = super::source(file)
            .and_then(|src| fleet::summarize(&src, &infos, args.per_thread).map_err(Error::from))
            .and_then(|s| {
                kstate_export::parquet::write_summary(&s, &args.output)
                    .map(|w| (s, w))
                    .map_err(Error::from)
            });
        match done {
            Ok((s, (path, written))) => println!(
                "{}: {} {} ({} events, {} keys{})",
                file.display(),
                if written {
                    "summarized in"
                } else {
                    "already summarized in"
                },
                path.display(),
                s.meta.events,
                s.stats.len(),
                if s.skipped.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = s.skipped.iter().map(|x| x.0.as_str()).collect();
                    format!("; not applicable: {}", names.join(", "))
                }
            ),
            Err(e) => {
                let msg = super::with_path(file, &e);
                eprintln!("kstate: {msg}");
                failed.push((file.clone(), msg));
            }
        }
    }
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "kstate: {} of {} recordings not summarized:",
        failed.len(),
        args.files.len()
    );
    for (f, _) in &failed {
        eprintln!("  {}", f.display());
    }
    Ok(ExitCode::from(crate::EXIT_BAD_INPUT))
}
