//! `kstate split --per-cpu`: one trace.dat per CPU (LKST's lkstlogdiv). Pages are copied
//! unchanged, so timestamps and lost-event marks stay as recorded; each file carries the
//! whole metadata and kstate's sections, and reads in kstate and trace-cmd alike.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::error::Error;
use kstate_format::writer::{write_from_trace, Compression, WriterConfig};

#[derive(clap::Args)]
pub struct Args {
    /// trace.dat or capture directory
    file: PathBuf,
    /// One output file per CPU (the only split there is so far)
    #[arg(long, required = true)]
    per_cpu: bool,
    /// Output directory (created if missing); files are named cpuN.dat
    #[arg(short, long)]
    output: PathBuf,
    /// Compress the outputs with zstd
    #[arg(long)]
    zstd: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let _ = args.per_cpu;
    let trace = super::open(&args.file)?;
    refuse_symlink(&args.output)?;
    std::fs::create_dir_all(&args.output).map_err(|e| Error::output(&args.output, e))?;
    if trace.cpu_data.is_empty() {
        return Err(Error::Input(
            kstate_format::Error::unsupported(None, "the trace holds no CPU data")
                .in_file(&args.file),
        ));
    }
    for cd in &trace.cpu_data {
        let out = args.output.join(format!("cpu{}.dat", cd.cpu));
        let mut cfg = WriterConfig::new(trace.layout.page_size);
        if args.zstd {
            cfg.compression = Compression::Zstd;
        }
        cfg.version = Some(
            trace
                .tool_version
                .clone()
                .unwrap_or_else(|| format!("kstate {}", env!("CARGO_PKG_VERSION"))),
        );
        write_from_trace(&trace, &out, cfg, Some(&[cd.cpu]))?;
        // A closed pipe (`| head`) is not an error worth stopping the split for.
        let _ = writeln!(std::io::stdout(), "{}", out.display());
    }
    // The pages are copied as they are; what the input lacks, its copies lack too.
    let damage = kstate_format::damage::scan(&trace);
    Ok(super::damage::finish(&damage))
}

/// Refuses an output directory that is itself a symbolic link (`split -o`, `run -o`), as
/// O_NOFOLLOW refuses a file: kstate runs as root, and a link planted at the name in a
/// directory others can write (a shared /tmp) would send its files wherever the link
/// points. Links among the parents (/var/tmp often is one) are the owner's and stay
/// allowed.
pub(crate) fn refuse_symlink(dir: &Path) -> Result<(), Error> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            let to =
                std::fs::read_link(dir).map_or_else(|_| "?".into(), |t| t.display().to_string());
            Err(Error::Usage(format!(
                "{}: the output directory is a symbolic link (to {to}); kstate does not write \
                 through one: name a real directory",
                dir.display()
            )))
        }
        _ => Ok(()),
    }
}
