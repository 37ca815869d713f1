//! Pages kstate builds for containers that hold events rather than pages, where they cannot
//! be built as a reader asks (a perf.data out of time order, kstate's Parquet directory):
//! each CPU's pages go to an unnamed temporary file (`O_TMPFILE` in the temporary
//! directory), which the kernel removes with its last descriptor, so a reader that is
//! killed leaves nothing behind.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::layout::PageLayout;
use crate::page_builder::PageBuilder;
use crate::pages::{PageSource, PlainPages};
use crate::trace::BuildPages;

/// One CPU's synthesized pages going to an unnamed temporary file.
pub struct CpuStream {
    out: BufWriter<File>,
    pub builder: PageBuilder,
    bytes: u64,
    failed: Option<std::io::Error>,
}

/// Where the unnamed files live, for messages.
fn spool_dir() -> PathBuf {
    std::env::temp_dir()
}

impl CpuStream {
    pub fn create(layout: PageLayout) -> Result<CpuStream> {
        let f = crate::output::unnamed(&spool_dir()).map_err(|e| Error::io(&spool_dir(), e))?;
        Ok(CpuStream {
            out: BufWriter::with_capacity(1 << 18, f),
            builder: PageBuilder::new(layout),
            bytes: 0,
            failed: None,
        })
    }

    pub fn push(&mut self, ts: u64, payload: &[u8]) -> Result<()> {
        let (out, bytes, failed) = (&mut self.out, &mut self.bytes, &mut self.failed);
        let mut done = |p: &[u8]| write_page(out, bytes, failed, p);
        // A payload larger than a page cannot be a tracepoint record; it is skipped.
        self.builder.push(ts, payload, &mut done);
        match self.failed.take() {
            Some(e) => Err(Error::io(&spool_dir(), e)),
            None => Ok(()),
        }
    }

    /// The pages, complete: the builder's last page written and the file flushed.
    pub fn finish(mut self) -> Result<Spooled> {
        let (out, bytes, failed) = (&mut self.out, &mut self.bytes, &mut self.failed);
        self.builder
            .finish(&mut |p: &[u8]| write_page(out, bytes, failed, p));
        if let Some(e) = self.failed.take() {
            return Err(Error::io(&spool_dir(), e));
        }
        let size = self.bytes;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io(&spool_dir(), e.into_error()))?;
        Ok(Spooled { file, size })
    }
}

/// Writes one finished page unless an earlier write failed (the failure is kept for the
/// caller: the page builder's callback cannot return it).
fn write_page(
    out: &mut BufWriter<File>,
    bytes: &mut u64,
    failed: &mut Option<std::io::Error>,
    p: &[u8],
) {
    if failed.is_none() {
        match out.write_all(p) {
            Ok(()) => *bytes += p.len() as u64,
            Err(e) => *failed = Some(e),
        }
    }
}

/// One CPU's finished pages.
#[derive(Debug)]
pub struct Spooled {
    file: File,
    size: u64,
}

impl Spooled {
    /// Bytes of pages.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// A reader of the pages; `name` stands for them in messages (they have no path).
    pub fn pages(&self, name: &Path, page_size: usize) -> Result<PlainPages> {
        let file = self.file.try_clone().map_err(|e| Error::io(name, e))?;
        PlainPages::from_file(file, name, 0, self.size, page_size)
    }
}

/// Every CPU's spooled pages, as a trace's page source.
#[derive(Debug)]
pub struct SpooledPages {
    name: PathBuf,
    page_size: usize,
    cpus: BTreeMap<u32, Spooled>,
}

impl SpooledPages {
    /// `name`: the file the pages were built from, for messages.
    pub fn new(name: &Path, page_size: usize, cpus: BTreeMap<u32, Spooled>) -> SpooledPages {
        SpooledPages {
            name: name.to_path_buf(),
            page_size,
            cpus,
        }
    }
}

impl BuildPages for SpooledPages {
    fn pages(&self, cpu: u32, _wanted: Option<&[bool]>) -> Result<Box<dyn PageSource>> {
        match self.cpus.get(&cpu) {
            Some(s) => Ok(Box::new(s.pages(&self.name, self.page_size)?)),
            None => Err(Error::new(
                ErrorKind::Unsupported,
                None,
                format!("no pages were built for CPU {cpu}"),
            )
            .in_file(&self.name)),
        }
    }
    fn first_ts(&self) -> Option<u64> {
        None
    }
}
