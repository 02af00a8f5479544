-- The rollup's reads and its retention (rollup.py). The settle statements in postgres.sql write
-- it; nothing here runs on the hot path.

-- name: read_rollup
-- Every minute from `since` on, shard by shard: the driver adds the shards together.
SELECT minute, queue, name, outcome, count, run_seconds, wait_seconds, run_buckets, wait_buckets
FROM x_job_rollup
WHERE minute >= %(since)s
ORDER BY minute, queue, name, outcome, shard;

-- name: prune_rollup
-- XJOBS["ROLLUP_RETENTION"]: minutes older than the cutoff go.
DELETE FROM x_job_rollup WHERE minute < now() - make_interval(secs => %(older_than)s);
