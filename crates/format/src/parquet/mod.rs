//! kstate's Parquet directory, read back as a trace by [`open`]: the LKST authors'
//! intermediate file, written by `kstate convert --to parquet -o DIR` (kstate-export's
//! `parquet::write`, where the tables are described). The column rules both sides use are
//! defined once, here ([`COMMON_COLUMNS`], [`field_columns`], [`field_type`]); the meta
//! table's rows are laid out and read in [`meta`], and the writer writes what it lays out. Convert a large trace once; every later
//! `kstate analyze` on the directory reads only the tables of the events it needs.
//!
//! Besides the tables people query, the conversion writes [`META_FILE`]: what a `Trace`
//! needs that the tables do not say (page layout, header_page, every event format's
//! text, clock, CPUs, saved comms, kallsyms, printk formats, kstate's own sections as
//! their raw bytes, and where events were lost). Opening the directory reads only that
//! file. Ring-buffer pages are built into unnamed temporary files when a reader first asks
//! for them, from the tables of the events it wants, by re-encoding each row's typed
//! columns into the event's record layout. Rows are merged by their `seq` column (the
//! event's position in the original merge), so every CPU gets its records back in their
//! original order and the merge of the rebuilt trace is the merge of the original.
//!
//! Reading (and kstate-export's writing) needs the `parquet` feature; without it a directory holding
//! [`META_FILE`] is still recognised, and opening it says what is missing.

use std::path::{Path, PathBuf};

use crate::{Error, ErrorKind, EventFormat, Field, FieldKind, Result, Trace};

#[cfg(feature = "parquet")]
pub mod column;
#[cfg(feature = "parquet")]
pub mod meta;
#[cfg(feature = "parquet")]
mod rebuild;

/// The file that makes a directory of Parquet tables a trace kstate can read.
pub const META_FILE: &str = "_kstate.parquet";

/// How a column is stored; the one definition the writer declares columns by and the
/// reader checks them against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    /// An integer of `bits` bits: INT32 up to 32 bits (a UINT32 as its INT32 bits), else
    /// INT64, annotated with its width and signedness.
    Int { bits: u8, signed: bool },
    /// A UTF-8 string (BYTE_ARRAY, logical type STRING).
    Str,
    /// Raw bytes (BYTE_ARRAY).
    Bytes,
    /// A flag (BOOLEAN).
    Bool,
}

const fn int(bits: u8, signed: bool) -> ColType {
    ColType::Int { bits, signed }
}

/// The columns every event table starts with, as (name, type, nullable): time, CPU,
/// thread, thread group (null where the trace does not record it), task name (null where
/// unknown), and the event's position in the whole trace.
pub const COMMON_COLUMNS: [(&str, ColType, bool); 6] = [
    ("ts", int(64, false), false),
    ("cpu", int(32, false), false),
    ("tid", int(32, true), false),
    ("pid", int(32, true), true),
    ("comm", ColType::Str, true),
    ("seq", int(64, false), false),
];

#[cfg(feature = "parquet")]
impl ColType {
    /// The Parquet physical type and its logical annotation.
    pub fn parquet_type(
        self,
    ) -> (
        ::parquet::basic::Type,
        Option<::parquet::basic::LogicalType>,
    ) {
        use ::parquet::basic::{LogicalType, Type as Physical};
        match self {
            ColType::Int { bits: 64, signed } => {
                (Physical::INT64, Some(LogicalType::integer(64, signed)))
            }
            ColType::Int { bits, signed } => (
                Physical::INT32,
                Some(LogicalType::integer(bits as i8, signed)),
            ),
            ColType::Str => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
            ColType::Bytes => (Physical::BYTE_ARRAY, None),
            ColType::Bool => (Physical::BOOLEAN, None),
        }
    }
}

/// The type of the common column `name` (one of [`COMMON_COLUMNS`]).
pub fn common_type(name: &str) -> Option<ColType> {
    COMMON_COLUMNS.iter().find(|c| c.0 == name).map(|c| c.1)
}

/// The column names of `fmt`'s own fields, in format order: the field's name, prefixed
/// with `ev_` while it clashes with a common column or an earlier field's column.
pub fn field_columns(fmt: &EventFormat) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(fmt.fields.len());
    for f in &fmt.fields {
        let mut name = f.name.clone();
        while common_type(&name).is_some() || out.contains(&name) {
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

/// The column type of `f`, by its [`column_kind`]: integers keep the field's size and
/// signedness.
pub fn field_type(f: &Field) -> ColType {
    match column_kind(f) {
        ColumnKind::Int => int((f.size * 8) as u8, f.signed),
        ColumnKind::Text => ColType::Str,
        ColumnKind::Bytes => ColType::Bytes,
    }
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
