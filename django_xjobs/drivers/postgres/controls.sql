-- Operators' standing orders per queue, fleet-wide (x_queue_controls). Never on the claim's
-- path: a worker reads the paused set when told it changed (NOTIFY on xjobs_control) and once a
-- poll interval, and leaves paused queues out of the queues it claims from.

-- name: pause_queue
-- The first pause wins: pausing a paused queue keeps who paused it and when, and takes the new
-- pause's end (`until`: NULL, until resumed). A pause whose end has passed is over (issue 45,
-- SPEC PAUSE-01): the next pause starts afresh. The NOTIFY is delivered at commit, so a woken
-- worker reads the new row.
WITH upsert AS (
    INSERT INTO x_queue_controls (queue, paused_at, paused_by, paused_until, updated_at)
    VALUES (%(queue)s, now(), %(by)s, %(until)s::timestamptz, now())
    ON CONFLICT (queue) DO UPDATE
        SET paused_at = CASE WHEN x_queue_controls.paused_at IS NOT NULL
                                  AND (x_queue_controls.paused_until IS NULL
                                       OR x_queue_controls.paused_until > now())
                             THEN x_queue_controls.paused_at ELSE EXCLUDED.paused_at END,
            paused_by = CASE WHEN x_queue_controls.paused_at IS NOT NULL
                                  AND (x_queue_controls.paused_until IS NULL
                                       OR x_queue_controls.paused_until > now())
                             THEN x_queue_controls.paused_by ELSE EXCLUDED.paused_by END,
            paused_until = EXCLUDED.paused_until,
            updated_at = now()
    RETURNING queue, paused_at, paused_by, paused_until
)
SELECT queue, paused_at, paused_by, paused_until, pg_notify('xjobs_control', queue) FROM upsert

-- name: resume_queue
-- The row stays (later per-queue settings live beside the pause); only the pause goes.
WITH upsert AS (
    INSERT INTO x_queue_controls (queue, paused_at, paused_by, updated_at)
    VALUES (%(queue)s, NULL, NULL, now())
    ON CONFLICT (queue) DO UPDATE
        SET paused_at = NULL, paused_by = NULL, paused_until = NULL, updated_at = now()
    RETURNING queue, paused_at, paused_by
)
SELECT queue, paused_at, paused_by, pg_notify('xjobs_control', queue) FROM upsert

-- name: queue_controls
-- A pause whose end has passed reads as none: it ended by itself (SPEC PAUSE-01).
SELECT queue,
       CASE WHEN active THEN paused_at END,
       CASE WHEN active THEN paused_by END,
       concurrency,
       CASE WHEN active THEN paused_until END
FROM (
    SELECT queue, paused_at, paused_by, paused_until, concurrency,
           paused_at IS NOT NULL AND (paused_until IS NULL OR paused_until > now()) AS active
    FROM x_queue_controls
) AS c
ORDER BY queue

-- name: paused_queues
-- Read by every worker once a poll interval: a pause past its end drops out of the set with
-- no one resuming it (SPEC PAUSE-01).
SELECT queue FROM x_queue_controls
WHERE paused_at IS NOT NULL
  AND (paused_until IS NULL OR paused_until > now())

-- name: pause_job
-- An operator's pause of a job name or of a limit key until resumed (issue 45, SPEC PAUSE-04,
-- PAUSE-05), as pause_queue pauses a queue: the first pause in force wins its paused_at and
-- paused_by, the new one sets the end (`until`: NULL, until resumed), and one past its end is
-- over, so the next starts afresh. The NOTIFY tells each worker to read the pauses again.
WITH upsert AS (
    INSERT INTO x_job_controls (target, name, limit_key, paused_at, paused_by, paused_until,
                                updated_at)
    VALUES (%(target)s, %(name)s, %(key)s, now(), %(by)s, %(until)s::timestamptz, now())
    ON CONFLICT (target) DO UPDATE
        SET paused_at = CASE WHEN x_job_controls.paused_until IS NULL
                                  OR x_job_controls.paused_until > now()
                             THEN x_job_controls.paused_at ELSE EXCLUDED.paused_at END,
            paused_by = CASE WHEN x_job_controls.paused_until IS NULL
                                  OR x_job_controls.paused_until > now()
                             THEN x_job_controls.paused_by ELSE EXCLUDED.paused_by END,
            paused_until = EXCLUDED.paused_until,
            updated_at = now()
    RETURNING name, limit_key, paused_at, paused_by, paused_until
)
SELECT name, limit_key, paused_at, paused_by, paused_until, pg_notify('xjobs_control', name)
FROM upsert

-- name: resume_job
-- The pause goes with its row; resuming a key also lifts the pause in its x_limit_keys row (an
-- operator's with an end, or a RateLimited's): the operator says its runs may start again.
-- Answers whether a pause was in force.
WITH gone AS (
    DELETE FROM x_job_controls WHERE target = %(target)s
    RETURNING paused_until IS NULL OR paused_until > now() AS active
), lifted AS (
    UPDATE x_limit_keys SET paused_until = NULL, updated_at = now()
    WHERE %(key)s::text IS NOT NULL AND key = %(target)s
      AND paused_until > statement_timestamp()
    RETURNING key
)
SELECT EXISTS (SELECT 1 FROM gone WHERE active) OR EXISTS (SELECT 1 FROM lifted),
       pg_notify('xjobs_control', %(name)s)

-- name: job_pauses
-- Read by every worker once a poll interval and when told: a pause past its end drops out with
-- no one resuming it (SPEC PAUSE-05).
SELECT name, limit_key, paused_at, paused_by, paused_until FROM x_job_controls
WHERE paused_until IS NULL OR paused_until > now()
ORDER BY target
