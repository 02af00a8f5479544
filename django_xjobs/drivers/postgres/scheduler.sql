-- The scheduler's durable watermark (x_scheduler_state) and its expiring-lease leader
-- (x_scheduler_leader), by name. Loaded once by scheduler/postgres.py. Never an advisory lock:
-- a lease row survives poolers and PgBouncer (SPEC SCHED-14/15, SE-40).

-- name: watermark
SELECT last_fired_at FROM x_scheduler_state WHERE task_name = %(task)s;

-- name: mark_fired
-- Forward only (SPEC SCHED-13, SE-41): a stale round never rewinds the watermark.
INSERT INTO x_scheduler_state (task_name, last_fired_at, updated_at)
VALUES (%(task)s, %(at)s, now())
ON CONFLICT (task_name) DO UPDATE
SET last_fired_at = GREATEST(x_scheduler_state.last_fired_at, EXCLUDED.last_fired_at),
    updated_at = now();

-- name: acquire
-- One upsert that wins when the key is free, already ours (a renewal), or expired.
INSERT INTO x_scheduler_leader (lock_key, holder, expires_at)
VALUES (%(key)s, %(holder)s, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (lock_key) DO UPDATE
SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE x_scheduler_leader.holder = EXCLUDED.holder OR x_scheduler_leader.expires_at <= now()
RETURNING holder;

-- name: confirm
-- Inside the dispatch transaction: still the leader, lease unexpired. FOR SHARE keeps a rival's
-- takeover waiting until this dispatch commits or rolls back.
SELECT 1 FROM x_scheduler_leader
WHERE lock_key = %(key)s AND holder = %(holder)s AND expires_at > now()
FOR SHARE;

-- name: release
DELETE FROM x_scheduler_leader WHERE lock_key = %(key)s AND holder = %(holder)s;

-- name: leader
-- Who leads now: the holder of an unexpired lease on the key, on the database clock.
SELECT holder FROM x_scheduler_leader WHERE lock_key = %(key)s AND expires_at > now();

-- name: pause_cron
-- Operators' standing orders per cron (x_cron_controls). The first pause wins: pausing a paused
-- cron keeps who paused it and when.
INSERT INTO x_cron_controls (cron, paused_at, paused_by, updated_at)
VALUES (%(cron)s, now(), %(by)s, now())
ON CONFLICT (cron) DO UPDATE
    SET paused_at = COALESCE(x_cron_controls.paused_at, EXCLUDED.paused_at),
        paused_by = CASE WHEN x_cron_controls.paused_at IS NULL
                         THEN EXCLUDED.paused_by ELSE x_cron_controls.paused_by END,
        updated_at = now()
RETURNING cron, paused_at, paused_by;

-- name: resume_cron
-- The row stays; only the pause goes. The watermark is untouched: the next round catches up.
INSERT INTO x_cron_controls (cron, paused_at, paused_by, updated_at)
VALUES (%(cron)s, NULL, NULL, now())
ON CONFLICT (cron) DO UPDATE SET paused_at = NULL, paused_by = NULL, updated_at = now()
RETURNING cron, paused_at, paused_by;

-- name: cron_controls
SELECT cron, paused_at, paused_by FROM x_cron_controls ORDER BY cron;

-- name: paused_crons
-- Once a round, by the leader only.
SELECT cron FROM x_cron_controls WHERE paused_at IS NOT NULL;

-- name: mark_run
-- A "run now" under a key: the one request that changes the key wins (returns a row) and
-- enqueues, in the same transaction; the same key again (a double click) returns nothing.
INSERT INTO x_cron_controls (cron, run_key, run_at, updated_at)
VALUES (%(cron)s, %(key)s, now(), now())
ON CONFLICT (cron) DO UPDATE
    SET run_key = EXCLUDED.run_key, run_at = EXCLUDED.run_at, updated_at = now()
    WHERE x_cron_controls.run_key IS DISTINCT FROM EXCLUDED.run_key
RETURNING run_at;
