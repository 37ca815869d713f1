//! `kstate recover`: a trace.dat from what a killed recorder left. A recorder's scratch
//! directory is a capture from its first second (formats, kallsyms, command names, and
//! the pages it moved, at most a moment behind the kernel), so SIGKILL, the OOM killer or
//! a lost machine cost only the events still in the kernel's buffer.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Error;
use kstate_format::sections::ids;
use kstate_format::writer::{write_from_trace, WriterConfig};
use kstate_record::leftovers;

#[derive(clap::Args)]
#[command(after_help = "\
A recorder that is killed (SIGKILL, the OOM killer, a power cut) leaves beside its output a
directory OUTPUT.kstate-PID.XXXXXX.scratch holding every page it had moved (kstate info,
dump and analyze read it as it is) and an unfinished OUTPUT.XXXXXX.tmp. `kstate record`
says so when it finds them. This command writes the pages into OUTPUT (a trace.dat that
`kstate info` shows as recovered) and removes the leftovers; where several recorders left
some, the latest is recovered and the others are named.")]
pub struct Args {
    /// The output the killed recording was writing
    #[arg(default_value = "kstate.dat")]
    output: PathBuf,
    /// Write the recovered trace here instead of OUTPUT
    #[arg(short = 'o', long = "to", value_name = "FILE")]
    to: Option<PathBuf>,
}

fn bad(msg: String) -> Error {
    Error::Usage(msg)
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let mut found = leftovers::find(&args.output);
    let Some(l) = found.pop() else {
        return Err(bad(format!(
            "{}: nothing to recover: no OUTPUT.kstate-PID.*.scratch directory of a killed \
             recorder beside it",
            args.output.display()
        )));
    };
    let to = args.to.unwrap_or_else(|| args.output.clone());
    if std::fs::symlink_metadata(&to).is_ok() {
        return Err(bad(format!(
            "{} exists (a later recording?): recover into another file with --to",
            to.display()
        )));
    }
    let torn = whole_pages(&l.dir)?;
    let mut trace = super::open(&l.dir)?;
    let note = format!(
        "by `kstate recover` from what recorder {} left in {} when it was killed; missing: \
         the events the kernel still held at that moment (at most the last second){}, \
         kstate's summary sections (memory snapshots, CPU samples, ring-buffer statistics)",
        l.pid,
        l.dir.display(),
        if torn > 0 {
            format!(", and {torn} bytes of a page it was writing")
        } else {
            String::new()
        }
    );
    trace
        .extra_options
        .push((ids::RECOVERED, note.into_bytes()));
    let cfg = WriterConfig::new(trace.layout.page_size);
    write_from_trace(&trace, &to, cfg, None)?;
    l.remove();
    // The dead recorder's tracefs instance (its tracing stopped when it died).
    if let Ok(tfs) = kstate_record::tracefs::Tracefs::open() {
        for name in kstate_record::instance::remove_stale(&tfs) {
            eprintln!(
                "kstate: removed tracefs instance {name} left by a recorder that no longer runs"
            );
        }
    }
    eprintln!(
        "kstate: recovered what recorder {} had recorded into {}",
        l.pid,
        to.display()
    );
    for other in &found {
        eprintln!(
            "kstate: recorder {} left a recording too, in {}: run kstate recover again for it",
            other.pid,
            other.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Cuts each CPU's page file to whole pages (a write the kill interrupted leaves part of
/// one); returns the bytes cut.
fn whole_pages(dir: &std::path::Path) -> Result<u64, Error> {
    let header = dir.join("header_page");
    let text = std::fs::read(&header).map_err(|e| Error::system(&header, e))?;
    let endian = if cfg!(target_endian = "big") {
        kstate_format::Endian::Big
    } else {
        kstate_format::Endian::Little
    };
    let layout =
        kstate_format::PageLayout::parse(&text, endian, None).map_err(|e| e.in_file(&header))?;
    let page = layout.page_size as u64;
    let traces = dir.join("traces");
    let mut cut = 0;
    let rd = std::fs::read_dir(&traces).map_err(|e| Error::system(&traces, e))?;
    for ent in rd.flatten() {
        let p = ent.path();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| Error::system(&p, e))?;
        let len = f.metadata().map_err(|e| Error::system(&p, e))?.len();
        if len % page != 0 {
            f.set_len(len - len % page)
                .map_err(|e| Error::system(&p, e))?;
            cut += len % page;
        }
    }
    Ok(cut)
}
