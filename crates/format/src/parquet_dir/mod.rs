//! kstate's Parquet directory (`kstate convert --to parquet -o DIR`) read back as a trace:
//! the LKST authors' intermediate file. Convert a large trace once; every later
//! `kstate analyze` on the directory reads only the tables of the events it needs.
//!
//! Besides the tables people query, the conversion writes [`META_FILE`]: what a `Trace`
//! needs that the tables do not say (page layout, header_page, every event format's
//! text, clock, CPUs, saved comms, kallsyms, printk formats, kstate's own sections as
//! their raw bytes, and where events were lost). Opening the directory reads only that
//! file. Ring-buffer pages are built into a scratch directory when a reader first asks
//! for them, from the tables of the events it wants, by re-encoding each row's typed
//! columns into the event's record layout. Rows are merged by their `seq` column (the
//! event's position in the original merge), so every CPU gets its records back in their
//! original order and the merge of the rebuilt trace is the merge of the original.
//!
//! The reading needs the `parquet` feature; without it a directory holding
//! [`META_FILE`] is still recognised, and opening it says what is missing.

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind, Result};
use crate::event_format::{EventFormat, Field, FieldKind};
use crate::trace::Trace;

#[cfg(feature = "parquet")]
mod meta;
#[cfg(feature = "parquet")]
mod rebuild;

#[cfg(feature = "parquet")]
pub use meta::{write_meta, Conversion, Loss};

/// The file that makes a directory of Parquet tables a trace kstate can read.
pub const META_FILE: &str = "_kstate.parquet";

/// The columns every event table starts with: time, CPU, thread, thread group, task
/// name, and the event's position in the whole trace.
pub const COMMON_COLUMNS: [&str; 6] = ["ts", "cpu", "tid", "pid", "comm", "seq"];

/// The column names of `fmt`'s own fields, in format order: the field's name, prefixed
/// with `ev_` while it clashes with a common column or an earlier field's column.
pub fn field_columns(fmt: &EventFormat) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(fmt.fields.len());
    for f in &fmt.fields {
        let mut name = f.name.clone();
        while COMMON_COLUMNS.contains(&name.as_str()) || out.contains(&name) {
            name = format!("ev_{name}");
        }
        out.push(name);
    }
    out
}

/// How a field is stored in its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// An integer of the field's size and signedness (INT32 up to 4 bytes, else INT64).
    Int,
    /// A string: `char` arrays, `__data_loc char[]`, up to the first NUL.
    Text,
    /// Raw bytes: other arrays, dynamic or fixed.
    Bytes,
}

/// How `f` is stored in its event's table.
pub fn column_kind(f: &Field) -> ColumnKind {
    let text = match f.kind {
        FieldKind::Array { string, .. } => string,
        FieldKind::Dynamic { string, .. } => string || f.size == 2,
        FieldKind::Int => f.size == 0 && f.type_name.contains("char"),
    };
    match f.kind {
        FieldKind::Int if matches!(f.size, 1 | 2 | 4 | 8) => ColumnKind::Int,
        _ if text => ColumnKind::Text,
        _ => ColumnKind::Bytes,
    }
}

/// Where a kstate Parquet conversion lies under `dir`: `dir` itself when it holds
/// [`META_FILE`], else its only `host=*` subdirectory that does (the `-o` directory of
/// `kstate convert`). `None`: `dir` is no such conversion.
pub fn locate(dir: &Path) -> Result<Option<PathBuf>> {
    if dir.join(META_FILE).is_file() {
        return Ok(Some(dir.to_path_buf()));
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut hosts: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("host="))
                && p.join(META_FILE).is_file()
        })
        .collect();
    hosts.sort();
    match hosts.len() {
        0 => Ok(None),
        1 => Ok(hosts.pop()),
        _ => {
            let names: Vec<String> = hosts.iter().map(|h| h.display().to_string()).collect();
            Err(Error::new(
                ErrorKind::Unsupported,
                None,
                format!(
                    "this directory holds the Parquet tables of {} hosts; name one: {}",
                    hosts.len(),
                    names.join(", ")
                ),
            )
            .in_file(dir))
        }
    }
}

/// Opens the conversion in `dir` (a directory [`locate`] found).
pub fn open(dir: &Path) -> Result<Trace> {
    #[cfg(feature = "parquet")]
    {
        meta::open(dir).map_err(|e| if e.path.is_none() { e.in_file(dir) } else { e })
    }
    #[cfg(not(feature = "parquet"))]
    {
        Err(Error::new(
            ErrorKind::Unsupported,
            None,
            "this is a kstate Parquet directory, and this kstate was built without the \
             parquet feature: build it with `cargo build --release --features parquet`, or \
             analyze the original trace",
        )
        .in_file(dir))
    }
}
