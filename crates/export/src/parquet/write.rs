//! `kstate convert --to parquet -o DIR`: the trace as Parquet tables under
//! `DIR/host=HOST/`, so that traces of many hosts can be queried together (DuckDB,
//! pandas, Spark, Trino read the `host=` directory as a partition column).
//!
//! * `EVENT.parquet`, one per event type seen (named by the event; `SYSTEM-EVENT` where
//!   two systems share a name): `ts` (trace-clock ns), `cpu`, `tid` (common_pid), `pid`
//!   (thread group, where the trace records it, else null), `comm` (the task's name as
//!   last seen: saved comms, updated by sched_switch), `seq` (the event's position in the
//!   whole trace, ordering events of equal time across tables), then every field of the
//!   format file as a typed column: integers by size and signedness (INT8..INT64, UINT8..UINT64),
//!   strings for `char` arrays and `__data_loc char[]`, raw bytes for other arrays. A field
//!   named like one of the first six columns gets an `ev_` prefix (sched_waking's
//!   `ev_pid`, `ev_comm`). A field the record is too short for is null.
//! * `log_ANALYZER.parquet` per analyzer that applies: exactly the rows of
//!   `kstate analyze ANALYZER --log`: `ts` (start), `key`, the value (`dur_ns`, or the
//!   unit's name, e.g. `bytes`; `level` for levels), `tid`, `pid`, `comm`, `cpu`, and the
//!   analyzer's flag column (e.g. `failed`) where it has one.
//! * `meta.parquet`: one row per CPU: host, kernel, clock, cpus, cpu, events, lost
//!   (null where the kernel flagged a loss without a count), the CPU's first and last
//!   event, the trace's first and last event, the source file and the tool.
//! * `_kstate.parquet`: what makes the directory a trace kstate reads back
//!   (`kstate_format::parquet::open`), written last and only when the whole trace was read.
//!
//! Rows are buffered per table and written as row groups of up to 256 Ki rows (and at
//! most 2 Mi rows buffered over all tables), so memory stays bounded whatever the trace
//! size. The analyzer tables are written on a second thread while the events are.

use std::collections::HashMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, Encoding, Repetition};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, Type};

use super::meta::write_meta;
use kstate_analyze::analyzer::{Info, Kind, LogRow, LogSink, Unit};
use kstate_analyze::fxmap::FxMap;
use kstate_analyze::Source;
use kstate_format::output::NewFile;
use kstate_format::parquet::meta::{Conversion, Loss};
use kstate_format::parquet::{
    column_kind, field_columns, field_type, ColType, ColumnKind, COMMON_COLUMNS,
};
use kstate_format::sections::{ids, Recording};
use kstate_format::stream::merge::{IdFilter, Merger};
use kstate_format::{ErrorKind, EventFormat, FieldRef, Lost, Trace};

use crate::common::{self, comm_str, SwitchFields};
use crate::error::Error;

const GROUP_ROWS: usize = 256 * 1024;
const BUFFERED_ROWS: usize = 2 * 1024 * 1024;

pub(super) fn perr(path: &Path, e: parquet::errors::ParquetError) -> Error {
    Error::Encode {
        path: path.to_path_buf(),
        msg: format!("writing Parquet: {e}"),
    }
}

/// One column's buffered values.
enum Data {
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bytes(Vec<ByteArray>),
    Bool(Vec<bool>),
}

pub(super) struct Col {
    data: Data,
    /// Definition levels of an optional column (1 = value, 0 = null).
    def: Option<Vec<i16>>,
}

impl Col {
    fn new(t: &ColType, optional: bool) -> Col {
        let data = match t {
            ColType::Int { bits: 64, .. } => Data::I64(Vec::new()),
            ColType::Int { .. } => Data::I32(Vec::new()),
            ColType::Str | ColType::Bytes => Data::Bytes(Vec::new()),
            ColType::Bool => Data::Bool(Vec::new()),
        };
        Col {
            data,
            def: optional.then(Vec::new),
        }
    }
    #[inline]
    fn present(&mut self) {
        if let Some(d) = &mut self.def {
            d.push(1);
        }
    }
    #[inline]
    pub(super) fn null(&mut self) {
        self.def
            .as_mut()
            .expect("null in a required column")
            .push(0);
    }
    /// An integer (its low bits for narrower columns: a UINT32 is stored as its INT32 bits).
    #[inline]
    pub(super) fn int(&mut self, v: i64) {
        self.present();
        match &mut self.data {
            Data::I32(x) => x.push(v as i32),
            Data::I64(x) => x.push(v),
            _ => unreachable!("int into a non-integer column"),
        }
    }
    #[inline]
    pub(super) fn bytes(&mut self, v: ByteArray) {
        self.present();
        match &mut self.data {
            Data::Bytes(x) => x.push(v),
            _ => unreachable!("bytes into a non-byte column"),
        }
    }
    #[inline]
    fn bool(&mut self, v: bool) {
        self.present();
        match &mut self.data {
            Data::Bool(x) => x.push(v),
            _ => unreachable!("bool into a non-bool column"),
        }
    }
}

fn column(name: &str, t: ColType, optional: bool) -> Arc<Type> {
    let rep = if optional {
        Repetition::OPTIONAL
    } else {
        Repetition::REQUIRED
    };
    let (phys, logical) = t.parquet_type();
    Arc::new(
        Type::primitive_type_builder(name, phys)
            .with_repetition(rep)
            .with_logical_type(logical)
            .build()
            .expect("a valid column"),
    )
}

/// A Parquet file being written: its columns' buffers and the writer.
pub(super) struct Table {
    path: PathBuf,
    writer: SerializedFileWriter<BufWriter<NewFile>>,
    pub(super) cols: Vec<Col>,
    rows: usize,
    total: u64,
}

/// Snappy pages; dictionaries only for strings (task names, keys repeat; timestamps and
/// most integers do not, and trying costs); min/max per column chunk for pruning.
fn props(cols: &[(String, ColType, bool)]) -> Arc<WriterProperties> {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(GROUP_ROWS))
        .set_dictionary_enabled(false)
        .set_created_by(format!("kstate {}", env!("CARGO_PKG_VERSION")));
    for (name, t, _) in cols {
        if matches!(t, ColType::Str) {
            b = b.set_column_dictionary_enabled(ColumnPath::from(name.as_str()), true);
        }
        if name == "seq" {
            // Increasing with small steps: a few bits a row instead of eight bytes.
            b = b.set_column_encoding(
                ColumnPath::from(name.as_str()),
                Encoding::DELTA_BINARY_PACKED,
            );
        }
    }
    Arc::new(b.build())
}

impl Table {
    pub(super) fn create(path: PathBuf, cols: &[(String, ColType, bool)]) -> Result<Table, Error> {
        let fields = cols.iter().map(|(n, t, o)| column(n, *t, *o)).collect();
        let schema = Arc::new(
            Type::group_type_builder("schema")
                .with_fields(fields)
                .build()
                .map_err(|e| perr(&path, e))?,
        );
        let f = NewFile::create(&path).map_err(|e| Error::write(&path, e))?;
        let writer =
            SerializedFileWriter::new(BufWriter::with_capacity(1 << 20, f), schema, props(cols))
                .map_err(|e| perr(&path, e))?;
        Ok(Table {
            cols: cols.iter().map(|(_, t, o)| Col::new(t, *o)).collect(),
            path,
            writer,
            rows: 0,
            total: 0,
        })
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<(), Error> {
        if self.rows == 0 {
            return Ok(());
        }
        let path = &self.path;
        let mut rg = self.writer.next_row_group().map_err(|e| perr(path, e))?;
        for col in &mut self.cols {
            let mut cw = rg
                .next_column()
                .map_err(|e| perr(path, e))?
                .expect("a writer per column");
            let def = col.def.as_deref();
            let r = match &mut col.data {
                Data::I32(v) => {
                    let r = cw.typed::<Int32Type>().write_batch(v, def, None);
                    v.clear();
                    r
                }
                Data::I64(v) => {
                    let r = cw.typed::<Int64Type>().write_batch(v, def, None);
                    v.clear();
                    r
                }
                Data::Bytes(v) => {
                    let r = cw.typed::<ByteArrayType>().write_batch(v, def, None);
                    v.clear();
                    r
                }
                Data::Bool(v) => {
                    let r = cw.typed::<BoolType>().write_batch(v, def, None);
                    v.clear();
                    r
                }
            };
            r.map_err(|e| perr(path, e))?;
            if let Some(d) = &mut col.def {
                d.clear();
            }
            cw.close().map_err(|e| perr(path, e))?;
        }
        rg.close().map_err(|e| perr(path, e))?;
        self.total += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Ends a row; writes a row group when it is full.
    #[inline]
    pub(super) fn row_done(&mut self) -> Result<(), Error> {
        self.rows += 1;
        if self.rows >= GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn close(mut self) -> Result<u64, Error> {
        self.flush()?;
        let path = self.path.clone();
        let w = self.writer.into_inner().map_err(|e| perr(&path, e))?;
        let mut f = w
            .into_inner()
            .map_err(|e| Error::write(&path, e.into_error()))?;
        f.persist().map_err(|e| Error::write(&path, e))?;
        Ok(self.total)
    }
}

/// How one event field is read into its column.
enum Getter {
    Int(FieldRef),
    Str(kstate_format::Field),
    Bytes(kstate_format::Field),
}

struct EventTable {
    table: Table,
    getters: Vec<Getter>,
}

fn event_table(dir: &Path, file_name: &str, fmt: &EventFormat) -> Result<EventTable, Error> {
    let mut cols: Vec<(String, ColType, bool)> = COMMON_COLUMNS
        .iter()
        .map(|&(name, t, optional)| (name.to_string(), t, optional))
        .collect();
    let mut getters = Vec::new();
    for (f, name) in fmt.fields.iter().zip(field_columns(fmt)) {
        getters.push(match column_kind(f) {
            ColumnKind::Int => Getter::Int(FieldRef::from(f)),
            ColumnKind::Text => Getter::Str(f.clone()),
            ColumnKind::Bytes => Getter::Bytes(f.clone()),
        });
        cols.push((name, field_type(f), true));
    }
    let table = Table::create(dir.join(format!("{file_name}.parquet")), &cols)?;
    Ok(EventTable { table, getters })
}

/// What a conversion wrote.
pub struct Summary {
    pub dir: PathBuf,
    pub events: u64,
    /// (table, rows)
    pub tables: Vec<(String, u64)>,
    pub skipped: Vec<&'static str>,
}

/// The host the trace was recorded on: kstate's recording section, else the uname's
/// node name; made safe for a directory name.
fn host(trace: &Trace) -> String {
    let from_rec = trace
        .extra(ids::RECORDING)
        .and_then(|b| Recording::decode(b).ok())
        .map(|r| r.hostname)
        .filter(|h| !h.is_empty());
    let h = from_rec
        .or_else(|| {
            trace
                .uname
                .as_deref()
                .and_then(|u| u.split_whitespace().nth(1))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into());
    h.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn write(source: &Source, out: &Path, names: &[String]) -> Result<Summary, Error> {
    let trace = source.trace();
    let (selected, explicit) = common::select(names)?;
    let dir = out.join(format!("host={}", host(trace)));
    if let Ok(rd) = std::fs::read_dir(&dir) {
        if rd
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "parquet"))
        {
            return Err(Error::Unsupported(format!(
                "{} already holds Parquet tables: remove them or choose another -o",
                dir.display()
            )));
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::write(&dir, e))?;
    if trace.container == kstate_format::Container::RawDir {
        // Raw captures keep thread groups in a file next to the pages: carried along, so
        // `kstate analyze --pid` on the directory matches what it matches on the capture.
        let src = trace.path.join("saved_tgids");
        if src.is_file() {
            let dst = dir.join("saved_tgids");
            let tgids = std::fs::read(&src).map_err(|e| kstate_format::Error::io(&src, e))?;
            kstate_format::output::write(&dst, tgids).map_err(|e| Error::write(&dst, e))?;
        }
    }
    let (ev, logs) = std::thread::scope(|s| {
        let logs = s.spawn(|| analyzer_tables(source, &dir, &selected, explicit));
        let ev = event_tables(trace, &dir);
        (ev, logs.join().expect("the analyzer thread panicked"))
    });
    let (events, mut tables) = ev?;
    let (logs, skipped) = logs?;
    tables.extend(logs);
    Ok(Summary {
        dir,
        events,
        tables,
        skipped,
    })
}

struct CpuMeta {
    events: u64,
    lost: Option<u64>,
    first: Option<u64>,
    last: u64,
}

fn event_tables(trace: &Trace, dir: &Path) -> Result<(u64, Vec<(String, u64)>), Error> {
    // File names: the event's name, or SYSTEM-NAME where names repeat.
    let mut count: HashMap<&str, usize> = HashMap::new();
    for e in trace.events.iter() {
        *count.entry(e.name.as_str()).or_default() += 1;
    }
    let file_name = |e: &EventFormat| {
        if count[e.name.as_str()] > 1 {
            format!("{}-{}", e.system, e.name)
        } else {
            e.name.clone()
        }
    };
    let (tgids, saved) = common::tasks(trace);
    let mut comms: HashMap<i32, ByteArray> = saved
        .iter()
        .map(|(p, c)| (*p, ByteArray::from(c.as_bytes().to_vec())))
        .collect();
    comms.insert(0, ByteArray::from(&b"<idle>"[..]));
    let sw = SwitchFields::bind(trace);
    let mut tables: Vec<Option<EventTable>> = Vec::new();
    tables.resize_with(trace.events.id_limit(), || None);
    let mut cpus: Vec<CpuMeta> = Vec::new();
    let mut buffered = 0usize;
    let mut m = Merger::new(trace, None, IdFilter::all())?;
    let mut errors = Vec::new();
    let mut total = 0u64;
    let mut losses: Vec<Loss> = Vec::new();
    let mut first_ts = None;
    loop {
        let ev = match m.next() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => {
                eprintln!("kstate: {e}");
                errors.push(e);
                continue;
            }
        };
        let seq = total;
        total += 1;
        match ev.lost_before {
            Lost::None => {}
            Lost::Count(k) => losses.push(Loss {
                cpu: ev.cpu,
                seq: Some(seq),
                count: Some(k),
            }),
            Lost::Unknown => losses.push(Loss {
                cpu: ev.cpu,
                seq: Some(seq),
                count: None,
            }),
        }
        first_ts.get_or_insert(ev.ts);
        let c = ev.cpu as usize;
        if c >= cpus.len() {
            cpus.resize_with(c + 1, || CpuMeta {
                events: 0,
                lost: Some(0),
                first: None,
                last: 0,
            });
        }
        let cm = &mut cpus[c];
        cm.events += 1;
        cm.first.get_or_insert(ev.ts);
        cm.last = ev.ts;
        cm.lost = match (cm.lost, ev.lost_before) {
            (l, Lost::None) => l,
            (Some(n), Lost::Count(k)) => Some(n + k),
            _ => None,
        };
        let tid = ev.pid();
        if let Some(s) = sw.as_ref().filter(|s| s.id == ev.id) {
            let x = s.read(&ev);
            for (t, cm) in [(x.prev_pid, &x.prev_comm), (x.next_pid, &x.next_comm)] {
                if t != 0 && cm[0] != 0 {
                    let cur = comms.get(&t).map(|b| b.data());
                    let new = comm_str(cm).as_bytes();
                    if cur != Some(new) {
                        comms.insert(t, ByteArray::from(new.to_vec()));
                    }
                }
            }
        }
        let id = ev.id as usize;
        if id >= tables.len() {
            tables.resize_with(id + 1, || None);
        }
        if tables[id].is_none() {
            let Some(fmt) = trace.events.get(ev.id) else {
                return Err(kstate_format::Error::new(
                    ErrorKind::Corrupt,
                    None,
                    format!("event id {} on CPU {} has no format", ev.id, ev.cpu),
                )
                .in_file(&trace.path)
                .into());
            };
            tables[id] = Some(event_table(dir, &file_name(fmt), fmt)?);
        }
        let t = tables[id].as_mut().expect("made above");
        let (p, e) = (ev.payload, ev.endian);
        let cols = &mut t.table.cols;
        cols[0].int(ev.ts as i64);
        cols[1].int(i64::from(ev.cpu));
        cols[2].int(i64::from(tid));
        cols[5].int(seq as i64);
        match tgids.get(&tid) {
            Some(g) => cols[3].int(i64::from(*g)),
            None => cols[3].null(),
        }
        match comms.get(&tid) {
            Some(b) => cols[4].bytes(b.clone()),
            None => cols[4].null(),
        }
        for (g, col) in t.getters.iter().zip(&mut cols[6..]) {
            match g {
                Getter::Int(f) => match f.get_i64(p, e) {
                    Some(v) => col.int(v),
                    None => col.null(),
                },
                Getter::Str(f) => match f.str(p, e) {
                    Some(s) => col.bytes(ByteArray::from(s.as_bytes().to_vec())),
                    None => col.null(),
                },
                Getter::Bytes(f) => match f.data(p, e) {
                    Some(d) => col.bytes(ByteArray::from(d.to_vec())),
                    None => col.null(),
                },
            }
        }
        let before = t.table.rows;
        t.table.row_done()?;
        if t.table.rows == 0 {
            buffered -= before;
        } else {
            buffered += 1;
        }
        if buffered >= BUFFERED_ROWS {
            // Too much held over all tables: write out the fullest.
            if let Some(big) = tables.iter_mut().flatten().max_by_key(|t| t.table.rows) {
                buffered -= big.table.rows;
                big.table.flush()?;
            }
        }
    }
    losses.extend(trailing_losses(&m, &losses));
    let mut written = Vec::new();
    let mut out = Vec::new();
    for (id, t) in tables.into_iter().enumerate() {
        let Some(t) = t else { continue };
        let name = t
            .table
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        written.push((id as u32, name.clone()));
        out.push((name, t.table.close()?));
    }
    out.sort();
    let meta_rows = meta_table(trace, dir, &cpus)?;
    out.push(("meta".into(), meta_rows));
    if let Some(e) = errors.into_iter().next() {
        return Err(e.into());
    }
    // Last, and only for a whole trace: its presence makes the directory a trace.
    let conv = Conversion {
        tables: &written,
        losses: &losses,
        first_ts,
        events: total,
    };
    write_meta(trace, dir, &conv)?;
    Ok((total, out))
}

/// Losses after a CPU's last event: the merge counts them in its totals but hands them
/// to no event.
fn trailing_losses(m: &Merger, seen: &[Loss]) -> Vec<Loss> {
    let mut out = Vec::new();
    for (cpu, t) in m.totals() {
        let on_cpu = seen.iter().filter(|l| l.cpu == cpu);
        let counted: u64 = on_cpu.clone().filter_map(|l| l.count).sum();
        let uncounted = on_cpu.filter(|l| l.count.is_none()).count() as u64;
        if t.lost_counted > counted {
            out.push(Loss {
                cpu,
                seq: None,
                count: Some(t.lost_counted - counted),
            });
        }
        if t.lost_unknown > uncounted {
            out.push(Loss {
                cpu,
                seq: None,
                count: None,
            });
        }
    }
    out
}

fn meta_table(trace: &Trace, dir: &Path, cpus: &[CpuMeta]) -> Result<u64, Error> {
    let s = |n: &str| (n.to_string(), ColType::Str, true);
    let u64c = |n: &str, o: bool| {
        (
            n.to_string(),
            ColType::Int {
                bits: 64,
                signed: false,
            },
            o,
        )
    };
    let cols = vec![
        s("host"),
        s("kernel"),
        s("clock"),
        (
            "cpus".to_string(),
            ColType::Int {
                bits: 32,
                signed: false,
            },
            false,
        ),
        (
            "cpu".to_string(),
            ColType::Int {
                bits: 32,
                signed: false,
            },
            false,
        ),
        u64c("events", false),
        u64c("lost", true),
        u64c("first_ts", true),
        u64c("last_ts", true),
        u64c("trace_first_ts", true),
        u64c("trace_last_ts", true),
        s("file"),
        s("tool"),
    ];
    let mut t = Table::create(dir.join("meta.parquet"), &cols)?;
    let first = cpus.iter().filter_map(|c| c.first).min();
    let last = cpus
        .iter()
        .filter(|c| c.first.is_some())
        .map(|c| c.last)
        .max();
    let host = host(trace);
    let str_or_null = |col: &mut Col, v: Option<&str>| match v {
        Some(v) => col.bytes(ByteArray::from(v.as_bytes().to_vec())),
        None => col.null(),
    };
    let opt = |col: &mut Col, v: Option<u64>| match v {
        Some(v) => col.int(v as i64),
        None => col.null(),
    };
    // Every CPU the trace has data for, with or without events.
    let mut ids: Vec<u32> = trace.cpu_data.iter().map(|c| c.cpu).collect();
    ids.extend((0..cpus.len() as u32).filter(|c| cpus[*c as usize].events > 0));
    ids.sort_unstable();
    ids.dedup();
    for cpu in ids {
        let c = cpus.get(cpu as usize);
        let cols = &mut t.cols;
        str_or_null(&mut cols[0], Some(&host));
        str_or_null(&mut cols[1], trace.uname.as_deref());
        str_or_null(&mut cols[2], trace.clock.as_deref());
        cols[3].int(i64::from(trace.cpu_count));
        cols[4].int(i64::from(cpu));
        cols[5].int(c.map_or(0, |c| c.events) as i64);
        opt(&mut cols[6], c.map_or(Some(0), |c| c.lost));
        opt(&mut cols[7], c.and_then(|c| c.first));
        opt(&mut cols[8], c.and_then(|c| c.first.map(|_| c.last)));
        opt(&mut cols[9], first);
        opt(&mut cols[10], last);
        str_or_null(&mut cols[11], Some(&trace.path.display().to_string()));
        str_or_null(&mut cols[12], trace.tool_version.as_deref());
        t.row_done()?;
    }
    t.close()
}

/// The analyzers' `--log` rows, one table each.
struct LogTable<'a> {
    info: &'a Info,
    dir: &'a Path,
    table: Option<Table>,
    err: Option<Error>,
    /// Keys and task names repeat: one buffer each, shared by every row that has it.
    names: Interned,
}

#[derive(Default)]
struct Interned(FxMap<Box<[u8]>, ByteArray>);

impl Interned {
    #[inline]
    fn get(&mut self, s: &str) -> ByteArray {
        if let Some(b) = self.0.get(s.as_bytes()) {
            return b.clone();
        }
        if self.0.len() >= 1 << 16 {
            self.0.clear();
        }
        let b = ByteArray::from(s.as_bytes().to_vec());
        self.0.insert(s.as_bytes().into(), b.clone());
        b
    }
}

impl LogTable<'_> {
    fn columns(info: &Info) -> Vec<(String, ColType, bool)> {
        let value = match info.unit {
            Unit::Ns => "dur_ns".to_string(),
            u => u.suffix().to_string(),
        };
        let i32c = |n: &str, o| {
            (
                n.to_string(),
                ColType::Int {
                    bits: 32,
                    signed: true,
                },
                o,
            )
        };
        let mut c = vec![
            (
                "ts".to_string(),
                ColType::Int {
                    bits: 64,
                    signed: false,
                },
                false,
            ),
            ("key".to_string(), ColType::Str, false),
            (
                value,
                ColType::Int {
                    bits: 64,
                    signed: false,
                },
                true,
            ),
            (
                "level".to_string(),
                ColType::Int {
                    bits: 64,
                    signed: false,
                },
                true,
            ),
            i32c("tid", false),
            i32c("pid", true),
            ("comm".to_string(), ColType::Str, false),
            (
                "cpu".to_string(),
                ColType::Int {
                    bits: 32,
                    signed: false,
                },
                false,
            ),
        ];
        if let Some(f) = info.flag_column {
            c.push((f.to_string(), ColType::Bool, false));
        }
        c
    }
}

impl LogSink for LogTable<'_> {
    fn row(&mut self, r: &LogRow<'_>) -> std::io::Result<()> {
        let to_io = |e: Error| std::io::Error::other(e.to_string());
        if self.table.is_none() {
            let path = self.dir.join(format!("log_{}.parquet", self.info.name));
            self.table = Some(Table::create(path, &Self::columns(self.info)).map_err(to_io)?);
        }
        let t = self.table.as_mut().expect("made above");
        let c = &mut t.cols;
        c[0].int(r.start as i64);
        c[1].bytes(self.names.get(r.key));
        match r.kind {
            Kind::Dur => {
                c[2].int(r.value as i64);
                c[3].null();
            }
            // A mark's value (e.g. a forked child's pid) is not in the analyzer's unit.
            Kind::Level | Kind::Mark => {
                c[2].null();
                c[3].int(r.value as i64);
            }
        }
        c[4].int(i64::from(r.tid));
        match r.pid {
            Some(p) => c[5].int(i64::from(p)),
            None => c[5].null(),
        }
        c[6].bytes(self.names.get(r.comm));
        c[7].int(i64::from(r.cpu));
        if self.info.flag_column.is_some() {
            c[8].bool(r.flag);
        }
        t.row_done().map_err(|e| {
            let msg = e.to_string();
            self.err = Some(e);
            std::io::Error::other(msg)
        })
    }
}

type Tables = (Vec<(String, u64)>, Vec<&'static str>);

fn analyzer_tables(
    source: &Source,
    dir: &Path,
    selected: &[&'static Info],
    explicit: bool,
) -> Result<Tables, Error> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for info in selected {
        let mut sink = LogTable {
            info,
            dir,
            table: None,
            err: None,
            names: Interned::default(),
        };
        // A damaged trace is refused here, as the events' tables refuse it: a directory
        // of tables is a trace of its own, and must not pass a part off as the whole.
        let mut damage = Vec::new();
        let r = common::run_analyzer(source, info, explicit, &mut sink, &mut damage);
        if let Some(e) = sink.err.take() {
            return Err(e);
        }
        if let Some(e) = damage.into_iter().next() {
            return Err(e.into());
        }
        match r? {
            Some(_) => {
                let name = format!("log_{}", info.name);
                let rows = match sink.table.take() {
                    Some(t) => t.close()?,
                    // No rows: an empty table, so queries over many hosts still find it.
                    None => Table::create(
                        dir.join(format!("{name}.parquet")),
                        &LogTable::columns(info),
                    )?
                    .close()?,
                };
                out.push((name, rows));
            }
            None => skipped.push(info.name),
        }
    }
    Ok((out, skipped))
}
