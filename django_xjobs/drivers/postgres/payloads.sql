-- Stored payloads rewritten in place, a batch at a time (issue 46): `xjobs rotate-keys` walks the
-- sealed payloads of one place in key order (the primary key of x_jobs, x_outbox and
-- x_job_events, x_job_history's id index, the unique run_id, name of x_job_steps: each walk reads an index range, never
-- the table from the start again) and swaps a batch, each row fenced on the value it read, so
-- one rewritten meanwhile (a replace, a settle, a step written again) is left as it is. A sealed
-- payload is an object of one key, crypt.py's MARK. With --encrypt-clear it walks the clear
-- payloads the same way (rows written before the keys were set) and seals them.

-- name: sealed_outbox_input
SELECT id, '' AS name, input, job FROM x_outbox
WHERE id > %(after)s AND jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_job_input
SELECT id, '' AS name, input, name FROM x_jobs
WHERE id > %(after)s AND jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_job_result
SELECT id, '' AS name, result, name FROM x_jobs
WHERE id > %(after)s AND jsonb_typeof(result) = 'object' AND result ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_history_input
SELECT id, '' AS name, input, name FROM x_job_history
WHERE id > %(after)s AND jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_history_result
SELECT id, '' AS name, result, name FROM x_job_history
WHERE id > %(after)s AND jsonb_typeof(result) = 'object' AND result ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: sealed_step_output
SELECT run_id, name, output, '' AS job FROM x_job_steps
WHERE (run_id, name) > (%(after)s, %(after_name)s)
  AND jsonb_typeof(output) = 'object' AND output ? 'xjobs:fernet'
ORDER BY run_id, name
LIMIT %(limit)s;

-- name: sealed_event_data
SELECT id, '' AS name, payload, '' AS job FROM x_job_events
WHERE id > %(after)s AND jsonb_typeof(payload) = 'object' AND payload ? 'xjobs:fernet'
ORDER BY id
LIMIT %(limit)s;

-- name: unsealed_outbox_input
SELECT id, '' AS name, input, job FROM x_outbox
WHERE id > %(after)s AND input IS NOT NULL AND input <> 'null'::jsonb
  AND NOT (jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet')
ORDER BY id
LIMIT %(limit)s;

-- name: unsealed_job_input
SELECT id, '' AS name, input, name FROM x_jobs
WHERE id > %(after)s AND input IS NOT NULL AND input <> 'null'::jsonb
  AND NOT (jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet')
ORDER BY id
LIMIT %(limit)s;

-- name: unsealed_job_result
SELECT id, '' AS name, result, name FROM x_jobs
WHERE id > %(after)s AND result IS NOT NULL AND result <> 'null'::jsonb
  AND NOT (jsonb_typeof(result) = 'object' AND result ? 'xjobs:fernet')
ORDER BY id
LIMIT %(limit)s;

-- name: unsealed_history_input
SELECT id, '' AS name, input, name FROM x_job_history
WHERE id > %(after)s AND input IS NOT NULL AND input <> 'null'::jsonb
  AND NOT (jsonb_typeof(input) = 'object' AND input ? 'xjobs:fernet')
ORDER BY id
LIMIT %(limit)s;

-- name: unsealed_history_result
SELECT id, '' AS name, result, name FROM x_job_history
WHERE id > %(after)s AND result IS NOT NULL AND result <> 'null'::jsonb
  AND NOT (jsonb_typeof(result) = 'object' AND result ? 'xjobs:fernet')
ORDER BY id
LIMIT %(limit)s;

-- name: unsealed_step_output
-- a completed step's value only: a sleep's and a waiting step's records (a wake_at) and a call
-- step's (its children) are read as they are stored
SELECT run_id, name, output, '' AS job FROM x_job_steps
WHERE (run_id, name) > (%(after)s, %(after_name)s)
  AND status = 'completed' AND wake_at IS NULL
  AND output IS NOT NULL AND output <> 'null'::jsonb
  AND NOT (jsonb_typeof(output) = 'object' AND (output ? 'xjobs:fernet' OR output ? 'children'))
ORDER BY run_id, name
LIMIT %(limit)s;

-- name: unsealed_event_data
SELECT id, '' AS name, payload, '' AS job FROM x_job_events
WHERE id > %(after)s AND payload IS NOT NULL AND payload <> 'null'::jsonb
  AND NOT (jsonb_typeof(payload) = 'object' AND payload ? 'xjobs:fernet')
ORDER BY id
LIMIT %(limit)s;

-- name: reseal_outbox_input
UPDATE x_outbox AS o SET input = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE o.id = c.row AND o.input = c.old;

-- name: reseal_job_input
UPDATE x_jobs AS j SET input = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE j.id = c.row AND j.input = c.old;

-- name: reseal_job_result
UPDATE x_jobs AS j SET result = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE j.id = c.row AND j.result = c.old;

-- name: reseal_history_input
UPDATE x_job_history AS h SET input = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE h.id = c.row AND h.input = c.old;

-- name: reseal_history_result
UPDATE x_job_history AS h SET result = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE h.id = c.row AND h.result = c.old;

-- name: reseal_step_output
UPDATE x_job_steps AS s SET output = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE s.run_id = c.row AND s.name = c.name AND s.output = c.old;

-- name: reseal_event_data
UPDATE x_job_events AS e SET payload = c.new
FROM jsonb_to_recordset(%(changes)s::jsonb) AS c(row uuid, name text, old jsonb, new jsonb)
WHERE e.id = c.row AND e.payload = c.old;
