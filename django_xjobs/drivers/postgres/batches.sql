-- Batches (issue 32), by name: loaded by drivers/postgres_batches.py. A member's final state is
-- counted by the statement that settles it (complete, finish, cancel in jobs.sql); these open,
-- fill, close and read a batch. Times are the database's now().

-- name: batch_open
-- A batch row, empty and open; opening it again (a retried call) changes nothing.
INSERT INTO x_batches (id, input, callbacks, total, pending, done, dead, failed, cancelled,
                       created_at)
VALUES (%(id)s, %(input)s::jsonb, %(callbacks)s::jsonb, 0, 0, 0, 0, 0, 0, now())
ON CONFLICT (id) DO NOTHING;

-- name: batch_add
-- Insert members of an open batch, as enqueue_many does, and count them pending, in one
-- statement. The batch row is locked first: a close waits for this add, and an add after the
-- close inserts nothing (the first column says whether the batch was open). A member whose key
-- a live job holds is not inserted, and not counted.
WITH open AS (
    SELECT id FROM x_batches
    WHERE id = %(batch)s AND closed_at IS NULL
    FOR UPDATE
), given AS (
    SELECT *
    FROM unnest(%(ids)s::uuid[], %(run_ids)s::uuid[], %(names)s::text[], %(queues)s::text[],
                %(keys)s::text[], %(max_attempts)s::int[],
                %(priorities)s::int[], %(run_ats)s::timestamptz[], %(delays)s::float8[],
                %(tenants)s::text[], %(enqueued_by)s::text[], %(traceparents)s::text[])
         WITH ORDINALITY AS g(id, run_id, name, queue, idempotency_key, max_attempts,
                              priority, run_at, delay, tenant_id, enqueued_by, traceparent, n)
    JOIN jsonb_array_elements(%(inputs)s::jsonb) WITH ORDINALITY AS i(input, n) USING (n)
), due AS (
    SELECT given.*, COALESCE(run_at, now() + make_interval(secs => delay)) AS due_at FROM given
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at, batch_id)
    SELECT due.id, name, queue, input, idempotency_key, run_id, 0, max_attempts,
           CASE WHEN due_at > now() THEN 'delayed' ELSE 'ready' END,
           priority, due_at, tenant_id, enqueued_by, traceparent, now(), now(), open.id
    FROM due, open
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue
), counted AS (
    UPDATE x_batches
    SET total = total + (SELECT count(*) FROM ins),
        pending = pending + (SELECT count(*) FROM ins)
    WHERE id = (SELECT id FROM open)
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM ins WHERE state = 'ready') AS ready
)
SELECT true, ins.id, ins.run_id FROM ins, woken
UNION ALL
SELECT EXISTS (SELECT 1 FROM open), NULL, NULL;

-- name: batch_close
-- No member joins from here on. A batch whose members have all ended already completes here,
-- its callbacks inserted in this statement; otherwise its last member's settle completes it.
-- Closing a closed batch changes nothing.
WITH counted AS (
    UPDATE x_batches b
    SET closed_at = now(),
        completed_at = CASE WHEN b.pending = 0 THEN now() END
    WHERE b.id = %(batch)s
      AND b.closed_at IS NULL
    RETURNING b.id, b.input, b.callbacks, b.total, b.done, b.dead, b.failed, b.cancelled,
              b.completed_at
), fired AS (
    -- The completed batch's callbacks, inserted in the transaction that completed it: they
    -- exist exactly when the last member's final state does (docs/concepts/workflows.md).
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, created_at, updated_at)
    SELECT cb.id, cb.name, cb.queue,
           c.input || jsonb_build_object('batch', jsonb_build_object(
               'id', c.id, 'total', c.total, 'done', c.done, 'dead', c.dead,
               'failed', c.failed, 'cancelled', c.cancelled)),
           cb.key, cb.run_id, 0, cb.max_attempts, 'ready', cb.priority, now(), cb.tenant_id,
           now(), now()
    FROM counted c
    CROSS JOIN LATERAL jsonb_to_recordset(c.callbacks) AS cb(
        kind text, id uuid, run_id uuid, name text, queue text, key text, max_attempts int,
        priority int, tenant_id text)
    WHERE c.completed_at IS NOT NULL
      AND (cb.kind = 'complete' OR (cb.kind = 'success') = (c.done = c.total))
    ON CONFLICT DO NOTHING
    RETURNING queue
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues FROM (SELECT DISTINCT queue FROM fired) AS q
)

SELECT counted.id FROM counted, woken;

-- name: batch_cancel
-- Cancel every live member of a batch (issue 32), run after batch_close in one transaction so
-- no member joins after: as the job store's cancel does for one job (the cleared lease token
-- stops a running member), each member counted in the batch in this same statement; the last
-- one completes it and queues its callbacks.
WITH settled AS (
    UPDATE x_jobs
    SET state = 'cancelled',
        stop_reason = 'cancelled',
        lease_expiries = 0,
        lapsed_holder = NULL,
        last_error = COALESCE(%(reason)s::text, last_error),
        visible_at = NULL,
        claimed_by = NULL,
        lease_token = NULL,
        updated_at = now()
    WHERE batch_id = %(batch)s
      AND (state IN ('ready', 'delayed', 'running', 'suspended')) IS TRUE
    RETURNING id, batch_id, state, dependants
-- include: batch_members
-- include: batch_counted
-- include: fired
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM fired WHERE state = 'ready') AS q
)

SELECT count(*) FROM settled, woken;

-- name: batch_get
SELECT id, input, callbacks, total, pending, done, dead, failed, cancelled, created_at,
       closed_at, completed_at
FROM x_batches
WHERE id = %(batch)s;

-- name: batch_list
-- The newest batches first; with `open_only`, those whose callbacks are not yet queued.
SELECT id, input, callbacks, total, pending, done, dead, failed, cancelled, created_at,
       closed_at, completed_at
FROM x_batches
WHERE NOT %(open_only)s OR completed_at IS NULL
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: batch_open_count
-- Batches whose callbacks are not queued yet (the xjobs_batches_open gauge).
SELECT count(*) FROM x_batches WHERE completed_at IS NULL;

-- name: batch_members
-- A batch's members by id (time-ordered: the order they were added), after `after`, those
-- moved to the history too (HIST-11; x_job_history_batch_idx finds them).
SELECT id FROM (
    (SELECT id FROM x_jobs
     WHERE batch_id = %(batch)s AND id > %(after)s
     ORDER BY id
     LIMIT %(limit)s)
    UNION ALL
    (SELECT id FROM x_job_history
     WHERE batch_id = %(batch)s AND id > %(after)s
     ORDER BY id
     LIMIT %(limit)s)
) AS members
ORDER BY id
LIMIT %(limit)s;
