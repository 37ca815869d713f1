-- kstate fleet in plain SQL: merged count, total, min, max and nearest-rank p50, p99 and
-- p99.9 to the bucket, per analyzer and key, for the whole fleet and per host, kernel and
-- command. The same figures as `kstate fleet DIR --by host|kernel|command --format json`.
--
-- Runs unchanged on DuckDB, Spark SQL and Trino (no UDFs). It reads a table or view named
-- `summaries` holding the rows of `kstate summarize` files (docs/bucket-scheme.md), e.g.
--   DuckDB: CREATE VIEW summaries AS SELECT * FROM read_parquet('DIR/**/*.summary.parquet');
--   Spark:  spark.read.parquet(DIR).createOrReplaceTempView("summaries")
--
-- Histograms merge by adding the counts of equal bucket indexes. The nearest-rank quantile
-- q (in thousandths) of n values lies in the first bucket whose running count c satisfies
-- c * 1000 >= q * n: integers only, so every engine finds the same bucket. Its value is
-- reported as kstate does: the bucket's midpoint, within the merged [min, max].
--
-- Written for engines that do not keep a WITH clause's result (Spark re-runs a CTE at every
-- reference): each CTE is read once, rows are cut to the columns used before anything is
-- shuffled, copies are dropped by aggregating (not by a window, which sorts every row)
-- the rows of recordings summarized more than once only, and the four groupings are one
-- GROUPING SETS aggregate, not four unions of the rows. The earlier form (a window over
-- every whole row for copies, four unions of them) had Spark scan and sort the rows eight
-- times; over 1,000 summaries (27.5 M bucket rows) in local[2] it had not finished in 13
-- minutes, where aggregating every row for copies took 439 s of CPU. Over 1,000 other
-- summaries (6.8 M bucket rows), two fresh local[2] sessions side by side: 170 s of JVM
-- CPU when every bucket row went through that aggregate, 145 s now.
WITH stat_rows AS (
    -- Rows of another scheme or layout version do not add up with these: left out.
    -- Each recording counted once, however many summaries of it the files hold (a summary
    -- copied twice, a dataset appended to twice): copies hold equal rows, so grouping by
    -- the recording and what the row is keeps one of each.
    SELECT recording, host, COALESCE(kernel, '(unknown)') AS kernel,
           CASE WHEN command IS NULL THEN '(unknown)'
                WHEN command = '' THEN '(system-wide)'
                ELSE command END AS command,
           analyzer, key,
           MAX(count) AS n, MAX(total) AS total, MIN(min) AS lowest, MAX(max) AS highest
    FROM summaries
    WHERE scheme = 'kstate-loglinear-256-128' AND scheme_version = 1 AND kind = 'stat'
    GROUP BY recording, host, kernel, command, analyzer, key
),
copies AS (
    -- Every summary holds one 'recording' row: how many summaries there are of each.
    SELECT recording, COUNT(*) AS copies
    FROM summaries
    WHERE scheme = 'kstate-loglinear-256-128' AND scheme_version = 1 AND kind = 'recording'
    GROUP BY recording
),
bucket_rows AS (
    -- A recording summarized once (the common case): its rows as they are. Only copies
    -- need the aggregate that keeps one of each row, and that aggregate moves every row
    -- it is given between Spark's tasks: here it is given the copies' rows alone. The
    -- recordings' copy counts are a row per summary file, joined on every task (the hint
    -- is Spark's; other engines read a comment).
    SELECT /*+ BROADCAST(c) */
           r.recording, r.host, COALESCE(r.kernel, '(unknown)') AS kernel,
           CASE WHEN r.command IS NULL THEN '(unknown)'
                WHEN r.command = '' THEN '(system-wide)'
                ELSE r.command END AS command,
           r.analyzer, r.key, r.bucket, r.bucket_lo AS lo, r.bucket_hi AS hi, r.count AS n
    FROM summaries r
    JOIN copies c ON c.recording = r.recording AND c.copies = 1
    WHERE r.scheme = 'kstate-loglinear-256-128' AND r.scheme_version = 1 AND r.kind = 'bucket'
    UNION ALL
    -- One of each equal row of a recording summarized more than once.
    SELECT /*+ BROADCAST(c) */
           r.recording, r.host, COALESCE(r.kernel, '(unknown)') AS kernel,
           CASE WHEN r.command IS NULL THEN '(unknown)'
                WHEN r.command = '' THEN '(system-wide)'
                ELSE r.command END AS command,
           r.analyzer, r.key, r.bucket,
           MIN(r.bucket_lo) AS lo, MAX(r.bucket_hi) AS hi, MAX(r.count) AS n
    FROM summaries r
    JOIN copies c ON c.recording = r.recording AND c.copies > 1
    WHERE r.scheme = 'kstate-loglinear-256-128' AND r.scheme_version = 1 AND r.kind = 'bucket'
    GROUP BY r.recording, r.host, r.kernel, r.command, r.analyzer, r.key, r.bucket
),
stats AS (
    -- GROUPING(x) is 1 in the rows of a set without x: that names the dimension, and the
    -- one grouping column that is set is the group.
    SELECT CASE WHEN GROUPING(host) = 0 THEN 'host'
                WHEN GROUPING(kernel) = 0 THEN 'kernel'
                WHEN GROUPING(command) = 0 THEN 'command'
                ELSE 'fleet' END AS dim,
           COALESCE(host, kernel, command, '(fleet)') AS grp,
           analyzer, key,
           COUNT(DISTINCT recording) AS recordings,
           SUM(n) AS n, SUM(total) AS total, MIN(lowest) AS lowest, MAX(highest) AS highest
    FROM stat_rows
    GROUP BY GROUPING SETS ((analyzer, key), (host, analyzer, key),
                            (kernel, analyzer, key), (command, analyzer, key))
),
buckets AS (
    SELECT CASE WHEN GROUPING(host) = 0 THEN 'host'
                WHEN GROUPING(kernel) = 0 THEN 'kernel'
                WHEN GROUPING(command) = 0 THEN 'command'
                ELSE 'fleet' END AS dim,
           COALESCE(host, kernel, command, '(fleet)') AS grp,
           analyzer, key, bucket, MIN(lo) AS lo, MAX(hi) AS hi, SUM(n) AS n
    FROM bucket_rows
    GROUP BY GROUPING SETS ((analyzer, key, bucket), (host, analyzer, key, bucket),
                            (kernel, analyzer, key, bucket), (command, analyzer, key, bucket))
),
running AS (
    SELECT b.*,
           SUM(n) OVER (PARTITION BY dim, grp, analyzer, key ORDER BY bucket
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS c,
           SUM(n) OVER (PARTITION BY dim, grp, analyzer, key) AS t
    FROM buckets b
),
quantiles AS (
    -- Bounds grow with the index, so the smallest bound past the rank is the first
    -- bucket's.
    SELECT dim, grp, analyzer, key,
           MIN(CASE WHEN c * 1000 >= 500 * t THEN bucket END) AS p50_bucket,
           MIN(CASE WHEN c * 1000 >= 500 * t THEN lo END) AS p50_lo,
           MIN(CASE WHEN c * 1000 >= 500 * t THEN hi END) AS p50_hi,
           MIN(CASE WHEN c * 1000 >= 990 * t THEN bucket END) AS p99_bucket,
           MIN(CASE WHEN c * 1000 >= 990 * t THEN lo END) AS p99_lo,
           MIN(CASE WHEN c * 1000 >= 990 * t THEN hi END) AS p99_hi,
           MIN(CASE WHEN c * 1000 >= 999 * t THEN bucket END) AS p999_bucket,
           MIN(CASE WHEN c * 1000 >= 999 * t THEN lo END) AS p999_lo,
           MIN(CASE WHEN c * 1000 >= 999 * t THEN hi END) AS p999_hi
    FROM running
    GROUP BY dim, grp, analyzer, key
)
SELECT s.dim, s.grp, s.analyzer, s.key, s.recordings,
       s.n AS count, s.total, s.lowest AS min, s.highest AS max,
       CAST(FLOOR(s.total / s.n) AS BIGINT) AS avg,
       q.p50_bucket,
       GREATEST(s.lowest, LEAST(s.highest,
           q.p50_lo + CAST(FLOOR((q.p50_hi - q.p50_lo) / 2) AS BIGINT))) AS p50,
       q.p99_bucket,
       GREATEST(s.lowest, LEAST(s.highest,
           q.p99_lo + CAST(FLOOR((q.p99_hi - q.p99_lo) / 2) AS BIGINT))) AS p99,
       q.p999_bucket,
       GREATEST(s.lowest, LEAST(s.highest,
           q.p999_lo + CAST(FLOOR((q.p999_hi - q.p999_lo) / 2) AS BIGINT))) AS p999
FROM stats s
JOIN quantiles q
  ON q.dim = s.dim AND q.grp = s.grp AND q.analyzer = s.analyzer AND q.key = s.key
ORDER BY s.analyzer, s.key, s.dim, s.grp
