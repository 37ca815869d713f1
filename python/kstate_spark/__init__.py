"""kstate on Spark: `kstate summarize` distributed over executors, the fleet reduce in
Spark SQL (sql/fleet_quantiles.sql). Run `spark-submit python/kstate_spark/job.py --help`."""
