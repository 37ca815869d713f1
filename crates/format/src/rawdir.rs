//! A raw tracefs capture in a directory: the layout `kstate record` uses for scratch and
//! what tools like schedviz save.

use std::path::Path;

use crate::error::Result;
use crate::trace::Trace;

pub fn open(path: &Path) -> Result<Trace> {
    let _ = path;
    todo!("raw capture reader")
}
