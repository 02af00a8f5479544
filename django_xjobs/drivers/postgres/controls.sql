-- Operators' standing orders per queue, fleet-wide (x_queue_controls). Never on the claim's
-- path: a worker reads the paused set when told it changed (NOTIFY on xjobs_control) and once a
-- poll interval, and leaves paused queues out of the queues it claims from.

-- name: pause_queue
-- The first pause wins: pausing a paused queue keeps who paused it and when. The NOTIFY is
-- delivered at commit, so a woken worker reads the new row.
WITH upsert AS (
    INSERT INTO x_queue_controls (queue, paused_at, paused_by, updated_at)
    VALUES (%(queue)s, now(), %(by)s, now())
    ON CONFLICT (queue) DO UPDATE
        SET paused_at = COALESCE(x_queue_controls.paused_at, EXCLUDED.paused_at),
            paused_by = CASE WHEN x_queue_controls.paused_at IS NULL
                             THEN EXCLUDED.paused_by ELSE x_queue_controls.paused_by END,
            updated_at = now()
    RETURNING queue, paused_at, paused_by
)
SELECT queue, paused_at, paused_by, pg_notify('xjobs_control', queue) FROM upsert

-- name: resume_queue
-- The row stays (later per-queue settings live beside the pause); only the pause goes.
WITH upsert AS (
    INSERT INTO x_queue_controls (queue, paused_at, paused_by, updated_at)
    VALUES (%(queue)s, NULL, NULL, now())
    ON CONFLICT (queue) DO UPDATE
        SET paused_at = NULL, paused_by = NULL, updated_at = now()
    RETURNING queue, paused_at, paused_by
)
SELECT queue, paused_at, paused_by, pg_notify('xjobs_control', queue) FROM upsert

-- name: queue_controls
SELECT queue, paused_at, paused_by, concurrency FROM x_queue_controls ORDER BY queue

-- name: paused_queues
SELECT queue FROM x_queue_controls WHERE paused_at IS NOT NULL
