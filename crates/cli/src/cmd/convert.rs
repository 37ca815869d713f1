//! `kstate convert`: a raw capture directory into a trace.dat v7 that trace-cmd and
//! KernelShark open.

use std::path::PathBuf;
use std::process::ExitCode;

use kstate_format::writer::{write_from_capture, Compression, WriterConfig};
use kstate_format::{Container, Error, ErrorKind};

#[derive(clap::Args)]
pub struct Args {
    /// Raw tracefs capture directory (header_page, events/*/*/format, per_cpu/cpuN/trace_pipe_raw)
    dir: PathBuf,
    /// Output trace.dat
    #[arg(short, long)]
    output: PathBuf,
    /// Compress CPU data and metadata sections with zstd
    #[arg(long)]
    zstd: bool,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let trace = super::open(&args.dir)?;
    if trace.container != Container::RawDir {
        return Err(Error::new(
            ErrorKind::Unsupported,
            None,
            "convert reads raw capture directories only",
        )
        .in_file(&args.dir));
    }
    let mut cfg = WriterConfig::new(trace.layout.page_size);
    if args.zstd {
        cfg.compression = Compression::Zstd;
    }
    cfg.version = Some(format!("kstate {}", env!("CARGO_PKG_VERSION")));
    write_from_capture(&trace, &args.output, cfg)?;
    Ok(ExitCode::SUCCESS)
}
