//! A recording's fleet summary ([`kstate_analyze::fleet::Summary`]) as one Parquet file,
//! and read back. One table, one row per fact, every row carrying the recording's facts
//! (dictionary-encoded, so they cost a few bytes), so that a query over a directory of
//! summaries groups by host, kernel or command without a join. `kind` says what a row is:
//!
//! - `recording`: the facts alone (one row);
//! - `lost`: events lost on `cpu` (`lost` null: the kernel did not count);
//! - `stat`: an analyzer's key: `count`, `total`, `min`, `max`, `flagged`;
//! - `bucket`: one non-empty histogram bucket of that key: its index `bucket`, bounds
//!   `bucket_lo`..=`bucket_hi`, and the `count` and `total` (sum) of its values.
//!
//! `scheme` and `scheme_version` name the bucket scheme and the layout
//! (docs/bucket-scheme.md); a summary of another one is refused. Integers are signed
//! INT64 (Spark and Trino read no unsigned 64-bit type); values past 2^63-1 are clamped.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::data_type::ByteArray;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row, RowAccessor};

use super::write::{perr, Table};
use super::ColType;
use kstate_analyze::fleet::{KeyStat, Meta, Summary, SUMMARY_VERSION};
use kstate_analyze::hist::{bucket_range, SCHEME};
use kstate_analyze::stats::Agg;
use kstate_format::{Error, ErrorKind, Result};

const I64: ColType = ColType::Int {
    bits: 64,
    signed: true,
};
const I32: ColType = ColType::Int {
    bits: 32,
    signed: true,
};
const STR: ColType = ColType::Str;

/// The columns, in order, as (name, type, nullable).
pub const COLUMNS: [(&str, ColType, bool); 27] = [
    ("scheme", STR, false),
    ("scheme_version", I32, false),
    ("recording", STR, false),
    ("file", STR, false),
    ("host", STR, false),
    ("kernel", STR, true),
    ("command", STR, true),
    ("cpus", I32, false),
    ("start_wall_ns", I64, true),
    ("duration_ns", I64, false),
    ("events", I64, false),
    ("tool", STR, false),
    ("kind", STR, false),
    ("analyzer", STR, true),
    ("by", STR, true),
    ("unit", STR, true),
    ("key", STR, true),
    ("cpu", I32, true),
    ("lost", I64, true),
    ("count", I64, true),
    ("total", I64, true),
    ("min", I64, true),
    ("max", I64, true),
    ("flagged", I64, true),
    ("bucket", I32, true),
    ("bucket_lo", I64, true),
    ("bucket_hi", I64, true),
];

/// File name suffix of summaries; `kstate fleet DIR` reads every file so named under DIR.
pub const SUFFIX: &str = ".summary.parquet";

fn clamp(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// Values of one row; `None` is null.
#[derive(Default)]
struct Line<'a> {
    kind: &'a str,
    analyzer: Option<&'a str>,
    by: Option<&'a str>,
    unit: Option<&'a str>,
    key: Option<&'a str>,
    /// From `cpu` on: cpu, lost, count, total, min, max, flagged, bucket, lo, hi.
    ints: [Option<i64>; 10],
}

fn text(t: &mut Table, i: usize, v: Option<&str>) {
    match v {
        Some(s) => t.cols[i].bytes(ByteArray::from(s)),
        None => t.cols[i].null(),
    }
}

fn int(t: &mut Table, i: usize, v: Option<i64>) {
    match v {
        Some(x) => t.cols[i].int(x),
        None => t.cols[i].null(),
    }
}

fn put(t: &mut Table, m: &Meta, l: &Line) -> Result<()> {
    text(t, 0, Some(SCHEME));
    int(t, 1, Some(SUMMARY_VERSION as i64));
    text(t, 2, Some(&m.recording));
    text(t, 3, Some(&m.file));
    text(t, 4, Some(&m.host));
    text(t, 5, m.kernel.as_deref());
    text(t, 6, m.command.as_deref());
    int(t, 7, Some(m.cpus as i64));
    int(t, 8, m.start_wall_ns);
    int(t, 9, Some(clamp(m.duration_ns)));
    int(t, 10, Some(clamp(m.events)));
    text(t, 11, Some(&m.tool));
    text(t, 12, Some(l.kind));
    text(t, 13, l.analyzer);
    text(t, 14, l.by);
    text(t, 15, l.unit);
    text(t, 16, l.key);
    for (j, v) in l.ints.iter().enumerate() {
        int(t, 17 + j, *v);
    }
    t.row_done()
}

/// Writes `s` as `DIR/RECORDING.summary.parquet`. A summary already there is left as it
/// is (summaries are appended, never rewritten): the result says whether it was written.
pub fn write_summary(s: &Summary, dir: &Path) -> Result<(PathBuf, bool)> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join(format!("{}{SUFFIX}", s.meta.recording));
    if path.exists() {
        return Ok((path, false));
    }
    let cols: Vec<(String, ColType, bool)> = COLUMNS
        .iter()
        .map(|&(n, t, o)| (n.to_string(), t, o))
        .collect();
    let mut t = Table::create(path.clone(), &cols)?;
    let m = &s.meta;
    put(
        &mut t,
        m,
        &Line {
            kind: "recording",
            ..Line::default()
        },
    )?;
    for (cpu, lost) in &m.lost {
        let mut ints = [None; 10];
        ints[0] = Some(*cpu as i64);
        ints[1] = lost.map(clamp);
        put(
            &mut t,
            m,
            &Line {
                kind: "lost",
                ints,
                ..Line::default()
            },
        )?;
    }
    for k in &s.stats {
        let a = &k.agg;
        let mut l = Line {
            kind: "stat",
            analyzer: Some(&k.analyzer),
            by: Some(&k.by),
            unit: Some(&k.unit),
            key: Some(&k.key),
            ints: [None; 10],
        };
        l.ints[2..7].copy_from_slice(&[
            Some(clamp(a.count)),
            Some(clamp(a.total)),
            Some(clamp(a.min())),
            Some(clamp(a.max)),
            Some(clamp(a.flagged)),
        ]);
        put(&mut t, m, &l)?;
        l.kind = "bucket";
        for (i, c, sum) in a.hist.indexed() {
            let (lo, hi) = bucket_range(i);
            l.ints = [None; 10];
            l.ints[2] = Some(clamp(c));
            l.ints[3] = Some(clamp(sum));
            l.ints[7..].copy_from_slice(&[Some(i as i64), Some(clamp(lo)), Some(clamp(hi))]);
            put(&mut t, m, &l)?;
        }
    }
    t.close()?;
    Ok((path, true))
}

/// Every summary under `dir` (recursively), in path order.
pub fn summary_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let p = e.map_err(|e| Error::io(&d, e))?.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.to_string_lossy().ends_with(SUFFIX) {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn bad(path: &Path, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Corrupt, None, msg.into()).in_file(path)
}

/// Reads a summary back. Refused: a file that is not a kstate summary, one of another
/// bucket scheme or layout version, rows that contradict each other.
pub fn read_summary(path: &Path) -> Result<Summary> {
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader = SerializedFileReader::new(f).map_err(|e| perr(path, e))?;
    let schema = reader.metadata().file_metadata().schema_descr();
    let names: Vec<&str> = schema.columns().iter().map(|c| c.name()).collect();
    if names.first() != Some(&"scheme") || names.get(1) != Some(&"scheme_version") {
        return Err(bad(path, "not a kstate summary (no scheme column)"));
    }
    let mut s = Summary::default();
    let mut current: Option<KeyStat> = None;
    let rows = reader.get_row_iter(None).map_err(|e| perr(path, e))?;
    for (n, row) in rows.enumerate() {
        let row = row.map_err(|e| perr(path, e))?;
        let scheme = row.get_string(0).map(|x| x.as_str()).unwrap_or("");
        let version = row.get_int(1).unwrap_or(-1);
        if scheme != SCHEME || version != SUMMARY_VERSION as i32 {
            return Err(bad(
                path,
                format!(
                    "a summary of bucket scheme {scheme:?} version {version}; this kstate \
                     reads {SCHEME:?} version {SUMMARY_VERSION} only"
                ),
            ));
        }
        if names != COLUMNS.map(|c| c.0) {
            return Err(bad(
                path,
                "the columns are not those of this summary version",
            ));
        }
        let r = Cells { row: &row, path, n };
        match r.str(12)? {
            "recording" => s.meta = r.meta()?,
            "lost" => {
                let cpu = u32::try_from(r.int(17)?).map_err(|_| r.bad("a negative cpu"))?;
                s.meta.lost.insert(cpu, r.opt_u64(18)?);
            }
            "stat" => {
                s.stats.extend(current.take());
                let mut agg = Agg {
                    count: r.u64(19)?,
                    total: r.u64(20)?,
                    min: r.u64(21)?,
                    max: r.u64(22)?,
                    flagged: r.u64(23)?,
                    ..Agg::default()
                };
                if agg.count == 0 {
                    agg.min = u64::MAX;
                }
                current = Some(KeyStat {
                    analyzer: r.str(13)?.to_string(),
                    by: r.str(14)?.to_string(),
                    unit: r.str(15)?.to_string(),
                    key: r.str(16)?.to_string(),
                    agg,
                });
            }
            "bucket" => {
                let k = current
                    .as_mut()
                    .ok_or_else(|| r.bad("a bucket row before any stat row"))?;
                if r.str(13)? != k.analyzer || r.str(16)? != k.key {
                    return Err(r.bad("a bucket row of another key than the stat row before"));
                }
                let i = u32::try_from(r.int(24)?).map_err(|_| r.bad("a negative bucket"))?;
                k.agg
                    .hist
                    .add_bucket(i, r.u64(19)?, r.u64(20)?)
                    .map_err(|e| r.bad(e))?;
            }
            other => return Err(r.bad(format!("a row of unknown kind {other:?}"))),
        }
    }
    s.stats.extend(current.take());
    if s.meta.recording.is_empty() {
        return Err(bad(path, "no recording row"));
    }
    for k in &s.stats {
        if k.agg.hist.count() != k.agg.count {
            return Err(bad(
                path,
                format!(
                    "{} {:?}: the buckets hold {} values, the stat row says {}",
                    k.analyzer,
                    k.key,
                    k.agg.hist.count(),
                    k.agg.count
                ),
            ));
        }
    }
    Ok(s)
}

/// A row's cells, read with errors that name the file and the row.
struct Cells<'a> {
    row: &'a Row,
    path: &'a Path,
    n: usize,
}

impl Cells<'_> {
    fn bad(&self, msg: impl Into<String>) -> Error {
        bad(self.path, format!("row {}: {}", self.n, msg.into()))
    }
    fn field(&self, i: usize) -> Option<&Field> {
        self.row.get_column_iter().nth(i).map(|(_, f)| f)
    }
    fn str(&self, i: usize) -> Result<&str> {
        match self.field(i) {
            Some(Field::Str(s)) => Ok(s),
            _ => Err(self.bad(format!("no {}", COLUMNS[i].0))),
        }
    }
    fn opt_str(&self, i: usize) -> Option<String> {
        match self.field(i) {
            Some(Field::Str(s)) => Some(s.clone()),
            _ => None,
        }
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.field(i) {
            Some(Field::Long(v)) => Ok(Some(*v)),
            Some(Field::Int(v)) => Ok(Some(*v as i64)),
            Some(Field::Null) | None => Ok(None),
            Some(_) => Err(self.bad(format!("{} is not an integer", COLUMNS[i].0))),
        }
    }
    fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?
            .ok_or_else(|| self.bad(format!("no {}", COLUMNS[i].0)))
    }
    fn opt_u64(&self, i: usize) -> Result<Option<u64>> {
        self.opt_int(i)?
            .map(|v| u64::try_from(v).map_err(|_| self.bad(format!("a negative {}", COLUMNS[i].0))))
            .transpose()
    }
    fn u64(&self, i: usize) -> Result<u64> {
        self.opt_u64(i)?
            .ok_or_else(|| self.bad(format!("no {}", COLUMNS[i].0)))
    }
    fn meta(&self) -> Result<Meta> {
        Ok(Meta {
            recording: self.str(2)?.to_string(),
            file: self.str(3)?.to_string(),
            host: self.str(4)?.to_string(),
            kernel: self.opt_str(5),
            command: self.opt_str(6),
            cpus: u32::try_from(self.int(7)?).map_err(|_| self.bad("a negative cpus"))?,
            start_wall_ns: self.opt_int(8)?,
            duration_ns: self.u64(9)?,
            events: self.u64(10)?,
            lost: Default::default(),
            tool: self.str(11)?.to_string(),
        })
    }
}
