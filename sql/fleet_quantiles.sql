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
WITH known AS (
    -- Buckets of another scheme or layout version do not add up with these: left out.
    SELECT * FROM summaries
    WHERE scheme = 'kstate-loglinear-256-128' AND scheme_version = 1
      AND kind IN ('stat', 'bucket')
),
once AS (
    -- Each recording counted once, however many summaries of it the files hold (a
    -- summary copied twice, a dataset appended to twice): a row is identified by its
    -- recording and what it is, and of equal rows the one of the first file is kept.
    SELECT * FROM (
        SELECT k.*,
               ROW_NUMBER() OVER (PARTITION BY recording, kind, analyzer, key, bucket
                                  ORDER BY file) AS copy_no
        FROM known k
    ) numbered
    WHERE copy_no = 1
),
grouped AS (
    SELECT 'fleet' AS dim, '(fleet)' AS grp, k.* FROM once k
    UNION ALL
    SELECT 'host' AS dim, k.host AS grp, k.* FROM once k
    UNION ALL
    SELECT 'kernel' AS dim, COALESCE(k.kernel, '(unknown)') AS grp, k.* FROM once k
    UNION ALL
    SELECT 'command' AS dim,
           CASE WHEN k.command IS NULL THEN '(unknown)'
                WHEN k.command = '' THEN '(system-wide)'
                ELSE k.command END AS grp,
           k.* FROM once k
),
stats AS (
    SELECT dim, grp, analyzer, key,
           COUNT(DISTINCT recording) AS recordings,
           SUM(count) AS n, SUM(total) AS total, MIN(min) AS lowest, MAX(max) AS highest
    FROM grouped WHERE kind = 'stat'
    GROUP BY dim, grp, analyzer, key
),
buckets AS (
    SELECT dim, grp, analyzer, key, bucket,
           MIN(bucket_lo) AS lo, MAX(bucket_hi) AS hi, SUM(count) AS n
    FROM grouped WHERE kind = 'bucket'
    GROUP BY dim, grp, analyzer, key, bucket
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
