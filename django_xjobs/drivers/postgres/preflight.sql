-- name: table_present
-- Positional: run on a plain cursor before any role statement, outside the prepared path.
SELECT to_regclass(%s) IS NOT NULL;

-- name: database_present
-- On the server's "postgres" database, as createdb does, when the connect itself failed.
SELECT 1 FROM pg_database WHERE datname = %s;
