-- Queue depth over time (depth.py): one sample a minute for the fleet, its reads and its
-- retention. Nothing here runs on the hot path: the workers' presence beat samples, at most
-- twice a minute per worker.

-- name: sample_depth
-- This minute's live depth per queue, counted as `stats` counts it (a due delayed row is
-- ready, DESIGN Q-05). A minute that already holds a sample is left alone without counting:
-- the NOT EXISTS is a one-time filter read before the scan, so the fleet's other workers pay
-- one index probe. Two samplers racing in one minute both count; the unique key keeps the first
-- row of each queue and drops the other (ON CONFLICT DO NOTHING). The state filter implies the
-- live-key index's predicate, so the count reads live rows only, never the finished ones.
INSERT INTO x_queue_depth (minute, queue, ready, delayed, running)
SELECT date_trunc('minute', now(), 'UTC'), queue,
       count(*) FILTER (WHERE state IN ('ready', 'delayed') AND run_at <= now()),
       count(*) FILTER (WHERE state IN ('ready', 'delayed') AND run_at > now()),
       count(*) FILTER (WHERE state = 'running')
FROM x_jobs
WHERE state IN ('ready', 'delayed', 'running')
  AND NOT EXISTS (SELECT 1 FROM x_queue_depth WHERE minute = date_trunc('minute', now(), 'UTC'))
GROUP BY queue
ON CONFLICT (minute, queue) DO NOTHING;

-- name: read_depth
SELECT minute, queue, ready, delayed, running
FROM x_queue_depth
WHERE minute >= %(since)s
ORDER BY minute, queue;

-- name: prune_depth
-- XJOBS["ROLLUP_RETENTION"]: samples older than the cutoff go, as the rollup's minutes do.
DELETE FROM x_queue_depth WHERE minute < now() - make_interval(secs => %(older_than)s);

-- name: age_depth_away
-- Test support (JobDriver.age), in two steps as the rollup's (jobs.sql age_rollup_away): one
-- UPDATE shifting the minutes would land a row on a minute another row still holds.
UPDATE x_queue_depth SET minute = minute - interval '1000 years' - %(d)s;

-- name: age_depth_back
UPDATE x_queue_depth SET minute = minute + interval '1000 years';
