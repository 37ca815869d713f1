//! [`META_FILE`](super::META_FILE): one row per thing a `Trace` needs that the event tables
//! do not say, written by `kstate convert --to parquet` and read when the directory is
//! opened. Columns: `kind` (what the row is), `key`, three integers `a` `b` `c` and raw
//! bytes `data`, each used as the kind needs:
//!
//! | kind          | key         | a      | b                 | c              | data          |
//! |---------------|-------------|--------|-------------------|----------------|---------------|
//! | `attr`        | name        |        |                   |                | value (text)  |
//! | `header_page` |             |        |                   |                | its text      |
//! | `format`      | system      |        |                   |                | format text   |
//! | `table`       | file stem   | id     |                   |                |               |
//! | `cpu`         |             | cpu    |                   |                |               |
//! | `comm`        | comm        | pid    |                   |                |               |
//! | `kallsyms`, `printk` |      |        |                   |                | file contents |
//! | `option`      |             | id     |                   |                | payload       |
//! | `lost`        |             | cpu    | seq of next event (null: none) | count (null: unknown) | |
//!
//! `option` rows are the trace.dat options kstate keeps uninterpreted, among them its own
//! sections (recording, processes, sysinfo, samples): their bytes as they were, so
//! nothing is decoded and re-encoded on the way.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::data_type::ByteArray;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::RowAccessor;

use crate::{
    ClockMap, Container, CpuData, DataLoc, Endian, Error, ErrorKind, EventFormat, EventTable,
    PageLayout, Result, Trace,
};

use super::rebuild::{Rebuild, TableFile};
use super::META_FILE;

/// Bumped when the rows change meaning; a reader refuses versions it does not know.
const VERSION: &str = "1";

pub const SCHEMA: &str = "message kstate_meta {
  required binary kind (STRING);
  optional binary key (STRING);
  optional int64 a;
  optional int64 b;
  optional int64 c;
  optional binary data;
}";

/// Events lost on `cpu` just before the event `seq` (None: after the CPU's last event);
/// `count` None where the kernel flagged a loss without counting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    pub cpu: u32,
    pub seq: Option<u64>,
    pub count: Option<u64>,
}

/// What a conversion learnt while writing the event tables.
pub struct Conversion<'a> {
    /// (event id, file stem of its table) for every table written.
    pub tables: &'a [(u32, String)],
    pub losses: &'a [Loss],
    pub first_ts: Option<u64>,
    pub events: u64,
}

fn perr(e: parquet::errors::ParquetError) -> Error {
    Error::new(ErrorKind::Corrupt, None, format!("Parquet: {e}"))
}

/// The meta table's columns in [`SCHEMA`]'s order, each optional one as (values,
/// definition levels).
#[derive(Default)]
pub struct Rows {
    pub kind: Vec<ByteArray>,
    pub key: (Vec<ByteArray>, Vec<i16>),
    pub a: (Vec<i64>, Vec<i16>),
    pub b: (Vec<i64>, Vec<i16>),
    pub c: (Vec<i64>, Vec<i16>),
    pub data: (Vec<ByteArray>, Vec<i16>),
}

fn opt<T>(col: &mut (Vec<T>, Vec<i16>), v: Option<T>) {
    match v {
        Some(v) => {
            col.0.push(v);
            col.1.push(1);
        }
        None => col.1.push(0),
    }
}

impl Rows {
    fn add(
        &mut self,
        kind: &str,
        key: Option<&str>,
        a: Option<i64>,
        b: Option<i64>,
        c: Option<i64>,
        data: Option<&[u8]>,
    ) {
        self.kind.push(ByteArray::from(kind.as_bytes().to_vec()));
        opt(
            &mut self.key,
            key.map(|k| ByteArray::from(k.as_bytes().to_vec())),
        );
        opt(&mut self.a, a);
        opt(&mut self.b, b);
        opt(&mut self.c, c);
        opt(&mut self.data, data.map(|d| ByteArray::from(d.to_vec())));
    }
    fn attr(&mut self, key: &str, value: &str) {
        self.add("attr", Some(key), None, None, None, Some(value.as_bytes()));
    }
}

/// The rows of [`META_FILE`] for `trace`, next to the tables `c` describes: kstate-export
/// writes them with [`SCHEMA`].
pub fn rows(trace: &Trace, c: &Conversion) -> Rows {
    let mut r = Rows::default();
    let l = &trace.layout;
    r.attr("version", VERSION);
    let endian = match trace.endian {
        Endian::Little => "little",
        Endian::Big => "big",
    };
    r.attr("endian", endian);
    for (k, v) in [
        ("long_size", trace.long_size),
        ("page_size", l.page_size),
        ("ts_offset", l.ts_offset),
        ("commit_offset", l.commit_offset),
        ("commit_size", l.commit_size),
        ("data_offset", l.data_offset),
        ("cpu_count", trace.cpu_count as usize),
    ] {
        r.attr(k, &v.to_string());
    }
    r.attr("events", &c.events.to_string());
    if let Some(t) = c.first_ts {
        r.attr("first_ts", &t.to_string());
    }
    for (k, v) in [
        ("clock", &trace.clock),
        ("uname", &trace.uname),
        ("tool_version", &trace.tool_version),
    ] {
        if let Some(v) = v {
            r.attr(k, v);
        }
    }
    r.attr("source", &trace.path.display().to_string());
    if let Some(h) = &trace.header_page {
        r.add("header_page", None, None, None, None, Some(h));
    }
    for (system, text) in &trace.format_texts {
        r.add("format", Some(system), None, None, None, Some(text));
    }
    for (id, stem) in c.tables {
        r.add("table", Some(stem), Some(i64::from(*id)), None, None, None);
    }
    for cd in &trace.cpu_data {
        r.add("cpu", None, Some(i64::from(cd.cpu)), None, None, None);
    }
    let mut comms: Vec<(&i32, &String)> = trace.comms.iter().collect();
    comms.sort();
    for (pid, comm) in comms {
        r.add("comm", Some(comm), Some(i64::from(*pid)), None, None, None);
    }
    if let Some(k) = &trace.kallsyms {
        r.add("kallsyms", None, None, None, None, Some(k));
    }
    if let Some(p) = &trace.printk_formats {
        r.add("printk", None, None, None, None, Some(p));
    }
    for (id, payload) in &trace.extra_options {
        r.add(
            "option",
            None,
            Some(i64::from(*id)),
            None,
            None,
            Some(payload),
        );
    }
    for loss in c.losses {
        r.add(
            "lost",
            None,
            Some(i64::from(loss.cpu)),
            loss.seq.map(|s| s as i64),
            loss.count.map(|n| n as i64),
            None,
        );
    }
    r
}

fn corrupt(msg: impl Into<String>) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        None,
        format!("{META_FILE}: {}", msg.into()),
    )
}

/// Opens the conversion in `dir`: reads [`META_FILE`] only; pages come later, on demand.
pub fn open(dir: &Path) -> Result<Trace> {
    let path = dir.join(META_FILE);
    let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
    let reader = SerializedFileReader::new(f).map_err(|e| perr(e).in_file(&path))?;
    let mut attrs: HashMap<String, String> = HashMap::new();
    let mut header_page = None;
    let mut format_texts = Vec::new();
    let mut tables: Vec<(u32, String)> = Vec::new();
    let mut cpus = Vec::new();
    let mut comms = HashMap::new();
    let (mut kallsyms, mut printk) = (None, None);
    let mut extra_options = Vec::new();
    let mut losses = Vec::new();
    for row in reader.get_row_iter(None).map_err(perr)? {
        let row = row.map_err(perr)?;
        let kind = row.get_string(0).map_err(perr)?.as_str();
        let key = row.get_string(1).ok().cloned();
        let a = row.get_long(2).ok();
        let b = row.get_long(3).ok();
        let c = row.get_long(4).ok();
        let data = row.get_bytes(5).ok().map(|d| d.data().to_vec());
        let need = |v: Option<i64>, what: &str| {
            v.and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| corrupt(format!("a {kind} row without a valid {what}")))
        };
        match kind {
            "attr" => {
                if let (Some(k), Some(d)) = (key, data) {
                    attrs.insert(k, String::from_utf8_lossy(&d).into_owned());
                }
            }
            "header_page" => header_page = data,
            "format" => format_texts.push((key.unwrap_or_default(), data.unwrap_or_default())),
            "table" => tables.push((need(a, "id")?, key.unwrap_or_default())),
            "cpu" => cpus.push(need(a, "cpu")?),
            "comm" => {
                comms.insert(a.unwrap_or(0) as i32, key.unwrap_or_default());
            }
            "kallsyms" => kallsyms = data,
            "printk" => printk = data,
            "option" => {
                let id = u16::try_from(need(a, "id")?)
                    .map_err(|_| corrupt("an option id over 65535"))?;
                extra_options.push((id, data.unwrap_or_default()));
            }
            "lost" => losses.push(Loss {
                cpu: need(a, "cpu")?,
                seq: b.map(|s| s as u64),
                count: c.map(|n| n as u64),
            }),
            // Rows of kinds a later kstate adds are not needed to read this version.
            _ => {}
        }
    }
    match attrs.get("version").map(String::as_str) {
        Some(VERSION) => {}
        v => {
            return Err(Error::new(
                ErrorKind::Unsupported,
                None,
                format!(
                    "{META_FILE} is version {}, this kstate reads version {VERSION}: convert \
                     the trace again with this kstate",
                    v.unwrap_or("(none)")
                ),
            ))
        }
    }
    let num = |k: &str| -> Result<usize> {
        attrs
            .get(k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| corrupt(format!("no valid {k}")))
    };
    let endian = match attrs.get("endian").map(String::as_str) {
        Some("little") => Endian::Little,
        Some("big") => Endian::Big,
        _ => return Err(corrupt("no valid endian")),
    };
    let layout = PageLayout {
        endian,
        ts_offset: num("ts_offset")?,
        commit_offset: num("commit_offset")?,
        commit_size: num("commit_size")?,
        data_offset: num("data_offset")?,
        page_size: num("page_size")?,
    };
    if !matches!(layout.commit_size, 4 | 8)
        || layout.page_size > 1 << 24
        || layout.data_offset + layout.commit_size + 64 > layout.page_size
    {
        return Err(corrupt("implausible page layout"));
    }
    let long_size = num("long_size")?;
    let mut events = EventTable::default();
    for (system, text) in &format_texts {
        // As trace.dat readers do: an unparsable format leaves its events unknown.
        if let Ok(ev) = EventFormat::parse(text, system, long_size) {
            events.insert(ev);
        }
    }
    let mut files = Vec::new();
    for (id, stem) in tables {
        let fmt = events.get(id).ok_or_else(|| {
            corrupt(format!(
                "table {stem} is of event id {id}, which has no format"
            ))
        })?;
        files.push(TableFile {
            path: dir.join(format!("{stem}.parquet")),
            format: fmt.clone(),
        });
    }
    losses.sort_by_key(|l: &Loss| (l.cpu, l.seq.unwrap_or(u64::MAX)));
    cpus.sort_unstable();
    cpus.dedup();
    let build = Arc::new(Rebuild::new(
        dir,
        layout,
        cpus.clone(),
        files,
        losses,
        attrs.get("first_ts").and_then(|t| t.parse().ok()),
    ));
    let cpu_data = cpus
        .iter()
        .map(|&cpu| CpuData {
            cpu,
            file_bytes: 0,
            loc: DataLoc::Built(build.clone()),
        })
        .collect();
    Ok(Trace {
        path: dir.to_path_buf(),
        container: Container::Parquet,
        endian,
        long_size,
        layout,
        events,
        header_page,
        format_texts,
        comms,
        clock: attrs.get("clock").cloned(),
        // The tables hold nanoseconds already.
        clock_map: ClockMap::default(),
        time_shift: None,
        trace_cmd_unreadable: None,
        uname: attrs.get("uname").cloned(),
        tool_version: attrs.get("tool_version").cloned(),
        kallsyms,
        printk_formats: printk,
        cpu_count: num("cpu_count")? as u32,
        cpu_data,
        extra_options,
        truncated: None,
        cut_short: None,
        lost_sections: Vec::new(),
        spool: None,
        perf: None,
    })
}
