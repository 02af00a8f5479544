-- A queue's waiting jobs moved from one jobs database to another (issue 48, SPEC SHARD-30): a
-- page read and locked in the source with its run's steps, written in the target, deleted in
-- the source in the same transaction as the read. A job and its steps travel as each row's own
-- jsonb and are read back into the target's row types, so every column moves, a later
-- migration's too, without a list to keep. Only jobs nothing links move: a batch's member, a
-- job waiting for others (`after`, children) or waited for stays with them (SPEC SHARD-31).

-- fragment: movable
    j.queue = %(queue)s
    AND j.state IN ('ready', 'delayed', 'suspended')

-- fragment: unlinked
    j.batch_id IS NULL AND j.after IS NULL AND j.dependants IS NULL AND j.waiting_on IS NULL

-- name: move_holds
SELECT
    (SELECT count(*) FROM x_jobs j WHERE j.queue = %(queue)s AND j.state = 'running'),
    (SELECT count(*) FROM x_jobs j WHERE
-- include: movable
    ),
    ARRAY(
        SELECT j.id FROM x_jobs j
        WHERE
-- include: movable
            AND NOT (
-- include: unlinked
            )
        ORDER BY j.id
        LIMIT %(limit)s
    );

-- name: move_page
-- The lowest ids first, locked until the transaction deletes them: a claim's SKIP LOCKED passes
-- over them, and rows a claim holds now are passed over here, left for the next page.
SELECT
    j.id,
    to_jsonb(j)::text,
    (SELECT coalesce(jsonb_agg(to_jsonb(s) - 'id' ORDER BY s.id), '[]'::jsonb)
     FROM x_job_steps s WHERE s.run_id = j.run_id)::text
FROM x_jobs j
WHERE
-- include: movable
    AND
-- include: unlinked
ORDER BY j.id
LIMIT %(limit)s
FOR UPDATE OF j SKIP LOCKED;

-- name: move_forget
-- The page just written elsewhere, still locked by this transaction: its rows and their steps.
WITH gone AS (
    DELETE FROM x_jobs
    WHERE id = ANY(%(ids)s::uuid[]) AND state IN ('ready', 'delayed', 'suspended')
    RETURNING id, run_id
), steps AS (
    DELETE FROM x_job_steps WHERE run_id IN (SELECT run_id FROM gone)
    RETURNING 1
)
SELECT id FROM gone ORDER BY id;

-- name: move_take
-- Jobs from another database's move_page: a job this database holds by id already (a move
-- repeated after a crash between the two databases' commits), or whose live idempotency key a
-- job here holds, is left as it is (ON CONFLICT DO NOTHING); the steps of the jobs written get
-- this table's own ids. The workers of each queue written are woken.
-- The star expands the parameter read back as this table's own row type, so its columns are
-- the insert's, in its order, whatever a migration added.
WITH written AS (
    INSERT INTO x_jobs
    SELECT r.* FROM jsonb_populate_recordset(NULL::x_jobs, %(rows)s::jsonb) AS r
    ON CONFLICT DO NOTHING
    RETURNING id, run_id, queue
), steps AS (
    INSERT INTO x_job_steps
    SELECT (jsonb_populate_record(
        NULL::x_job_steps,
        s || jsonb_build_object('id', nextval(pg_get_serial_sequence('x_job_steps', 'id')))
    )).*
    FROM jsonb_array_elements(%(steps)s::jsonb) AS s
    WHERE (s ->> 'run_id')::uuid IN (SELECT run_id FROM written)
    ON CONFLICT DO NOTHING
    RETURNING 1
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues FROM (SELECT DISTINCT queue FROM written) AS q
)
SELECT id FROM written, woken ORDER BY id;
