-- The job store's hot path. Every statement the PostgreSQL driver runs on x_jobs is here, by
-- name, so the exact SQL behind a stuck queue can be read and run by hand. Loaded once by
-- drivers/postgres.py; parameters are psycopg named placeholders. Times are the database's now().
--
-- A write on one known row is fenced with its state written as `(state = 'running') IS TRUE`,
-- not `state = 'running'`. The plain test proves the predicates of the partial indexes (live-key,
-- lease), and with statistics taken while no row was running (a table analyzed full of ready jobs,
-- then truncated and refilled) the planner judged one of those indexes nearly empty and read all
-- of it, filtering on the id, instead of looking the row up by its primary key: an ack of a few
-- hundred runs took 500 ms and a 10k drain ran at a fifth of its speed. Wrapped, the test proves
-- no index, so the row is found by its id whatever the statistics say (tests/test_fence_plan.py).

-- name: enqueue
-- Insert one job unless a live row holds (name, tenant, key) (SPEC ENQ-06/10). A ready row
-- wakes listening workers; NOTIFY carries the queue name only, never the payload.
WITH due AS (
    SELECT COALESCE(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s)) AS run_at
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at)
    SELECT %(id)s, %(name)s, %(queue)s, %(input)s::jsonb, %(idempotency_key)s, %(run_id)s, 0,
           %(max_attempts)s, CASE WHEN due.run_at > now() THEN 'delayed' ELSE 'ready' END,
           %(priority)s, due.run_at, %(tenant_id)s, %(enqueued_by)s, %(traceparent)s, now(), now()
    FROM due
    -- No conflict target: the live-key index dedupes, and the primary key makes a second
    -- publish of a staged id (whose job was already inserted) a no-op (SPEC OUTBOX-12).
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue
)
SELECT id, run_id, CASE WHEN state = 'ready' THEN pg_notify('xjobs', queue) END FROM ins;

-- name: find_live
-- The live row an enqueue collided with; same namespace expression as the unique index.
SELECT id, run_id
FROM x_jobs
WHERE name = %(name)s
  AND COALESCE(tenant_id, '') = COALESCE(%(tenant_id)s, '')
  AND idempotency_key = %(idempotency_key)s
  AND state IN ('ready', 'delayed', 'running', 'suspended')
LIMIT 1;

-- name: find_published
-- A staged id published a second time: the job already inserted under it, whatever its state.
SELECT id, run_id FROM x_jobs WHERE id = %(id)s;

-- name: enqueue_many
-- enqueue for many rows in one statement, one array per column in request order. A key that
-- an earlier row of the same batch inserted is suppressed like a live one (the insert runs in
-- `n` order, so the first wins); NOTIFY once per queue that got a ready row, not per row.
-- The inputs come as one JSON array (a text array of JSON would be quoted element by element).
WITH given AS (
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
                        created_at, updated_at)
    SELECT id, name, queue, input, idempotency_key, run_id, 0, max_attempts,
           CASE WHEN due_at > now() THEN 'delayed' ELSE 'ready' END,
           priority, due_at, tenant_id, enqueued_by, traceparent, now(), now()
    FROM due
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM ins WHERE state = 'ready') AS ready
)
SELECT id, run_id FROM ins, woken;

-- name: enqueue_many_shared
-- enqueue_many for a batch whose rows share every per-call column (one job's enqueue_many):
-- those come once, only the ids, keys and inputs by row. Otherwise the same statement.
WITH given AS (
    SELECT *
    FROM unnest(%(ids)s::uuid[], %(run_ids)s::uuid[], %(keys)s::text[])
         WITH ORDINALITY AS g(id, run_id, idempotency_key, n)
    JOIN jsonb_array_elements(%(inputs)s::jsonb) WITH ORDINALITY AS i(input, n) USING (n)
), due AS (
    SELECT COALESCE(%(run_at)s::timestamptz,
                    now() + make_interval(secs => %(delay)s::float8)) AS due_at
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at)
    SELECT id, %(name)s::text, %(queue)s::text, input, idempotency_key, run_id, 0,
           %(max_attempts)s::int, CASE WHEN due_at > now() THEN 'delayed' ELSE 'ready' END,
           %(priority)s::int, due_at, %(tenant)s::text, %(enqueued_by)s::text,
           %(traceparent)s::text, now(), now()
    FROM given, due
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM ins WHERE state = 'ready') AS ready
)
SELECT id, run_id FROM ins, woken;

-- name: find_live_many
-- find_live for many keys at once: the (1-based) position of each key that has a live row.
SELECT k.n, j.id, j.run_id
FROM unnest(%(names)s::text[], %(tenants)s::text[], %(keys)s::text[])
     WITH ORDINALITY AS k(name, tenant_id, idempotency_key, n)
CROSS JOIN LATERAL (
    SELECT id, run_id
    FROM x_jobs
    WHERE name = k.name
      AND COALESCE(tenant_id, '') = COALESCE(k.tenant_id, '')
      AND idempotency_key = k.idempotency_key
      AND state IN ('ready', 'delayed', 'running', 'suspended')
    LIMIT 1
) AS j;

-- name: find_published_many
-- find_published for many staged ids: those already inserted as jobs.
SELECT id, run_id FROM x_jobs WHERE id = ANY(%(ids)s::uuid[]);

-- name: claim
-- Lock and take up to `limit` due waiting rows in one statement (SPEC DRV-03), in priority and
-- run_at order. Each queue is read on its own (LATERAL) and its filter and ORDER BY are the claim
-- index's own predicate and key, so the index is walked in order and stops after `limit` rows,
-- whatever the statistics say: the filter is written as "none of the other states" because the
-- claimable states, spelled out, would also prove the live-key index's predicate, and with stale
-- statistics the planner reads that whole index and sorts it (migration 0006). Every claim mints
-- a new lease token; the previous holder's writes are refused from here on (DESIGN Q-01), and
-- stamps the attempt: started_at once per job, last_attempted_at every time. Only what a run
-- needs comes back, in claim order. Running rows whose lease lapsed are taken by claim_lapsed,
-- which the worker runs on its own timer. The input comes back as text, decoded row by row by
-- the driver: a row this process cannot decode is settled on its own, not with its batch.
WITH picked AS (
    SELECT w.id
    FROM unnest(%(queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM x_jobs
        WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND queue = q.name
          AND run_at <= now()
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS w
    ORDER BY w.priority DESC, w.run_at, w.id
    LIMIT %(limit)s
), claimed AS (
    UPDATE x_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        claimed_by = %(worker_id)s,
        lease_token = gen_random_uuid(),
        visible_at = now() + make_interval(secs => %(visibility_timeout)s),
        started_at = COALESCE(j.started_at, now()),
        last_attempted_at = now(),
        attempted_by = %(worker_id)s,
        updated_at = now()
    -- The picked rows found again by their keys, as one array: a join with `picked` is planned
    -- from statistics, and with none (a table filled since TRUNCATE) or stale ones it read the
    -- whole table to hash it, or probed the array once per picked row.
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.run_id, j.name, j.queue, j.input, j.attempt, j.max_attempts, j.lease_token,
              j.priority, j.tenant_id, j.enqueued_by, j.idempotency_key, j.created_at,
              j.lease_expiries, j.traceparent, j.run_at
)
SELECT id, run_id, name, queue, input::text, attempt, max_attempts, lease_token, priority,
       tenant_id, enqueued_by, idempotency_key, created_at, lease_expiries, traceparent
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: claim_lapsed
-- The claim above, plus running rows whose lease lapsed (T4), all in one priority and run_at
-- order; the lapsed half walks the lease index, whose predicate it spells the same way (not any
-- other state) for the same reason. A lapsed row's unsettled run joins its failure history, dated
-- when its lease ran out: as crashed when the verdict below counts it, else as lapsed (its worker
-- stayed present); only the last `keep` entries stay, as in retry and finish.
WITH waiting AS (
    SELECT w.id, w.priority, w.run_at, NULL::text AS claimed_by, NULL::text AS lapsed_holder,
           false AS lapsed
    FROM unnest(%(queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM x_jobs
        WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND queue = q.name
          AND run_at <= now()
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS w
), lapsed AS (
    SELECT id, priority, run_at, claimed_by, lapsed_holder, true AS lapsed FROM x_jobs
    WHERE NOT (state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead', 'cancelled'))
      AND visible_at <= now()
      AND queue = ANY(%(queues)s::text[])
    ORDER BY visible_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT id, claimed_by, lapsed_holder, lapsed
    FROM (SELECT * FROM waiting UNION ALL SELECT * FROM lapsed) AS due
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
), verdict AS (
    -- A lapse is a crash (the poison count) only when its holder is gone: no presence row, or
    -- a presence that lapsed while another worker beat without a break since before the holder
    -- was last seen (the database was reachable all along). Otherwise the holder stays pending
    -- and is judged at the next lapse by whether its presence lapsed by then: an outage that
    -- silenced every worker is not a crash.
    -- A holder that marked its row stopped exited with the run in flight: gone, and said so.
    SELECT x.id,
           CASE WHEN h.stopped_at IS NOT NULL THEN 1 ELSE 0 END AS exited,
           CASE WHEN h.id IS NULL OR h.stopped_at IS NOT NULL OR (h.expires_at < now() AND EXISTS (
                    SELECT 1 FROM x_workers w
                    WHERE w.id <> h.id
                      AND w.seen_since <= h.last_seen
                      AND w.last_seen >= now() - make_interval(secs => %(visibility_timeout)s::float8 / 2)))
                THEN 1 ELSE 0 END AS crashed,
           CASE WHEN x.lapsed_holder IS NOT NULL AND NOT EXISTS (
                    SELECT 1 FROM x_workers p
                    WHERE p.id = x.lapsed_holder AND p.expires_at >= now())
                THEN 1 ELSE 0 END AS pending_crashed
    FROM picked x
    LEFT JOIN x_workers h ON h.id = x.claimed_by
    WHERE x.lapsed
), claimed AS (
    UPDATE x_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        lease_expiries = j.lease_expiries + COALESCE(
            (SELECT v.crashed + v.pending_crashed FROM verdict v WHERE v.id = j.id), 0),
        lapsed_holder = CASE (SELECT v.crashed FROM verdict v WHERE v.id = j.id)
                            WHEN 1 THEN NULL
                            WHEN 0 THEN j.claimed_by
                            ELSE j.lapsed_holder END,
        errors = CASE WHEN j.state <> 'running' THEN j.errors ELSE (
            SELECT jsonb_agg(kept.entry ORDER BY kept.n)
            FROM (
                SELECT entry, n
                FROM jsonb_array_elements(
                    j.errors || jsonb_build_array(
                        jsonb_build_object('attempt', j.attempt, 'at', j.visible_at)
                        || CASE WHEN (SELECT v.exited FROM verdict v WHERE v.id = j.id) = 1
                                THEN %(exited)s::jsonb
                                WHEN (SELECT v.crashed FROM verdict v WHERE v.id = j.id) = 1
                                THEN %(lapsed)s::jsonb
                                ELSE %(lapsed_present)s::jsonb END)
                ) WITH ORDINALITY AS entries(entry, n)
                ORDER BY n DESC
                LIMIT %(keep)s
            ) AS kept
        ) END,
        claimed_by = %(worker_id)s,
        lease_token = gen_random_uuid(),
        visible_at = now() + make_interval(secs => %(visibility_timeout)s),
        started_at = COALESCE(j.started_at, now()),
        last_attempted_at = now(),
        attempted_by = %(worker_id)s,
        updated_at = now()
    -- by key, as in claim; a lapsed row's verdict is looked up by its id (waiting rows have none)
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.run_id, j.name, j.queue, j.input, j.attempt, j.max_attempts, j.lease_token,
              j.priority, j.tenant_id, j.enqueued_by, j.idempotency_key, j.created_at,
              j.lease_expiries, j.traceparent, j.run_at
)
SELECT id, run_id, name, queue, input::text, attempt, max_attempts, lease_token, priority,
       tenant_id, enqueued_by, idempotency_key, created_at, lease_expiries, traceparent
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: ack
-- Settle many runs as done in one statement, each fenced on its own lease token (SPEC STATE-01).
-- A done job has no error: an earlier attempt's stays in `errors`, the history, not above
-- `state done` as if it still stood (issue 23).
UPDATE x_jobs j
SET state = 'done',
    result = a.result,
    last_error = NULL,
    lease_expiries = 0,
    lapsed_holder = NULL,
    stop_reason = NULL,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[], %(results)s::jsonb[]) AS a(id, token, result)
WHERE j.id = a.id
  AND (j.state = 'running') IS TRUE
  AND j.lease_token = a.token
RETURNING j.id;

-- name: retry
-- Settle one run as ready again after `delay` (SPEC DRV-01, STATE-02/03). A failed attempt's
-- `failure` joins the history in this same fenced write, stamped with the attempt and now();
-- only the last `keep` entries stay, so a failure still costs one statement.
UPDATE x_jobs
SET state = 'ready',
    errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE (
        SELECT jsonb_agg(kept.entry ORDER BY kept.n)
        FROM (
            SELECT entry, n
            FROM jsonb_array_elements(
                errors || jsonb_build_array(
                    jsonb_build_object('attempt', attempt, 'at', now()) || %(failure)s::jsonb)
            ) WITH ORDINALITY AS entries(entry, n)
            ORDER BY n DESC
            LIMIT %(keep)s
        ) AS kept
    ) END,
    lease_expiries = 0,
    lapsed_holder = NULL,
    attempt = CASE WHEN %(counts_as_attempt)s THEN attempt ELSE GREATEST(attempt - 1, 0) END,
    run_at = now() + make_interval(secs => %(delay)s),
    last_error = COALESCE(%(error)s, last_error),
    stop_reason = %(stop_reason)s,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: suspend
-- Park one run until now + `delay` without spending its attempt (SPEC STEP-10, STATE-03).
UPDATE x_jobs
SET state = 'suspended',
    lease_expiries = 0,
    lapsed_holder = NULL,
    attempt = GREATEST(attempt - 1, 0),
    run_at = now() + make_interval(secs => %(delay)s),
    last_error = COALESCE(%(error)s, last_error),
    stop_reason = NULL,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: shed
-- Hand one run back unrun (a full slot or limit, SPEC WORK-04/07/08): ready after `delay`, the
-- attempt given back, and the crash count kept, since the run never started. With `keep_place`
-- it is ready at once in its old place in the queue (a suspect waiting for an idle worker).
UPDATE x_jobs
SET state = 'ready',
    attempt = GREATEST(attempt - 1, 0),
    run_at = CASE WHEN %(keep_place)s THEN LEAST(run_at, now())
                  ELSE now() + make_interval(secs => %(delay)s) END,
    stop_reason = NULL,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: finish
-- End one run for good as dead or failed, with its stop reason; the failure joins the history
-- as in retry.
UPDATE x_jobs
SET state = %(state)s,
    errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE (
        SELECT jsonb_agg(kept.entry ORDER BY kept.n)
        FROM (
            SELECT entry, n
            FROM jsonb_array_elements(
                errors || jsonb_build_array(
                    jsonb_build_object('attempt', attempt, 'at', now()) || %(failure)s::jsonb)
            ) WITH ORDINALITY AS entries(entry, n)
            ORDER BY n DESC
            LIMIT %(keep)s
        ) AS kept
    ) END,
    lease_expiries = 0,
    lapsed_holder = NULL,
    run_at = now(),
    last_error = COALESCE(%(error)s, last_error),
    stop_reason = %(stop_reason)s,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: heartbeat
-- Renew a lease only for the claim that holds it (SPEC LEASE-02 with the token fence).
UPDATE x_jobs
SET visible_at = now() + make_interval(secs => %(visibility_timeout)s)
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: renew_presence
-- One statement per heartbeat for the whole worker, on the database clock. A beat later than
-- ttl / 2 after the last (a lease could have lapsed in that gap) or from a new process starts a
-- new unbroken streak (`seen_since`), which the claim's crash verdict reads. Rows lapsed a day
-- ago are deleted on the way.
WITH reaped AS (
    DELETE FROM x_workers
    WHERE expires_at < now() - interval '1 day' AND id <> %(id)s
)
INSERT INTO x_workers AS w
    (id, host, pid, queues, started_at, last_seen, seen_since, expires_at, in_flight)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::jsonb, now(), now(), now(),
        now() + make_interval(secs => %(ttl)s), %(in_flight)s)
ON CONFLICT (id) DO UPDATE
SET started_at = CASE WHEN (w.host, w.pid) = (EXCLUDED.host, EXCLUDED.pid)
                      THEN w.started_at ELSE now() END,
    seen_since = CASE WHEN (w.host, w.pid) = (EXCLUDED.host, EXCLUDED.pid)
                       AND w.last_seen >= now() - make_interval(secs => %(ttl)s::float8 / 2)
                      THEN w.seen_since ELSE now() END,
    host = EXCLUDED.host,
    pid = EXCLUDED.pid,
    queues = EXCLUDED.queues,
    last_seen = now(),
    expires_at = EXCLUDED.expires_at,
    in_flight = EXCLUDED.in_flight,
    stopped_at = NULL;

-- name: release_presence
-- A clean stop: the worker's row goes, so its lapsed leases (if any) count as crashes.
DELETE FROM x_workers WHERE id = %(id)s;

-- name: stop_presence
-- The process exits past --shutdown-timeout with runs in flight: the row stays, marked stopped
-- and lapsed at once, so the claim judges its runs' lapses as an exit (issue 23).
UPDATE x_workers
SET stopped_at = now(), expires_at = LEAST(expires_at, now()), in_flight = 0
WHERE id = %(id)s;

-- name: workers
SELECT id, host, pid, queues, started_at, last_seen, expires_at, in_flight,
       expires_at >= now() AND stopped_at IS NULL AS alive, stopped_at
FROM x_workers
ORDER BY started_at, id;

-- name: stats
-- Exclusive buckets per queue (SPEC MET-03); due 'delayed' rows count as ready (DESIGN Q-05).
SELECT queue,
       count(*) FILTER (WHERE state IN ('ready', 'delayed') AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE state IN ('ready', 'delayed') AND run_at > now()) AS delayed,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'suspended') AS suspended,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       COALESCE(EXTRACT(EPOCH FROM now() - min(run_at)
                FILTER (WHERE state IN ('ready', 'delayed') AND run_at <= now())), 0) AS oldest
FROM x_jobs
GROUP BY queue
ORDER BY queue;

-- name: cancel
-- Cancel a live job (SPEC CANCEL-02, DESIGN Q-09). Clearing the lease token is what stops its
-- holder: heartbeat, step writes, and every settle are fenced on it (CANCEL-05/06). No row back
-- means the job is missing or not live; the driver then reads its state to say which.
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
WHERE id = %(id)s
  AND (state IN ('ready', 'delayed', 'running', 'suspended')) IS TRUE
RETURNING id, name, queue, state, input, idempotency_key, run_id, attempt, max_attempts,
          priority, run_at, visible_at, claimed_by, lease_token, last_error, stop_reason, result,
          tenant_id, enqueued_by, traceparent, created_at, updated_at, lease_expiries, errors,
          started_at, last_attempted_at, attempted_by;

-- name: requeue
-- Run a finished job again from its stored steps (SPEC INSP-06, DESIGN Q-03): only from the
-- states in `states` (dead, failed; cancelled with force). Same run_id, attempt 0, due now;
-- last_error and the failed attempts stay as history. Its attempt times are cleared with the
-- attempt count: its next claim is a first attempt again. Wakes the queue's listeners once the
-- transaction commits.
UPDATE x_jobs
SET state = 'ready',
    attempt = 0,
    started_at = NULL,
    last_attempted_at = NULL,
    attempted_by = NULL,
    lease_expiries = 0,
    lapsed_holder = NULL,
    run_at = now(),
    stop_reason = NULL,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = %(id)s
  AND state = ANY(%(states)s::text[])
RETURNING id, name, queue, state, input, idempotency_key, run_id, attempt, max_attempts,
          priority, run_at, visible_at, claimed_by, lease_token, last_error, stop_reason, result,
          tenant_id, enqueued_by, traceparent, created_at, updated_at, lease_expiries, errors,
          started_at, last_attempted_at, attempted_by,
          pg_notify('xjobs', queue) AS notified;

-- name: requeue_from_step
-- Delete the step `step` of a run and every step recorded after it, in the order the run
-- reached them (its stored position, the same order list_steps reads) (DESIGN Q-04); earlier
-- steps stay and replay. Nothing back means the run has no such step.
WITH ordered AS (
    SELECT id, name,
           row_number() OVER (ORDER BY position NULLS LAST, started_at, id) AS position
    FROM x_job_steps
    WHERE run_id = %(run_id)s
), target AS (
    SELECT position FROM ordered WHERE name = %(step)s
)
DELETE FROM x_job_steps s
USING ordered o, target t
WHERE s.id = o.id
  AND o.position >= t.position
RETURNING s.name;

-- name: prune_count
-- What `prune` would delete, per state (xjobs prune --dry-run).
SELECT state, count(*)
FROM x_jobs
WHERE state = ANY(%(states)s::text[])
  AND state IN ('done', 'failed', 'dead', 'cancelled')  -- x_jobs_finished_idx's predicate
  AND updated_at < now() - make_interval(secs => %(older_than)s)
GROUP BY state;

-- name: prune
-- Delete up to `batch` finished jobs last updated before the cutoff, and their steps, oldest
-- first: the age index is walked in order. Rows a concurrent retry holds are skipped (SKIP
-- LOCKED) and left for the next prune. Each batch starts where the previous one stopped
-- (`after`, the last batch's newest updated_at): the rows it deleted keep their index entries
-- until a vacuum, and a batch that started from the oldest again would step over all of them,
-- so a prune of 100k rows slowed batch by batch (2.5 s, then 7.9 s for 120k in the soak).
WITH doomed AS (
    SELECT id, run_id, updated_at
    FROM x_jobs
    WHERE state = ANY(%(states)s::text[])
      AND state IN ('done', 'failed', 'dead', 'cancelled')  -- x_jobs_finished_idx's predicate
      AND updated_at < now() - make_interval(secs => %(older_than)s)
      AND updated_at >= %(after)s::timestamptz
    ORDER BY updated_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), steps AS (
    DELETE FROM x_job_steps WHERE run_id = ANY(ARRAY(SELECT run_id FROM doomed))
)
-- by key, as the claim finds its rows: a join with doomed is planned from the batch size, which
-- a generic plan does not know, and read the whole table
DELETE FROM x_jobs
WHERE id = ANY(ARRAY(SELECT id FROM doomed))
RETURNING state, updated_at;
