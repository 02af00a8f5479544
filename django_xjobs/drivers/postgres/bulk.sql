-- The operator's verbs on every job a filter admits (issue 45): the walk that selects a batch of
-- ids, and one statement per verb that acts on a batch. Each action statement is fenced as its
-- single-job verb is (jobs.sql's cancel, requeue, prune): on the verb's states, and on the
-- filter again, so a job that moved on between the walk and the action (settled, retried,
-- cancelled by someone else) is left as it is and counted as skipped (SPEC BULK-04). No
-- statement names more than one batch of ids: no lock is held on more (SPEC BULK-03).

-- fragment: admits
-- The filter (operations/bulk.py's JobFilter) on the row `j`: a field given as NULL admits every
-- row. A state is the one a surface shows: a waiting row is ready once due, delayed until then
-- (`due`, `later`), whichever it is stored as (DESIGN Q-05). The error code is the text before
-- the first colon of last_error (errors/base.py's describe_error writes "X_CODE: message").
    AND j.state = ANY(%(states)s::text[])
    AND (%(any_state)s
         OR j.state = ANY(%(shown)s::text[])
         OR (%(due)s AND j.state IN ('ready', 'delayed') AND j.run_at <= now())
         OR (%(later)s AND j.state IN ('ready', 'delayed') AND j.run_at > now()))
    AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
    AND (%(name)s::text IS NULL OR j.name = %(name)s::text)
    AND (%(tenant_id)s::text IS NULL OR j.tenant_id = %(tenant_id)s::text)
    AND (%(stop_reason)s::text IS NULL OR j.stop_reason = %(stop_reason)s::text)
    AND (%(error_code)s::text IS NULL
         OR j.last_error = %(error_code)s::text
         OR left(j.last_error, length(%(error_code)s::text) + 1) = %(error_code)s::text || ':')
    AND (%(created_after)s::timestamptz IS NULL OR j.created_at >= %(created_after)s::timestamptz)
    AND (%(created_before)s::timestamptz IS NULL OR j.created_at < %(created_before)s::timestamptz)
    AND (%(updated_after)s::timestamptz IS NULL OR j.updated_at >= %(updated_after)s::timestamptz)
    AND (%(updated_before)s::timestamptz IS NULL OR j.updated_at < %(updated_before)s::timestamptz)
    AND (%(input)s::jsonb IS NULL OR j.input @> %(input)s::jsonb)
    AND (%(only_ids)s::uuid[] IS NULL OR j.id = ANY(%(only_ids)s::uuid[]))

-- name: bulk_match
-- The next batch of ids the filter admits, in the primary key's order from where the last one
-- stopped (`after`): each batch starts past the previous one, never from the start again. The
-- finished jobs moved to the history are admitted as those still in x_jobs (HIST-09): each
-- table gives its next batch by its own id index, and the two are merged (one snapshot: a job
-- the mover moves meanwhile is in exactly one of them).
SELECT id FROM (
    (SELECT j.id
     FROM x_jobs j
     WHERE j.id > %(after)s::uuid
-- include: admits
     ORDER BY j.id
     LIMIT %(limit)s)
    UNION ALL
    (SELECT j.id
     FROM x_job_history j
     WHERE j.id > %(after)s::uuid
-- include: admits
     ORDER BY j.id
     LIMIT %(limit)s)
) AS matched
ORDER BY id
LIMIT %(limit)s;

-- name: bulk_count
-- How many jobs the filter admits (a dry run's answer, and the count a command confirms),
-- wherever they live (HIST-09).
SELECT (SELECT count(*)
        FROM x_jobs j
        WHERE true
-- include: admits
       )
     + (SELECT count(*)
        FROM x_job_history j
        WHERE true
-- include: admits
       );

-- name: bulk_cancel
-- Cancel the live jobs of a batch, as jobs.sql's cancel does one (SPEC CANCEL-02, BULK-05):
-- clearing the lease token is what stops a running one's holder, at its next heartbeat; each
-- member of a batch counted in it; the jobs waiting for one released. Answers each id it
-- cancelled, marked when the job was parked or running: such a job may be a parent whose call
-- step waits for child jobs, which are cancelled next (SPEC CHILD-06).
WITH prior AS (
    SELECT j.id, j.state AS was
    FROM x_jobs j
    WHERE j.id = ANY(%(ids)s::uuid[])
-- include: admits
), settled AS (
    UPDATE x_jobs j
    SET state = 'cancelled',
        stop_reason = 'cancelled',
        lease_expiries = 0,
        lapsed_holder = NULL,
        last_error = COALESCE(%(reason)s::text, j.last_error),
        visible_at = NULL,
        claimed_by = NULL,
        lease_token = NULL,
        updated_at = now()
    WHERE j.id = ANY(ARRAY(SELECT id FROM prior))
      AND (j.state IN ('ready', 'delayed', 'running', 'suspended')) IS TRUE
-- include: admits
    RETURNING j.id, j.batch_id, j.state, j.dependants, j.queue
-- include: batch_members
-- include: batch_counted
-- include: fired
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM fired WHERE state = 'ready') AS q
)
SELECT s.id, p.was IN ('suspended', 'running') AS parked
FROM settled s
JOIN prior p ON p.id = s.id
CROSS JOIN woken;

-- name: bulk_retry
-- Run the finished jobs of a batch again, as jobs.sql's requeue does one (SPEC INSP-06,
-- BULK-06): same run, attempt 0, due now, its steps replayed; its batch waits for it again. With
-- `to_queue` they go to that queue (requeue_jobs). A job whose idempotency key a live job holds is
-- left (the live-key index allows one live row per key), and so is all but the first of a batch's
-- jobs that share a key; a concurrent enqueue that takes a key meanwhile fails the statement, and
-- the driver then goes one job at a time.
-- Answers how many it ran again, how many of the ids it found in x_jobs and how many it picked
-- (BULK-26): unless `restored` (bulk_restore ran first in this transaction) it changes nothing
-- when an id is not there, since that job may be in the history, to be brought back first and
-- so to take its place among the batch's keys. Each row is read once (BULK-27): found by its
-- id, updated by the ctid of the version read. A row another transaction changes while the
-- statement waits for its lock is left, whatever the change (its newest version has another
-- ctid): fewer changed than picked, and the driver runs the batch again to judge those rows
-- at their newest version, as an update by id would have judged them.
WITH found AS (
    SELECT j.id, j.ctid AS at, j.state AS was, j.batch_id,
           j.name, j.tenant_id, j.idempotency_key,
           (true
-- include: admits
           ) AS admitted
    FROM x_jobs j
    WHERE j.id = ANY(%(ids)s::uuid[])
), picked AS (
    SELECT DISTINCT ON (f.name, COALESCE(f.tenant_id, ''), f.idempotency_key)
           f.id, f.at, f.was, f.batch_id
    FROM found f
    WHERE f.admitted
      AND NOT EXISTS (
          SELECT 1 FROM x_jobs l
          WHERE l.name = f.name
            AND COALESCE(l.tenant_id, '') = COALESCE(f.tenant_id, '')
            AND l.idempotency_key = f.idempotency_key
            AND l.state IN ('ready', 'delayed', 'running', 'suspended'))
      AND (%(restored)s
           OR (SELECT count(*) FROM found) = cardinality(%(ids)s::uuid[]))
    ORDER BY f.name, COALESCE(f.tenant_id, ''), f.idempotency_key, f.id
), requeued AS (
    UPDATE x_jobs j
    SET state = 'ready',
        queue = COALESCE(%(to_queue)s::text, j.queue),
-- include: operator_retry
    WHERE j.ctid = ANY(ARRAY(SELECT at FROM picked))
-- include: admits
    RETURNING j.id, j.queue
), reopened AS (
    UPDATE x_batches b
    SET pending = b.pending + r.n,
        done = b.done - r.done,
        dead = b.dead - r.dead,
        failed = b.failed - r.failed,
        cancelled = b.cancelled - r.cancelled
    FROM (
        SELECT p.batch_id, count(*)::int AS n,
               count(*) FILTER (WHERE p.was = 'done')::int AS done,
               count(*) FILTER (WHERE p.was = 'dead')::int AS dead,
               count(*) FILTER (WHERE p.was = 'failed')::int AS failed,
               count(*) FILTER (WHERE p.was = 'cancelled')::int AS cancelled
        FROM picked p
        JOIN requeued q ON q.id = p.id
        WHERE p.batch_id IS NOT NULL
        GROUP BY p.batch_id
    ) AS r
    WHERE b.id = r.batch_id
      AND b.completed_at IS NULL
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM requeued) AS q
)
SELECT count(q.id) AS changed,
       (SELECT count(*) FROM found) AS present,
       (SELECT count(*) FROM picked) AS picked
FROM requeued q
CROSS JOIN woken;

-- name: bulk_restore
-- HIST-09: the finished jobs of a batch that live in the history come back to x_jobs as they
-- were, in the transaction of the bulk_retry that follows (archive.sql's restore, for a batch):
-- only those bulk_retry will run again, so a job whose key a live job holds, or all but the
-- first of the batch's jobs sharing a key, stays in the history. `{columns}` is filled in by
-- the driver (every column of JobColumns, SPEC DB-04).
WITH picked AS (
    SELECT DISTINCT ON (j.name, COALESCE(j.tenant_id, ''), j.idempotency_key) j.id
    FROM x_job_history j
    WHERE j.id = ANY(%(ids)s::uuid[])
-- include: admits
      AND NOT EXISTS (
          SELECT 1 FROM x_jobs l
          WHERE l.name = j.name
            AND COALESCE(l.tenant_id, '') = COALESCE(j.tenant_id, '')
            AND l.idempotency_key = j.idempotency_key
            AND l.state IN ('ready', 'delayed', 'running', 'suspended'))
    ORDER BY j.name, COALESCE(j.tenant_id, ''), j.idempotency_key, j.id
), back AS (
    DELETE FROM x_job_history h
    WHERE h.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING {h_columns}
)
INSERT INTO x_jobs ({columns})
SELECT {columns} FROM back;

-- name: bulk_move
-- Move the waiting jobs of a batch to another queue (requeue_jobs, SPEC BULK-07): each keeps its
-- run_at, priority and attempt, so it takes the same place among the new queue's jobs; that
-- queue's workers are woken.
WITH moved AS (
    UPDATE x_jobs j
    SET queue = %(to_queue)s::text,
        updated_at = now()
    WHERE j.id = ANY(%(ids)s::uuid[])
      AND j.state IN ('ready', 'delayed')
      AND j.queue <> %(to_queue)s::text
-- include: admits
    RETURNING j.id
), woken AS (
    SELECT count(pg_notify('xjobs', %(to_queue)s::text)) AS queues
    FROM (SELECT 1 FROM moved LIMIT 1) AS any_moved
)
SELECT m.id, false AS parked
FROM moved m
CROSS JOIN woken;

-- name: bulk_delete
-- Delete the finished jobs of a batch and their steps (SPEC BULK-08), as prune does: a job a
-- live job waits for (`after`) is kept until that one settles, and rows a concurrent retry holds
-- are skipped (SKIP LOCKED). A job of the batch moved to the history is deleted there, with its
-- steps, in the same statement (HIST-10).
WITH doomed AS (
    SELECT j.id, j.run_id
    FROM x_jobs j
    WHERE j.id = ANY(%(ids)s::uuid[])
      AND j.state IN ('done', 'failed', 'dead', 'cancelled')
-- include: admits
      AND (j.after IS NULL OR NOT EXISTS (
          SELECT 1 FROM x_jobs l
          WHERE l.id = ANY(j.after)
            AND l.state IN ('ready', 'delayed', 'running', 'suspended')))
    FOR UPDATE SKIP LOCKED
), moved AS (
    SELECT j.id, j.run_id
    FROM x_job_history j
    WHERE j.id = ANY(%(ids)s::uuid[])
-- include: admits
      AND (j.after IS NULL OR NOT EXISTS (
          SELECT 1 FROM x_jobs l
          WHERE l.id = ANY(j.after)
            AND l.state IN ('ready', 'delayed', 'running', 'suspended')))
    FOR UPDATE SKIP LOCKED
), steps AS (
    DELETE FROM x_job_steps
    WHERE run_id = ANY(ARRAY(SELECT run_id FROM doomed UNION ALL SELECT run_id FROM moved))
), gone AS (
    DELETE FROM x_jobs
    WHERE id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING id
), gone_moved AS (
    DELETE FROM x_job_history
    WHERE id = ANY(ARRAY(SELECT id FROM moved))
    RETURNING id
)
SELECT id, false AS parked FROM gone
UNION ALL
SELECT id, false AS parked FROM gone_moved;
