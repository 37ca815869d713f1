//! trace-cmd's `trace.dat`, versions 6 and 7 (sections, optionally zstd/zlib-compressed).

use std::path::Path;

use crate::error::Result;
use crate::trace::{PageSource, Trace};

/// Where a CPU's compressed chunks are (v7).
#[derive(Debug, Clone)]
pub struct CompressedData {
    pub offset: u64,
    pub size: u64,
}

pub fn open(path: &Path) -> Result<Trace> {
    let _ = path;
    todo!("trace.dat reader")
}

/// Decompresses one CPU's chunks one at a time and hands out their pages.
pub struct CompressedPages {}

impl CompressedPages {
    pub fn open(path: &Path, data: &CompressedData, page_size: usize) -> Result<CompressedPages> {
        let _ = (path, data, page_size);
        todo!()
    }
}

impl PageSource for CompressedPages {
    fn advance(&mut self) -> Result<bool> {
        todo!()
    }
    fn page(&self) -> &[u8] {
        todo!()
    }
    fn page_offset(&self) -> u64 {
        todo!()
    }
    fn path(&self) -> &Path {
        todo!()
    }
}
