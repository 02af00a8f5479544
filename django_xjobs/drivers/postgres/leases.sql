-- The fleet concurrency slots of the PostgreSQL driver (x_job_leases), by name (SPEC SLOT-03/06).
-- Loaded once by drivers/postgres_leases.py. Times are the database clock's now(), never
-- Python's (DESIGN §7 Time); a row is live while expires_at > now(). No advisory locks: the
-- unique (lease_key, slot) index is the only arbiter (DESIGN §5, pooler-safe).

-- name: acquire_slot
-- One attempt at the lowest slot in 0..limit-1 without a live row in this statement's snapshot.
-- The insert either creates the row or takes over an expired one; the ON CONFLICT ... WHERE
-- re-checks expiry on the newest committed version, so two racers for one slot cannot both
-- win. Returns (candidate, granted): candidate NULL = every slot is live; granted NULL with a
-- candidate = a racer took that slot first (the caller tries again with a fresh snapshot).
WITH live AS (
    SELECT slot FROM x_job_leases
    WHERE lease_key = %(key)s AND expires_at > now()
), candidate AS (
    SELECT s.slot
    FROM generate_series(0, %(limit)s::int - 1) AS s(slot)
    WHERE NOT EXISTS (SELECT 1 FROM live WHERE live.slot = s.slot)
    ORDER BY s.slot
    LIMIT 1
), granted AS (
    INSERT INTO x_job_leases (lease_key, slot, holder, expires_at)
    SELECT %(key)s, candidate.slot, %(holder)s, now() + make_interval(secs => %(ttl)s::float8)
    FROM candidate
    ON CONFLICT (lease_key, slot) DO UPDATE
    SET holder = EXCLUDED.holder,
        expires_at = EXCLUDED.expires_at
    WHERE x_job_leases.expires_at <= now()
    RETURNING slot
)
SELECT (SELECT slot FROM candidate), (SELECT slot FROM granted);

-- name: renew_slot
-- Only the holder, and only while the slot is still live: a lapsed slot is never revived
-- (SPEC SLOT-06, SE-08, DRV-04 l).
UPDATE x_job_leases
SET expires_at = now() + make_interval(secs => %(ttl)s::float8)
WHERE lease_key = %(key)s
  AND slot = %(slot)s
  AND holder = %(holder)s
  AND expires_at > now();

-- name: release_slot
-- Only the holder's own row (live or lapsed); a row taken over by another holder stays.
DELETE FROM x_job_leases
WHERE lease_key = %(key)s AND slot = %(slot)s AND holder = %(holder)s;

-- name: held_slots
SELECT count(*) FROM x_job_leases WHERE lease_key = %(key)s AND expires_at > now();
