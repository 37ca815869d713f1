"""Summarize a fleet's recordings on a Spark cluster and reduce them in Spark SQL.

    spark-submit --master spark://HOST:7077 --files target/release/kstate \
        python/kstate_spark/job.py --out hdfs:///fleet/summaries \
        --sql sql/fleet_quantiles.sql --result /tmp/fleet.json '/data/traces/*.dat'

Each executor runs the `kstate` binary shipped with the job (`--files`, found with
SparkFiles; in kstate's default build) on its share of the recordings:
`kstate summarize FILE -o TMP`, one streaming pass per file. The summary's rows (a few
hundred per recording, docs/bucket-scheme.md) come back as rows of a DataFrame that is
appended to one Parquet dataset partitioned by host and date (of the recording's start).
Then the fleet reduce runs in Spark SQL over the whole dataset: the shipped query, unchanged.
A recording the dataset already holds (a second run, the same file named twice, or the
same recording under another path) is not written again, and is named on stderr.

Recordings are named by local paths or globs (the same on every executor: a shared
mount), or by any URL Spark reads (hdfs://, s3a://, ...): those are read with
`binaryFiles`, which holds one whole file in an executor's memory while it is summarized.

A recording that cannot be summarized is reported with its path and kstate's message; the
others are summarized; the failures are listed at the end (and written to --failures) and
the job exits with status 2.
"""

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile

# The summary's columns (kstate_export::parquet::summary::COLUMNS), as Spark types.
INT = "int"
LONG = "bigint"
STR = "string"
COLUMNS = [
    ("scheme", STR), ("scheme_version", INT), ("recording", STR), ("file", STR),
    ("host", STR), ("kernel", STR), ("command", STR), ("cpus", INT),
    ("start_wall_ns", LONG), ("duration_ns", LONG), ("events", LONG), ("tool", STR),
    ("kind", STR), ("analyzer", STR), ("by", STR), ("unit", STR), ("key", STR),
    ("cpu", INT), ("lost", LONG), ("count", LONG), ("total", LONG), ("min", LONG),
    ("max", LONG), ("flagged", LONG), ("bucket", INT), ("bucket_lo", LONG),
    ("bucket_hi", LONG),
]


def summarize_one(kstate, path, data=None):
    """Runs kstate summarize on one recording; yields ("ok", row) or ("failed", (path, why))."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="kstate-summary-") as tmp:
        src = path
        if data is not None:
            src = os.path.join(tmp, os.path.basename(path) or "recording")
            with open(src, "wb") as f:
                f.write(data)
        out = os.path.join(tmp, "out")
        p = subprocess.run([kstate, "summarize", "-o", out, src],
                           capture_output=True, text=True)
        if p.returncode != 0:
            yield ("failed", (path, p.stderr.strip() or f"kstate exited with {p.returncode}"))
            return
        files = [os.path.join(out, n) for n in os.listdir(out) if n.endswith(".summary.parquet")]
        if len(files) != 1:
            yield ("failed", (path, f"kstate wrote {len(files)} summaries, not 1"))
            return
        table = pq.read_table(files[0])
        names = [c for c, _ in COLUMNS]
        if table.column_names != names:
            yield ("failed", (path, f"unexpected summary columns {table.column_names}"))
            return
        for row in table.to_pylist():
            row["file"] = path
            start = row["start_wall_ns"]
            row["date"] = (datetime.datetime.fromtimestamp(start / 1e9, datetime.timezone.utc)
                           .strftime("%Y-%m-%d") if start is not None else "unknown")
            yield ("ok", tuple(row[c] for c in names + ["date"]))


def already_summarized(spark, out):
    """The recording ids and files the dataset at `out` holds (empty sets if none yet)."""
    try:
        old = spark.read.parquet(out).select("recording", "file").distinct().collect()
    except Exception as e:  # noqa: BLE001 - Spark says "path does not exist" many ways
        if "does not exist" in str(e) or "PATH_NOT_FOUND" in str(e):
            return set(), set()
        raise
    return set(r for r, _ in old), set(f for _, f in old)


def local_inputs(patterns):
    """Local paths and globs, expanded on the driver (executors see the same mount)."""
    out = []
    for p in patterns:
        hits = sorted(glob.glob(p)) if any(ch in p for ch in "*?[") else [p]
        out.extend(hits or [p])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="recordings: paths, globs or URLs Spark reads")
    ap.add_argument("--out", required=True, help="the summaries' Parquet dataset (appended)")
    ap.add_argument("--sql", help="a query over the view `summaries` (sql/fleet_quantiles.sql)")
    ap.add_argument("--result", help="write the query's rows here as JSON lines (else printed)")
    ap.add_argument("--failures", help="write the recordings that failed here (JSON)")
    ap.add_argument("--kstate", default="kstate",
                    help="the kstate binary's name as shipped with --files (default: kstate)")
    ap.add_argument("--partitions", type=int, default=0,
                    help="tasks for summarizing (default: one per recording)")
    args = ap.parse_args(argv)

    from pyspark import SparkFiles
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.appName("kstate fleet")
             # Host names are names, even when they look like numbers.
             .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
             .getOrCreate())
    sc = spark.sparkContext
    name = args.kstate

    def binary():
        shipped = SparkFiles.get(os.path.basename(name))
        if os.path.exists(shipped):
            os.chmod(shipped, 0o755)
            return shipped
        return name

    # The dataset is appended to: what it already holds is not summarized or written
    # again (a second run, or a recording named twice), so every figure counts each
    # recording once. Known by the file summarized, and after summarizing by the
    # recording's id (the same recording under another path).
    done_ids, done_files = already_summarized(spark, args.out)
    urls = [p for p in args.inputs if "://" in p and not p.startswith("file://")]
    local = local_inputs([p[len("file://"):] if p.startswith("file://") else p
                          for p in args.inputs if p not in urls])
    notes = [f"{p}: already summarized in {args.out}; skipped"
             for p in sorted(set(p for p in local if p in done_files))]
    local = [p for p in dict.fromkeys(local) if p not in done_files]
    parts = []
    if local:
        n = args.partitions or len(local)
        parts.append(sc.parallelize(local, n)
                     .flatMap(lambda p: summarize_one(binary(), p)))
    for u in urls:
        parts.append(sc.binaryFiles(u)
                     .filter(lambda kv: kv[0] not in done_files)
                     .flatMap(lambda kv: summarize_one(binary(), kv[0], kv[1])))
    failed = []
    if parts:
        results = parts[0] if len(parts) == 1 else sc.union(parts)
        results = results.cache()
        schema = ", ".join(f"`{c}` {t}" for c, t in COLUMNS) + ", `date` string"
        rows = results.filter(lambda r: r[0] == "ok").map(lambda r: r[1])
        df = spark.createDataFrame(rows, schema).cache()
        # Per recording, the rows of one file: the first by path; those already in the
        # dataset are left out.
        from pyspark.sql import functions as F
        first = df.groupBy("recording").agg(F.min("file").alias("file"))
        keep = df.join(first, ["recording", "file"])
        if done_ids:
            known = spark.createDataFrame([(r,) for r in done_ids], "recording string")
            keep = keep.join(known, "recording", "left_anti")
        keep = keep.select(*[c for c, _ in COLUMNS], "date")
        pairs = (df.select("recording", "file").distinct()
                 .join(first.withColumnRenamed("file", "kept"), "recording").collect())
        for r, f, kept in sorted(pairs, key=lambda x: x[1]):
            if r in done_ids:
                notes.append(f"{f}: recording {r} is already in {args.out}; not written again")
            elif f != kept:
                notes.append(f"{f}: the same recording ({r}) as {kept}; counted once")
        keep.write.mode("append").partitionBy("host", "date").parquet(args.out)
        failed = sorted(results.filter(lambda r: r[0] == "failed").map(lambda r: r[1]).collect())
        df.unpersist()
        results.unpersist()
    for n in notes:
        print(f"kstate_spark: {n}", file=sys.stderr)

    if args.sql:
        spark.read.parquet(args.out).createOrReplaceTempView("summaries")
        with open(args.sql) as f:
            query = f.read()
        out = spark.sql(query).collect()
        lines = [json.dumps(r.asDict()) for r in out]
        if args.result:
            with open(args.result, "w") as f:
                f.write("\n".join(lines) + ("\n" if lines else ""))
        else:
            print("\n".join(lines))

    for path, why in failed:
        print(f"kstate_spark: {path}: {why}", file=sys.stderr)
    if args.failures:
        with open(args.failures, "w") as f:
            json.dump([{"file": p, "error": w} for p, w in failed], f, indent=1)
    spark.stop()
    if failed:
        print(f"kstate_spark: {len(failed)} recordings not summarized: "
              + ", ".join(p for p, _ in failed), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
