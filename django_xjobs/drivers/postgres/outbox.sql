-- The outbox store (x_outbox), by name. Loaded once by outbox/postgres.py.
-- stage runs on the CALLER's connection, inside their transaction (SPEC OUTBOX-05); everything
-- else runs on the relay's own connection in autocommit.
--
-- A statement that names its rows by id finds them by the primary key, whatever the statistics
-- say: its `published_at IS NULL` is written `(published_at IS NULL) IS TRUE`, which proves no
-- partial index, and a join with the ids also filters `id = ANY(ids)`. Written plainly, a table
-- analyzed while every row was published, then truncated and refilled, had the planner read the
-- whole unpublished index for each chunk of an on-commit publish (200 ms a chunk), or the whole
-- table (tests/drivers/postgres/test_fence_plan.py).

-- name: stage
-- One row per enqueue; staged_at is the transaction's start, so a transaction's rows tie on it
-- and are ordered by their time-ordered ids (SPEC SE-31). The NOTIFY is delivered at commit.
WITH ins AS (
    INSERT INTO x_outbox (id, job, queue, input, idempotency_key, max_attempts, priority,
                          run_at, staged_at, tenant_id, traceparent, enqueued_by,
                          expires_at, expires_in, replace, after, run_anyway)
    VALUES (%(id)s, %(job)s, %(queue)s, %(input)s::jsonb, %(idempotency_key)s,
            %(max_attempts)s, %(priority)s,
            COALESCE(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s)), now(),
            %(tenant_id)s, %(traceparent)s, %(enqueued_by)s,
            %(expires_at)s::timestamptz, %(expires_in)s::float8, %(replace)s,
            %(after)s::uuid[], %(run_anyway)s)
    RETURNING id
)
SELECT id, pg_notify('xjobs_outbox', '') FROM ins;

-- name: stage_many
-- stage for many rows in one statement, one array per column in enqueue order (the inputs as
-- one JSON array); one NOTIFY.
WITH ins AS (
    INSERT INTO x_outbox (id, job, queue, input, idempotency_key, max_attempts, priority,
                          run_at, staged_at, tenant_id, traceparent, enqueued_by,
                          expires_at, expires_in, replace)
    SELECT id, job, queue, input, idempotency_key, max_attempts, priority,
           COALESCE(run_at, now() + make_interval(secs => delay)), now(),
           tenant_id, traceparent, enqueued_by, expires_at, expires_in, replace
    FROM unnest(%(ids)s::uuid[], %(names)s::text[], %(queues)s::text[],
                %(keys)s::text[], %(max_attempts)s::int[], %(priorities)s::int[],
                %(run_ats)s::timestamptz[], %(delays)s::float8[], %(tenants)s::text[],
                %(traceparents)s::text[], %(enqueued_by)s::text[],
                %(expires_ats)s::timestamptz[], %(expires_ins)s::float8[],
                %(replaces)s::boolean[])
         WITH ORDINALITY AS s(id, job, queue, idempotency_key, max_attempts, priority, run_at,
                              delay, tenant_id, traceparent, enqueued_by, expires_at,
                              expires_in, replace, n)
    JOIN jsonb_array_elements(%(inputs)s::jsonb) WITH ORDINALITY AS i(input, n) USING (n)
    ORDER BY n
    RETURNING id
)
SELECT count(*), pg_notify('xjobs_outbox', '') FROM ins;

-- name: stage_quiet
-- stage for the later rows of a transaction whose first row already sent the NOTIFY (one
-- notification per transaction is all a relay needs, and all PostgreSQL would deliver).
INSERT INTO x_outbox (id, job, queue, input, idempotency_key, max_attempts, priority,
                      run_at, staged_at, tenant_id, traceparent, enqueued_by,
                      expires_at, expires_in, replace, after, run_anyway)
VALUES (%(id)s, %(job)s, %(queue)s, %(input)s::jsonb, %(idempotency_key)s,
        %(max_attempts)s, %(priority)s,
        COALESCE(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s)), now(),
        %(tenant_id)s, %(traceparent)s, %(enqueued_by)s,
        %(expires_at)s::timestamptz, %(expires_in)s::float8, %(replace)s,
        %(after)s::uuid[], %(run_anyway)s);

-- name: claim
-- A lease taken in one statement (SPEC OUTBOX-06, SE-28): unpublished rows nobody holds, or
-- whose holder's lease lapsed, oldest (staged_at, id) first. A quarantined row is left out: its
-- publish fails the same way every time, and would hold back every row behind it (issue 24).
WITH picked AS (
    SELECT id FROM x_outbox
    WHERE published_at IS NULL
      AND quarantined_at IS NULL
      AND (claimed_at IS NULL OR claimed_at <= now() - make_interval(secs => %(lease)s))
    ORDER BY staged_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE x_outbox o
SET claimed_at = now(), claimed_by = %(token)s
FROM picked
WHERE o.id = picked.id
RETURNING o.id, o.job, o.queue, o.input, o.idempotency_key, o.max_attempts, o.priority,
          o.run_at, o.staged_at, o.tenant_id, o.traceparent, o.enqueued_by, o.claimed_by,
          o.expires_at, o.expires_in, o.replace, o.after, o.run_anyway;

-- name: claim_ids
-- The on-commit fast path: the same lease, for exactly the rows its transaction staged.
WITH picked AS (
    SELECT id FROM x_outbox
    WHERE id = ANY(%(ids)s::uuid[])
      AND (published_at IS NULL) IS TRUE
      AND quarantined_at IS NULL
      AND (claimed_at IS NULL OR claimed_at <= now() - make_interval(secs => %(lease)s))
    ORDER BY staged_at, id
    FOR UPDATE SKIP LOCKED
)
UPDATE x_outbox o
SET claimed_at = now(), claimed_by = %(token)s
FROM picked
WHERE o.id = picked.id
RETURNING o.id, o.job, o.queue, o.input, o.idempotency_key, o.max_attempts, o.priority,
          o.run_at, o.staged_at, o.tenant_id, o.traceparent, o.enqueued_by, o.claimed_by,
          o.expires_at, o.expires_in, o.replace, o.after, o.run_anyway;

-- name: release
-- Hand rows back, only if still ours and unpublished (SPEC OUTBOX-11, SE-30).
UPDATE x_outbox
SET claimed_at = NULL, claimed_by = NULL
WHERE id = ANY(%(ids)s::uuid[])
  AND (published_at IS NULL) IS TRUE
  AND claimed_by = %(token)s;

-- name: mark_published
-- First writer wins; a stale relay retires nothing (SPEC OUTBOX-12). job_id is the job the row
-- became: its own id, or the live duplicate it collapsed into.
UPDATE x_outbox
SET published_at = now(), job_id = %(job_id)s
WHERE id = %(id)s
  AND (published_at IS NULL) IS TRUE
  AND claimed_by = %(token)s;

-- name: publish_taken
-- The on-commit publish on the jobs' own database in one statement: take the rows claim_ids
-- would take, marked published as their own jobs, and insert those jobs straight from them, so
-- no row travels to the client and back. The jobs go in as enqueue_many would insert them
-- (same states, the same expiry: the one given, or its seconds counted from the run time; one
-- NOTIFY per queue that got a ready job); a row whose insert was suppressed (a live duplicate,
-- or a job already inserted under its id) answers false and is published through the driver's
-- enqueue_many, which knows what it collapsed into. So does a row staged to replace (issue 29),
-- and every row of the take that shares its key: the driver replaces a waiting holder, and
-- decides those rows one by one in stage order, as the direct enqueues would have been. So
-- does a row with dependencies (issue 32): the driver's enqueue registers it with them. The
-- row locks fence a relay out until the transaction commits; a failure rolls the marks back
-- with the inserts.
WITH picked AS (
    SELECT id FROM x_outbox
    WHERE id = ANY(%(ids)s::uuid[])
      AND (published_at IS NULL) IS TRUE
      AND quarantined_at IS NULL
      AND (claimed_at IS NULL OR claimed_at <= now() - make_interval(secs => %(lease)s))
    FOR UPDATE SKIP LOCKED
), taken AS (
    UPDATE x_outbox o
    SET published_at = now(), job_id = o.id, claimed_at = now(), claimed_by = %(token)s
    FROM picked
    WHERE o.id = picked.id
    RETURNING o.id, o.job, o.queue, o.input, o.idempotency_key, o.max_attempts, o.priority,
              o.run_at, o.staged_at, o.tenant_id, o.traceparent, o.enqueued_by,
              o.expires_at, o.expires_in, o.replace, o.after
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at, expires_at)
    SELECT t.id, t.job, t.queue, t.input, t.idempotency_key, r.run_id, 0, t.max_attempts,
           CASE WHEN t.run_at > now() THEN 'delayed' ELSE 'ready' END,
           t.priority, t.run_at, t.tenant_id, t.enqueued_by, t.traceparent, now(), now(),
           -- as jobs.sql enqueue: the run time is the due time the stage computed
           COALESCE(t.expires_at, t.run_at + make_interval(secs => t.expires_in))
    FROM taken t
    JOIN unnest(%(ids)s::uuid[], %(run_ids)s::uuid[]) AS r(id, run_id) USING (id)
    -- the live-key index's namespace; NOT IN over these never-null values, planned as one
    -- hashed subplan (NOT EXISTS became a nested loop over the chunk: quadratic)
    WHERE (t.job, COALESCE(t.tenant_id, ''), t.idempotency_key) NOT IN (
        SELECT job, COALESCE(tenant_id, ''), idempotency_key FROM taken
        WHERE replace OR after IS NOT NULL
    )
    ORDER BY t.staged_at, t.id
    ON CONFLICT DO NOTHING
    RETURNING id, state, queue
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM ins WHERE state = 'ready') AS ready
)
-- IN, not a join: planned as a hashed subplan. Under a generic plan the planner joined the CTEs
-- in a nested loop: a million comparisons for a chunk of a thousand rows.
SELECT t.id, t.id IN (SELECT id FROM ins) FROM taken t, woken;

-- name: taken_rows
-- The rows of a publish_taken whose insert was suppressed, for the driver to publish.
SELECT id, job, queue, input, idempotency_key, max_attempts, priority, run_at, staged_at,
       tenant_id, traceparent, enqueued_by, claimed_by, expires_at, expires_in, replace,
       after, run_anyway
FROM x_outbox
WHERE id = ANY(%(ids)s::uuid[])
  AND claimed_by = %(token)s;

-- name: take_claimed
-- The relay's batched publish on the jobs' own database: the rows of its claim it still holds,
-- marked published as their own jobs in the transaction that inserts those jobs (SPEC
-- OUTBOX-09/12). A row another relay took after our lease lapsed is neither marked nor
-- inserted, and the row locks fence that relay out until this transaction ends.
UPDATE x_outbox
SET published_at = now(), job_id = id
WHERE id = ANY(%(ids)s::uuid[])
  AND (published_at IS NULL) IS TRUE
  AND claimed_by = %(token)s
RETURNING id;

-- name: collapsed
-- Rows publish_taken marked whose publish collapsed into a live duplicate: the job they became.
UPDATE x_outbox o
SET job_id = m.job_id
FROM unnest(%(ids)s::uuid[], %(job_ids)s::uuid[]) AS m(id, job_id)
WHERE o.id = ANY(%(ids)s::uuid[])
  AND o.id = m.id
  AND o.claimed_by = %(token)s;

-- name: mark_published_many
-- mark_published for a publish's whole chunk: each row with the job it became.
UPDATE x_outbox o
SET published_at = now(), job_id = m.job_id
FROM unnest(%(ids)s::uuid[], %(job_ids)s::uuid[]) AS m(id, job_id)
WHERE o.id = ANY(%(ids)s::uuid[])
  AND o.id = m.id
  AND (o.published_at IS NULL) IS TRUE
  AND o.claimed_by = %(token)s;

-- name: bound_publish
-- The publish transaction holds the new job row and its key until it commits. A relay that
-- stalls in it past its lease must not block the next relay forever: the server ends a
-- transaction left idle that long, and a publish waiting on another's row gives up.
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, true),
       set_config('lock_timeout', %(ms)s, true);

-- name: resolve
-- A staged id that collapsed into another job at publish answers for that job.
SELECT job_id FROM x_outbox
WHERE id = %(id)s AND job_id IS NOT NULL AND job_id <> id;

-- name: pending
-- Unpublished rows, claimed ones included (SPEC OUTBOX-19), and the oldest one's age. A
-- quarantined row waits for an operator, not for the relay: it is counted on its own.
SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(staged_at)), 0)
FROM x_outbox
WHERE published_at IS NULL
  AND quarantined_at IS NULL;

-- name: quarantine
-- A row whose publish failed for a reason that fails the same way again (issue 24): kept, with
-- the error, out of every batch until an operator retries or discards it. Only while the row is
-- still ours and unpublished, as every other write of a claimed row.
UPDATE x_outbox
SET quarantined_at = now(), error_code = %(code)s, error = %(error)s,
    claimed_at = NULL, claimed_by = NULL
WHERE id = %(id)s
  AND (published_at IS NULL) IS TRUE
  AND claimed_by = %(token)s;

-- name: quarantined
-- The quarantined rows, oldest quarantine first, with the sizes of the values the live-key
-- index holds (the usual culprit).
SELECT id, job, queue, idempotency_key, tenant_id, staged_at, quarantined_at, error_code, error,
       octet_length(idempotency_key), octet_length(tenant_id), octet_length(job)
FROM x_outbox
WHERE quarantined_at IS NOT NULL
  AND published_at IS NULL
ORDER BY quarantined_at, id
LIMIT %(limit)s;

-- name: quarantined_count
SELECT count(*) FROM x_outbox WHERE quarantined_at IS NOT NULL AND published_at IS NULL;

-- name: unquarantine
-- An operator's retry: the row goes back to the relay, whose next pass tries it again.
UPDATE x_outbox
SET quarantined_at = NULL, error_code = NULL, error = NULL, claimed_at = NULL, claimed_by = NULL
WHERE id = %(id)s
  AND quarantined_at IS NOT NULL
  AND (published_at IS NULL) IS TRUE;

-- name: discard
-- An operator's discard: the quarantined row is deleted, and never becomes a job.
DELETE FROM x_outbox
WHERE id = %(id)s
  AND quarantined_at IS NOT NULL
  AND (published_at IS NULL) IS TRUE;

-- name: prune
-- Published rows are the audit trail for OUTBOX_RETENTION, then go.
DELETE FROM x_outbox
WHERE published_at IS NOT NULL
  AND published_at < now() - make_interval(secs => %(retention)s);
