-- Session settings of a role's connection (worker claim loop, settler, heartbeat, relay,
-- scheduler). Loaded by drivers/connections.py; values are milliseconds. set_config(..., false) sets
-- the session's value: it outlives the statement (and, inside a transaction, ends with it).

-- name: bound_session
SELECT set_config('statement_timeout', %(statement_ms)s, false),
       set_config('lock_timeout', %(lock_ms)s, false)

-- name: unbound_session
-- Back to what the session started with, when a role ran on a caller's thread.
SELECT set_config(name, reset_val, false)
FROM pg_settings
WHERE name IN ('statement_timeout', 'lock_timeout')
