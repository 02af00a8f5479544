-- What a claim weighs for one job, for `why_job` (issue 42): counted where the rows are, so an
-- operator's question about a job behind 10,000 others reads numbers, not 10,000 rows. Every
-- count stops at `cap`. The waiting rows a claim takes are the claim index's own (not running,
-- not finished: ready, delayed or a suspended row whose time came), due on the database's clock.

-- name: standing
WITH me AS (
    SELECT id, queue, priority, run_at, limit_key, COALESCE(tenant_id, '') AS tenant
    FROM x_jobs WHERE id = %(id)s
)
SELECT
    me.queue, me.tenant,
    (SELECT count(*) FROM (
        SELECT 1 FROM x_jobs j
        WHERE NOT (j.state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND j.queue = me.queue AND j.run_at <= now() AND j.id <> me.id
          AND (j.priority > me.priority
               OR (j.priority = me.priority AND (j.run_at, j.id) < (me.run_at, me.id)))
        LIMIT %(cap)s) s) AS ahead,
    (SELECT count(*) FROM (
        SELECT 1 FROM x_jobs j
        WHERE NOT (j.state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND j.queue = me.queue AND j.run_at <= now() AND j.id <> me.id
          AND j.priority > me.priority
        LIMIT %(cap)s) s) AS higher_priority,
    me.limit_key,
    (SELECT count(*) FROM (
        SELECT 1 FROM x_jobs j
        WHERE NOT (j.state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND j.queue = me.queue AND j.limit_key = me.limit_key
          AND j.run_at <= now() AND j.id <> me.id
          AND (j.priority > me.priority
               OR (j.priority = me.priority AND (j.run_at, j.id) < (me.run_at, me.id)))
        LIMIT %(cap)s) s) AS key_ahead,
    (SELECT count(*) FROM x_jobs r
     WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead',
                            'cancelled'))
       AND r.limit_key = me.limit_key) AS key_running,
    (SELECT json_agg(json_build_array(h.id, h.claimed_by) ORDER BY h.id) FROM (
        SELECT r.id, r.claimed_by FROM x_jobs r
        WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead',
                               'cancelled'))
          AND r.limit_key = me.limit_key
        ORDER BY r.id
        LIMIT 10) h) AS key_holders,
    (SELECT COALESCE(l.starts, '{}') FROM x_limit_keys l WHERE l.key = me.limit_key) AS starts,
    (SELECT l.paused_until FROM x_limit_keys l
     WHERE l.key = me.limit_key AND l.paused_until > now()) AS paused_until,
    (SELECT count(*) FROM x_jobs r
     WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead',
                            'cancelled'))
       AND r.queue = me.queue) AS queue_running
FROM me;

-- name: standing_turns
-- Fair share (XJOBS["FAIR_SHARE"]): the claim takes each key's first run, then each key's
-- second... A row of another key goes first when its place in its key comes before this job's
-- turn, or is the same turn and the claim order puts it first; how many keys wait besides.
WITH me AS (
    SELECT id, queue, priority, run_at, limit_key FROM x_jobs WHERE id = %(id)s
), others AS (
    SELECT j.limit_key, j.priority, j.run_at, j.id,
           row_number() OVER (PARTITION BY j.limit_key
                              ORDER BY j.priority DESC, j.run_at, j.id) AS turn
    FROM x_jobs j, me
    WHERE NOT (j.state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
      AND j.queue = me.queue AND j.run_at <= now() AND j.id <> me.id
      AND j.limit_key IS DISTINCT FROM me.limit_key
)
SELECT
    (SELECT count(*) FROM (SELECT DISTINCT o.limit_key FROM others o LIMIT %(cap)s) k),
    (SELECT count(*) FROM (
        SELECT 1 FROM others o, me
        WHERE o.turn < %(turn)s
           OR (o.turn = %(turn)s
               AND (o.priority > me.priority
                    OR (o.priority = me.priority AND (o.run_at, o.id) < (me.run_at, me.id))))
        LIMIT %(cap)s) s);

-- name: standing_loads
-- Each worker's runs now: all, those of the job's queue, those of its tenant (the per-process
-- caps of XJOBS["LIMITS"] count these).
SELECT claimed_by, count(*),
       count(*) FILTER (WHERE queue = %(queue)s),
       count(*) FILTER (WHERE COALESCE(tenant_id, '') = %(tenant)s)
FROM x_jobs
WHERE NOT (state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead', 'cancelled'))
  AND claimed_by IS NOT NULL
GROUP BY claimed_by
ORDER BY claimed_by;

-- name: job_states
-- The state of each id that names a job, and nothing else of its row.
SELECT id, state FROM x_jobs WHERE id = ANY (%(ids)s::uuid[]);
