"""The shipped fleet SQL (sql/fleet_quantiles.sql) on Trino, over kstate summaries.

    python python/kstate_trino.py setup target/trino
    python python/kstate_trino.py query --trino target/trino/trino-server-core-476 \
        --summaries DIR --sql sql/fleet_quantiles.sql [--result rows.jsonl]

`setup` fetches Trino's server (trino-server-core, with the Hive connector's plugin beside
it) from Maven Central with `mvn dependency:copy` (kept in Maven's local repository, so a
second setup downloads nothing) and unpacks it under the given directory.

`query` starts a single-node Trino on this machine (coordinator and worker in one JVM,
1 GB heap, on a free loopback port; Trino needs Java 24 or newer: $JAVA_HOME, else the
Temurin 25 JDK), makes the summaries under DIR one external table of the Hive connector
over a file metastore (no Hive server: `hive.metastore=file`, local files read with
`fs.native-local.enabled`), names it `summaries` and runs the query on it unchanged. The
rows are written as JSON lines, one object per row, keys the query's column names; then
Trino is stopped. Needs the `trino` client from PyPI.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile

VERSION = "476"
SERVER = f"trino-server-core-{VERSION}"
JAVA = "/usr/lib/jvm/temurin-25-jdk-amd64"

# The summary's columns (kstate_export::parquet::summary::COLUMNS), as Trino types.
COLUMNS = [
    ("scheme", "varchar"), ("scheme_version", "integer"), ("recording", "varchar"),
    ("file", "varchar"), ("host", "varchar"), ("kernel", "varchar"), ("command", "varchar"),
    ("cpus", "integer"), ("start_wall_ns", "bigint"), ("duration_ns", "bigint"),
    ("events", "bigint"), ("tool", "varchar"), ("kind", "varchar"), ("analyzer", "varchar"),
    ("by", "varchar"), ("unit", "varchar"), ("key", "varchar"), ("cpu", "integer"),
    ("lost", "bigint"), ("count", "bigint"), ("total", "bigint"), ("min", "bigint"),
    ("max", "bigint"), ("flagged", "bigint"), ("bucket", "integer"), ("bucket_lo", "bigint"),
    ("bucket_hi", "bigint"),
]


def setup(root):
    """Trino's server with the Hive plugin under `root`; returns the server's directory."""
    server = os.path.join(root, SERVER)
    if os.path.isdir(os.path.join(server, "plugin", "hive")):
        return server
    os.makedirs(root, exist_ok=True)
    fetched = os.path.join(root, "download")
    for artifact in [f"io.trino:trino-server-core:{VERSION}:tar.gz",
                     f"io.trino:trino-hive:{VERSION}:zip"]:
        subprocess.run(["mvn", "-B", "-q", "dependency:copy", f"-Dartifact={artifact}",
                        f"-DoutputDirectory={fetched}"], check=True,
                       stdout=sys.stderr)  # stdout says where the server is, alone
    # Unpacked beside, then moved in place: an interrupted setup is done again.
    work = tempfile.mkdtemp(prefix="unpack-", dir=root)
    with tarfile.open(os.path.join(fetched, f"{SERVER}.tar.gz")) as t:
        if hasattr(tarfile, "data_filter"):
            t.extractall(work, filter="data")
        else:
            t.extractall(work)
    with zipfile.ZipFile(os.path.join(fetched, f"trino-hive-{VERSION}.zip")) as z:
        z.extractall(work)
    os.rename(os.path.join(work, f"trino-hive-{VERSION}"),
              os.path.join(work, SERVER, "plugin", "hive"))
    shutil.rmtree(server, ignore_errors=True)
    os.rename(os.path.join(work, SERVER), server)
    shutil.rmtree(work)
    shutil.rmtree(fetched)
    return server


def java_home():
    for home in [os.environ.get("JAVA_HOME"), JAVA]:
        if not home:
            continue
        out = subprocess.run([os.path.join(home, "bin", "java"), "-version"],
                             capture_output=True, text=True)
        words = out.stderr.split('"')
        if out.returncode == 0 and len(words) > 1 and int(words[1].split(".")[0]) >= 24:
            return home
    sys.exit(f"kstate_trino: Trino {VERSION} needs Java 24 or newer: set JAVA_HOME "
             f"(looked at $JAVA_HOME and {JAVA})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(etc, port, metastore):
    os.makedirs(os.path.join(etc, "catalog"))
    files = {
        # Every address it announces and calls is the loopback one.
        "node.properties": ["node.environment=kstate", "node.id=kstate-fleet",
                            "node.internal-address=127.0.0.1"],
        "jvm.config": ["-server", "-Xmx1G", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError",
                       "-XX:-OmitStackTraceInFastThrow", "-XX:ReservedCodeCacheSize=256M",
                       "-Djdk.attach.allowAttachSelf=true", "-Dfile.encoding=UTF-8",
                       "-XX:+EnableDynamicAgentLoading"],
        "config.properties": ["coordinator=true", "node-scheduler.include-coordinator=true",
                              f"http-server.http.port={port}",
                              f"discovery.uri=http://127.0.0.1:{port}",
                              "query.max-memory=512MB", "query.max-memory-per-node=512MB"],
        "log.properties": ["io.trino=WARN"],
        # local:///PATH is PATH on this machine's file system.
        "catalog/hive.properties": ["connector.name=hive", "hive.metastore=file",
                                    f"hive.metastore.catalog.dir=local://{metastore}",
                                    "fs.native-local.enabled=true", "local.location=/",
                                    # a dataset partitioned by host and date (job.py)
                                    "hive.recursive-directories=true"],
    }
    for name, lines in files.items():
        with open(os.path.join(etc, name), "w") as f:
            f.write("\n".join(lines) + "\n")


def wait_started(port, proc, log, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"kstate_trino: Trino exited with {proc.returncode}; its log:\n"
                     + open(log, errors="replace").read()[-4000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/info", timeout=5) as r:
                if not json.load(r)["starting"]:
                    return
        except OSError:
            pass
        time.sleep(1)
    sys.exit(f"kstate_trino: Trino had not started after {timeout} s; its log: {log}")


def query(args):
    import trino

    summaries = os.path.abspath(args.summaries)
    if not os.path.isdir(summaries):
        sys.exit(f"kstate_trino: {summaries}: not a directory")
    with open(args.sql) as f:
        # The client sends one statement: without the final ';' if any.
        sql = f.read().strip().rstrip(";")
    home = java_home()
    work = tempfile.mkdtemp(prefix="kstate-trino-")
    port = free_port()
    etc = os.path.join(work, "etc")
    write_config(etc, port, os.path.join(work, "metastore"))
    os.makedirs(os.path.join(work, "metastore"))
    log = os.path.join(work, "server.log")
    env = dict(os.environ, JAVA_HOME=home,
               PATH=os.path.join(home, "bin") + os.pathsep + os.environ.get("PATH", ""))
    t0 = time.time()
    with open(log, "w") as out:
        proc = subprocess.Popen([os.path.join(args.trino, "bin", "launcher"), "run",
                                 "--etc-dir", etc, "--data-dir", os.path.join(work, "data")],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_started(port, proc, log, args.start_timeout)
        started = time.time() - t0
        cur = trino.dbapi.connect(host="127.0.0.1", port=port, user="kstate",
                                  catalog="hive", schema="fleet").cursor()
        cur.execute("CREATE SCHEMA hive.fleet")
        cur.fetchall()
        cols = ", ".join(f'"{c}" {t}' for c, t in COLUMNS)
        # Every file under the directory is read: summaries only.
        cur.execute(f"CREATE TABLE summaries ({cols}) WITH (format = 'PARQUET', "
                    f"external_location = 'local://{summaries}')")
        cur.fetchall()
        t1 = time.time()
        cur.execute(sql)
        rows = cur.fetchall()
        took = time.time() - t1
        names = [d[0] for d in cur.description]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    lines = [json.dumps(dict(zip(names, r))) for r in rows]
    if args.result:
        with open(args.result, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    else:
        print("\n".join(lines))
    print(f"kstate_trino: {len(rows)} rows; Trino started in {started:.1f} s, "
          f"the query took {took:.1f} s", file=sys.stderr)
    shutil.rmtree(work)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup", help="fetch and unpack Trino with the Hive plugin")
    s.add_argument("dir")
    q = sub.add_parser("query", help="run a query over summaries on Trino")
    q.add_argument("--trino", required=True, help=f"the unpacked {SERVER} (setup's)")
    q.add_argument("--summaries", required=True, help="a directory of summaries")
    q.add_argument("--sql", required=True, help="the query (sql/fleet_quantiles.sql)")
    q.add_argument("--result", help="write the rows here as JSON lines (else printed)")
    q.add_argument("--start-timeout", type=int, default=300,
                   help="seconds to wait for Trino to start (default 300)")
    args = ap.parse_args(argv)
    if args.cmd == "setup":
        print(setup(args.dir))
    else:
        query(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
