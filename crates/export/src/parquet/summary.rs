//! A recording's fleet summary ([`kstate_views::fleet::Summary`]) as one Parquet file,
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

use parquet::column::reader::ColumnReader;
use parquet::data_type::ByteArray;
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::write::Table;
use crate::error::{Error, Result};
use kstate_analyze::hist::{bucket_range, SCHEME};
use kstate_analyze::stats::Agg;
use kstate_format::parquet::column::Vals;
use kstate_format::parquet::ColType;
use kstate_format::ErrorKind;
use kstate_views::fleet::{KeyStat, Meta, Summary, SUMMARY_VERSION};

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
    std::fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
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
        for e in std::fs::read_dir(&d).map_err(|e| kstate_format::Error::io(&d, e))? {
            let p = e.map_err(|e| kstate_format::Error::io(&d, e))?.path();
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
    kstate_format::Error::new(ErrorKind::Corrupt, None, msg.into())
        .in_file(path)
        .into()
}

fn rerr(path: &Path, e: parquet::errors::ParquetError) -> Error {
    bad(path, format!("reading Parquet: {e}"))
}

/// Reads a summary back. Refused: a file that is not a kstate summary, one of another
/// bucket scheme or layout version, rows that contradict each other.
pub fn read_summary(path: &Path) -> Result<Summary> {
    read_summary_of(path, None, None)
}

/// Reads a summary keeping only the keys of `analyzer` and `key` (every one where
/// `None`): the histograms of other keys are never built, which is most of the work in
/// a fleet reduce asking for one key. The checks are those of [`read_summary`].
///
/// The file is read a column at a time, in batches (a row-by-row read took 112 s for
/// 1,000 summaries); the recording's facts, which every row repeats, are read only as
/// far as the one `recording` row.
pub fn read_summary_of(path: &Path, analyzer: Option<&str>, key: Option<&str>) -> Result<Summary> {
    read(path, analyzer, key, false)
}

/// Reads a summary's recording facts alone (a fleet reduce groups the summaries by
/// them before reading any histogram): the rows up to the `recording` row, which is the
/// first one kstate writes, with the checks of [`read_summary`] on those rows. The
/// events lost per CPU (`lost` rows, after it) are not read.
pub fn read_summary_meta(path: &Path) -> Result<Meta> {
    read(path, None, None, true).map(|s| s.meta)
}

fn read(
    path: &Path,
    analyzer: Option<&str>,
    key: Option<&str>,
    meta_only: bool,
) -> Result<Summary> {
    let f = File::open(path).map_err(|e| kstate_format::Error::io(path, e))?;
    let reader = SerializedFileReader::new(f).map_err(|e| rerr(path, e))?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let names: Vec<&str> = schema.columns().iter().map(|c| c.name()).collect();
    if names.first() != Some(&"scheme") || names.get(1) != Some(&"scheme_version") {
        return Err(bad(path, "not a kstate summary (no scheme column)"));
    }
    let mut rd = Reader {
        path,
        s: Summary::default(),
        current: None,
        stat_seen: false,
        analyzer,
        key,
        // Checked at the first row, after the scheme: a summary of another version is
        // named as such, not as one with unexpected columns.
        columns_ok: names == COLUMNS.map(|c| c.0),
        row: 0,
    };
    for g in 0..reader.num_row_groups() {
        let rg = reader.get_row_group(g).map_err(|e| rerr(path, e))?;
        let mut cols = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            let c = rg.get_column_reader(i).map_err(|e| rerr(path, e))?;
            let (col, ok) = Col::new(c, schema.column(i).max_def_level() > 0, i);
            rd.columns_ok &= ok;
            cols.push(col);
        }
        let mut left = rg.metadata().num_rows().max(0) as usize;
        while left > 0 {
            let n = left.min(if meta_only { META_BATCH } else { BATCH });
            rd.batch(&mut cols, n)?;
            left -= n;
            if meta_only && !rd.s.meta.recording.is_empty() {
                return Ok(rd.s);
            }
        }
    }
    rd.finish()
}

/// Rows decoded at a time, per column.
const BATCH: usize = 8192;
/// Rows decoded to find the recording's facts (the first row in kstate's summaries).
const META_BATCH: usize = 16;

/// Column indexes (see [`COLUMNS`]).
const SCHEME_COL: usize = 0;
const VERSION_COL: usize = 1;
const META_COLS: std::ops::Range<usize> = 2..12;
const KIND_COL: usize = 12;

/// The state of one summary's read, row after row.
struct Reader<'a> {
    path: &'a Path,
    s: Summary,
    /// The key whose bucket rows come next (`None` after a stat row filtered out).
    current: Option<KeyStat>,
    stat_seen: bool,
    analyzer: Option<&'a str>,
    key: Option<&'a str>,
    columns_ok: bool,
    /// Rows read so far in the file (for errors).
    row: usize,
}

impl Reader<'_> {
    /// Reads the next `n` rows of every column and takes them in.
    fn batch(&mut self, cols: &mut [Col], n: usize) -> Result<()> {
        let meta_needed = self.s.meta.recording.is_empty();
        for (i, c) in cols.iter_mut().enumerate() {
            // Once the recording row is read, its columns are not decoded again.
            if META_COLS.contains(&i) && !meta_needed {
                continue;
            }
            let got = c.read(n).map_err(|e| rerr(self.path, e))?;
            if got != n {
                return Err(bad(
                    self.path,
                    format!("column {} ends at row {}", COLUMNS[i].0, self.row + got),
                ));
            }
        }
        for r in 0..n {
            let cells = Cells {
                cols,
                path: self.path,
                r,
                n: self.row + r,
            };
            self.take(&cells)?;
        }
        self.row += n;
        Ok(())
    }

    fn take(&mut self, r: &Cells) -> Result<()> {
        let scheme = r.opt_str(SCHEME_COL)?.unwrap_or("");
        let version = r.opt_int(VERSION_COL)?.unwrap_or(-1);
        if scheme != SCHEME || version != SUMMARY_VERSION as i64 {
            return Err(bad(
                self.path,
                format!(
                    "a summary of bucket scheme {scheme:?} version {version}; this kstate \
                     reads {SCHEME:?} version {SUMMARY_VERSION} only"
                ),
            ));
        }
        if !self.columns_ok {
            return Err(bad(
                self.path,
                "the columns are not those of this summary version",
            ));
        }
        match r.str(KIND_COL)? {
            "recording" => {
                if !self.s.meta.recording.is_empty() {
                    return Err(r.bad("a second recording row"));
                }
                let lost = std::mem::take(&mut self.s.meta.lost);
                self.s.meta = r.meta()?;
                self.s.meta.lost = lost;
            }
            "lost" => {
                let cpu = u32::try_from(r.int(17)?).map_err(|_| r.bad("a negative cpu"))?;
                self.s.meta.lost.insert(cpu, r.opt_u64(18)?);
            }
            "stat" => {
                self.stat_seen = true;
                self.s.stats.extend(self.current.take());
                let (analyzer, key) = (r.str(13)?, r.str(16)?);
                if self.analyzer.is_some_and(|a| a != analyzer)
                    || self.key.is_some_and(|k| k != key)
                {
                    return Ok(());
                }
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
                self.current = Some(KeyStat {
                    analyzer: analyzer.to_string(),
                    by: r.str(14)?.to_string(),
                    unit: r.str(15)?.to_string(),
                    key: key.to_string(),
                    agg,
                });
            }
            "bucket" => {
                if !self.stat_seen {
                    return Err(r.bad("a bucket row before any stat row"));
                }
                // A bucket of a key filtered out.
                let Some(k) = self.current.as_mut() else {
                    return Ok(());
                };
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
        Ok(())
    }

    fn finish(mut self) -> Result<Summary> {
        let path = self.path;
        self.s.stats.extend(self.current.take());
        if self.s.meta.recording.is_empty() {
            return Err(bad(path, "no recording row"));
        }
        for k in &self.s.stats {
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
        Ok(self.s)
    }
}

/// One column of a row group, read a batch at a time.
struct Col {
    reader: ColumnReader,
    optional: bool,
    /// `None`: not a column of the summary, or not of its type: never read.
    vals: Option<Vals>,
    def: Vec<i16>,
    /// Per row of the batch, the index of its value in `vals` (`u32::MAX`: null).
    at: Vec<u32>,
}

impl Col {
    /// Integers may be stored as INT32 or INT64 (DuckDB writes `2` as INT32), strings
    /// as byte arrays. A column of another type is not read: the second value says
    /// whether the column is the summary's, so that the caller refuses the file at its
    /// first row, once its scheme and version are known.
    fn new(reader: ColumnReader, optional: bool, i: usize) -> (Col, bool) {
        let vals = Vals::of(&reader).filter(|v| {
            matches!(
                (v, COLUMNS.get(i).map(|c| c.1)),
                (Vals::I32(_) | Vals::I64(_), Some(ColType::Int { .. }))
                    | (Vals::Bytes(_), Some(ColType::Str))
            )
        });
        let ok = vals.is_some();
        let col = Col {
            reader,
            optional,
            vals,
            def: Vec::new(),
            at: Vec::new(),
        };
        (col, ok)
    }

    /// Reads the next `n` rows; returns how many there were.
    fn read(&mut self, n: usize) -> parquet::errors::Result<usize> {
        self.def.clear();
        let def = self.optional.then_some(&mut self.def);
        let Some(vals) = self.vals.as_mut() else {
            // Refused at the first row (see `new`): not read.
            return Ok(n);
        };
        let rows = match vals.read(&mut self.reader, def, n) {
            Some(rows) => rows?,
            None => return Ok(n),
        };
        self.at.clear();
        if self.optional {
            let mut next = 0;
            self.at.extend(self.def.iter().map(|&d| {
                if d > 0 {
                    next += 1;
                    next - 1
                } else {
                    u32::MAX
                }
            }));
        } else {
            self.at.extend(0..rows as u32);
        }
        Ok(rows)
    }

    fn int(&self, r: usize) -> Option<i64> {
        self.vals.as_ref()?.int(*self.at.get(r)? as usize)
    }

    fn bytes(&self, r: usize) -> Option<&[u8]> {
        self.vals.as_ref()?.bytes(*self.at.get(r)? as usize)
    }
}

/// A row's cells, read with errors that name the file and the row.
struct Cells<'a> {
    cols: &'a [Col],
    path: &'a Path,
    /// The row in the batch, and in the file.
    r: usize,
    n: usize,
}

impl Cells<'_> {
    fn bad(&self, msg: impl Into<String>) -> Error {
        bad(self.path, format!("row {}: {}", self.n, msg.into()))
    }
    fn opt_str(&self, i: usize) -> Result<Option<&str>> {
        self.cols[i]
            .bytes(self.r)
            .map(|b| {
                std::str::from_utf8(b)
                    .map_err(|_| self.bad(format!("{} is not UTF-8", COLUMNS[i].0)))
            })
            .transpose()
    }
    fn str(&self, i: usize) -> Result<&str> {
        self.opt_str(i)?
            .ok_or_else(|| self.bad(format!("no {}", COLUMNS[i].0)))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.cols[i].int(self.r))
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
            kernel: self.opt_str(5)?.map(str::to_string),
            command: self.opt_str(6)?.map(str::to_string),
            cpus: u32::try_from(self.int(7)?).map_err(|_| self.bad("a negative cpus"))?,
            start_wall_ns: self.opt_int(8)?,
            duration_ns: self.u64(9)?,
            events: self.u64(10)?,
            lost: Default::default(),
            tool: self.str(11)?.to_string(),
        })
    }
}
