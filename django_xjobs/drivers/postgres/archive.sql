-- The history of finished jobs (x_job_history, issue 46, HIST-01..), by name. Loaded by
-- drivers/postgres/archive.py, which names the columns a move copies (``{columns}``, and
-- ``{j_columns}`` each as j.<column>: every column of JobColumns, so x_jobs's column order does
-- not matter and no statement reads ``*``, SPEC DB-04) and a day's partition.

-- name: now
-- The database's clock, which retention measures a day's age by.
SELECT now();

-- name: oldest_finished
-- Per finished state, its oldest row still in x_jobs (x_jobs_finished_idx: one index probe a
-- state), and the database's today: the days the next move needs a partition for.
SELECT s.state,
       (SELECT min(j.updated_at) FROM x_jobs j WHERE j.state = s.state),
       now()
FROM unnest(%(states)s::text[]) AS s(state);

-- name: partitions
-- Every day's partition of the history: its state, its name and its lower bound (the text
-- PostgreSQL keeps, parsed by the caller: FOR VALUES FROM ('...') TO ('...')).
SELECT parent.relname, child.relname, pg_get_expr(child.relpartbound, child.oid)
FROM pg_inherits i
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_class child ON child.oid = i.inhrelid
JOIN pg_inherits top ON top.inhrelid = parent.oid
WHERE top.inhparent = 'x_job_history'::regclass
ORDER BY child.relname;

-- name: lock_partitions
-- One creator or dropper of partitions at a time, fleet-wide: two workers creating the same
-- day would otherwise race to the same name (held to the end of the transaction).
SELECT pg_advisory_xact_lock(hashtext('x_job_history'));

-- name: bound_ddl
-- HIST-15: a day's partition made or dropped waits this long for its locks, then fails: the
-- DROP takes an ACCESS EXCLUSIVE lock on its state's table, and a lock waiting behind a slow
-- reader queues every later read of that state behind it (to the end of the transaction).
SELECT set_config('lock_timeout', %(ms)s, true);

-- name: move_finished
-- HIST-02: one batch of finished rows older than the grace leaves x_jobs and enters the
-- history in one statement: nothing is lost or copied twice, whatever fails. The settle is not
-- touched (its statements per job stay as they are); FOR UPDATE SKIP LOCKED passes a row an
-- operator's retry or another mover holds. finished_at is the settle's updated_at.
WITH picked AS (
    SELECT id FROM x_jobs
    WHERE state IN ('done', 'failed', 'dead', 'cancelled')
      AND updated_at < now() - make_interval(secs => %(grace)s)
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM x_jobs j USING picked WHERE j.id = picked.id
    RETURNING {j_columns}
)
INSERT INTO x_job_history ({columns}, finished_at)
SELECT {columns}, updated_at FROM moved;

-- name: restore
-- HIST-05: an operator's retry of a finished job that lives in the history brings its row
-- back to x_jobs as it was, in the retry's transaction; the retry then runs as on any row.
WITH back AS (
    DELETE FROM x_job_history WHERE id = %(id)s RETURNING {columns}
)
INSERT INTO x_jobs ({columns})
SELECT {columns} FROM back
RETURNING id;

-- name: moved_ids
-- HIST-13: which of these jobs live in the history, with their runs (x_job_history_id_idx).
SELECT id, run_id FROM x_job_history WHERE id = ANY(%(ids)s::uuid[]);

-- name: partition_steps
-- HIST-03: the step records of the jobs of a day about to be dropped (x_job_steps holds a
-- finished run's steps), in one statement: a hash join of the day's run ids against the
-- steps, where a batch per 1,000 jobs cost a round trip each for a day with no steps at all.
-- No one else writes these rows (their jobs have ended), so the long delete blocks nobody.
DELETE FROM x_job_steps s USING {partition} p WHERE s.run_id = p.run_id;
