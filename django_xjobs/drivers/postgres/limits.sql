-- Fleet-wide limits decided in the claim (drivers/postgres_limits.py). Run only by a worker whose
-- queues hold limited jobs or carry an operator's cap: a fleet that declares no limit never runs
-- these, and its claim is the very statement it ran before (postgres.sql's claim).
--
-- A limited claim is one transaction of three statements. `limit_queues` and `limit_keys` lock
-- the queues' caps and the keys this claim may take runs of (SKIP LOCKED: a key another worker is
-- claiming is left to it this poll); `claim_limited` then counts each key's running rows and
-- takes at most what its limits leave. The count is read by a statement that starts after the
-- locks are held, so any claim that held the same key before has committed and its runs are
-- seen: two workers never spend one key's budget at once. Nothing counts runs up or down: a run
-- is counted while its row is running, so a crashed worker's run holds its slot until its lease
-- lapses and the run is taken again (by claim_lapsed, still one run) or ends. A key's times are
-- on the statement's clock (statement_timestamp()), never the transaction's: the claim's own
-- statement starts after its locks are held, so its starts are never dated before the starts of
-- the claim that held the key last.

-- name: limit_queues
-- The caps on these queues, each locked for this claim or, held by another worker's claim,
-- reported unlocked: the caller leaves that queue out of this poll. A row with no queue when
-- none has a cap: the settings below are made whatever the caps (the preserved side of the
-- join; set_config is volatile, so its columns are never dropped unread).
--
-- The first statement of the limited claim's transaction, so it also makes that transaction's
-- settings (a statement of its own cost a round trip a claim). JIT off: claim_limited's
-- estimates (a backlog's row count at each lateral step) pass jit_above_cost, and PostgreSQL
-- built with LLVM then compiled it on every claim, about 2.4 s of CPU a sweep over a throttled
-- backlog of 100k runs, for a statement that runs in a millisecond. With prepared statements,
-- the generic plan: PostgreSQL planned claim_limited afresh on every execution (it never
-- settled on the generic plan), and the planning cost more than the run, about 5 ms a claim.
-- Its scans, and limit_keys', are lateral and limited, so the generic plan is the custom one
-- without the replanning (tests/drivers/postgres/test_limit_cost.py).
WITH capped AS (
    SELECT queue FROM x_queue_controls
    WHERE queue = ANY(%(queues)s::text[]) AND concurrency IS NOT NULL
), locked AS (
    SELECT queue FROM x_queue_controls
    WHERE queue = ANY(%(queues)s::text[]) AND concurrency IS NOT NULL
    FOR UPDATE SKIP LOCKED
)
SELECT q.queue, q.locked
FROM (SELECT set_config('jit', 'off', true) AS jit,
             set_config('plan_cache_mode',
                        CASE WHEN %(generic)s THEN 'force_generic_plan'
                             ELSE current_setting('plan_cache_mode') END,
                        true) AS plans) AS settings
LEFT JOIN (SELECT c.queue, l.queue IS NOT NULL AS locked
           FROM capped c LEFT JOIN locked l USING (queue)) AS q ON true;

-- name: limit_keys
-- The keys with work waiting in one queue that this claim may take runs of, at most `limit` of
-- them: found by skipping through x_jobs_limit_wait_idx one key at a time (a backlog of 100k
-- runs of one key is one step, not 100k rows), from the key after `after` (the last key this
-- worker's claim took in the queue) round to the first key and back up to `after`, so that
-- successive claims visit every key in turn and none late in key order starves. A key that is
-- paused, whose rate window is spent or whose running rows fill its concurrency is stepped over
-- (a throttled key costs a poll nothing but its step); the walk stops at the `limit`-th key with
-- room, so a claim reads what it can take, not every key with work waiting. Each key kept has
-- its row created if new and locked; claim_limited counts its room again under the lock. The
-- keys come in the walk's order.
WITH RECURSIVE walk(key, lap) AS (
    SELECT (SELECT limit_key FROM x_jobs
            WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
              AND limit_key IS NOT NULL AND queue = %(queue)s
              AND limit_key > %(after)s
            ORDER BY limit_key
            LIMIT 1), 0
    UNION ALL
    SELECT (SELECT limit_key FROM x_jobs
            WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
              AND limit_key IS NOT NULL AND queue = %(queue)s
              AND limit_key > COALESCE(w.key, '')
            ORDER BY limit_key
            LIMIT 1),
           CASE WHEN w.key IS NULL THEN 1 ELSE w.lap END
    FROM walk w
    -- past the last key, round once to the first (none to go round to from the start); the
    -- lap back stops at `after`
    WHERE (w.key IS NOT NULL OR (w.lap = 0 AND %(after)s <> ''))
      AND NOT (w.lap = 1 AND w.key >= %(after)s)
), limits AS (
    SELECT * FROM unnest(%(names)s::text[], %(concurrency)s::int[], %(rates)s::int[],
                         %(windows)s::float8[])
        AS d(name, concurrency, rate, window_s)
), filled AS (
    -- the keys whose running rows fill their concurrency, counted once for the whole walk
    -- from the running rows with a key (as many as the fleet runs at once, whatever the backlog)
    SELECT r.limit_key AS key
    FROM x_jobs r
    JOIN limits p ON p.name = split_part(r.limit_key, E'\x1f', 1)
    WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead',
                           'cancelled'))
      AND r.limit_key IS NOT NULL
      AND p.concurrency IS NOT NULL
    GROUP BY r.limit_key, p.concurrency
    HAVING count(*) >= p.concurrency
), room AS (
    -- the walk read lazily, row by row: each test a subquery on the key (never a join that
    -- would read the walk, or the keys' table, whole). `open`: the key's row says it may start
    -- a run (true), it may not (false), or the key has no row yet (null), read once
    SELECT w.key, w.lap, k.open FROM walk w
    CROSS JOIN LATERAL (
        SELECT (
            SELECT (l.paused_until IS NULL OR l.paused_until <= statement_timestamp())
                   AND NOT EXISTS (
                       SELECT 1 FROM limits r
                       WHERE r.name = split_part(l.key, E'\x1f', 1) AND r.rate IS NOT NULL
                         AND (SELECT count(*) FROM unnest(l.starts) AS s(at)
                              WHERE s.at > statement_timestamp()
                                           - make_interval(secs => r.window_s))
                             >= r.rate)
            FROM x_limit_keys l WHERE l.key = w.key) AS open
        -- a fence: pulled up, the subquery ran once for the test and again for the column
        OFFSET 0
    ) AS k
    WHERE w.key IS NOT NULL AND (w.lap = 0 OR w.key <= %(after)s)
      AND k.open IS NOT FALSE
      -- an operator's pause of the key or of its job (SPEC PAUSE-04/05): stepped over
      AND w.key <> ALL(%(paused)s::text[])
      AND split_part(w.key, E'\x1f', 1) <> ALL(%(paused)s::text[])
      -- a hashed set, read once: a count per key stepped over planned onto whichever partial
      -- index of running rows looked cheaper, and after an ANALYZE taken with nothing
      -- running that was the lease index, read whole for every key
      AND w.key NOT IN (SELECT key FROM filled)
    LIMIT %(limit)s
), fresh AS (
    -- only the keys the walk found no row for: a key with a row is locked below, not probed
    -- for a conflict first (a row inserted since the walk read is another claim's: it wins)
    INSERT INTO x_limit_keys (key, updated_at)
    SELECT key, statement_timestamp() FROM room WHERE open IS NULL
    ON CONFLICT DO NOTHING
    RETURNING key
), held AS (
    -- checked again on the locked row: a pause or a start committed since the walk read it
    SELECT l.key FROM x_limit_keys l
    WHERE l.key IN (SELECT key FROM room WHERE open)
      AND (l.paused_until IS NULL OR l.paused_until <= statement_timestamp())
      AND NOT EXISTS (
          SELECT 1 FROM limits r
          WHERE r.name = split_part(l.key, E'\x1f', 1) AND r.rate IS NOT NULL
            AND (SELECT count(*) FROM unnest(l.starts) AS s(at)
                 WHERE s.at > statement_timestamp() - make_interval(secs => r.window_s)) >= r.rate)
    FOR UPDATE OF l SKIP LOCKED
)
-- in the walk's order: a key past `after` was on its first lap, one at or before it on its
-- second (a join back to room to read the lap compared every pair of the two lists)
SELECT k.key FROM (SELECT key FROM fresh UNION ALL SELECT key FROM held) AS k
ORDER BY k.key <= %(after)s, k.key;

-- name: claim_limited
-- claim, within limits: runs of the locked `keys`, each key at most what its concurrency (its
-- running rows) and its rate window leave; runs with no key in `plain_queues`, walked as the plain
-- claim walks them; then each capped queue at most its cap less its running rows. The rows are
-- taken as claim takes them (same lease token, attempt and stamps), and each rate-limited key
-- records its starts, its window trimmed to what is still inside it. Its clock is the statement's,
-- not the transaction's: it starts once the locks are held, after the claim that held them last.
WITH jobs AS (
    SELECT * FROM unnest(%(names)s::text[], %(concurrency)s::int[], %(rates)s::int[],
                         %(windows)s::float8[])
        AS p(name, concurrency, rate, window_s)
), budget AS (
    -- each locked key's room; its row is read only for a rate's window (a CASE evaluates only
    -- the branch it takes): a key limited by concurrency alone costs its count, no read of its
    -- row (limit_keys holds its lock, nothing here needs the row itself)
    SELECT k.key,
           LEAST(%(limit)s,
                 CASE WHEN p.concurrency IS NULL THEN %(limit)s
                      ELSE p.concurrency - (
                          SELECT count(*) FROM x_jobs r
                          WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done',
                                                 'failed', 'dead', 'cancelled'))
                            AND r.limit_key = k.key) END,
                 CASE WHEN p.rate IS NULL THEN %(limit)s
                      ELSE p.rate - (
                          SELECT count(*) FROM x_limit_keys l, unnest(l.starts) AS s(at)
                          WHERE l.key = k.key
                            AND s.at > statement_timestamp()
                                       - make_interval(secs => p.window_s)) END) AS room
    -- a key with runs in two of the queues was locked by both walks
    FROM (SELECT DISTINCT key FROM unnest(%(keys)s::text[]) AS u(key)) AS k
    LEFT JOIN jobs p ON p.name = split_part(k.key, E'\x1f', 1)
), reachable AS (
    SELECT w.id, w.queue, w.priority, w.run_at, b.key, b.room
    FROM budget b
    CROSS JOIN unnest(%(queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at FROM x_jobs
        WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND limit_key IS NOT NULL
          AND queue = q.name
          AND limit_key = b.key
          AND run_at <= statement_timestamp()
          -- only runs whose version this worker honours, as jobs.sql's waiting_rows (VER-05)
          AND (version IS NULL
               OR NOT ((SELECT %(versions)s::jsonb) ? name)
               OR version <= ((SELECT %(versions)s::jsonb) -> name ->> 0)::int
                  AND NOT (parked AND ((SELECT %(versions)s::jsonb) -> name ->> 1)::bool
                           AND version < ((SELECT %(versions)s::jsonb) -> name ->> 0)::int))
          -- an operator's pause (SPEC PAUSE-04), weighed as fragments.sql's paused_rows says
          AND NOT (ARRAY[name] && %(paused)s::text[])
        ORDER BY priority DESC, run_at, id
        LIMIT GREATEST(b.room, 0)
        FOR UPDATE SKIP LOCKED
    ) AS w
), keyed AS (
    -- a key with runs in two of these queues still takes at most its room in all; `turn` is
    -- the run's place within its key, the order fair share takes them in
    SELECT id, queue, priority, run_at, place AS turn
    FROM (SELECT r.*, row_number() OVER (PARTITION BY r.key
                                         ORDER BY r.priority DESC, r.run_at, r.id) AS place
          FROM reachable r) AS x
    WHERE x.place <= x.room
), plain AS (
    SELECT w.id, w.queue, w.priority, w.run_at,
           row_number() OVER (PARTITION BY w.queue ORDER BY w.priority DESC, w.run_at, w.id) AS turn
    FROM unnest(%(plain_queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at FROM x_jobs
        WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
          AND queue = q.name
          AND run_at <= statement_timestamp()
          -- only runs whose version this worker honours, as jobs.sql's waiting_rows (VER-05)
          AND (version IS NULL
               OR NOT ((SELECT %(versions)s::jsonb) ? name)
               OR version <= ((SELECT %(versions)s::jsonb) -> name ->> 0)::int
                  AND NOT (parked AND ((SELECT %(versions)s::jsonb) -> name ->> 1)::bool
                           AND version < ((SELECT %(versions)s::jsonb) -> name ->> 0)::int))
          -- an operator's pause (SPEC PAUSE-04), weighed as fragments.sql's paused_rows says
          AND NOT (ARRAY[name] && %(paused)s::text[])
          AND limit_key IS NULL
        ORDER BY priority DESC, run_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS w
), stray AS (
    -- runs with no key in a queue of keyed jobs (enqueued before the job declared its key):
    -- looked for on the sweep among the first `scan` waiting rows only, so a throttled backlog
    -- is never walked whole; not locked here, the update below fences them on their state
    SELECT w.id, w.queue, w.priority, w.run_at,
           row_number() OVER (PARTITION BY w.queue ORDER BY w.priority DESC, w.run_at, w.id) AS turn
    FROM unnest(%(stray_queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT ahead.id, ahead.queue, ahead.priority, ahead.run_at
        FROM (SELECT id, queue, priority, run_at, limit_key FROM x_jobs
              WHERE NOT (state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
                AND queue = q.name
                AND run_at <= statement_timestamp()
          -- only runs whose version this worker honours, as jobs.sql's waiting_rows (VER-05)
          AND (version IS NULL
               OR NOT ((SELECT %(versions)s::jsonb) ? name)
               OR version <= ((SELECT %(versions)s::jsonb) -> name ->> 0)::int
                  AND NOT (parked AND ((SELECT %(versions)s::jsonb) -> name ->> 1)::bool
                           AND version < ((SELECT %(versions)s::jsonb) -> name ->> 0)::int))
          -- an operator's pause (SPEC PAUSE-04), weighed as fragments.sql's paused_rows says
          AND NOT (ARRAY[name] && %(paused)s::text[])
              ORDER BY priority DESC, run_at, id
              LIMIT %(scan)s) AS ahead
        WHERE ahead.limit_key IS NULL
        ORDER BY ahead.priority DESC, ahead.run_at, ahead.id
        LIMIT %(limit)s
    ) AS w
), quota AS MATERIALIZED (
    -- once per queue, and a queue's running rows counted only when it has a cap: inlined, the
    -- count ran again for every row picked, each time reading every running row
    SELECT q.name AS queue,
           CASE WHEN c.concurrency IS NULL THEN %(limit)s
                ELSE c.concurrency - (
                    SELECT count(*) FROM x_jobs r
                    WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed',
                                           'dead', 'cancelled'))
                      AND r.queue = q.name)
           END AS room
    FROM unnest(%(queues)s::text[]) AS q(name)
    LEFT JOIN x_queue_controls c ON c.queue = q.name
), ranked AS (
    SELECT d.*, row_number() OVER (PARTITION BY d.queue
                                   ORDER BY CASE WHEN %(fair)s THEN d.turn END,
                                            d.priority DESC, d.run_at, d.id) AS place
    FROM (SELECT * FROM keyed UNION ALL SELECT * FROM plain UNION ALL SELECT * FROM stray) AS d
), picked AS (
    SELECT r.id FROM ranked r JOIN quota q USING (queue)
    WHERE r.place <= q.room
    ORDER BY CASE WHEN %(fair)s THEN r.turn END, r.priority DESC, r.run_at, r.id
    LIMIT %(limit)s
), claimed AS (
    UPDATE x_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        claimed_by = %(worker_id)s,
        lease_token = gen_random_uuid(),
        visible_at = statement_timestamp() + make_interval(secs => %(visibility_timeout)s),
        started_at = COALESCE(j.started_at, statement_timestamp()),
        last_attempted_at = statement_timestamp(),
        attempted_by = %(worker_id)s,
        -- as claim_stamps: the version at the first claim, and a claim ends a park (issue 44)
        version = COALESCE(j.version, CASE WHEN j.started_at IS NULL
                                           THEN ((SELECT %(versions)s::jsonb) -> j.name ->> 0)::int
                                           ELSE 1 END),
        parked = false,
        updated_at = statement_timestamp()
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
      -- a stray row was not locked: another claim may have taken it meanwhile (wrapped, as
      -- the fenced writes are, so the row is still found by its id)
      AND (j.state IN ('ready', 'delayed', 'suspended')) IS TRUE
    RETURNING j.id, j.run_id, j.name, j.queue, j.input, j.attempt, j.max_attempts, j.lease_token,
              j.priority, j.tenant_id, j.enqueued_by, j.idempotency_key, j.created_at,
              j.lease_expiries, j.traceparent, j.run_at, j.limit_key,
              -- as jobs.sql's claim: past expires_at at its first claim (issue 29)
              j.expires_at <= statement_timestamp()
                  AND j.started_at = statement_timestamp() AS expired,
              j.snoozes, j.lapsed_holder, j.version
), spent AS (
    UPDATE x_limit_keys l
    SET starts = ARRAY(SELECT s.at FROM unnest(l.starts) AS s(at)
                       WHERE s.at > statement_timestamp() - make_interval(secs => p.window_s) ORDER BY s.at)
                 || array_fill(statement_timestamp(), ARRAY[c.n]),
        updated_at = statement_timestamp()
    FROM (SELECT limit_key, count(*)::int AS n FROM claimed GROUP BY limit_key) AS c, jobs p
    WHERE l.key = c.limit_key
      AND p.name = split_part(l.key, E'\x1f', 1)
      AND p.rate IS NOT NULL
      -- decided once: with no rate declared, the keys' table is not read at all
      AND (SELECT bool_or(rate IS NOT NULL) FROM jobs)
)
-- include: claimed_columns
       GREATEST(EXTRACT(EPOCH FROM statement_timestamp() - run_at)::float8, 0) AS waited
FROM claimed
ORDER BY priority DESC, run_at, id;

-- name: reclaim_lapsed
-- jobs.sql's claim_lapsed without its waiting half, for a limited claim's sweep: a lapsed
-- run is the same run taken again, so it keeps the slot it held and takes no new one, while the
-- waiting rows go through claim_limited. The rows it takes, their verdict and the claim are
-- claim_lapsed's own fragments, so the two sweeps answer alike (a job first claimed past its
-- expiry is expired at either: SPEC JCTL-02).
WITH lapsed AS (
-- include: lapsed_rows
-- include: lapsed_tail
), picked AS (
    SELECT id, claimed_by, visible_at, lapsed
    FROM lapsed AS due
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

-- name: reclaim_lapsed_paused
-- reclaim_lapsed, told of the operators' pauses (jobs.sql's claim_lapsed_paused does the same):
-- a paused job's or key's lapsed run waits until the pause is lifted (SPEC PAUSE-10).
WITH lapsed AS (
-- include: lapsed_rows
-- include: paused_rows
-- include: lapsed_tail
), picked AS (
    SELECT id, claimed_by, visible_at, lapsed
    FROM lapsed AS due
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

-- name: pause_key
-- RateLimited: no run of the key starts before now + `delay` (a later pause wins over an earlier
-- one, never the reverse).
INSERT INTO x_limit_keys (key, paused_until, updated_at)
VALUES (%(key)s, statement_timestamp() + make_interval(secs => %(delay)s), statement_timestamp())
ON CONFLICT (key) DO UPDATE
    SET paused_until = GREATEST(x_limit_keys.paused_until, EXCLUDED.paused_until),
        updated_at = statement_timestamp();

-- name: limit_usage
-- Each key's state with its runs: running now, and starts inside its window, for the queues
-- page, `xjobs queues --keys` and metrics. Keys idle for a day are not shown.
SELECT l.key, l.paused_until,
       (SELECT count(*) FROM x_jobs r
        WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead',
                               'cancelled'))
          AND r.limit_key = l.key) AS running,
       COALESCE(l.starts, '{}') AS starts
FROM x_limit_keys l
WHERE l.updated_at > now() - interval '1 day'
ORDER BY l.key
LIMIT %(limit)s;

-- name: prune_limit_keys
-- Retention for the keys' rows (worker/retention.py), a batch at a time: a key with no run waiting
-- or running, no pause in force, no start inside its job's window (`names`, `windows`: the
-- declared rates) and untouched for `idle_for` seconds goes, so the table holds the keys in use,
-- not every tenant ever seen. A row holds no count (a key's runs at once are its running rows),
-- so a pruned key is what a new one is, and the next claim that finds its work creates it again.
-- A key a claim holds is skipped (SKIP LOCKED): the next prune takes it. Each batch starts after
-- the last key the one before deleted (`after`), so kept keys are not read again batch by batch.
WITH gone AS (
    SELECT l.key FROM x_limit_keys l
    WHERE l.key > %(after)s
      AND l.updated_at <= statement_timestamp() - make_interval(secs => %(idle_for)s)
      AND (l.paused_until IS NULL OR l.paused_until <= statement_timestamp())
      AND NOT EXISTS (
          SELECT 1 FROM unnest(%(names)s::text[], %(windows)s::float8[]) AS r(name, window_s)
          WHERE r.name = split_part(l.key, E'\x1f', 1)
            AND EXISTS (SELECT 1 FROM unnest(l.starts) AS s(at)
                        WHERE s.at > statement_timestamp() - make_interval(secs => r.window_s)))
      AND NOT EXISTS (
          SELECT 1 FROM x_jobs w
          WHERE NOT (w.state IN ('running', 'done', 'failed', 'dead', 'cancelled'))
            AND w.limit_key IS NOT NULL AND w.limit_key = l.key)
      AND NOT EXISTS (
          SELECT 1 FROM x_jobs r
          WHERE NOT (r.state IN ('ready', 'delayed', 'suspended', 'done', 'failed', 'dead',
                                 'cancelled'))
            AND r.limit_key = l.key)
    ORDER BY l.key
    LIMIT %(batch)s
    FOR UPDATE OF l SKIP LOCKED
), deleted AS (
    DELETE FROM x_limit_keys l USING gone WHERE l.key = gone.key
    RETURNING l.key
)
-- the last key by the database's own order, where the next batch starts
SELECT count(*), max(key) FROM deleted;

-- name: set_queue_limit
-- An operator's cap on a queue's runs at once, fleet-wide (null: none); the row keeps its pause.
WITH upsert AS (
    INSERT INTO x_queue_controls (queue, concurrency, updated_at)
    VALUES (%(queue)s, %(concurrency)s, now())
    ON CONFLICT (queue) DO UPDATE
        SET concurrency = EXCLUDED.concurrency, updated_at = now()
    RETURNING queue, paused_at, paused_by, concurrency
)
SELECT queue, paused_at, paused_by, concurrency, pg_notify('xjobs_control', queue) FROM upsert;

-- name: unkeyed
-- Runs just published from the outbox whose job declares a limit (stamp_keys).
-- Every run under FAIR_SHARE (`every`): each gets its fair-share group's key.
SELECT id, name, input::text, tenant_id FROM x_jobs
WHERE id = ANY(%(ids)s::uuid[])
  AND (name = ANY(%(names)s::text[]) OR %(every)s)
  AND limit_key IS NULL;

-- name: stamp_keys
UPDATE x_jobs j SET limit_key = k.key
FROM unnest(%(ids)s::uuid[], %(keys)s::text[]) AS k(id, key)
WHERE j.id = k.id
RETURNING j.id;
