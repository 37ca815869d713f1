"""Fleet scale benchmark: summarize throughput, summary size, and the fleet reduce of N
summaries in `kstate fleet` and in Spark local mode.

    python python/kstate_spark/bench.py --kstate target/release/kstate --n 1000 \
        --work /tmp/fleet-bench REC.dat [REC.dat ...]

Each recording is summarized once (`kstate summarize`, its CPU time measured: events/s per
core). The summaries are then copied to N files with the host name (and recording id)
varied, `host-0000` ... (DuckDB rewrites the two columns; every other figure is the real
recording's), and reduced by `kstate fleet DIR --by host` and by the shipped SQL
(sql/fleet_quantiles.sql) in Spark local[*] (session start timed apart). Needs duckdb and
pyspark. Prints one JSON object.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recordings", nargs="+")
    ap.add_argument("--kstate", required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--work", required=True)
    ap.add_argument("--spark-master", default="local[*]")
    args = ap.parse_args()
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

    t0 = time.time()
    subprocess.run([args.kstate, "fleet", fleet, "--by", "host", "--format", "json"],
                   stdout=subprocess.DEVNULL, check=True)
    kstate_fleet_s = time.time() - t0

    from pyspark.sql import SparkSession
    t0 = time.time()
    spark = (SparkSession.builder.master(args.spark_master).appName("kstate fleet bench")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "8").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_start_s = time.time() - t0
    t0 = time.time()
    spark.read.parquet(fleet).createOrReplaceTempView("summaries")
    rows = spark.sql(open(SQL).read()).collect()
    spark_reduce_s = time.time() - t0
    spark.stop()

    print(json.dumps({
        "recordings": per,
        "n_summaries": args.n,
        "fleet_bytes": fleet_bytes,
        "make_copies_s": round(make_s, 2),
        "kstate_fleet_s": round(kstate_fleet_s, 2),
        "spark_master": args.spark_master,
        "spark_session_start_s": round(spark_start_s, 2),
        "spark_sql_reduce_s": round(spark_reduce_s, 2),
        "spark_rows": len(rows),
        "cpus": os.cpu_count(),
    }, indent=1))


if __name__ == "__main__":
    sys.exit(main())
