-- name: create_schema
CREATE SCHEMA IF NOT EXISTS xjobs_clock;

-- name: create_now
-- STABLE like pg_catalog.now(): one value for a whole statement
CREATE OR REPLACE FUNCTION xjobs_clock.now() RETURNS timestamptz LANGUAGE sql STABLE AS
$$ SELECT COALESCE(NULLIF(current_setting('xjobs.now', true), '')::timestamptz, pg_catalog.now()) $$;

-- name: follow
-- The frozen time, and the search path with our now() first and pg_catalog explicitly last
-- (only then does a user function shadow a built-in one); says whether the function exists.
SELECT set_config('xjobs.now', %(now)s, %(local)s),
       CASE WHEN current_setting('search_path') LIKE 'xjobs_clock,%%' THEN NULL ELSE
           set_config('search_path', 'xjobs_clock, ' || current_setting('search_path')
                      || ', pg_catalog', %(local)s) END,
       to_regprocedure('xjobs_clock.now()') IS NOT NULL;

-- name: reset
-- an empty xjobs.now makes xjobs_clock.now() the server's again, in a transaction or not
SELECT set_config('xjobs.now', '', false);
