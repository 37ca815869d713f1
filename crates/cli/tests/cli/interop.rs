//! `kstate convert --to chrome-json | perfetto | parquet`: what the files hold is checked
//! against kstate's own views of the same trace: `kstate dump --json` for sched_switch
//! events and `kstate analyze NAME --log --format json` for analyzer rows.
//!
//! Perfetto files are decoded twice: by a small protobuf reader here (wire format only,
//! field numbers from perfetto_trace.proto), and with Perfetto's own schema
//! (`perfetto_trace_pb2` from the `perfetto` package on PyPI, in a venv this test makes);
//! both must agree. Perfetto's trace processor itself is not used: its Python package
//! downloads the native binary from outside PyPI at run time, which this machine cannot.

use crate::support;

use support::{kstate, KSTATE};

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn lisa() -> PathBuf {
    let f = support::fixture("lisa-sched_load/trace.dat");
    assert!(f.is_file(), "fixture missing: {}", f.display());
    f
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A trace of this machine: sched and syscall events, all CPUs, while kstate's getppid
/// and sleep workloads run (recorded once per test binary).
fn recording() -> &'static Path {
    static REC: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &REC.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("rec.dat");
        let o = Command::new(KSTATE)
            .args([
                "record",
                "-e",
                "sched,syscall",
                "-a",
                "--sysinfo-interval",
                "0",
                "-o",
            ])
            .arg(&f)
            .args(["--", KSTATE, "workload", "sleep", "20", "2"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "kstate record: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        (dir, f)
    })
    .1
}

/// `kstate analyze NAME FILE --log --format json` rows.
fn log_rows(analyzer: &str, file: &Path) -> Vec<Value> {
    let out = kstate(&["analyze", analyzer, s(file), "--log", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["rows"].as_array().unwrap().clone()
}

/// (ts, cpu, next_pid) of every sched_switch, per `kstate dump --json`.
fn switches(file: &Path) -> Vec<(u64, u64, i64)> {
    kstate(&["dump", "--json", "--events", "sched_switch", s(file)])
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["ts"].as_u64().unwrap(),
                v["cpu"].as_u64().unwrap(),
                v["fields"]["next_pid"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Slices per track must nest; kstate's tracks never even overlap.
fn assert_no_overlap(what: &str, mut spans: Vec<(u64, u64)>) {
    spans.sort_unstable();
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].1,
            "{what}: slices overlap: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
}

// ---------------------------------------------------------------------------------------
// Chrome JSON

fn us_to_ns(v: &Value) -> u64 {
    // Written as microseconds with exactly three decimals.
    let t = v.to_string();
    let (a, b) = t.split_once('.').unwrap_or((&t, "0"));
    a.parse::<u64>().unwrap() * 1000 + format!("{b:0<3}").parse::<u64>().unwrap()
}

fn check_chrome(file: &Path, analyzers: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.json");
    kstate(&["convert", s(file), "--to", "chrome-json", "-o", s(&out)]);
    let text = std::fs::read_to_string(&out).unwrap();
    let v: Value = serde_json::from_str(&text).expect("valid JSON");
    let evs = v["traceEvents"].as_array().unwrap();
    // Names of processes and threads.
    let mut procs = HashMap::new();
    let mut threads = HashMap::new();
    for e in evs.iter().filter(|e| e["ph"] == "M") {
        let name = e["args"]["name"].as_str().unwrap().to_string();
        match e["name"].as_str().unwrap() {
            "process_name" => procs.insert(e["pid"].as_u64().unwrap(), name),
            "thread_name" => threads.insert(e["tid"].as_u64().unwrap(), name),
            n => panic!("metadata {n}"),
        };
    }
    // CPU tracks: one X per run of a task, i.e. per switch to a task other than idle.
    let sw = switches(file);
    let runs: Vec<&Value> = evs.iter().filter(|e| e["cat"] == "sched").collect();
    assert_eq!(
        runs.len(),
        sw.iter().filter(|x| x.2 != 0).count(),
        "one run per switch to a task"
    );
    let mut per_cpu: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    let mut starts: Vec<(u64, u64, i64)> = Vec::new();
    for r in &runs {
        assert_eq!(procs[&r["pid"].as_u64().unwrap()], "CPUs");
        let track = threads[&r["tid"].as_u64().unwrap()].clone();
        let cpu: u64 = track.strip_prefix("CPU ").unwrap().parse().unwrap();
        let (t, d) = (us_to_ns(&r["ts"]), us_to_ns(&r["dur"]));
        per_cpu.entry(track).or_default().push((t, t + d));
        starts.push((t, cpu, r["args"]["tid"].as_i64().unwrap()));
    }
    for (track, spans) in per_cpu {
        assert_no_overlap(&track, spans);
    }
    // Every run starts at a switch to that task on that CPU.
    starts.sort_unstable();
    let mut to_task: Vec<(u64, u64, i64)> = sw.into_iter().filter(|x| x.2 != 0).collect();
    to_task.sort_unstable();
    assert_eq!(starts, to_task);
    // Analyzer rows.
    for a in analyzers {
        let rows = log_rows(a, file);
        assert!(!rows.is_empty(), "{a}: no rows to check");
        let proc = format!("kstate {a}");
        let pid = procs
            .iter()
            .find(|(_, n)| **n == proc)
            .map(|(p, _)| *p)
            .unwrap_or_else(|| panic!("no process {proc}"));
        let mine: Vec<&Value> = evs
            .iter()
            .filter(|e| e["pid"].as_u64() == Some(pid) && e["ph"] != "M")
            .collect();
        assert_eq!(mine.len(), rows.len(), "{a}: one event per --log row");
        let mut want: Vec<(u64, String, u64)> = Vec::new();
        let mut got: Vec<(u64, String, u64)> = Vec::new();
        let mut tracks: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for r in &rows {
            let v = r["dur_ns"].as_u64().or(r["level"].as_u64()).unwrap_or(0);
            want.push((
                r["ts"].as_u64().unwrap(),
                r["key"].as_str().unwrap().into(),
                v,
            ));
        }
        for e in &mine {
            let t = us_to_ns(&e["ts"]);
            let v = match e["ph"].as_str().unwrap() {
                "X" => {
                    let d = us_to_ns(&e["dur"]);
                    let track = threads[&e["tid"].as_u64().unwrap()].clone();
                    assert!(track.starts_with(&format!("{a} CPU ")), "{track}");
                    tracks
                        .entry(e["tid"].as_u64().unwrap())
                        .or_default()
                        .push((t, t + d));
                    d
                }
                "C" => e["args"]["value"].as_u64().unwrap(),
                p => panic!("{a}: unexpected phase {p}"),
            };
            got.push((t, e["name"].as_str().unwrap().into(), v));
        }
        want.sort();
        got.sort();
        assert_eq!(got, want, "{a}: slices are the --log rows");
        for (tid, spans) in tracks {
            assert_no_overlap(&threads[&tid], spans);
        }
    }
}

#[test]
fn chrome_json_of_lisa_trace_has_a_run_per_switch_and_the_analyzer_rows() {
    check_chrome(&lisa(), &["offcpu", "runq"]);
}

#[test]
fn chrome_json_of_a_recording() {
    check_chrome(recording(), &["syscall", "offcpu"]);
}

// ---------------------------------------------------------------------------------------
// Perfetto: a protobuf wire-format reader

#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// fixed64/fixed32/double/float: kstate writes none.
    Fixed,
}

fn read_varint(b: &[u8], i: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let c = b[*i];
        *i += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c < 0x80 {
            return v;
        }
        shift += 7;
        assert!(shift < 70, "varint too long");
    }
}

/// The fields of one message, in order; panics on malformed data.
fn fields(b: &[u8]) -> Vec<(u32, Wire<'_>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = read_varint(b, &mut i);
        let (field, wire) = ((key >> 3) as u32, key & 7);
        assert!(field > 0, "field number 0 at {i}");
        let v = match wire {
            0 => Wire::Varint(read_varint(b, &mut i)),
            1 => {
                assert!(i + 8 <= b.len(), "fixed64 past the end");
                i += 8;
                Wire::Fixed
            }
            2 => {
                let n = read_varint(b, &mut i) as usize;
                assert!(i + n <= b.len(), "length past the end");
                let v = Wire::Bytes(&b[i..i + n]);
                i += n;
                v
            }
            5 => {
                assert!(i + 4 <= b.len(), "fixed32 past the end");
                i += 4;
                Wire::Fixed
            }
            w => panic!("wire type {w} at {i}"),
        };
        out.push((field, v));
    }
    out
}

fn uint(f: &[(u32, Wire<'_>)], n: u32) -> Option<u64> {
    f.iter().rev().find_map(|(k, v)| match v {
        Wire::Varint(x) if *k == n => Some(*x),
        _ => None,
    })
}

fn msg<'a>(f: &[(u32, Wire<'a>)], n: u32) -> Option<&'a [u8]> {
    f.iter().rev().find_map(|(k, v)| match v {
        Wire::Bytes(x) if *k == n => Some(*x),
        _ => None,
    })
}

fn text(f: &[(u32, Wire<'_>)], n: u32) -> Option<String> {
    msg(f, n).map(|b| String::from_utf8(b.to_vec()).unwrap())
}

#[derive(Debug, Default)]
struct Pftrace {
    /// (ts, cpu, next_pid) of every sched_switch
    switches: Vec<(u64, u64, i64)>,
    /// uuid -> (name, parent, is counter)
    tracks: HashMap<u64, (String, Option<u64>, bool)>,
    /// track uuid -> (type, ts, name)
    events: HashMap<u64, Vec<(u64, u64, String)>>,
    thread_names: HashMap<i64, String>,
    sequences: Vec<u64>,
}

fn decode(path: &Path) -> Pftrace {
    let data = std::fs::read(path).unwrap();
    let mut t = Pftrace::default();
    for (n, p) in fields(&data) {
        assert_eq!(n, 1, "Trace holds only packets");
        let Wire::Bytes(p) = p else { panic!("packet") };
        let pf = fields(p);
        let seq = uint(&pf, 10).expect("trusted_packet_sequence_id on every packet");
        if !t.sequences.contains(&seq) {
            t.sequences.push(seq);
        }
        if let Some(b) = msg(&pf, 1) {
            let bf = fields(b);
            let cpu = uint(&bf, 1).expect("bundle cpu");
            let mut last = 0;
            for (k, v) in &bf {
                let (2, Wire::Bytes(e)) = (k, v) else {
                    continue;
                };
                let ef = fields(e);
                let ts = uint(&ef, 1).expect("event timestamp");
                assert!(ts >= last, "bundle events in time order");
                last = ts;
                if let Some(s) = msg(&ef, 4) {
                    let sf = fields(s);
                    let next = uint(&sf, 6).unwrap() as i64;
                    t.switches.push((ts, cpu, next));
                }
            }
        }
        if let Some(d) = msg(&pf, 60) {
            let df = fields(d);
            let uuid = uint(&df, 1).unwrap();
            let name = text(&df, 2).unwrap();
            let prev = t
                .tracks
                .insert(uuid, (name, uint(&df, 5), msg(&df, 8).is_some()));
            assert!(prev.is_none(), "track {uuid} described twice");
        }
        if let Some(e) = msg(&pf, 11) {
            let ef = fields(e);
            let ts = uint(&pf, 8).expect("track event timestamp");
            let track = uint(&ef, 11).expect("track_uuid");
            t.events.entry(track).or_default().push((
                uint(&ef, 9).unwrap(),
                ts,
                text(&ef, 23).unwrap_or_default(),
            ));
        }
        if let Some(pt) = msg(&pf, 2) {
            for (k, v) in fields(pt) {
                if let (2, Wire::Bytes(th)) = (k, v) {
                    let tf = fields(th);
                    t.thread_names
                        .insert(uint(&tf, 1).unwrap() as i64, text(&tf, 2).unwrap());
                }
            }
        }
    }
    t
}

/// Perfetto's own schema's view: counts printed by a Python script using
/// `perfetto.protos.perfetto.trace.perfetto_trace_pb2`.
fn decode_with_schema(path: &Path) -> Value {
    const SCRIPT: &str = r#"
import json, sys
from collections import Counter
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], 'rb').read())
names = {}
parent = {}
slices = Counter()
switches = 0
threads = 0
for p in t.packet:
    if p.HasField('ftrace_events'):
        switches += sum(1 for e in p.ftrace_events.event if e.HasField('sched_switch'))
    if p.HasField('track_descriptor'):
        d = p.track_descriptor
        names[d.uuid] = d.name
        parent[d.uuid] = d.parent_uuid
    if p.HasField('process_tree'):
        threads += len(p.process_tree.threads)
for p in t.packet:
    if p.HasField('track_event') and p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        slices[names[parent[p.track_event.track_uuid]]] += 1
print(json.dumps({"switches": switches, "tracks": len(names), "threads": threads,
                  "slices": dict(slices)}))
"#;
    let o = Command::new(python())
        .arg("-c")
        .arg(SCRIPT)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "decoding with perfetto_trace_pb2: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A Python with `perfetto`, `protobuf` and `duckdb` from PyPI: $KSTATE_TEST_PYTHON, or a
/// venv made once under the target directory. Fails (does not skip) when PyPI cannot be
/// reached.
fn python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let check = |py: &Path| {
            Command::new(py)
                .args([
                    "-c",
                    "import duckdb, perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                ])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if let Some(p) = std::env::var_os("KSTATE_TEST_PYTHON") {
            let p = PathBuf::from(p);
            assert!(
                check(&p),
                "KSTATE_TEST_PYTHON={} lacks duckdb or perfetto",
                p.display()
            );
            return p;
        }
        support::python_venv(
            "pyvenv",
            &["duckdb", "perfetto", "protobuf"],
            "duckdb, perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        )
    })
    .clone()
}

fn check_perfetto(file: &Path, analyzers: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.pftrace");
    kstate(&["convert", s(file), "--to", "perfetto", "-o", s(&out)]);
    let t = decode(&out);
    assert_eq!(t.sequences, vec![1, 2], "scheduling, then analyzer tracks");
    // Native scheduling data: every sched_switch, as kstate dump shows it.
    let mut sw = switches(file);
    let mut got = t.switches.clone();
    sw.sort_unstable();
    got.sort_unstable();
    assert!(!sw.is_empty());
    assert_eq!(got, sw, "sched_switch events");
    // Thread names for every task switched to.
    for (_, _, pid) in &sw {
        if *pid != 0 {
            assert!(t.thread_names.contains_key(pid), "no name for thread {pid}");
        }
    }
    // Analyzer tracks and slices.
    let mut slices_by_analyzer: BTreeMap<String, u64> = BTreeMap::new();
    for a in analyzers {
        let rows = log_rows(a, file);
        assert!(!rows.is_empty(), "{a}: no rows to check");
        let parent = format!("kstate {a}");
        let (&puuid, _) = t
            .tracks
            .iter()
            .find(|(_, (n, p, _))| *n == parent && p.is_none())
            .unwrap_or_else(|| panic!("no track {parent}"));
        let children: Vec<u64> = t
            .tracks
            .iter()
            .filter(|(_, (_, p, _))| *p == Some(puuid))
            .map(|(u, _)| *u)
            .collect();
        let mut want: Vec<(u64, String, u64)> = rows
            .iter()
            .filter_map(|r| {
                Some((
                    r["ts"].as_u64()?,
                    r["key"].as_str()?.to_string(),
                    r["dur_ns"].as_u64()?,
                ))
            })
            .collect();
        let mut got: Vec<(u64, String, u64)> = Vec::new();
        let mut cpus_seen = std::collections::BTreeSet::new();
        for c in &children {
            let (name, _, counter) = &t.tracks[c];
            if *counter {
                continue;
            }
            let cpu: u64 = name
                .strip_prefix(&format!("{a} CPU "))
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("track name {name}"));
            cpus_seen.insert(cpu);
            let evs = &t.events[c];
            let mut spans = Vec::new();
            let mut open: Vec<(u64, String)> = Vec::new();
            for (ty, ts, n) in evs {
                match ty {
                    1 => open.push((*ts, n.clone())),
                    2 => {
                        let (s0, n0) = open.remove(0);
                        got.push((s0, n0, ts - s0));
                        spans.push((s0, *ts));
                    }
                    t => panic!("{name}: event type {t}"),
                }
            }
            assert!(open.is_empty(), "{name}: unfinished slices");
            assert_no_overlap(name, spans);
        }
        want.sort();
        got.sort();
        assert_eq!(got.len(), want.len(), "{a}: one slice per --log row");
        assert_eq!(got, want, "{a}: slices are the --log rows");
        let row_cpus: std::collections::BTreeSet<u64> =
            rows.iter().map(|r| r["cpu"].as_u64().unwrap()).collect();
        assert_eq!(cpus_seen, row_cpus, "{a}: a track per CPU with rows");
        slices_by_analyzer.insert(parent, got.len() as u64);
    }
    // Perfetto's schema agrees.
    let v = decode_with_schema(&out);
    assert_eq!(v["switches"].as_u64().unwrap(), t.switches.len() as u64);
    assert_eq!(v["tracks"].as_u64().unwrap(), t.tracks.len() as u64);
    assert_eq!(v["threads"].as_u64().unwrap(), t.thread_names.len() as u64);
    for (parent, n) in slices_by_analyzer {
        assert_eq!(
            v["slices"][&parent].as_u64(),
            Some(n),
            "{parent} per the schema"
        );
    }
}

#[test]
fn perfetto_of_lisa_trace_holds_every_switch_and_the_analyzer_slices() {
    check_perfetto(&lisa(), &["offcpu"]);
}

#[test]
fn perfetto_of_a_recording() {
    check_perfetto(recording(), &["syscall", "offcpu"]);
}

#[test]
fn convert_to_dat_rewrites_a_trace_dat_as_trace_cmd_reads_it() {
    // A v6 file from trace-cmd, rewritten as kstate writes v7 (the way through for files
    // an older kstate wrote with their metadata after 2 GiB of CPU data): trace-cmd
    // prints the same report for both.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.dat");
    let o = Command::new(KSTATE)
        .args(["convert", s(&lisa()), "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = |f: &Path| {
        let o = Command::new("trace-cmd")
            .args(["report", "-i"])
            .arg(f)
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap()
    };
    let (a, b) = (report(&lisa()), report(&out));
    assert!(a.lines().count() > 1000);
    assert_eq!(a, b);
}

// ---------------------------------------------------------------------------------------
// Parquet, queried with DuckDB (PyPI `duckdb` in the venv above)

/// Runs `sql` (with `{dir}` replaced by the output directory) in DuckDB; rows as JSON
/// arrays.
#[cfg(feature = "parquet")]
fn duckdb(dir: &Path, sql: &str) -> Vec<Value> {
    const SCRIPT: &str = r#"
import duckdb, json, sys
rows = duckdb.sql(sys.argv[1]).fetchall()
print(json.dumps([[c if isinstance(c, (int, str, type(None), bool)) else str(c) for c in r] for r in rows]))
"#;
    let sql = sql.replace("{dir}", s(dir));
    let o = Command::new(python())
        .arg("-c")
        .arg(SCRIPT)
        .arg(&sql)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "duckdb {sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[cfg(feature = "parquet")]
fn to_parquet(file: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    kstate(&["convert", s(file), "--to", "parquet", "-o", s(dir.path())]);
    dir
}

/// Every event type's table holds as many rows as `kstate info` counts, and the metadata
/// table has a row per CPU with its events and losses.
#[cfg(feature = "parquet")]
fn check_event_tables(file: &Path, dir: &Path) {
    let info: Value = serde_json::from_str(&kstate(&["info", "--json", s(file)])).unwrap();
    let counts = info["event_counts"].as_object().unwrap();
    assert!(!counts.is_empty());
    for (ev, n) in counts {
        let name = ev.rsplit(':').next().unwrap();
        let got = duckdb(
            dir,
            &format!("select count(*) from read_parquet('{{dir}}/*/{name}.parquet')"),
        );
        assert_eq!(got[0][0].as_u64(), n.as_u64(), "rows of {name}");
    }
    let meta = duckdb(
        dir,
        "select cpu, events, lost, host from read_parquet('{dir}/*/meta.parquet', \
         hive_partitioning = true) order by cpu",
    );
    let per_cpu = info["per_cpu"].as_array().unwrap();
    assert_eq!(meta.len(), per_cpu.len(), "a metadata row per CPU");
    for (m, c) in meta.iter().zip(per_cpu) {
        assert_eq!(m[0], c["cpu"]);
        assert_eq!(m[1], c["events"]);
        assert_eq!(m[2], c["lost"]);
        assert!(
            m[3].as_str().is_some_and(|h| !h.is_empty()),
            "host partition"
        );
    }
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_of_lisa_trace_has_typed_columns_equal_to_dump() {
    let f = lisa();
    let dir = to_parquet(&f);
    check_event_tables(&f, dir.path());
    // sched_switch column for column, as kstate dump --json prints it.
    let got = duckdb(
        dir.path(),
        "select ts, cpu, tid, prev_comm, prev_pid, prev_prio, prev_state, next_comm, \
         next_pid, next_prio from '{dir}/*/sched_switch.parquet' order by ts, cpu",
    );
    let want: Vec<Value> = kstate(&["dump", "--json", "--events", "sched_switch", s(&f)])
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let x = &v["fields"];
            serde_json::json!([
                v["ts"],
                v["cpu"],
                v["pid"],
                x["prev_comm"],
                x["prev_pid"],
                x["prev_prio"],
                x["prev_state"],
                x["next_comm"],
                x["next_pid"],
                x["next_prio"]
            ])
        })
        .collect();
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    let types = duckdb(
        dir.path(),
        "select column_name, column_type from (describe select * from \
         '{dir}/*/sched_switch.parquet')",
    );
    let ty = |c: &str| {
        types
            .iter()
            .find(|r| r[0] == c)
            .map(|r| r[1].as_str().unwrap().to_string())
    };
    assert_eq!(ty("ts").as_deref(), Some("UBIGINT"));
    assert_eq!(ty("prev_comm").as_deref(), Some("VARCHAR"));
    assert_eq!(ty("prev_pid").as_deref(), Some("INTEGER"));
    assert_eq!(ty("prev_state").as_deref(), Some("BIGINT"));
}

/// The acceptance check: per-syscall counts and total durations from the syscall
/// analyzer's log table equal `kstate analyze syscall --stat --format json`.
#[cfg(feature = "parquet")]
#[test]
fn parquet_syscall_log_sums_to_analyze_stat() {
    let f = recording();
    let dir = to_parquet(f);
    check_event_tables(f, dir.path());
    let stat: Value = serde_json::from_str(&kstate(&[
        "analyze",
        "syscall",
        s(f),
        "--stat",
        "--format",
        "json",
    ]))
    .unwrap();
    let mut want: Vec<(String, u64, u64, u64)> = stat["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["count"].as_u64().unwrap(),
                r["total_ns"].as_u64().unwrap(),
                r["errors"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(want.len() >= 3, "too few system calls recorded: {want:?}");
    let got = duckdb(
        dir.path(),
        "select key, count(*), sum(dur_ns)::ubigint, count(*) filter (where errors) \
         from read_parquet('{dir}/*/log_syscall.parquet', hive_partitioning = true) \
         group by key",
    );
    let mut got: Vec<(String, u64, u64, u64)> = got
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_string(),
                r[1].as_u64().unwrap(),
                r[2].as_u64().unwrap(),
                r[3].as_u64().unwrap(),
            )
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    // And the log table is the --log output row for row.
    let rows = log_rows("syscall", f);
    let n = duckdb(
        dir.path(),
        "select count(*) from '{dir}/*/log_syscall.parquet'",
    );
    assert_eq!(n[0][0].as_u64(), Some(rows.len() as u64));
    // A second conversion into the same place is refused rather than mixed in.
    let o = Command::new(KSTATE)
        .args(["convert", s(f), "--to", "parquet", "-o", s(dir.path())])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
