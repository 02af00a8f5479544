-- A tenant's rows counted and erased, a batch at a time (issue 46): its jobs with every step of
-- their runs, those moved to the history too (ERASE-04), its stored events, its staged outbox
-- rows and its fair-share limit key's row (`fair_key`, ERASE-05). Each batch is one statement
-- that locks at most `batch` rows of each table; rows a concurrent statement holds are skipped
-- (SKIP LOCKED) and left for the next batch. x_jobs_tenant_idx and x_job_history_tenant_idx
-- (migration 0034) find a tenant's jobs without reading the tables.

-- name: tenant_count
SELECT
    (SELECT count(*) FROM x_jobs WHERE tenant_id = %(tenant)s)
    + (SELECT count(*) FROM x_job_history WHERE tenant_id = %(tenant)s),
    (SELECT count(*) FROM x_jobs WHERE tenant_id = %(tenant)s AND state = 'running'),
    (SELECT count(*) FROM x_job_steps
     WHERE run_id = ANY(ARRAY(SELECT run_id FROM x_jobs WHERE tenant_id = %(tenant)s
                              UNION ALL
                              SELECT run_id FROM x_job_history WHERE tenant_id = %(tenant)s))),
    (SELECT count(*) FROM x_job_events WHERE tenant_id = %(tenant)s),
    (SELECT count(*) FROM x_outbox WHERE tenant_id = %(tenant)s),
    (SELECT count(*) FROM x_limit_keys WHERE key = %(fair_key)s);

-- name: tenant_erase
WITH doomed AS (
    SELECT id, run_id, state
    FROM x_jobs
    WHERE tenant_id = %(tenant)s AND (%(running)s OR state <> 'running')
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    SELECT id, run_id
    FROM x_job_history
    WHERE tenant_id = %(tenant)s
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), steps AS (
    DELETE FROM x_job_steps
    WHERE run_id = ANY(ARRAY(SELECT run_id FROM doomed UNION ALL SELECT run_id FROM moved))
    RETURNING 1
), jobs AS (
    DELETE FROM x_jobs WHERE id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING state
), moved_jobs AS (
    DELETE FROM x_job_history WHERE id = ANY(ARRAY(SELECT id FROM moved))
    RETURNING state
), keys AS (
    DELETE FROM x_limit_keys WHERE key = %(fair_key)s
    RETURNING 1
), events AS (
    DELETE FROM x_job_events WHERE id = ANY(ARRAY(
        SELECT id FROM x_job_events WHERE tenant_id = %(tenant)s
        LIMIT %(batch)s FOR UPDATE SKIP LOCKED))
    RETURNING 1
), outbox AS (
    DELETE FROM x_outbox WHERE id = ANY(ARRAY(
        SELECT id FROM x_outbox WHERE tenant_id = %(tenant)s
        LIMIT %(batch)s FOR UPDATE SKIP LOCKED))
    RETURNING 1
)
SELECT
    (SELECT count(*) FROM jobs) + (SELECT count(*) FROM moved_jobs),
    (SELECT count(*) FROM jobs WHERE state = 'running'),
    (SELECT count(*) FROM steps),
    (SELECT count(*) FROM events),
    (SELECT count(*) FROM outbox),
    (SELECT count(*) FROM keys);
