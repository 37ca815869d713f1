//! `kstate summarize` and `kstate fleet` on recordings of this machine made here from
//! workloads with different mixes. The merged figures are checked against every paired
//! value of every file (`kstate analyze NAME FILE --log --format json`), pooled and sorted
//! in this test: count, total, min, max exactly, and p50/p99/p99.9 to the bucket, with
//! the bucket computed here from the scheme's definition (docs/bucket-scheme.md). The
//! shipped SQL (sql/fleet_quantiles.sql) gives the same buckets in DuckDB, Spark and Trino.
//! Bad input (a summary of another scheme, a truncated summary, a recording that does not
//! parse) is reported per file and the rest still merged.
#![cfg(feature = "parquet")]

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use support::{kstate, kstate_json, record_workload, KSTATE};

/// The workloads, as (name, kstate workload args): different mixes of system calls and
/// scheduling. `getppid` twice, so that one command group merges two recordings.
const WORKLOADS: [(&str, &[&str]); 7] = [
    ("getppid", &["getppid", "3000"]),
    ("getppid2", &["getppid", "5000"]),
    ("sleep", &["sleep", "20", "1"]),
    ("fork", &["fork", "4", "--ms", "2"]),
    ("udp", &["udp", "300", "64"]),
    ("mmap", &["mmap", "2", "300"]),
    ("pages", &["touch-pages", "2000"]),
];

const ANALYZERS: [&str; 2] = ["syscall", "runq"];

struct Fleet {
    _dir: tempfile::TempDir,
    recordings: Vec<PathBuf>,
    summaries: PathBuf,
}

/// The recordings and their summaries, made once per test binary.
fn fleet() -> &'static Fleet {
    static F: OnceLock<Fleet> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let mut recordings = Vec::new();
        for (name, args) in WORKLOADS {
            let f = dir.path().join(format!("{name}.dat"));
            record_workload("sched,syscall", args, false, &f);
            recordings.push(f);
        }
        let summaries = dir.path().join("summaries");
        let mut args: Vec<&Path> = vec!["summarize".as_ref(), "-o".as_ref(), &summaries];
        args.extend(recordings.iter().map(PathBuf::as_path));
        kstate(&args);
        Fleet {
            _dir: dir,
            recordings,
            summaries,
        }
    })
}

/// The scheme's bucket of `v`, from its definition: values below 256 have their own
/// bucket; above, octave [2^e, 2^(e+1)) is cut into 128 equal parts.
fn bucket_of(v: u64) -> u64 {
    if v < 256 {
        return v;
    }
    let e = 63 - v.leading_zeros() as u64;
    256 + (e - 8) * 128 + ((v >> (e - 7)) - 128)
}

/// What the test expects of one (analyzer, key) over some files.
#[derive(Debug, PartialEq)]
struct Expect {
    count: u64,
    total: u64,
    min: u64,
    max: u64,
    /// Buckets of the nearest-rank p50, p99, p99.9.
    buckets: [u64; 3],
}

fn expect(mut v: Vec<u64>) -> Expect {
    v.sort_unstable();
    let n = v.len() as u64;
    let q = |permille: u64| {
        let rank = (permille * n).div_ceil(1000).max(1);
        bucket_of(v[rank as usize - 1])
    };
    Expect {
        count: n,
        total: v.iter().sum(),
        min: v[0],
        max: v[v.len() - 1],
        buckets: [q(500), q(990), q(999)],
    }
}

/// Every paired value of `analyzer` in `file`, per key (`kstate analyze --log`).
fn values(analyzer: &str, file: &Path) -> BTreeMap<String, Vec<u64>> {
    let v = kstate_json(&[
        "analyze".as_ref(),
        analyzer.as_ref(),
        file.as_os_str(),
        "--log".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in v["rows"].as_array().unwrap() {
        // Run-queue length samples ("level") are a series, not paired values.
        if r.get("level").is_some() {
            continue;
        }
        let val = r
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.starts_with("dur_") || *k == "value" || k.ends_with("_ns"))
            .and_then(|(_, x)| x.as_u64())
            .unwrap_or_else(|| panic!("no value in {r}"));
        // Summaries merge per-thread keys per command (comm-pid -> comm).
        let key = r["key"].as_str().unwrap();
        out.entry(strip_id(key).to_string()).or_default().push(val);
    }
    out
}

/// `comm-123` -> `comm`; other keys as they are.
fn strip_id(key: &str) -> &str {
    match key.rsplit_once('-') {
        Some((c, id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => c,
        _ => key,
    }
}

fn got(row: &Value) -> Expect {
    let b = |n: &str| row[format!("{n}_bucket")]["index"].as_u64().unwrap();
    Expect {
        count: row["count"].as_u64().unwrap(),
        total: row["total"].as_u64().unwrap(),
        min: row["min"].as_u64().unwrap(),
        max: row["max"].as_u64().unwrap(),
        buckets: [b("p50"), b("p99"), b("p999")],
    }
}

/// The first third of `file`, as DIR/broken.dat: a recording that does not parse.
fn cut_short(file: &Path, dir: &Path) -> PathBuf {
    let broken = dir.join("broken.dat");
    let bytes = std::fs::read(file).unwrap();
    std::fs::write(&broken, &bytes[..bytes.len() / 3]).unwrap();
    broken
}

/// `kstate fleet` merges to the figures of all the values at once: the whole fleet, and
/// each command (one group holds two recordings).
#[test]
fn fleet_is_exact_to_the_bucket() {
    let f = fleet();
    for analyzer in ANALYZERS {
        // Per command group, and for the whole fleet, every value of every key.
        let mut fleet_vals: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut group_vals: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
        for ((_, args), file) in WORKLOADS.iter().zip(&f.recordings) {
            let command = format!("{KSTATE} workload {}", args.join(" "));
            for (key, v) in values(analyzer, file) {
                fleet_vals.entry(key.clone()).or_default().extend(&v);
                group_vals
                    .entry((command.clone(), key))
                    .or_default()
                    .extend(v);
            }
        }
        // (Not more: where this kernel does not trace a CPU leaving idle, the forked
        // children's waits to run can all be inferred switch-ins, which have no latency.)
        assert!(
            fleet_vals.len() >= 3,
            "{analyzer}: only keys {:?}",
            fleet_vals.keys()
        );
        let out = kstate_json(&[
            "fleet".as_ref(),
            f.summaries.as_os_str(),
            "--by".as_ref(),
            "command".as_ref(),
            "--analyzer".as_ref(),
            analyzer.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
        ]);
        let rows = out["rows"].as_array().unwrap();
        let mut seen = 0;
        for row in rows {
            let key = row["key"].as_str().unwrap().to_string();
            let want = match row["group"].as_str() {
                None => expect(fleet_vals.remove(&key).unwrap_or_else(|| {
                    panic!("{analyzer} {key}: in the fleet, in no file's --log")
                })),
                Some(g) => expect(
                    group_vals
                        .remove(&(g.to_string(), key.clone()))
                        .unwrap_or_else(|| panic!("{analyzer} {key} {g}: no such group")),
                ),
            };
            assert_eq!(got(row), want, "{analyzer} {key} {}", row["group"]);
            seen += 1;
        }
        assert!(
            fleet_vals.is_empty(),
            "{analyzer}: keys missing {fleet_vals:?}"
        );
        assert!(group_vals.is_empty(), "{analyzer}: groups missing");
        assert!(seen > 10);
        let getppid = rows
            .iter()
            .find(|r| r["key"] == "getppid" && r["group"].is_null());
        if analyzer == "syscall" {
            // The two getppid workloads' calls, and a few of the others'.
            let n = getppid.unwrap()["count"].as_u64().unwrap();
            assert!((8000..8100).contains(&n), "getppid count {n}");
            assert_eq!(getppid.unwrap()["recordings"], 2);
        }
    }
}

/// The whole fleet's rows of `kstate fleet DIR` for `analyzer`, by key: (count, total,
/// min, max).
fn fleet_keys(dir: &Path, analyzer: &str) -> BTreeMap<String, [u64; 4]> {
    let v = kstate_json(&[
        "fleet".as_ref(),
        dir.as_os_str(),
        "--analyzer".as_ref(),
        analyzer.as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let n = |r: &Value, f: &str| r[f].as_u64().unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["group"].is_null())
        .map(|r| {
            let k = r["key"].as_str().unwrap().to_string();
            (k, [n(r, "count"), n(r, "total"), n(r, "min"), n(r, "max")])
        })
        .collect()
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// By default a summary merges the keys that name a thread (microstate's `comm-tid
/// STATE`) or a process (runq's `comm-pid`) per command; `--per-thread` keeps them. The
/// merged keys hold exactly the per-thread keys' values added up (count, total, min,
/// max), and the summaries are smaller.
#[test]
fn per_thread_keys_are_merged_per_command() {
    let f = fleet();
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&Path> = vec![
        "summarize".as_ref(),
        "--per-thread".as_ref(),
        "-o".as_ref(),
        dir.path(),
    ];
    args.extend(f.recordings.iter().map(PathBuf::as_path));
    kstate(&args);
    let mut keys = [0usize; 2];
    for analyzer in ["microstate", "runq"] {
        let merged = fleet_keys(&f.summaries, analyzer);
        let threads = fleet_keys(dir.path(), analyzer);
        assert!(
            threads.len() > merged.len(),
            "{analyzer}: {} per-thread keys, {} per command",
            threads.len(),
            merged.len()
        );
        keys[0] += merged.len();
        keys[1] += threads.len();
        let mut added: BTreeMap<String, [u64; 4]> = BTreeMap::new();
        for (k, v) in threads {
            let (task, state) = match k.rsplit_once(' ') {
                Some((t, s)) if analyzer == "microstate" => (t, format!(" {s}")),
                _ => (k.as_str(), String::new()),
            };
            assert_ne!(strip_id(task), task, "{analyzer}: {k} names no thread");
            let a = added
                .entry(format!("{}{state}", strip_id(task)))
                .or_insert([0, 0, u64::MAX, 0]);
            a[0] += v[0];
            a[1] += v[1];
            a[2] = a[2].min(v[2]);
            a[3] = a[3].max(v[3]);
        }
        assert_eq!(added, merged, "{analyzer}");
    }
    let (small, large) = (dir_bytes(&f.summaries), dir_bytes(dir.path()));
    eprintln!(
        "7 summaries: {small} bytes per command ({} microstate+runq keys), {large} per thread ({})",
        keys[0], keys[1]
    );
    assert!(small < large, "{small} >= {large}");
}

/// The recording's facts come from the file (`kstate info --json`).
#[test]
fn summary_keeps_the_recordings_facts() {
    let f = fleet();
    let out = kstate_json(&[
        "fleet".as_ref(),
        f.summaries.as_os_str(),
        "--by".as_ref(),
        "recording".as_ref(),
        "--analyzer".as_ref(),
        "syscall".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(out["groups"].as_object().unwrap().len(), WORKLOADS.len());
    let host = kstate_json(&[
        "info".as_ref(),
        "--json".as_ref(),
        f.recordings[0].as_os_str(),
    ])["recording"]["hostname"]
        .as_str()
        .unwrap()
        .to_string();
    let by_host = kstate_json(&[
        "fleet".as_ref(),
        f.summaries.as_os_str(),
        "--by".as_ref(),
        "host".as_ref(),
        "--key".as_ref(),
        "getppid".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(by_host["groups"][&host], WORKLOADS.len());
    // Summarizing again appends nothing and rewrites nothing.
    let before: Vec<_> = std::fs::read_dir(&f.summaries)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .collect();
    let again = kstate(&[
        "summarize".as_ref(),
        "-o".as_ref(),
        f.summaries.as_os_str(),
        f.recordings[0].as_os_str(),
    ]);
    assert!(again.contains("already summarized"), "{again}");
    let after: Vec<_> = std::fs::read_dir(&f.summaries)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().modified().unwrap())
        .collect();
    assert_eq!(before, after);
}

/// A truncated summary and a recording that does not parse are reported with their
/// paths; the others are still summarized and merged, and the exit status says so.
#[test]
fn bad_files_are_listed_and_the_rest_merged() {
    let f = fleet();
    let dir = tempfile::tempdir().unwrap();
    let broken = cut_short(&f.recordings[0], dir.path());
    let garbage = dir.path().join("garbage.dat");
    std::fs::write(&garbage, b"not a trace at all").unwrap();
    let out_dir = dir.path().join("s");
    let o = Command::new(KSTATE)
        .args(["summarize", "-o"])
        .arg(&out_dir)
        .arg(&garbage)
        .arg(&f.recordings[2])
        .arg(&broken)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&garbage.display().to_string()), "{err}");
    assert!(err.contains(&broken.display().to_string()), "{err}");
    assert!(err.contains("2 of 3 recordings not summarized"), "{err}");
    let written: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert_eq!(written.len(), 1, "only the good recording's summary");

    // A truncated summary among good ones.
    for e in std::fs::read_dir(&f.summaries).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, out_dir.join(p.file_name().unwrap())).unwrap();
    }
    let good = std::fs::read_dir(&f.summaries).unwrap().next().unwrap();
    let data = std::fs::read(good.unwrap().path()).unwrap();
    let cut = out_dir.join("cut.summary.parquet");
    std::fs::write(&cut, &data[..data.len() - 100]).unwrap();
    let o = Command::new(KSTATE)
        .arg("fleet")
        .arg(&out_dir)
        .args(["--key", "getppid", "--format", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&cut.display().to_string()), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failed"].as_array().unwrap().len(), 1);
    let n: u64 = v["groups"]
        .as_object()
        .unwrap()
        .values()
        .map(|x| x.as_u64().unwrap())
        .sum();
    // Every summary of the fleet and the one written above (of the same recording as one
    // of them, so it is the same file name and was overwritten by the copy).
    assert_eq!(n, WORKLOADS.len() as u64);
}

/// The fleet's summaries, with one of them copied again into a subdirectory: the same
/// recording twice. Returns the directory and the copy.
fn with_a_copy(f: &Fleet, dir: &Path) -> PathBuf {
    for e in std::fs::read_dir(&f.summaries).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    let one = std::fs::read_dir(&f.summaries).unwrap().next().unwrap();
    let one = one.unwrap().path();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let copy = dir.join("sub").join(one.file_name().unwrap());
    std::fs::copy(&one, &copy).unwrap();
    copy
}

/// A summary copied into a subdirectory is counted once by `kstate fleet` (the figures
/// and recordings of the fleet without the copy), and the copy is named in a warning with
/// the file it duplicates. Nothing is missing from the figures, so the exit status is 0
/// and the JSON lists the copy under "duplicates", not "failed".
#[test]
fn a_copied_summary_counts_once() {
    let f = fleet();
    let dir = tempfile::tempdir().unwrap();
    let copy = with_a_copy(f, dir.path());
    let args = [
        "--by",
        "command",
        "--analyzer",
        "syscall",
        "--format",
        "json",
    ];
    let o = Command::new(KSTATE)
        .arg("fleet")
        .arg(dir.path())
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let original = dir.path().join(copy.file_name().unwrap());
    let warning = err
        .lines()
        .find(|l| l.starts_with("kstate: warning: ") && l.contains("the same recording"))
        .unwrap_or_else(|| panic!("no warning of the copy: {err}"));
    for p in [&copy, &original] {
        assert!(warning.contains(&p.display().to_string()), "{warning}");
    }
    let got: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut want_args = vec![std::ffi::OsStr::new("fleet"), f.summaries.as_os_str()];
    want_args.extend(args.iter().map(std::ffi::OsStr::new));
    let want = kstate_json(&want_args);
    assert_eq!(got["groups"], want["groups"]);
    let n: u64 = got["groups"]
        .as_object()
        .unwrap()
        .values()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(n, WORKLOADS.len() as u64);
    assert_eq!(got["rows"], want["rows"]);
    assert_eq!(got["failed"].as_array().unwrap().len(), 0);
    let dups = got["duplicates"].as_array().unwrap();
    assert_eq!(dups.len(), 1, "{dups:?}");
    let named: Vec<&str> = ["file", "merged"]
        .iter()
        .map(|k| dups[0][k].as_str().unwrap())
        .collect();
    let mut both = [copy.display().to_string(), original.display().to_string()];
    both.sort();
    let mut named = [named[0].to_string(), named[1].to_string()];
    named.sort();
    assert_eq!(named, both);
}

// ---------------------------------------------------------------------------------------
// The shipped SQL on DuckDB and Spark

/// DuckDB, PySpark (with pyarrow, which the Spark job's executors use) and Trino's client
/// from PyPI.
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        support::python_venv(
            "pyvenv-fleet",
            &["duckdb", "pyspark", "pyarrow", "trino"],
            "duckdb, pyspark, pyarrow, trino",
        )
    })
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The shipped query's rows on DuckDB over the summaries in `dir`.
fn duckdb_rows(dir: &Path) -> Vec<Value> {
    let script = r#"
import duckdb, json, sys
duckdb.sql(f"CREATE VIEW summaries AS SELECT * FROM read_parquet('{sys.argv[1]}/**/*.summary.parquet')")
cur = duckdb.sql(open(sys.argv[2]).read())
names = cur.columns
for row in cur.fetchall():
    print(json.dumps(dict(zip(names, row))))
"#;
    let o = Command::new(python())
        .args(["-c", script])
        .arg(dir)
        .arg(repo("sql/fleet_quantiles.sql"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `kstate fleet DIR` by host, kernel and command as the query's rows, keyed by
/// (dimension, group, analyzer, key); the whole fleet as dimension "fleet".
fn kstate_rows(dir: &Path) -> BTreeMap<(String, String, String, String), Value> {
    let mut out = BTreeMap::new();
    for by in ["host", "kernel", "command"] {
        let v = kstate_json(&[
            "fleet".as_ref(),
            dir.as_os_str(),
            "--by".as_ref(),
            by.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
        ]);
        for r in v["rows"].as_array().unwrap() {
            let (dim, grp) = match r["group"].as_str() {
                Some(g) => (by, g),
                None => ("fleet", "(fleet)"),
            };
            let mut row = serde_json::Map::new();
            for f in [
                "recordings",
                "count",
                "total",
                "min",
                "max",
                "avg",
                "p50",
                "p99",
                "p999",
            ] {
                row.insert(f.into(), r[f].clone());
            }
            for q in ["p50", "p99", "p999"] {
                row.insert(
                    format!("{q}_bucket"),
                    r[format!("{q}_bucket")]["index"].clone(),
                );
            }
            let key = (
                dim.to_string(),
                grp.to_string(),
                r["analyzer"].as_str().unwrap().to_string(),
                r["key"].as_str().unwrap().to_string(),
            );
            out.insert(key, Value::Object(row));
        }
    }
    out
}

/// The query's rows equal `kstate fleet`'s, one for one.
fn same_as_kstate(sql_rows: &[Value], dir: &Path, engine: &str) {
    let mut want = kstate_rows(dir);
    assert!(want.len() > 100, "{} rows", want.len());
    for r in sql_rows {
        let s = |f: &str| r[f].as_str().unwrap().to_string();
        let key = (s("dim"), s("grp"), s("analyzer"), s("key"));
        let w = want
            .remove(&key)
            .unwrap_or_else(|| panic!("{engine}: {key:?} not in kstate fleet"));
        for (f, v) in w.as_object().unwrap() {
            assert_eq!(&r[f.as_str()], v, "{engine}: {key:?} {f}");
        }
    }
    assert!(want.is_empty(), "{engine} lacks {:?}", want.keys().next());
}

/// DuckDB running sql/fleet_quantiles.sql gives `kstate fleet`'s figures, with a summary
/// copied twice as without; a summary of
/// another bucket scheme is refused by `kstate fleet` (named, the rest merged) and left
/// out by the query.
#[test]
fn shipped_sql_on_duckdb() {
    let f = fleet();
    same_as_kstate(&duckdb_rows(&f.summaries), &f.summaries, "duckdb");
    // A summary copied twice: each recording still counted once.
    let copied = tempfile::tempdir().unwrap();
    with_a_copy(f, copied.path());
    same_as_kstate(&duckdb_rows(copied.path()), &f.summaries, "duckdb, a copy");

    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&f.summaries).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    let one = std::fs::read_dir(&f.summaries).unwrap().next().unwrap();
    let other = dir.path().join("other-scheme.summary.parquet");
    let newer = dir.path().join("newer-layout.summary.parquet");
    let script = r#"
import duckdb, sys
src, other, newer = sys.argv[1:]
duckdb.sql(f"COPY (SELECT * REPLACE ('kstate-loglinear-512-256' AS scheme) FROM '{src}') TO '{other}' (FORMAT parquet)")
duckdb.sql(f"COPY (SELECT * REPLACE (2 AS scheme_version) FROM '{src}') TO '{newer}' (FORMAT parquet)")
"#;
    let o = Command::new(python())
        .args(["-c", script])
        .arg(one.unwrap().path())
        .args([&other, &newer])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(KSTATE)
        .arg("fleet")
        .arg(dir.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for p in [&other, &newer] {
        assert!(err.contains(&p.display().to_string()), "{err}");
    }
    assert!(err.contains("kstate-loglinear-512-256"), "{err}");
    assert!(err.contains("version 2"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["failed"].as_array().unwrap().len(), 2);
    // The good summaries alone, merged as before, by kstate and by the query.
    for p in [&other, &newer] {
        std::fs::rename(p, p.with_extension("refused")).unwrap();
    }
    let sql = duckdb_rows(dir.path());
    same_as_kstate(&sql, dir.path(), "duckdb");
    for p in [&other, &newer] {
        std::fs::rename(p.with_extension("refused"), p).unwrap();
    }
    assert_eq!(
        duckdb_rows(dir.path()),
        sql,
        "the query leaves other schemes out"
    );
}

/// The shipped query on Trino (python/kstate_trino.py: a single-node Trino with the Hive
/// connector over a file metastore, the summaries one external table) gives `kstate
/// fleet`'s figures, with a summary copied into a subdirectory as without. Trino comes
/// from Maven Central, unpacked under target/ once (.ci/run sets it up beforehand).
#[test]
fn shipped_sql_on_trino() {
    let f = fleet();
    let script = repo("python/kstate_trino.py");
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("trino");
    let o = Command::new(python())
        .arg(&script)
        .arg("setup")
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "Trino's setup: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let server = String::from_utf8(o.stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copied = dir.path().join("summaries");
    std::fs::create_dir(&copied).unwrap();
    with_a_copy(f, &copied);
    let result = dir.path().join("rows.json");
    let o = Command::new(python())
        .arg(&script)
        .args(["query", "--trino", server.trim()])
        .arg("--summaries")
        .arg(&copied)
        .arg("--sql")
        .arg(repo("sql/fleet_quantiles.sql"))
        .arg("--result")
        .arg(&result)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "trino: {err}");
    let rows: Vec<Value> = std::fs::read_to_string(&result)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    same_as_kstate(&rows, &f.summaries, "trino, a copy");
}

/// The PySpark job (python/kstate_spark) in local[2]: kstate summarize on the executors,
/// one Parquet dataset partitioned by host and date, the shipped SQL in Spark SQL: the
/// same figures as `kstate fleet`; a recording that does not parse is listed, the rest
/// summarized. A recording named twice (a copy under another directory) is written once,
/// and a second run into the same dataset adds nothing: the figures stay those of
/// `kstate fleet` on the fleet's summaries.
#[test]
fn spark_job_local() {
    let f = fleet();
    let dir = tempfile::tempdir().unwrap();
    let broken = cut_short(&f.recordings[0], dir.path());
    std::fs::create_dir(dir.path().join("copy")).unwrap();
    let copy = dir
        .path()
        .join("copy")
        .join(f.recordings[1].file_name().unwrap());
    std::fs::copy(&f.recordings[1], &copy).unwrap();
    let out = dir.path().join("dataset");
    let result = dir.path().join("result.json");
    let failures = dir.path().join("failures.json");
    let venv_bin = python().parent().unwrap();
    let path = format!(
        "{}:{}",
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let submit = |inputs: &[&Path]| {
        let o = Command::new(venv_bin.join("spark-submit"))
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("PYSPARK_PYTHON", python())
            .args(["--master", "local[2]"])
            // A handful of rows: two shuffle partitions, not Spark's 200; no web UI.
            .args(["--conf", "spark.sql.shuffle.partitions=2"])
            .args(["--conf", "spark.ui.enabled=false"])
            .args(["--files", KSTATE])
            .arg(repo("python/kstate_spark/job.py"))
            .arg("--out")
            .arg(&out)
            .arg("--sql")
            .arg(repo("sql/fleet_quantiles.sql"))
            .arg("--result")
            .arg(&result)
            .arg("--failures")
            .arg(&failures)
            .args(inputs)
            .output()
            .unwrap();
        // spark-submit passes the Python driver's stderr on to its stdout.
        let err = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
        let rows: Vec<Value> = std::fs::read_to_string(&result)
            .unwrap_or_else(|e| panic!("{}: {e}\n{err}", result.display()))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (o.status.code(), err.into_owned(), rows)
    };
    let mut inputs: Vec<&Path> = f.recordings.iter().map(PathBuf::as_path).collect();
    inputs.push(&broken);
    inputs.push(&copy);
    let (code, err, rows) = submit(&inputs);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("kstate_spark: {}", broken.display())),
        "{err}"
    );
    // The copy and the original named together; the first path's rows are kept.
    let note = err
        .lines()
        .find(|l| l.contains("the same recording"))
        .unwrap_or_else(|| panic!("no note of the copy: {err}"));
    for p in [&copy, &f.recordings[1]] {
        assert!(note.contains(&p.display().to_string()), "{note}");
    }
    let failed: Value = serde_json::from_slice(&std::fs::read(&failures).unwrap()).unwrap();
    assert_eq!(failed.as_array().unwrap().len(), 1);
    assert_eq!(failed[0]["file"], broken.display().to_string());
    // Partitioned by host and date.
    let hosts: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("host="))
        .collect();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let dates = std::fs::read_dir(out.join(&hosts[0])).unwrap().count();
    assert_eq!(dates, 1);
    same_as_kstate(&rows, &f.summaries, "spark");

    // Run again over part of the fleet: nothing is summarized or written twice.
    let (code, err, rows) = submit(&[&f.recordings[0], &copy]);
    assert_eq!(code, Some(0), "{err}");
    // The file summarized before is skipped; the copy, summarized under a new path, is
    // known by its recording id and not written again.
    for p in [&f.recordings[0], &copy] {
        let prefix = format!("kstate_spark: {}: ", p.display());
        assert!(
            err.lines()
                .any(|l| l.starts_with(&prefix) && l.contains("already")),
            "{err}"
        );
    }
    same_as_kstate(&rows, &f.summaries, "spark, run twice");
}
