-- The job store's hot path. Every statement the PostgreSQL driver runs on x_jobs is here, by
-- name, so the exact SQL behind a stuck queue can be read and run by hand. Loaded once by
-- drivers/postgres/__init__.py; parameters are psycopg named placeholders. Times are the database's now().
--
-- A write on one known row is fenced with its state written as `(state = 'running') IS TRUE`,
-- not `state = 'running'`. The plain test proves the predicates of the partial indexes (live-key,
-- lease), and with statistics taken while no row was running (a table analyzed full of ready jobs,
-- then truncated and refilled) the planner judged one of those indexes nearly empty and read all
-- of it, filtering on the id, instead of looking the row up by its primary key: a complete of a few
-- hundred runs took 500 ms and a 10k drain ran at a fifth of its speed. Wrapped, the test proves
-- no index, so the row is found by its id whatever the statistics say
-- (tests/drivers/postgres/test_fence_plan.py).

-- name: enqueue
-- Insert one job unless a live row holds (name, tenant, key) (SPEC ENQ-06/10). A ready row
-- wakes listening workers; NOTIFY carries the queue name only, never the payload, and for a
-- row above priority 0 a second one, "<queue> <priority>", so a worker whose threads have a
-- backlog queued ahead claims it at once and runs it first (SPEC PRIO-01). A listener that
-- does not know the second form ignores it and wakes on the first.
WITH due AS (
    SELECT COALESCE(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s)) AS run_at
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at, expires_at, limit_key)
    SELECT %(id)s, %(name)s, %(queue)s, %(input)s::jsonb, %(idempotency_key)s, %(run_id)s, 0,
           %(max_attempts)s, CASE WHEN due.run_at > now() THEN 'delayed' ELSE 'ready' END,
           %(priority)s, due.run_at, %(tenant_id)s, %(enqueued_by)s, %(traceparent)s, now(), now(),
           COALESCE(%(expires_at)s::timestamptz,
                    due.run_at + make_interval(secs => %(expires_in)s::float8)),
           %(limit_key)s
    FROM due
    -- No conflict target: the live-key index dedupes, and the primary key makes a second
    -- publish of a staged id (whose job was already inserted) a no-op (SPEC OUTBOX-12).
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue, priority
)
SELECT id, run_id, CASE WHEN state = 'ready' THEN pg_notify('xjobs', queue) END,
       CASE WHEN state = 'ready' AND priority > 0 THEN pg_notify('xjobs', queue || ' ' || priority) END
FROM ins;

-- name: enqueue_after
-- enqueue for a job with dependencies (issue 32; the plain enqueue above stays as it was). The
-- dependencies are locked, so a settle of one either committed first (its state is read here:
-- done counts as satisfied, dead/failed/cancelled as failed) or waits for this transaction and
-- then finds this job in its `dependants` (RETURNING reads the row it locked, not its snapshot),
-- and releases it: no order strands the job (SPEC DEP-03). A staged id that collapsed into a live
-- duplicate at its publish stands for the job it became. With `strict` (a direct enqueue) an
-- unknown id inserts nothing and is named back; otherwise (a publish) it counts as failed.
-- A job with dependencies not yet done waits `suspended` until the last one settles; its
-- run_at is the far future meanwhile, so no claim ever looks at it. A live dependency already
-- waited for by `max_dependants` jobs takes no more: nothing is inserted and it is named back.
WITH given AS (
    SELECT DISTINCT COALESCE(o.job_id, a.id) AS id
    FROM unnest(%(after)s::uuid[]) AS a(id)
    LEFT JOIN x_outbox o ON o.id = a.id AND o.job_id IS NOT NULL
), deps AS (
    SELECT j.id, j.state, COALESCE(cardinality(j.dependants), 0) AS held FROM x_jobs j
    WHERE j.id IN (SELECT id FROM given)
    ORDER BY j.id
    FOR UPDATE
), ended AS (
    -- HIST-04: a dependency moved to the history has ended; its final state is read there
    SELECT h.id, h.state, 0 AS held FROM x_job_history h
    WHERE h.id IN (SELECT id FROM given) AND h.id NOT IN (SELECT id FROM deps)
), known AS (
    SELECT id, state, held FROM deps UNION ALL SELECT id, state, held FROM ended
), verdict AS (
    SELECT (SELECT count(*) FROM deps
            WHERE state IN ('ready', 'delayed', 'running', 'suspended'))::int AS waiting,
           (SELECT min(g.id::text) FROM given g
            WHERE g.id NOT IN (SELECT id FROM known))::uuid AS unknown,
           (SELECT min(d.id::text) FROM known d
            WHERE d.state IN ('dead', 'failed', 'cancelled'))::uuid AS failed,
           -- a live dependency that as many jobs wait for as one may (rules.MAX_DEPENDANTS)
           (SELECT min(d.id::text) FROM deps d
            WHERE d.state IN ('ready', 'delayed', 'running', 'suspended')
              AND d.held >= %(max_dependants)s)::uuid AS full
), due AS (
    SELECT COALESCE(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s)) AS run_at
), decided AS (
    SELECT v.waiting, v.unknown,
           CASE WHEN %(run_anyway)s THEN NULL ELSE COALESCE(v.failed, v.unknown) END AS failed,
           d.run_at
    FROM verdict v, due d
    -- `recheck`: an unknown id inserts nothing the first time, whatever `strict` says: a
    -- dependency the mover took to the history while `deps` waited for its row lock is there,
    -- where only the next statement's snapshot sees it, and the driver asks once more (HIST-12)
    WHERE NOT ((%(strict)s OR %(recheck)s) AND v.unknown IS NOT NULL) AND v.full IS NULL
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at, expires_at, limit_key,
                        after, waiting_on, after_failed, run_anyway)
    SELECT %(id)s, %(name)s, %(queue)s, %(input)s::jsonb, %(idempotency_key)s, %(run_id)s, 0,
           %(max_attempts)s,
           CASE WHEN c.failed IS NULL AND c.waiting > 0 THEN 'suspended'
                WHEN c.failed IS NULL AND c.run_at > now() THEN 'delayed'
                ELSE 'ready' END,
           %(priority)s,
           CASE WHEN c.failed IS NOT NULL THEN now()
                WHEN c.waiting > 0 THEN '9999-01-01T00:00:00Z'::timestamptz
                ELSE c.run_at END,
           %(tenant_id)s, %(enqueued_by)s, %(traceparent)s, now(), now(),
           -- a failed dependency ends it at its claim, through the claim's expiry test
           CASE WHEN c.failed IS NOT NULL THEN now()
                ELSE COALESCE(%(expires_at)s::timestamptz,
                              c.run_at + make_interval(secs => %(expires_in)s::float8)) END,
           %(limit_key)s, %(after)s::uuid[],
           CASE WHEN c.failed IS NOT NULL THEN 0 ELSE c.waiting END, c.failed,
           %(run_anyway)s
    FROM decided c
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue, waiting_on, priority
), registered AS (
    -- each dependency still live names this job among its dependants, in this transaction
    UPDATE x_jobs j
    SET dependants = COALESCE(j.dependants, '{}'::uuid[]) || ins.id
    FROM deps, ins
    WHERE j.id = deps.id
      AND deps.state IN ('ready', 'delayed', 'running', 'suspended')
      AND ins.waiting_on > 0
)
SELECT ins.id, ins.run_id, CASE WHEN ins.state = 'ready' THEN pg_notify('xjobs', ins.queue) END,
       v.unknown, v.full,
       CASE WHEN ins.state = 'ready' AND ins.priority > 0
            THEN pg_notify('xjobs', ins.queue || ' ' || ins.priority) END
FROM verdict v
LEFT JOIN ins ON true;

-- name: replace_waiting
-- on_conflict="replace" and debounce (issue 29): the live holder of the key takes the new
-- input, run time and expiry, only while it waits and has never started. A running, suspended
-- or retrying holder has steps or a run in flight and is never touched (the enqueue dedupes to
-- it); the state is re-checked under the row lock, so a claim that won the row first wins.
WITH due AS (
    SELECT COALESCE(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s)) AS run_at
), upd AS (
    UPDATE x_jobs j
    SET input = %(input)s::jsonb,
        run_at = due.run_at,
        state = CASE WHEN due.run_at > now() THEN 'delayed' ELSE 'ready' END,
        expires_at = COALESCE(%(expires_at)s::timestamptz,
                              due.run_at + make_interval(secs => %(expires_in)s::float8)),
        updated_at = now()
    FROM due
    WHERE j.name = %(name)s
      AND COALESCE(j.tenant_id, '') = COALESCE(%(tenant_id)s, '')
      AND j.idempotency_key = %(idempotency_key)s
      AND j.state IN ('ready', 'delayed')
      AND j.started_at IS NULL
    RETURNING j.id, j.run_id, j.state, j.queue, j.priority
)
SELECT id, run_id, CASE WHEN state = 'ready' THEN pg_notify('xjobs', queue) END,
       CASE WHEN state = 'ready' AND priority > 0 THEN pg_notify('xjobs', queue || ' ' || priority) END
FROM upd;

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
-- `n` order, so the first wins); NOTIFY once per queue that got a ready row, not per row, and
-- once per priority above 0 it got one of (the single enqueue's second form).
-- The answer: how many rows went in and, when not all, the ids of those that did.
-- The inputs come as one JSON array (a text array of JSON would be quoted element by element).
WITH given AS (
    SELECT *
    FROM unnest(%(ids)s::uuid[], %(run_ids)s::uuid[], %(names)s::text[], %(queues)s::text[],
                %(keys)s::text[], %(max_attempts)s::int[],
                %(priorities)s::int[], %(run_ats)s::timestamptz[], %(delays)s::float8[],
                %(tenants)s::text[], %(enqueued_by)s::text[], %(traceparents)s::text[],
                %(expires_ats)s::timestamptz[], %(expires_ins)s::float8[],
                %(limit_keys)s::text[])
         WITH ORDINALITY AS g(id, run_id, name, queue, idempotency_key, max_attempts,
                              priority, run_at, delay, tenant_id, enqueued_by, traceparent,
                              expires_at, expires_in, limit_key, n)
    JOIN jsonb_array_elements(%(inputs)s::jsonb) WITH ORDINALITY AS i(input, n) USING (n)
), due AS (
    SELECT given.*, COALESCE(run_at, now() + make_interval(secs => delay)) AS due_at FROM given
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at, expires_at, limit_key)
    SELECT id, name, queue, input, idempotency_key, run_id, 0, max_attempts,
           CASE WHEN due_at > now() THEN 'delayed' ELSE 'ready' END,
           priority, due_at, tenant_id, enqueued_by, traceparent, now(), now(),
           COALESCE(expires_at, due_at + make_interval(secs => expires_in)), limit_key
    FROM due
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue, priority
), woken AS (
-- include: woken_by_priority
)
-- how many rows went in, and their ids only when some did not: a row per job (two uuids to
-- send and parse each) cost more than the insert when every row of a large batch went in
SELECT count(*), CASE WHEN count(*) < cardinality(%(ids)s::uuid[]) THEN array_agg(ins.id) END
FROM ins, woken;

-- name: enqueue_many_shared
-- enqueue_many for a batch whose rows share every per-call column (one job's enqueue_many):
-- those come once, only the ids, keys and inputs by row. Otherwise the same statement.
WITH given AS (
    SELECT *
    FROM unnest(%(ids)s::uuid[], %(run_ids)s::uuid[], %(keys)s::text[], %(limit_keys)s::text[])
         WITH ORDINALITY AS g(id, run_id, idempotency_key, limit_key, n)
    JOIN jsonb_array_elements(%(inputs)s::jsonb) WITH ORDINALITY AS i(input, n) USING (n)
), due AS (
    SELECT COALESCE(%(run_at)s::timestamptz,
                    now() + make_interval(secs => %(delay)s::float8)) AS due_at
), ins AS (
    INSERT INTO x_jobs (id, name, queue, input, idempotency_key, run_id, attempt, max_attempts,
                        state, priority, run_at, tenant_id, enqueued_by, traceparent,
                        created_at, updated_at, expires_at, limit_key)
    SELECT id, %(name)s::text, %(queue)s::text, input, idempotency_key, run_id, 0,
           %(max_attempts)s::int, CASE WHEN due_at > now() THEN 'delayed' ELSE 'ready' END,
           %(priority)s::int, due_at, %(tenant)s::text, %(enqueued_by)s::text,
           %(traceparent)s::text, now(), now(),
           COALESCE(%(expires_at)s::timestamptz,
                    due_at + make_interval(secs => %(expires_in)s::float8)), limit_key
    FROM given, due
    ORDER BY n
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, state, queue, priority
), woken AS (
-- include: woken_by_priority
)
-- how many rows went in, and their ids only when some did not: a row per job (two uuids to
-- send and parse each) cost more than the insert when every row of a large batch went in
SELECT count(*), CASE WHEN count(*) < cardinality(%(ids)s::uuid[]) THEN array_agg(ins.id) END
FROM ins, woken;

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

-- fragment: waiting_rows
-- The due waiting rows a claim takes (claim, claim_lapsed), locked: each queue walked on its own
-- along the claim index, whose predicate and key its filter and order spell (claim says why), up
-- to `limit` rows a queue. Only runs whose version this worker honours (issue 44, SPEC VER-05):
-- `versions` maps each job it declares to [version, parks old runs]; a run started under a newer
-- version is never taken, nor one this worker's own old_runs="park" parked already (a worker of
-- the run's version, or one that replays or restarts old runs, takes it). A job it does not
-- declare is taken as ever. The map is read once a statement (an InitPlan), not once a row.
-- The fragment ends at the row filter: waiting_tail follows, or paused_rows and then it.
    FROM unnest(%(queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at FROM x_jobs
        WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND queue = q.name
          AND run_at <= now()
          AND (x_jobs.version IS NULL
               OR NOT ((SELECT %(versions)s::jsonb) ? x_jobs.name)
               OR x_jobs.version <= ((SELECT %(versions)s::jsonb) -> x_jobs.name ->> 0)::int
                  AND NOT (x_jobs.parked
                           AND ((SELECT %(versions)s::jsonb) -> x_jobs.name ->> 1)::bool
                           AND x_jobs.version
                               < ((SELECT %(versions)s::jsonb) -> x_jobs.name ->> 0)::int))

-- fragment: waiting_tail
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS w

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
-- include: waiting_rows
-- include: waiting_tail
    ORDER BY w.priority DESC, w.run_at, w.id
    LIMIT %(limit)s
), claimed AS (
    UPDATE x_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
-- include: claim_stamps
)
-- include: claimed_columns
       GREATEST(EXTRACT(EPOCH FROM now() - run_at)::float8, 0) AS waited
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: claim_paused
-- claim, told of the operators' pauses (paused_rows says why a statement of its own).
WITH picked AS (
    SELECT w.id
-- include: waiting_rows
-- include: paused_rows
-- include: waiting_tail
    ORDER BY w.priority DESC, w.run_at, w.id
    LIMIT %(limit)s
), claimed AS (
    UPDATE x_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
-- include: claim_stamps
)
-- include: claimed_columns
       GREATEST(EXTRACT(EPOCH FROM now() - run_at)::float8, 0) AS waited
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: claim_lapsed
-- The claim above, plus running rows whose lease lapsed (T4), all in one priority and run_at
-- order; the lapsed half walks the lease index, whose predicate it spells the same way (not any
-- other state) for the same reason. A lapsed row's unsettled run joins its failure history, dated
-- when its lease ran out, as its holder's verdict says (the lapse_verdict fragment); only the
-- last `keep` entries stay, as in retry and finish.
WITH waiting AS (
    SELECT w.id, w.priority, w.run_at, NULL::text AS claimed_by,
           NULL::timestamptz AS visible_at, false AS lapsed
-- include: waiting_rows
-- include: waiting_tail
), lapsed AS (
-- include: lapsed_rows
-- include: lapsed_tail
), picked AS (
    SELECT id, claimed_by, visible_at, lapsed
    FROM (SELECT * FROM waiting UNION ALL SELECT * FROM lapsed) AS due
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
-- include: lapse_verdict
), claimed AS (
-- include: lapse_claimed
-- include: claim_stamps
)
-- include: claimed_columns
       GREATEST(EXTRACT(EPOCH FROM now() - run_at)::float8, 0) AS waited
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: claim_lapsed_paused
-- claim_lapsed, told of the operators' pauses (paused_rows says why a statement of its own):
-- neither half takes a paused job's run, so a run whose worker died while its job was paused
-- waits, lapsed, until the pause is lifted (SPEC PAUSE-10).
WITH waiting AS (
    SELECT w.id, w.priority, w.run_at, NULL::text AS claimed_by,
           NULL::timestamptz AS visible_at, false AS lapsed
-- include: waiting_rows
-- include: paused_rows
-- include: waiting_tail
), lapsed AS (
-- include: lapsed_rows
-- include: paused_rows
-- include: lapsed_tail
), picked AS (
    SELECT id, claimed_by, visible_at, lapsed
    FROM (SELECT * FROM waiting UNION ALL SELECT * FROM lapsed) AS due
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
-- include: lapse_verdict
), claimed AS (
-- include: lapse_claimed
-- include: claim_stamps
)
-- include: claimed_columns
       GREATEST(EXTRACT(EPOCH FROM now() - run_at)::float8, 0) AS waited
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: complete
-- Settle many runs as done in one statement, each fenced on its own lease token (SPEC STATE-01).
-- A done job has no error: an earlier attempt's stays in `errors`, the history, not above
-- `state done` as if it still stood (issue 23). Each run is counted in the rollup as it lands,
-- and a batch member in its batch (issue 32).
WITH settled AS (
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
    RETURNING j.id, j.queue, j.name, j.run_at, j.last_attempted_at, j.batch_id, j.state,
              j.dependants
), ended AS (
    -- a complete leaves run_at as the claim found it: the attempt's due time
    SELECT queue, name, 'done' AS outcome, last_attempted_at AS attempted_at, run_at AS due_at
    FROM settled
-- include: rollup
-- include: batch_members
), locked AS (
    -- The batch rows locked in id order: two workers each acking members of the same two
    -- batches would otherwise lock them in opposite orders and deadlock.
    SELECT id FROM x_batches
    WHERE id IN (SELECT batch_id FROM members)
    ORDER BY id
    FOR UPDATE
), counted AS (
    -- The row lock serialises members settling at once: exactly one of them (or the close)
    -- sees pending reach 0 in a closed batch, and completes it.
    UPDATE x_batches b
    SET pending = b.pending - e.n,
        done = b.done + e.done,
        dead = b.dead + e.dead,
        failed = b.failed + e.failed,
        cancelled = b.cancelled + e.cancelled,
        completed_at = CASE WHEN b.pending = e.n AND b.closed_at IS NOT NULL THEN now() END
    FROM members e
    JOIN locked l ON l.id = e.batch_id
    WHERE b.id = e.batch_id
      AND b.completed_at IS NULL
    RETURNING b.id, b.input, b.callbacks, b.total, b.done, b.dead, b.failed, b.cancelled,
              b.completed_at
-- include: fired
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM fired WHERE state = 'ready') AS q
)
SELECT settled.id FROM settled, woken;

-- name: retry
-- Settle one run as ready again after `delay` (SPEC DRV-01, STATE-02/03). A failed attempt's
-- `failure` joins the history in this same fenced write, stamped with the attempt and now();
-- only the last `keep` entries stay, so a failure still costs one statement.
WITH due AS (
    -- the due time this attempt was claimed at, read before the write below moves it
    SELECT run_at FROM x_jobs WHERE id = %(id)s
), settled AS (
    UPDATE x_jobs
    SET state = 'ready',
        errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE (
            -- include: errors_kept
        ) END,
        -- a run that died alone in the child isolating it is a crash: counted (SPEC LEASE-17);
        -- a run handed back keeps its place, its count and its mark (SPEC LEASE-20)
        lease_expiries = CASE WHEN %(crashed)s THEN lease_expiries + 1
                              WHEN %(keep_place)s THEN lease_expiries ELSE 0 END,
        lapsed_holder = CASE WHEN %(keep_place)s THEN lapsed_holder END,
        attempt = CASE WHEN %(counts_as_attempt)s THEN attempt ELSE GREATEST(attempt - 1, 0) END,
        run_at = CASE WHEN %(keep_place)s THEN LEAST(run_at, now())
                      ELSE now() + make_interval(secs => %(delay)s) END,
        last_error = COALESCE(%(error)s, last_error),
        stop_reason = %(stop_reason)s,
        visible_at = NULL,
        claimed_by = NULL,
        lease_token = NULL,
        updated_at = now()
    WHERE id = %(id)s
      AND (state = 'running') IS TRUE
      AND lease_token = %(lease_token)s
    RETURNING queue, name, last_attempted_at
), ended AS (
    SELECT queue, name, %(outcome)s::text AS outcome, last_attempted_at AS attempted_at,
           (SELECT run_at FROM due) AS due_at
    FROM settled
    WHERE %(outcome)s::text IS NOT NULL
-- include: rollup
)
SELECT 1 FROM settled;

-- name: suspend
-- Park one run until now + `delay` without spending its attempt (SPEC STEP-10, STATE-03). A
-- snooze (ctx.snooze, issue 29) waits as ready instead, counts one more snooze, and its entry
-- joins the history as in retry. A run parking on a waiting step that an event already answers
-- is due now (issue 43, SPEC EVT-06): a publish that saw the step while the run was running
-- marked the row in this attempt (steps.sql's publish_event; the row lock orders the two), or
-- the event committed after the step's look and before this statement (the same rule as
-- find_event; a run with no waiting step, a sleep's, reads nothing in x_job_events). An
-- encrypted event's data cannot be matched here (SPEC CRYPT-11): a step with match fields looks
-- for such an event once more after writing its waiting record (steps/waits.py).
UPDATE x_jobs
SET state = CASE WHEN %(snoozed)s THEN 'ready' ELSE 'suspended' END,
    snoozes = snoozes + CASE WHEN %(snoozed)s THEN 1 ELSE 0 END,
    errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE (
        -- include: errors_kept
    ) END,
    lease_expiries = 0,
    lapsed_holder = NULL,
    attempt = GREATEST(attempt - 1, 0),
    run_at = CASE
        WHEN event_released_at >= last_attempted_at OR EXISTS (
            SELECT 1
            FROM x_job_steps s
            JOIN x_job_events e ON e.name = s.event
            WHERE s.run_id = x_jobs.run_id
              AND s.status = 'waiting'
              AND e.expires_at > now()
              AND e.published_at >= s.started_at
              AND (s.correlation_key IS NULL OR e.correlation_key = s.correlation_key)
              AND (s.any_tenant IS TRUE OR e.tenant_id IS NOT DISTINCT FROM x_jobs.tenant_id)
              AND (COALESCE(s.match, '{}'::jsonb) = '{}'::jsonb OR e.payload @> s.match))
        THEN now()
        ELSE now() + make_interval(secs => %(delay)s) END,
    last_error = COALESCE(%(error)s, last_error),
    stop_reason = NULL,
    -- a worker of a newer version parks an older run (issue 44): its own claims pass it by
    parked = %(parked)s,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: restart_run
-- A worker of a newer version starts an older run again (old_runs="restart", issue 44, SPEC
-- VER-07): the run takes this worker's version, the restart joins its history (the last `keep`
-- entries kept), and its stored steps are deleted, all in this one statement, fenced on the
-- lease as every write of a run is; a run no longer held writes and deletes nothing.
WITH restarted AS (
    UPDATE x_jobs
    SET version = %(version)s,
        errors = (
            -- include: errors_kept
        ),
        updated_at = now()
    WHERE id = %(id)s
      AND (state = 'running') IS TRUE
      AND lease_token = %(lease_token)s
    RETURNING run_id
), dropped AS (
    DELETE FROM x_job_steps s
    USING restarted r
    WHERE s.run_id = r.run_id
)
SELECT count(*) FROM restarted;

-- name: suspend_children
-- suspend for a call step parked on child jobs (issue 32, SPEC CHILD-07): the run is named
-- among the dependants of each child still live, and counts them in waiting_on, in this one
-- fenced statement; the settle of the last child makes it due at once (the `fired` step of
-- complete, finish and cancel), and the delay is only the fallback look (CHILD-05). A child whose
-- settle committed first is read as ended here; one whose settle commits after this statement
-- finds the run among its dependants. A run with no child left is due now.
-- Locks: the run's own row first, then its children in id order WITHOUT waiting. A complete that
-- settles two of them at once locks them in its own order (its plan's), so a park that held
-- one while waiting for the other could deadlock with it (40P01). A child locked by another
-- transaction (most often its settle in flight) is skipped: not named, not counted, and the
-- run looks again within a second (or at its poll, if sooner) instead of being due now, so
-- whether that settle ends the child or not, the next look sees it; no wake-up is lost.
WITH parent AS (
    SELECT id FROM x_jobs
    WHERE id = %(id)s
      AND (state = 'running') IS TRUE
      AND lease_token = %(lease_token)s
    FOR UPDATE
), seen AS (
    -- live in this statement's snapshot; ARRAY() below is computed once, so a row whose
    -- settle committed since is still locked below and read as it is now, not as skipped
    SELECT id FROM x_jobs
    WHERE id = ANY(%(children)s::uuid[])
      AND state IN ('ready', 'delayed', 'running', 'suspended')
), locked AS (
    SELECT c.id, c.state FROM x_jobs c
    WHERE c.id = ANY(ARRAY(SELECT id FROM seen))
      AND EXISTS (SELECT 1 FROM parent)
    ORDER BY c.id
    FOR UPDATE SKIP LOCKED
), registered AS (
    UPDATE x_jobs c
    SET dependants = CASE WHEN c.dependants @> ARRAY[%(id)s::uuid] THEN c.dependants
                          ELSE COALESCE(c.dependants, '{}'::uuid[]) || %(id)s::uuid END
    FROM locked l
    WHERE c.id = l.id
      AND l.state IN ('ready', 'delayed', 'running', 'suspended')
    RETURNING c.id
), counted AS (
    SELECT (SELECT count(*) FROM registered)::int AS live,
           (SELECT count(*) FROM seen) - (SELECT count(*) FROM locked) AS skipped
)
UPDATE x_jobs
SET state = 'suspended',
    lease_expiries = 0,
    lapsed_holder = NULL,
    attempt = GREATEST(attempt - 1, 0),
    waiting_on = counted.live,
    run_at = CASE WHEN counted.skipped > 0 THEN now() + make_interval(secs => LEAST(%(delay)s, 1))
                  WHEN counted.live = 0 THEN now()
                  ELSE now() + make_interval(secs => %(delay)s) END,
    last_error = COALESCE(%(error)s, last_error),
    stop_reason = NULL,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
FROM counted
WHERE id = %(id)s
  AND (state = 'running') IS TRUE
  AND lease_token = %(lease_token)s;

-- name: shed
-- Hand one run back unrun (a full slot or limit, SPEC WORK-04/07/08): ready after `delay`, the
-- attempt given back, and the crash count kept, since the run never started. With `keep_place`
-- it is ready at once in its old place in the queue (a run claimed ahead, then paused or drained).
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
-- as in retry. A batch member is counted in its batch as in complete.
WITH due AS (
    -- the due time this attempt was claimed at, read before the write below moves it
    SELECT run_at FROM x_jobs WHERE id = %(id)s
), settled AS (
    UPDATE x_jobs
    SET state = %(state)s,
        errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE (
            -- include: errors_kept
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
      AND lease_token = %(lease_token)s
    RETURNING id, queue, name, last_attempted_at, batch_id, state, dependants
), ended AS (
    SELECT queue, name, %(state)s::text AS outcome, last_attempted_at AS attempted_at,
           (SELECT run_at FROM due) AS due_at
    FROM settled
    WHERE %(state)s::text IS NOT NULL
-- include: rollup
-- include: batch_members
-- include: batch_counted
-- include: fired
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM fired WHERE state = 'ready') AS q
)
SELECT 1 FROM settled, woken;

-- name: progress
-- A run's ctx.progress (issue 29), fenced like a heartbeat; the worker throttles it to one write
-- a second per run. updated_at is left alone: progress is not a state change.
UPDATE x_jobs
SET progress = %(progress)s::jsonb || jsonb_build_object('at', now())
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
-- means the job is missing or not live; the driver then reads its state to say which. A batch
-- member is counted in its batch as in complete.
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
WHERE id = %(id)s
  AND (state IN ('ready', 'delayed', 'running', 'suspended')) IS TRUE
RETURNING id, name, queue, state, input, idempotency_key, run_id, attempt, max_attempts,
          priority, run_at, visible_at, claimed_by, lease_token, last_error, stop_reason, result,
          tenant_id, enqueued_by, traceparent, created_at, updated_at, lease_expiries, errors,
          started_at, last_attempted_at, attempted_by, expires_at, snoozes, progress, batch_id,
          after, waiting_on, after_failed, run_anyway, dependants
-- include: batch_members
-- include: batch_counted
-- include: fired
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM fired WHERE state = 'ready') AS q
)
SELECT settled.* FROM settled, woken;

-- name: run_now
-- An operator's "run now" (issue 42): a waiting job due at once, in its place among the due ones
-- by priority; a run_at already past is kept. Fenced on the waiting states; the NOTIFY wakes the
-- workers of its queue at commit.
UPDATE x_jobs
SET run_at = LEAST(run_at, now()),
    state = 'ready',
    updated_at = now()
WHERE id = %(id)s
  AND state IN ('ready', 'delayed')
RETURNING id, pg_notify('xjobs', queue);

-- name: requeue
-- Run a finished job again from its stored steps (SPEC INSP-06, DESIGN Q-03): only from the
-- states in `states` (dead, failed; cancelled with force). Same run_id, attempt 0, due now;
-- last_error and the failed attempts stay as history. Its attempt times are cleared with the
-- attempt count: its next claim is a first attempt again. Wakes the queue's listeners once the
-- transaction commits. A member of a batch not yet completed is no longer counted as ended:
-- its batch waits for it again, so its next final state is counted once, not twice (issue 32).
-- `prior` is the statement's snapshot of the row (its state before this update; FOR UPDATE would
-- skip a row this same statement updates): a racing requeue waits on the row lock and then
-- finds it ready, so only one of them reopens. `restart` (issue 44, SPEC VER-09): also a run a
-- worker of a newer version parked, and the run starts again under the version its next claim
-- stamps (its steps are deleted by requeue_restart, in the same transaction).
WITH prior AS (
    SELECT id, state AS was, batch_id FROM x_jobs WHERE id = %(id)s
), requeued AS (
UPDATE x_jobs
SET state = 'ready',
    version = CASE WHEN %(restart)s THEN NULL ELSE version END,
-- include: operator_retry
WHERE id = %(id)s
  AND (state = ANY(%(states)s::text[]) OR (%(restart)s AND parked AND state = 'suspended'))
RETURNING id, name, queue, state, input, idempotency_key, run_id, attempt, max_attempts,
          priority, run_at, visible_at, claimed_by, lease_token, last_error, stop_reason, result,
          tenant_id, enqueued_by, traceparent, created_at, updated_at, lease_expiries, errors,
          started_at, last_attempted_at, attempted_by, expires_at, snoozes, progress, batch_id,
          after, waiting_on, after_failed, run_anyway, dependants, version, parked,
          pg_notify('xjobs', queue) AS notified
), reopened AS (
    UPDATE x_batches b
    SET pending = b.pending + 1,
        done = b.done - (p.was = 'done')::int,
        dead = b.dead - (p.was = 'dead')::int,
        failed = b.failed - (p.was = 'failed')::int,
        cancelled = b.cancelled - (p.was = 'cancelled')::int
    FROM prior p
    WHERE b.id = p.batch_id
      AND b.completed_at IS NULL
      -- a parked run restarted was live: its batch never counted it as ended
      AND p.was IN ('done', 'dead', 'failed', 'cancelled')
      AND EXISTS (SELECT 1 FROM requeued)
)
SELECT * FROM requeued;

-- name: requeue_restart
-- `retry --restart`: every stored step of the run goes, so it starts again from the top
-- (issue 44, SPEC VER-09), in the transaction of the requeue above.
DELETE FROM x_job_steps WHERE run_id = %(run_id)s;

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
  -- as prune: a job a live job it waited for still names is kept (issue 32)
  AND (x_jobs.after IS NULL OR NOT EXISTS (
      SELECT 1 FROM x_jobs l
      WHERE l.id = ANY(x_jobs.after)
        AND l.state IN ('ready', 'delayed', 'running', 'suspended')))
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
      -- a job still named by a live job it waited for stays until that one settles, so the
      -- settle's release finds it (issue 32); null `after` on every other row: no lookup
      AND (x_jobs.after IS NULL OR NOT EXISTS (
          SELECT 1 FROM x_jobs l
          WHERE l.id = ANY(x_jobs.after)
            AND l.state IN ('ready', 'delayed', 'running', 'suspended')))
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

-- name: age_jobs
-- Test support (JobDriver.age): every stored time of the jobs, their limit keys, the
-- operators' audit trail, the queues', jobs' and keys' pauses and the workers' presence made
-- %(d)s earlier, the same as that much time passing. Never run by a worker.
WITH jobs AS (
    UPDATE x_jobs SET run_at = run_at - %(d)s, visible_at = visible_at - %(d)s,
        created_at = created_at - %(d)s, updated_at = updated_at - %(d)s,
        started_at = started_at - %(d)s, last_attempted_at = last_attempted_at - %(d)s,
        expires_at = expires_at - %(d)s
), limit_keys AS (  -- a limit key's window and pause (issue 31)
    UPDATE x_limit_keys SET paused_until = paused_until - %(d)s, updated_at = updated_at - %(d)s,
        starts = ARRAY(SELECT s - %(d)s FROM unnest(starts) AS s ORDER BY s)
), audit AS (  -- the operators' audit trail (issue 45)
    UPDATE x_operator_actions SET at = at - %(d)s
), controls AS (  -- a queue's pause and its end (issue 45)
    UPDATE x_queue_controls SET paused_at = paused_at - %(d)s,
        paused_until = paused_until - %(d)s, updated_at = updated_at - %(d)s
), job_controls AS (  -- a job's or a key's pause and its end (issue 45)
    UPDATE x_job_controls SET paused_at = paused_at - %(d)s,
        paused_until = paused_until - %(d)s, updated_at = updated_at - %(d)s
)
UPDATE x_workers SET started_at = started_at - %(d)s, last_seen = last_seen - %(d)s,
    seen_since = seen_since - %(d)s, expires_at = expires_at - %(d)s;

-- name: age_steps
UPDATE x_job_steps SET started_at = started_at - %(d)s, completed_at = completed_at - %(d)s,
    wake_at = wake_at - %(d)s;

-- name: age_events
UPDATE x_job_events SET published_at = published_at - %(d)s, expires_at = expires_at - %(d)s;

-- name: age_rollup_away
-- The rollup's minutes move in two steps (age_rollup_back follows): one UPDATE shifting them by
-- a minute or more would put a row on a minute another row still holds, before that one moved,
-- and the unique key refuses it. Far away first, then back by less: no step lands on a row not
-- yet moved.
UPDATE x_job_rollup SET minute = minute - interval '1000 years' - %(d)s;

-- name: age_rollup_back
UPDATE x_job_rollup SET minute = minute + interval '1000 years';
