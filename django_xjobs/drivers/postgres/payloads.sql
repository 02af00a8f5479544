-- Stored payloads rewritten in place, a batch at a time (issue 46): `xjobs rotate-keys` walks the
-- sealed payloads of one place in key order (the primary key of x_jobs, the unique run_id, name
-- of x_job_steps: each walk reads an index range, never the table from the start again) and
-- swaps a batch, each row fenced on the value it read, so one rewritten meanwhile (a replace, a
-- settle, a step written again) is left as it is. A sealed payload is an object of one key,
-- crypt.py's MARK.

-- name: sealed_job_input
SELECT id, '' AS name, input FROM x_jobs
WHERE id > %(after)s AND jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_job_result
SELECT id, '' AS name, result FROM x_jobs
WHERE id > %(after)s AND jsonb_typeof(result) = 'object' AND result ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_step_output
SELECT run_id, name, output FROM x_job_steps
WHERE (run_id, name) > (%(after)s, %(after_name)s)
  AND jsonb_typeof(output) = 'object' AND output ? 'xjobs:fernet'
ORDER BY run_id, name
LIMIT %(limit)s;

-- name: reseal_job_input
UPDATE x_jobs AS j SET input = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE j.id = c.row AND j.input = c.old;

-- name: reseal_job_result
UPDATE x_jobs AS j SET result = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE j.id = c.row AND j.result = c.old;

-- name: reseal_step_output
UPDATE x_job_steps AS s SET output = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE s.run_id = c.row AND s.name = c.name AND s.output = c.old;
