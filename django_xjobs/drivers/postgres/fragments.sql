-- Parts several statements run alike, written once: a statement includes one with a line
-- `-- include: <fragment>` (sql.py). Any .sql file in this folder may include these.

-- fragment: fired
-- The settle's second insert: the callbacks of the batches `counted` completed, and the jobs
-- waiting for a row in `settled` counted down (issue 32). Ack, finish, cancel and a batch's
-- cancel end rows the same way, so they release what waits for them the same way.
), fired AS (
    -- The completed batch's callbacks, inserted in the transaction that completed it: they
    -- exist exactly when the last member's final state does (docs/concepts/workflows.md).
    -- The same insert releases the jobs waiting for a row settled here (issue 32): a settle
    -- runs one insert for both, so a job nobody waits for pays nothing for dependencies.
    INSERT INTO x_jobs AS w (id, name, queue, input, idempotency_key, run_id, attempt,
                             max_attempts, state, priority, run_at, tenant_id, created_at,
                             updated_at, stop_reason, waiting_on, after_failed)
    SELECT cb.id, cb.name, cb.queue,
           c.input || jsonb_build_object('batch', jsonb_build_object(
               'id', c.id, 'total', c.total, 'done', c.done, 'dead', c.dead,
               'failed', c.failed, 'cancelled', c.cancelled)),
           cb.key, cb.run_id, 0, cb.max_attempts, 'ready', cb.priority, now(), cb.tenant_id,
           now(), now(), NULL, NULL, NULL
    FROM counted c
    CROSS JOIN LATERAL jsonb_to_recordset(c.callbacks) AS cb(
        kind text, id uuid, run_id uuid, name text, queue text, key text, max_attempts int,
        priority int, tenant_id text)
    WHERE c.completed_at IS NOT NULL
      AND (cb.kind = 'complete' OR (cb.kind = 'success') = (c.done = c.total))
    UNION ALL
    -- Dependencies (issue 32): each job waiting for a row settled here counts its end, and
    -- the last one makes it due, in this same statement, so a crash cannot strand one (SPEC
    -- DEP-02); so does a run parked on child jobs when its last child ends (SPEC CHILD-07).
    -- `dependants` is null on every job nobody waits for: for those this reads nothing. A
    -- waiting job is reached by its key with an upsert, not an UPDATE: one whose enqueue locked
    -- the settled row first and committed after this statement's snapshot is invisible to an
    -- UPDATE, not to ON CONFLICT (SPEC DEP-03). Its proposed row only carries the counts
    -- (waiting_on: its dependencies that ended here; after_failed: one that did not end done)
    -- and is never inserted, as a job named in `dependants` is not pruned while the naming job
    -- is live. Keys in order: two settles releasing the same jobs cannot deadlock.
    (SELECT r.id, 'xjobs.dependant-missing', 'default', '{}'::jsonb, r.id::text, r.id, 0, 0,
            'cancelled', 0, now(), NULL, now(), now(), 'dependency_failed', r.ended, r.failed
     FROM (
         SELECT u.id, count(*)::int AS ended,
                min(s.id::text) FILTER (WHERE s.state <> 'done')::uuid AS failed
         FROM settled s
         CROSS JOIN LATERAL unnest(s.dependants) AS u(id)
         WHERE s.dependants IS NOT NULL
         GROUP BY u.id
     ) AS r
     ORDER BY r.id)
    -- A callback's id is new (a conflict means it was inserted already: left as it is); a
    -- released job's is its own. A dependency that failed ends a job that never started (due
    -- now with its expiry passed: DEP-04) unless it runs anyway; a run that started (a parked
    -- parent) counts every end alike.
    ON CONFLICT (id) DO UPDATE
    SET waiting_on = CASE WHEN EXCLUDED.after_failed IS NOT NULL AND w.started_at IS NULL
                               AND NOT COALESCE(w.run_anyway, false) THEN 0
                          ELSE GREATEST(w.waiting_on - EXCLUDED.waiting_on, 0) END,
        after_failed = CASE WHEN w.started_at IS NULL AND NOT COALESCE(w.run_anyway, false)
                            THEN EXCLUDED.after_failed END,
        state = CASE WHEN w.waiting_on <= EXCLUDED.waiting_on
                          OR (EXCLUDED.after_failed IS NOT NULL AND w.started_at IS NULL
                              AND NOT COALESCE(w.run_anyway, false))
                     THEN 'ready' ELSE w.state END,
        run_at = CASE WHEN w.waiting_on <= EXCLUDED.waiting_on
                           OR (EXCLUDED.after_failed IS NOT NULL AND w.started_at IS NULL
                               AND NOT COALESCE(w.run_anyway, false))
                      THEN now() ELSE w.run_at END,
        expires_at = CASE WHEN EXCLUDED.after_failed IS NOT NULL AND w.started_at IS NULL
                               AND NOT COALESCE(w.run_anyway, false) THEN now()
                          ELSE w.expires_at END,
        updated_at = now()
    WHERE EXCLUDED.waiting_on IS NOT NULL
      AND (w.state = 'suspended') IS TRUE
      AND w.waiting_on > 0
    RETURNING w.queue, w.state

-- fragment: rollup
-- The settled runs' line in the per-minute rollup (issue 30), from the `ended` rows each settle
-- names for itself. Ack, retry and finish count a run the same way.
), rolled AS (
    -- the rollup row of this minute, queue, name and outcome, in this same statement
    -- (rollup.py): no round trip of its own. The shard is this backend's, so concurrent
    -- settlers each add to a row of their own and never wait on one another's row lock; the
    -- rows go in key order, so two settles sharing a shard cannot deadlock.
    INSERT INTO x_job_rollup AS r (minute, queue, name, outcome, shard, count, run_seconds,
                                   wait_seconds, run_buckets, wait_buckets)
    SELECT g.minute, g.queue, g.name, g.outcome, g.shard, g.n, g.run_s, g.wait_s,
           ARRAY(SELECT count(b.v) FROM generate_series(0, cardinality(%(bounds)s::float8[])) AS i
                 LEFT JOIN unnest(g.runs) AS b(v) ON b.v = i GROUP BY i ORDER BY i),
           ARRAY(SELECT count(b.v) FROM generate_series(0, cardinality(%(bounds)s::float8[])) AS i
                 LEFT JOIN unnest(g.waits) AS b(v) ON b.v = i GROUP BY i ORDER BY i)
    FROM (
        SELECT date_trunc('minute', now(), 'UTC') AS minute, e.queue, e.name, e.outcome,
               mod(pg_backend_pid(), 16) AS shard, count(*) AS n, sum(e.run_s) AS run_s,
               sum(e.wait_s) AS wait_s,
               array_agg(width_bucket(e.run_s, %(bounds)s::float8[])) AS runs,
               array_agg(width_bucket(e.wait_s, %(bounds)s::float8[])) AS waits
        FROM (
            SELECT queue, name, outcome,
                   GREATEST(EXTRACT(EPOCH FROM now() - attempted_at)::float8, 0) AS run_s,
                   GREATEST(EXTRACT(EPOCH FROM attempted_at - due_at)::float8, 0) AS wait_s
            FROM ended
        ) AS e
        GROUP BY e.queue, e.name, e.outcome
    ) AS g
    ORDER BY g.queue, g.name, g.outcome
    ON CONFLICT (minute, queue, name, outcome, shard) DO UPDATE
    SET count = r.count + EXCLUDED.count,
        run_seconds = r.run_seconds + EXCLUDED.run_seconds,
        wait_seconds = r.wait_seconds + EXCLUDED.wait_seconds,
        run_buckets = ARRAY(SELECT a + b FROM unnest(r.run_buckets, EXCLUDED.run_buckets)
                            WITH ORDINALITY AS t(a, b, n) ORDER BY n),
        wait_buckets = ARRAY(SELECT a + b FROM unnest(r.wait_buckets, EXCLUDED.wait_buckets)
                             WITH ORDINALITY AS t(a, b, n) ORDER BY n)

-- fragment: batch_members
-- The settled batch members counted by batch (issue 32), from `settled`. Ack, finish, cancel
-- and a batch's cancel count a member's end the same way.
), members AS (
    -- Batches (issue 32): each settled member's final state counted in its batch, in this same
    -- statement. Fenced by the settle above: a member leaves its live states once, so a
    -- re-settle, a lost lease's late settle or a worker killed mid-settle can never count it
    -- twice (the row was not updated, or the whole statement rolled back). A job with no batch
    -- stops here: no batch row is read.
    SELECT batch_id, count(*)::int AS n,
           count(*) FILTER (WHERE state = 'done')::int AS done,
           count(*) FILTER (WHERE state = 'dead')::int AS dead,
           count(*) FILTER (WHERE state = 'failed')::int AS failed,
           count(*) FILTER (WHERE state = 'cancelled')::int AS cancelled
    FROM settled
    WHERE batch_id IS NOT NULL
    GROUP BY batch_id

-- fragment: batch_counted
-- The members' batches counted down, after `batch_members`: finish, cancel and a batch's
-- cancel spell it alike (complete locks the batch rows in id order first, so it keeps its own).
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
    WHERE b.id = e.batch_id
      AND b.completed_at IS NULL
    RETURNING b.id, b.input, b.callbacks, b.total, b.done, b.dead, b.failed, b.cancelled,
              b.completed_at

-- fragment: claimed_columns
-- A claimed row, in the order `_claimed` reads it (drivers/postgres/__init__.py): each claim
-- statement selects these from its `claimed` rows, then its `waited` and its order. The
-- creation time goes out as whole microseconds since the epoch, not as a timestamptz: Django's
-- text loader for timestamptz costs about 8 µs a row in Python, of the ~100 µs a drained job
-- costs the worker (bench/README.md, "The floor under the drain"); an integer costs a quarter
-- of a µs. Whole seconds and the microseconds within the second are taken apart, each an
-- exact integer: PostgreSQL 13's EXTRACT gives a float8, and the epoch in microseconds as one
-- float8 product would drift by one near 2041.
SELECT id, run_id, name, queue, input::text, attempt, max_attempts, lease_token, priority,
       tenant_id, enqueued_by, idempotency_key,
       EXTRACT(EPOCH FROM date_trunc('second', created_at))::int8 * 1000000
           + mod(EXTRACT(MICROSECONDS FROM created_at)::int8, 1000000) AS created_us,
       lease_expiries, traceparent, expired, snoozes, lapsed_holder, version,

-- fragment: lapsed_rows
-- The rows a sweep takes again (jobs.sql's claim_lapsed, limits.sql's reclaim_lapsed, each with
-- lapsed_tail after it, and their _paused twins with paused_rows between the two): running
-- rows whose lease ran out, read on the lease index, whose predicate it spells the same way (not
-- any other state), oldest lapse first. A lapsed run is taken once its holder's verdict can be
-- told (issue 39; SPEC LEASE-16): the holder has no presence row, marked it stopped, renewed it
-- after the lease ran out, or has not renewed it through a whole presence TTL (its own) during
-- which another worker beat without a break, so the database answered and a live holder would
-- have. Right after an outage every streak starts again, so a run whose holder may yet come back
-- (and hand it back itself) waits up to a TTL; a holder that died while the others beat on is
-- judged at once, whoever claims.
    SELECT id, priority, run_at, claimed_by, visible_at, true AS lapsed FROM x_jobs j
    WHERE NOT (state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead', 'cancelled'))
      AND visible_at <= now()
      AND queue = ANY(%(queues)s::text[])
      -- never a run started under a newer version than this worker declares (SPEC VER-05)
      AND (j.version IS NULL
           OR NOT ((SELECT %(versions)s::jsonb) ? j.name)
           OR j.version <= ((SELECT %(versions)s::jsonb) -> j.name ->> 0)::int)
      AND NOT EXISTS (
          SELECT 1 FROM x_workers h
          WHERE h.id = j.claimed_by
            AND h.stopped_at IS NULL
            AND h.last_seen < j.visible_at
            AND NOT EXISTS (
                SELECT 1 FROM x_workers w
                WHERE w.id <> h.id
                  AND w.stopped_at IS NULL
                  AND w.last_seen >= now() - make_interval(secs => %(visibility_timeout)s::float8 / 2)
                  AND w.last_seen >= GREATEST(w.seen_since, h.last_seen) + (h.expires_at - h.last_seen)))

-- fragment: lapsed_tail
-- The end of lapsed_rows (paused_rows may stand between them): the oldest lapse first, locked.
    ORDER BY visible_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED

-- fragment: paused_rows
-- The _paused statements' one difference (issue 45, SPEC PAUSE-04/05/10): no run of a job or
-- a limit key an operator paused (`paused`: the names and rendered keys of the pauses in force,
-- which the worker reads once a poll), neither a waiting one (after waiting_rows) nor a lapsed
-- one (after lapsed_rows: a pause means "do not start this job's code", and a run taken again
-- starts it again). Only a claim told of a pause sends it, so nothing paused sends the claim as
-- it was. Its columns are unqualified, read from the x_jobs row of either fragment (waiting_rows
-- reads it unaliased, lapsed_rows as `j`). Written as an overlap of arrays, not
-- `name <> ALL(...)`: in a generic plan (prepared statements) the planner weighed `<> ALL` of an
-- unknown array by the column's statistics (a queue of one job name: nothing would pass) and
-- left the claim index's ordered walk for a sort of every waiting row, 2.5 to 3.3 times the
-- buffers beside finished jobs (tests/drivers/postgres/test_claim_buffers.py); an overlap of an
-- expression has no statistics and is weighed as the rare test it is.
          AND NOT (ARRAY[name, COALESCE(limit_key, '')] && %(paused)s::text[])

-- fragment: lapse_verdict
-- What a lapsed run's holder was when its lease ran out (issue 39; SPEC LEASE-16), from its
-- presence row (x_workers): `exited` when it marked the row stopped (it was told to stop and
-- outlived its --shutdown-timeout), `present` when it renewed the row after the lease ran out
-- (the database or the network was away, not the worker), else `died`: no row, or not seen
-- since, while the database answered (lapsed_rows). Nothing here is counted against the job:
-- every run a dead worker held died with it and nothing says which one killed it, so a `died`
-- run is marked to run next alone, in a child process of the worker that claims it, where a
-- death is its own (SPEC LEASE-17/18).
), verdict AS (
    SELECT x.id,
           CASE WHEN h.stopped_at IS NOT NULL THEN 'exited'
                WHEN h.last_seen >= x.visible_at THEN 'present'
                ELSE 'died' END AS kind
    FROM picked x
    LEFT JOIN x_workers h ON h.id = x.claimed_by
    WHERE x.lapsed

-- fragment: lapse_claimed
-- The sweep's claim of the rows it picked (claim_lapsed, reclaim_lapsed), up to what any claim
-- writes (claim_stamps, which follows it): the writes a lapse verdict decides. A `died` run is
-- marked with the worker it died with (its next run is isolated), the others keep what they had;
-- the unsettled attempt joins the history, dated when its lease ran out, and only the last
-- `keep` entries stay. A lapsed row's verdict is looked up by its id (waiting rows have none).
    UPDATE x_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        lapsed_holder = CASE WHEN (SELECT v.kind FROM verdict v WHERE v.id = j.id) = 'died'
                             THEN j.claimed_by ELSE j.lapsed_holder END,
        errors = CASE WHEN j.state <> 'running' THEN j.errors ELSE (
            SELECT jsonb_agg(kept.entry ORDER BY kept.n)
            FROM (
                SELECT entry, n
                FROM jsonb_array_elements(
                    j.errors || jsonb_build_array(
                        jsonb_build_object('attempt', j.attempt, 'at', j.visible_at)
                        || CASE (SELECT v.kind FROM verdict v WHERE v.id = j.id)
                                WHEN 'exited' THEN %(exited)s::jsonb
                                WHEN 'died' THEN %(lapsed)s::jsonb
                                ELSE %(lapsed_present)s::jsonb END)
                ) WITH ORDINALITY AS entries(entry, n)
                ORDER BY n DESC
                LIMIT %(keep)s
            ) AS kept
        ) END,

-- fragment: claim_stamps
-- What every claim of jobs.sql's (claim, claim_lapsed) and limits.sql's reclaim_lapsed writes
-- after its state and attempt, and what it answers: a new lease token (the previous holder's
-- writes are refused from here on, DESIGN Q-01), the lease, the attempt's stamps (started_at once
-- per job, last_attempted_at every time), on the rows `picked` found again by their keys, as one
-- array: a join with `picked` is planned from statistics, and with none (a table filled since
-- TRUNCATE) or stale ones it read the whole table to hash it, or probed the array once per
-- picked row. (claim_limited stamps the statement's time instead, and answers its key.)
        claimed_by = %(worker_id)s,
        lease_token = gen_random_uuid(),
        visible_at = now() + make_interval(secs => %(visibility_timeout)s),
        started_at = COALESCE(j.started_at, now()),
        last_attempted_at = now(),
        attempted_by = %(worker_id)s,
        -- the version this worker declares, at the run's first claim only; a run claimed before
        -- runs recorded one reads as 1 (SPEC VER-02); a claim ends a park (SPEC VER-08)
        version = COALESCE(j.version, CASE WHEN j.started_at IS NULL
                                           THEN ((SELECT %(versions)s::jsonb) -> j.name ->> 0)::int
                                           ELSE 1 END),
        parked = false,
        updated_at = now()
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.run_id, j.name, j.queue, j.input, j.attempt, j.max_attempts, j.lease_token,
              j.priority, j.tenant_id, j.enqueued_by, j.idempotency_key, j.created_at,
              j.lease_expiries, j.traceparent, j.run_at,
              -- expired: first claimed at or past expires_at (started_at is the first
              -- claim's time), at that claim and at any reclaim after a worker died before
              -- settling the verdict (SPEC JCTL-02); NULL when the job has no expiry
              j.expires_at <= j.started_at AS expired, j.snoozes, j.lapsed_holder, j.version

-- fragment: operator_retry
-- What an operator's retry resets on a row, one job (jobs.sql's requeue) or a filter's batch
-- (bulk.sql's requeue) alike: attempt 0, due now, its snoozes and expiry to spend again, no
-- holder, and a run a newer worker parked no longer marked so (issue 44); a job that ended
-- dependency_failed runs when an operator says so (issue 32). Follows `SET state = ...,`.
    attempt = 0,
    expires_at = NULL,
    snoozes = 0,
    started_at = NULL,
    last_attempted_at = NULL,
    attempted_by = NULL,
    lease_expiries = 0,
    lapsed_holder = NULL,
    run_at = now(),
    stop_reason = NULL,
    after_failed = NULL,
    waiting_on = CASE WHEN waiting_on IS NOT NULL THEN 0 END,
    parked = false,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()

-- fragment: errors_kept
-- A run's failure history with this attempt's `failure` appended, stamped with the attempt and
-- now(), of which only the last `keep` entries stay: a failure costs no statement of its own and
-- the history no unbounded growth. Retry, snooze, finish and a version restart append alike.
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

-- fragment: woken_by_priority
-- A bulk insert's wake-ups, from its `ins` rows (id, run_id, state, queue, priority): each queue
-- that got a ready row once, by its name, and once more as "<queue> <priority>" for each
-- priority above 0 it got (SPEC PRIO-01). A queue's plain name repeated across priorities is
-- one notification: PostgreSQL folds identical ones within a transaction.
    SELECT count(pg_notify('xjobs', note)) AS queues
    FROM (SELECT DISTINCT queue, priority FROM ins WHERE state = 'ready') AS ready,
         LATERAL (SELECT ready.queue
                  UNION ALL
                  SELECT ready.queue || ' ' || ready.priority WHERE ready.priority > 0) AS n(note)
