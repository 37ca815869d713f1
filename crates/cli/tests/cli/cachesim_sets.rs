//! `kstate cachesim --sets`: valgrind lackey's address trace of real programs, judged
//! against a 2 MiB 16-way L2 with 64 B lines (2,048 sets, 128 KiB per way). Seed 001's
//! walk over 1,024 structures 8 KiB apart puts each hot field's 1,024 lines in
//! 128 KiB / 8 KiB = 16 sets, 64 lines for 16 ways: flagged, with 1,024 / (16 x 16) = 4
//! colours suggested. Coloured 4 ways, the same field uses 64 sets of 16 lines: not
//! flagged. Random probes of a 1 MiB hash table spread over every set: not flagged. A
//! command that fails under valgrind, or cannot start, is an error, not a report.

use crate::support;
use support::*;

use serde_json::Value;

const L2: &str = "2097152,16,64";

fn sets(cmd: &[&str]) -> Value {
    let mut a = vec![
        "cachesim", "--sets", "--json", "--top", "0", "--cache", L2, "--",
    ];
    a.extend_from_slice(cmd);
    let out = kstate(&a);
    serde_json::from_str(out.lines().last().unwrap()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn sites(v: &Value) -> &Vec<Value> {
    v["sites"].as_array().unwrap()
}

#[test]
fn the_uncoloured_walk_is_flagged_and_the_coloured_one_is_not() {
    let (nodes, stride, way, ways) = (1024u64, 8192u64, 128u64 << 10, 16u64);
    let positions = way / stride;
    let walk = |colours: &str| {
        sets(&[
            KSTATE,
            "workload",
            "colour-walk",
            "--nodes",
            "1024",
            "--stride",
            "8192",
            "--way",
            "131072",
            "--colours",
            colours,
        ])
    };
    let v = walk("1");
    assert_eq!(v["cache"]["sets"], 2048);
    let flagged: Vec<&Value> = sites(&v).iter().filter(|s| s["flagged"] == true).collect();
    // The walk's reads of the link field, and the stores that wrote it.
    let link_field: Vec<&&Value> = flagged
        .iter()
        .filter(|s| s["lines"] == nodes && s["stride"] == stride)
        .collect();
    assert!(link_field.len() >= 2, "{flagged:#?}");
    for s in &link_field {
        assert_eq!(s["sets_used"], positions, "{s}");
        assert_eq!(s["max_lines_per_set"], nodes / positions, "{s}");
        assert_eq!(s["colours"], nodes / (positions * ways), "{s}");
        assert!(s["site"].as_str().unwrap().contains("(kstate)"), "{s}");
    }
    assert!(
        flagged
            .iter()
            .all(|s| s["site"].as_str().unwrap().contains("(kstate)")),
        "only the walk's structures: {flagged:#?}"
    );

    let v = walk("4");
    let flagged: Vec<&Value> = sites(&v).iter().filter(|s| s["flagged"] == true).collect();
    assert!(flagged.is_empty(), "{flagged:#?}");
    // The same field, now in 4 times the sets, as many lines per set as ways.
    assert!(
        sites(&v).iter().any(|s| s["lines"] == nodes
            && s["sets_used"] == positions * 4
            && s["max_lines_per_set"] == ways),
        "{:#?}",
        sites(&v)
            .iter()
            .filter(|s| s["lines"] == nodes)
            .collect::<Vec<_>>()
    );
}

#[test]
fn random_hash_probes_are_not_flagged() {
    // 131,072 slots of 8 bytes: 16,384 lines, 8 per set when spread.
    let v = sets(&[KSTATE, "workload", "hash-probe", "--lookups", "100000"]);
    assert!(
        sites(&v).iter().all(|s| s["flagged"] == false),
        "{:#?}",
        sites(&v)
    );
    assert!(
        sites(&v)
            .iter()
            .any(|s| s["lines"].as_u64().unwrap() > 10_000 && s["sets_used"] == 2048),
        "{:#?}",
        sites(&v)
    );
}

#[test]
fn failures_are_errors() {
    let fails = |args: &[&str], want: &str| {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    let exit3 = [
        "cachesim", "--sets", "--cache", L2, "--", "sh", "-c", "exit 3",
    ];
    fails(&exit3, "exited with status 3 under valgrind");
    fails(
        &[
            "cachesim",
            "--sets",
            "--cache",
            L2,
            "--",
            "/nonexistent/prog",
        ],
        "valgrind could not start it",
    );
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_str().unwrap();
    fails(
        &["cachesim", "--sets", "--sysfs", root, "--", "true"],
        "no cache information",
    );
    fails(
        &["cachesim", "--sets"],
        "give the command to check after --",
    );
    fails(
        &["cachesim", "--sets", "--cache", "64,16,64", "--", "true"],
        "--cache 64,16,64",
    );
    fails(&["cachesim", "--level", "3", "--", "true"], "--sets");
}
