//! Ring-buffer pages rebuilt from the event tables (see the module above for the why).
//!
//! One pass reads the wanted tables in row groups, batch by batch, merges their rows by
//! `seq` and re-encodes each into its event's record layout: common_type and common_pid,
//! integers at their offsets, char arrays zero-filled, `__data_loc` data appended after
//! the fixed part with its location word. Losses go back in front of the first rebuilt
//! event of their CPU at or after the event they preceded, which is where a merge that
//! skips the other events would report them. Memory: one batch per column of each table
//! read and one page per CPU.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use parquet::column::reader::ColumnReader;
use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::built_pages::{CpuStream, SpooledPages};
use crate::{
    BuildPages, Endian, Error, ErrorKind, EventFormat, Field, FieldKind, PageLayout, PageSource,
    Result,
};

use super::column::Vals;
use super::meta::Loss;
use super::{column_kind, common_type, field_columns, field_type, ColumnKind};

/// Rows decoded per column at a time.
const BATCH: usize = 4096;

#[derive(Debug)]
pub(crate) struct TableFile {
    pub path: PathBuf,
    pub format: EventFormat,
}

#[derive(Debug)]
pub(crate) struct Rebuild {
    /// The Parquet directory, for messages.
    dir: PathBuf,
    layout: PageLayout,
    cpus: Vec<u32>,
    tables: Vec<TableFile>,
    /// Sorted by CPU, then seq (a loss after a CPU's last event last).
    losses: Vec<Loss>,
    first_ts: Option<u64>,
    built: Mutex<Option<Built>>,
}

/// Pages built for a set of events (None: all).
#[derive(Debug)]
struct Built {
    wanted: Option<Vec<bool>>,
    pages: SpooledPages,
}

impl Built {
    fn covers(&self, want: Option<&[bool]>) -> bool {
        match (&self.wanted, want) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(have), Some(want)) => want
                .iter()
                .enumerate()
                .all(|(i, w)| !w || have.get(i).copied().unwrap_or(false)),
        }
    }
}

impl Rebuild {
    pub fn new(
        dir: &Path,
        layout: PageLayout,
        cpus: Vec<u32>,
        tables: Vec<TableFile>,
        losses: Vec<Loss>,
        first_ts: Option<u64>,
    ) -> Rebuild {
        Rebuild {
            dir: dir.to_path_buf(),
            layout,
            cpus,
            tables,
            losses,
            first_ts,
            built: Mutex::new(None),
        }
    }

    fn build(&self, wanted: Option<Vec<bool>>) -> Result<Built> {
        let mut streams: HashMap<u32, CpuStream> = HashMap::new();
        for &cpu in &self.cpus {
            streams.insert(cpu, CpuStream::create(self.layout)?);
        }
        let mut losses: HashMap<u32, std::iter::Peekable<std::vec::IntoIter<Loss>>> =
            HashMap::new();
        for cpu in &self.cpus {
            let l: Vec<Loss> = self
                .losses
                .iter()
                .filter(|l| l.cpu == *cpu)
                .copied()
                .collect();
            losses.insert(*cpu, l.into_iter().peekable());
        }
        let mut cursors = Vec::new();
        for t in &self.tables {
            let id = t.format.id as usize;
            if wanted
                .as_ref()
                .is_some_and(|w| !w.get(id).copied().unwrap_or(false))
            {
                continue;
            }
            cursors.push(Cursor::open(t, self.layout)?);
        }
        let mut heap = BinaryHeap::new();
        for (i, c) in cursors.iter_mut().enumerate() {
            if c.advance()? {
                heap.push(Reverse((c.seq, i)));
            }
        }
        let mut payload = Vec::new();
        while let Some(Reverse((seq, i))) = heap.pop() {
            let c = &mut cursors[i];
            let (ts, cpu) = c.encode(&mut payload)?;
            let stream = match streams.get_mut(&cpu) {
                Some(s) => s,
                None => {
                    // A CPU the metadata does not list: no reader will ask for it.
                    let s = CpuStream::create(self.layout)?;
                    streams.entry(cpu).or_insert(s)
                }
            };
            if let Some(l) = losses.get_mut(&cpu) {
                while let Some(loss) = l.next_if(|l| l.seq.is_some_and(|s| s <= seq)) {
                    note_loss(stream, loss);
                }
            }
            stream.push(ts, &payload)?;
            if c.advance()? {
                heap.push(Reverse((c.seq, i)));
            }
        }
        let mut built = std::collections::BTreeMap::new();
        for (cpu, mut stream) in streams {
            if let Some(l) = losses.get_mut(&cpu) {
                for loss in l {
                    note_loss(&mut stream, loss);
                }
            }
            built.insert(cpu, stream.finish()?);
        }
        Ok(Built {
            wanted,
            pages: SpooledPages::new(&self.dir, self.layout.page_size, built),
        })
    }
}

fn note_loss(stream: &mut CpuStream, loss: Loss) {
    match loss.count {
        Some(n) => stream.builder.lost(n),
        None => stream.builder.lost_uncounted(),
    }
}

impl BuildPages for Rebuild {
    fn pages(&self, cpu: u32, wanted: Option<&[bool]>) -> Result<Box<dyn PageSource>> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if !built.as_ref().is_some_and(|b| b.covers(wanted)) {
            // Build what this reader wants plus what earlier readers did, so readers that
            // alternate do not rebuild every time.
            let union = match (built.as_ref().map(|b| &b.wanted), wanted) {
                (_, None) | (Some(None), _) => None,
                (Some(Some(have)), Some(want)) => {
                    let n = have.len().max(want.len());
                    Some(
                        (0..n)
                            .map(|i| {
                                have.get(i).copied().unwrap_or(false)
                                    || want.get(i).copied().unwrap_or(false)
                            })
                            .collect(),
                    )
                }
                (None, Some(want)) => Some(want.to_vec()),
            };
            *built = Some(self.build(union)?);
        }
        let b = built.as_ref().expect("built above");
        b.pages.pages(cpu, None)
    }

    fn first_ts(&self) -> Option<u64> {
        self.first_ts
    }
}

struct Col {
    index: usize,
    reader: Option<ColumnReader>,
    vals: Vals,
    def: Vec<i16>,
    optional: bool,
    /// Next value of `vals` (values of an optional column skip its nulls).
    next: usize,
}

enum Value<'a> {
    Null,
    Int(i64),
    Bytes(&'a [u8]),
}

impl Col {
    fn read(&mut self, n: usize) -> parquet::errors::Result<usize> {
        self.def.clear();
        self.next = 0;
        let def = self.optional.then_some(&mut self.def);
        let r = self.reader.as_mut().expect("a reader per row group");
        self.vals
            .read(r, def, n)
            .expect("types checked when the table was opened")
    }

    #[inline]
    fn value(&mut self, row: usize) -> Value<'_> {
        if self.optional && self.def.get(row) != Some(&1) {
            return Value::Null;
        }
        let i = self.next;
        self.next += 1;
        match &self.vals {
            Vals::Bytes(_) => self.vals.bytes(i).map_or(Value::Null, Value::Bytes),
            _ => self.vals.int(i).map_or(Value::Null, Value::Int),
        }
    }
}

/// Reads one event table in `seq` order.
struct Cursor {
    reader: SerializedFileReader<File>,
    path: PathBuf,
    format: EventFormat,
    /// seq, ts, cpu, tid, then one per field of the format.
    cols: Vec<Col>,
    /// The record's fixed part: every common and own field's bytes.
    fixed: usize,
    type_at: Option<(usize, usize)>,
    pid_at: Option<(usize, usize)>,
    layout: PageLayout,
    group: usize,
    rows: usize,
    row: usize,
    /// The current row's seq (valid after `advance` returned true).
    seq: u64,
}

impl Cursor {
    fn open(t: &TableFile, layout: PageLayout) -> Result<Cursor> {
        let err = |msg: String| Error::new(ErrorKind::Corrupt, None, msg).in_file(&t.path);
        let f = File::open(&t.path).map_err(|e| Error::io(&t.path, e))?;
        let reader =
            SerializedFileReader::new(f).map_err(|e| err(format!("reading Parquet: {e}")))?;
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let index_of = |name: &str| {
            (0..schema.num_columns())
                .find(|&i| schema.column(i).name() == name)
                .ok_or_else(|| err(format!("the table has no column {name:?}")))
        };
        use parquet::basic::Type as P;
        let col = |name: &str, want: P| -> Result<Col> {
            let index = index_of(name)?;
            let c = schema.column(index);
            if c.physical_type() != want {
                return Err(err(format!(
                    "column {name:?} is {}, not the {want} kstate writes",
                    c.physical_type()
                )));
            }
            Ok(Col {
                index,
                reader: None,
                vals: match want {
                    P::INT32 => Vals::I32(Vec::with_capacity(BATCH)),
                    P::INT64 => Vals::I64(Vec::with_capacity(BATCH)),
                    _ => Vals::Bytes(Vec::with_capacity(BATCH)),
                },
                def: Vec::with_capacity(BATCH),
                optional: c.self_type().is_optional(),
                next: 0,
            })
        };
        let common = |name: &str| {
            let t = common_type(name).expect("one of the common columns");
            col(name, t.parquet_type().0)
        };
        let mut cols = vec![
            common("seq")?,
            common("ts")?,
            common("cpu")?,
            common("tid")?,
        ];
        let fmt = &t.format;
        for (f, name) in fmt.fields.iter().zip(field_columns(fmt)) {
            cols.push(col(&name, field_type(f).parquet_type().0)?);
        }
        let fixed = fmt
            .common
            .iter()
            .chain(&fmt.fields)
            .map(|f| f.offset + f.size)
            .max()
            .unwrap_or(8);
        if fixed > layout.page_size {
            return Err(err(format!(
                "event {} is {fixed} bytes, larger than a page",
                fmt.name
            )));
        }
        let at = |name: &str| {
            fmt.common
                .iter()
                .find(|f| f.name == name)
                .map(|f| (f.offset, f.size))
        };
        Ok(Cursor {
            type_at: at("common_type").or(Some((0, 2))),
            pid_at: at("common_pid").or(Some((4, 4))),
            reader,
            path: t.path.clone(),
            format: t.format.clone(),
            cols,
            fixed,
            layout,
            group: 0,
            rows: 0,
            row: 0,
            seq: 0,
        })
    }

    fn perr(&self, e: parquet::errors::ParquetError) -> Error {
        Error::new(ErrorKind::Corrupt, None, format!("reading Parquet: {e}")).in_file(&self.path)
    }

    /// Moves to the next row; false at the end of the table.
    fn advance(&mut self) -> Result<bool> {
        if self.rows > 0 {
            self.row += 1;
        }
        while self.row >= self.rows {
            if !self.next_batch()? {
                return Ok(false);
            }
        }
        self.seq = match self.cols[0].value(self.row) {
            Value::Int(s) => s as u64,
            _ => return Err(self.perr(parquet::errors::ParquetError::General("null seq".into()))),
        };
        Ok(true)
    }

    /// Decodes the next batch of every column, moving to the next row group as needed.
    fn next_batch(&mut self) -> Result<bool> {
        self.row = 0;
        self.rows = 0;
        loop {
            if self.cols[0].reader.is_some() {
                let mut rows = None;
                for c in &mut self.cols {
                    let n = c.read(BATCH).map_err(|e| {
                        Error::new(ErrorKind::Corrupt, None, format!("reading Parquet: {e}"))
                            .in_file(&self.path)
                    })?;
                    if *rows.get_or_insert(n) != n {
                        return Err(self.perr(parquet::errors::ParquetError::General(
                            "columns of unequal length".into(),
                        )));
                    }
                }
                if let Some(n) = rows.filter(|&n| n > 0) {
                    self.rows = n;
                    return Ok(true);
                }
            }
            if self.group >= self.reader.num_row_groups() {
                return Ok(false);
            }
            let rg = self
                .reader
                .get_row_group(self.group)
                .map_err(|e| Error::new(ErrorKind::Corrupt, None, format!("reading Parquet: {e}")))
                .map_err(|e| e.in_file(&self.path))?;
            for c in &mut self.cols {
                c.reader = Some(rg.get_column_reader(c.index).map_err(|e| {
                    Error::new(ErrorKind::Corrupt, None, format!("reading Parquet: {e}"))
                        .in_file(&self.path)
                })?);
            }
            self.group += 1;
        }
    }

    /// The current row as the event's record in `out`; returns its time and CPU.
    fn encode(&mut self, out: &mut Vec<u8>) -> Result<(u64, u32)> {
        let e = self.layout.endian;
        let row = self.row;
        let ts = match self.cols[1].value(row) {
            Value::Int(t) => t as u64,
            _ => 0,
        };
        let cpu = match self.cols[2].value(row) {
            Value::Int(c) => c as u32,
            _ => 0,
        };
        let tid = match self.cols[3].value(row) {
            Value::Int(t) => t,
            _ => 0,
        };
        out.clear();
        out.resize(self.fixed, 0);
        if let Some((at, n)) = self.type_at {
            e.put_uint(&mut out[at..at + n], u64::from(self.format.id));
        }
        if let Some((at, n)) = self.pid_at {
            e.put_uint(&mut out[at..at + n], tid as u32 as u64);
        }
        // Where the record ends early: the first field the original was too short for.
        let mut short_at: Option<usize> = None;
        for (f, col) in self.format.fields.iter().zip(&mut self.cols[4..]) {
            let text = matches!(column_kind(f), ColumnKind::Text);
            match col.value(row) {
                Value::Null => {
                    if !matches!(f.kind, FieldKind::Dynamic { .. }) {
                        short_at = Some(short_at.map_or(f.offset, |s| s.min(f.offset)));
                    }
                }
                Value::Int(v) => {
                    if matches!(f.size, 1 | 2 | 4 | 8) {
                        e.put_uint(&mut out[f.offset..f.offset + f.size], v as u64);
                    }
                }
                Value::Bytes(b) => put_bytes(f, b, text, e, out),
            }
        }
        if let Some(s) = short_at {
            out.truncate(s);
        }
        Ok((ts, cpu))
    }
}

/// Writes an array or string field's data where the record layout puts it.
fn put_bytes(f: &Field, b: &[u8], text: bool, e: Endian, out: &mut Vec<u8>) {
    match f.kind {
        FieldKind::Dynamic { relative, .. } => {
            let start = out.len();
            out.extend_from_slice(b);
            if text {
                out.push(0);
            }
            let len = out.len() - start;
            match f.size {
                4 => {
                    let base = if relative { f.offset + 4 } else { 0 };
                    let word = ((len as u64 & 0xffff) << 16) | ((start - base) as u64 & 0xffff);
                    e.put_uint(&mut out[f.offset..f.offset + 4], word);
                }
                2 => e.put_uint(&mut out[f.offset..f.offset + 2], start as u64 & 0xffff),
                _ => {}
            }
        }
        // "The rest of the record" (`char buf[]`, size 0): the data runs to the end.
        _ if f.size == 0 => {
            if out.len() < f.offset {
                out.resize(f.offset, 0);
            }
            out.extend_from_slice(b);
            if text {
                out.push(0);
            }
        }
        _ => {
            let n = b.len().min(f.size);
            out[f.offset..f.offset + n].copy_from_slice(&b[..n]);
        }
    }
}
