-- What a read surface says about the database it read (drivers/reading.py, SPEC READ-02).

-- name: read_lag
-- On a standby, how old its data is: the time since the last transaction it replayed committed
-- on the primary (NULL until it has replayed one). A fleet's heartbeats commit every few
-- seconds, so on a live system this is the replay delay; on an idle primary it overstates,
-- never understates. On a primary the figures are current: 0. The wall clock, not now(): a
-- long transaction or a test's frozen now() must not age the figures.
SELECT pg_is_in_recovery() AS standby,
       CASE WHEN pg_is_in_recovery()
            THEN greatest(0, extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()))
            ELSE 0
       END::float8 AS lag_seconds
