"""Fleet scale benchmark: summarize throughput, summary size, and the fleet reduce of N
summaries in `kstate fleet` and in Spark local mode.

    python python/kstate_spark/bench.py --kstate target/release/kstate --n 1000 \
        --work /tmp/fleet-bench REC.dat [REC.dat ...]

Each recording is summarized once (`kstate summarize`, its CPU time measured: events/s per
core). The summaries are then copied to N files with the host name (and recording id)
varied, `host-0000` ... (DuckDB rewrites the two columns; every other figure is the real
recording's), and reduced on the same files by `kstate fleet DIR --by D` for each --by
(wall and CPU time) and by the shipped SQL (sql/fleet_quantiles.sql, every dimension in one
query) in Spark local mode (session start timed apart; the JVM's CPU time from /proc).
Spark's rows of each --by dimension and of the whole fleet are checked against kstate
fleet's (count, total and the quantile buckets). `--sql FILE` (repeatable) times other
forms of the query in the same Spark session, in order (the first also pays the JVM's
warm-up: to compare two forms, swap the order or use fresh sessions). The load average is
reported at the start and the end: on a shared machine only ratios within one run mean
much. Needs duckdb and pyspark. Prints one JSON object.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SQL = os.path.join(HERE, "..", "..", "sql", "fleet_quantiles.sql")


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_of(pid):
    """User + system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def figures(row):
    return (row["count"], row["total"], row["p50_bucket"], row["p99_bucket"],
            row["p999_bucket"])


def kstate_fleet(kstate, fleet, by):
    """kstate fleet --by BY as {(dim, group, analyzer, key): figures}, timed."""
    c0, t0 = cpu_children(), time.time()
    out = subprocess.run([kstate, "fleet", fleet, "--by", by, "--format", "json"],
                         capture_output=True, check=True).stdout
    cpu, wall = cpu_children() - c0, time.time() - t0
    rows = {}
    for r in json.loads(out)["rows"]:
        dim, grp = (by, r["group"]) if r["group"] is not None else ("fleet", "(fleet)")
        r = dict(r, **{f"{q}_bucket": r[f"{q}_bucket"]["index"] for q in ["p50", "p99", "p999"]})
        rows[(dim, grp, r["analyzer"], r["key"])] = figures(r)
    return rows, wall, cpu


def want_dims(by):
    return set(by.split(",")) | {"fleet"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recordings", nargs="+")
    ap.add_argument("--kstate", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--work", required=True)
    ap.add_argument("--spark-master", default="local[*]")
    ap.add_argument("--by", default="host,kernel", help="kstate fleet's dimensions, timed")
    ap.add_argument("--sql", action="append",
                    help="a form of the query to time in Spark (default: the shipped one)")
    args = ap.parse_args()
    load_start = os.getloadavg()
    import duckdb

    shutil.rmtree(args.work, ignore_errors=True)
    base = os.path.join(args.work, "base")
    per = []
    for rec in args.recordings:
        c0, t0 = cpu_children(), time.time()
        out = subprocess.run([args.kstate, "summarize", "-o", base, rec],
                             capture_output=True, text=True, check=True).stdout
        cpu, wall = cpu_children() - c0, time.time() - t0
        events = int(re.search(r"\((\d+) events", out).group(1))
        path = out.split(" summarized in ")[1].split(" (")[0]
        per.append({"recording": os.path.basename(rec), "bytes": os.path.getsize(rec),
                    "events": events, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
                    "events_per_cpu_s": round(events / cpu) if cpu else None,
                    "summary_bytes": os.path.getsize(path), "summary": path})

    fleet = os.path.join(args.work, "fleet")
    os.makedirs(fleet)
    t0 = time.time()
    con = duckdb.connect()
    for i in range(args.n):
        src = per[i % len(per)]["summary"]
        dst = os.path.join(fleet, f"host-{i:04d}.summary.parquet")
        con.execute(
            f"COPY (SELECT * REPLACE ('host-{i:04d}' AS host, recording || '-{i}' AS recording) "
            f"FROM read_parquet('{src}')) TO '{dst}' (FORMAT parquet)")
    make_s = time.time() - t0
    fleet_bytes = sum(os.path.getsize(os.path.join(fleet, f)) for f in os.listdir(fleet))
    bucket_rows = con.execute(f"SELECT COUNT(*) FROM read_parquet('{fleet}/*.parquet') "
                              "WHERE kind = 'bucket'").fetchone()[0]

    want, kstate_runs = {}, {}
    for by in args.by.split(","):
        rows, wall, cpu = kstate_fleet(args.kstate, fleet, by)
        want.update(rows)
        kstate_runs[by] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "rows": len(rows)}

    from pyspark.sql import SparkSession
    t0 = time.time()
    spark = (SparkSession.builder.master(args.spark_master).appName("kstate fleet bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "8").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._gateway.proc.pid
    spark_start_s = time.time() - t0
    spark.read.parquet(fleet).createOrReplaceTempView("summaries")
    spark_runs = []
    for sql in args.sql or [SQL]:
        c0, t0 = cpu_of(jvm), time.time()
        rows = spark.sql(open(sql).read()).collect()
        wall, cpu = time.time() - t0, cpu_of(jvm) - c0
        got = {(r["dim"], r["grp"], r["analyzer"], r["key"]): figures(r.asDict())
               for r in rows if r["dim"] in want_dims(args.by)}
        spark_runs.append({"sql": os.path.relpath(sql), "wall_s": round(wall, 2),
                           "jvm_cpu_s": round(cpu, 2), "rows": len(rows),
                           "rows_checked": len(got), "same_as_kstate_fleet": got == want})
    spark.stop()

    print(json.dumps({
        "recordings": per,
        "n_summaries": args.n,
        "fleet_bytes": fleet_bytes,
        "bucket_rows": bucket_rows,
        "make_copies_s": round(make_s, 2),
        "kstate_fleet": kstate_runs,
        "spark_master": args.spark_master,
        "spark_session_start_s": round(spark_start_s, 2),
        "spark_sql": spark_runs,
        "cpus": os.cpu_count(),
        "load_start": [round(x, 1) for x in load_start],
        "load_end": [round(x, 1) for x in os.getloadavg()],
    }, indent=1))


if __name__ == "__main__":
    sys.exit(main())
