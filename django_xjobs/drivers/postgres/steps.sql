-- The step and event stores of the PostgreSQL driver (x_job_steps, x_job_events), by name.
-- Loaded once by drivers/postgres_steps.py. Every time is the database's now(): a publisher and
-- a worker on two machines compare times on one clock (issue 11, SPEC EVT-02/03).
-- The run's fence is written `(state = 'running') IS TRUE` so it is looked up by its id
-- whatever the statistics say (see jobs.sql's header).

-- name: now
-- The clock the step runner decides sleeps and waits on, the same one the rows are written with.
SELECT now();

-- name: list_steps
-- Every record of a run, in the order the steps were first reached (SPEC STEP-06: one read).
SELECT run_id, name, status, output, started_at, completed_at, wake_at, event, correlation_key,
       error, attempts, position, match, any_tenant
FROM x_job_steps
WHERE run_id = %(run_id)s
ORDER BY position NULLS LAST, started_at, id;

-- name: put_step
-- Upsert one record, only while the job is running under this claim's token (SPEC STEP-17,
-- DESIGN Q-01). FOR SHARE holds off a re-claim until the write is in. The upsert keeps the
-- first started_at, position, event, correlation key, match, any_tenant and a waiting step's
-- job id (SPEC §14, EVT-06: what a publish releases the step by); times the caller leaves
-- out are stamped with statement_timestamp(): now() inside an atomic step's block is when the
-- block began, and a step's record must say when it ended. A start left out is `ran_for`
-- seconds (the body's run time, measured by the runner) before that (issue 23: every step
-- read 0.000 s).
-- An atomic step (ctx.step.atomic, issue 17) runs this as the LAST statement of its block's
-- transaction: the FOR SHARE row lock then lasts until that commit, so no re-claim, cancel or
-- expiry can slip between this check and the commit of the block's writes. Taken last, it is
-- held only for the commit: the heartbeat's UPDATE waits that long at most, a claim's SKIP
-- LOCKED passes the row by, and the lock order is always the block's own rows, then the job
-- row (nothing takes a job row first and then an application row), so no deadlock forms.
INSERT INTO x_job_steps (run_id, name, status, output, started_at, completed_at, wake_at, event,
                         correlation_key, match, any_tenant, job_id, error, attempts, position)
SELECT %(run_id)s, %(name)s, %(status)s, %(output)s::jsonb,
       COALESCE(%(started_at)s::timestamptz,
                statement_timestamp() - make_interval(secs => COALESCE(%(ran_for)s, 0))),
       CASE WHEN %(status)s = 'completed'
            THEN COALESCE(%(completed_at)s::timestamptz, statement_timestamp()) END,
       %(wake_at)s, %(event)s, %(correlation_key)s, %(match)s::jsonb, %(any_tenant)s,
       CASE WHEN %(status)s = 'waiting' THEN %(job_id)s::uuid END,
       %(error)s, %(attempts)s, %(position)s
FROM (SELECT 1 FROM x_jobs
      WHERE id = %(job_id)s AND (state = 'running') IS TRUE AND lease_token = %(lease_token)s
      FOR SHARE) AS held
ON CONFLICT (run_id, name) DO UPDATE
SET status = EXCLUDED.status,
    output = EXCLUDED.output,
    completed_at = EXCLUDED.completed_at,
    wake_at = EXCLUDED.wake_at,
    error = EXCLUDED.error,
    attempts = EXCLUDED.attempts,
    position = COALESCE(x_job_steps.position, EXCLUDED.position),
    -- a step waiting since before migration 0026 has none: its next write gives them
    match = COALESCE(x_job_steps.match, EXCLUDED.match),
    any_tenant = COALESCE(x_job_steps.any_tenant, EXCLUDED.any_tenant),
    job_id = COALESCE(x_job_steps.job_id, EXCLUDED.job_id);

-- name: publish_event
-- published_at is the database's now(), never the publisher's clock (SPEC EVT-01). In the same
-- statement, so in the publisher's transaction, every run parked on a step this event answers
-- is released (issue 43, SPEC EVT-06): due now, and the workers of its queue woken at commit,
-- as a settle releases a parent whose last child ended. A rollback releases nothing. The step
-- is matched by find_event's rule turned around: its event name, its tenant (the run's) unless
-- it takes any, its correlation key if it has one, its match fields, and first reached at or
-- before the event's publication (this statement's now(), the event's published_at).
-- A run still running when this statement sees its waiting step (it wrote the step and is about
-- to park) is marked instead: its park (jobs.sql's suspend) is due at once. The row lock closes
-- the race: a park that took the row first is seen parked here once it commits, and a park
-- that comes second waits for this transaction and reads the mark as it stands then. A run
-- whose waiting step this statement cannot see yet (written, not committed) finds the event
-- when it parks if the publisher committed by then, else at its next look (event_poll).
-- The rows are locked in id order: two publishes releasing the same runs cannot deadlock.
-- The event row is inserted last, with how many runs it released (parked or marked) and what
-- the publish did before this statement (SPEC EVT-11): still one round trip. The steps are
-- matched on `data`, the event's data as given; the row stores `payload`, the same data sealed
-- under ENCRYPTION_KEYS when keys are set (SPEC CRYPT-08): only the stored copy is a token.
WITH waiting AS (
    -- x_job_steps_waiting_idx holds only waiting steps; each names its job, read by its key
    SELECT j.id
    FROM x_job_steps s
    JOIN x_jobs j ON j.id = s.job_id
    WHERE s.event = %(name)s
      AND s.status = 'waiting'
      AND j.run_id = s.run_id
      AND (j.state IN ('suspended', 'running')) IS TRUE
      AND s.started_at <= now()
      AND (s.correlation_key IS NULL OR s.correlation_key = %(correlation_key)s::text)
      AND (s.any_tenant IS TRUE OR j.tenant_id IS NOT DISTINCT FROM %(tenant_id)s::text)
      AND (COALESCE(s.match, '{}'::jsonb) = '{}'::jsonb OR %(data)s::jsonb @> s.match)
    ORDER BY j.id
    FOR UPDATE OF j
), released AS (
    UPDATE x_jobs
    SET state = CASE WHEN state = 'suspended' THEN 'ready' ELSE state END,
        run_at = CASE WHEN state = 'suspended' THEN now() ELSE run_at END,
        event_released_at = CASE WHEN state = 'running' THEN now() ELSE event_released_at END,
        updated_at = CASE WHEN state = 'suspended' THEN now() ELSE updated_at END
    WHERE id = ANY (ARRAY(SELECT id FROM waiting))
      AND (state IN ('suspended', 'running')) IS TRUE
    RETURNING queue, state
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM released WHERE state = 'ready') AS q
), event AS (
    INSERT INTO x_job_events
      (id, name, payload, correlation_key, published_at, expires_at, tenant_id, released,
       started, cancelled, refused)
    SELECT %(id)s, %(name)s, %(payload)s::jsonb, %(correlation_key)s, now(),
           now() + make_interval(secs => %(ttl)s), %(tenant_id)s,
           (SELECT count(*) FROM released), %(started)s, %(cancelled)s, %(refused)s::jsonb
    RETURNING id, name, payload, correlation_key, published_at, expires_at, tenant_id,
              released, started, cancelled, refused
)
SELECT e.id, e.name, e.payload, e.correlation_key, e.published_at, e.expires_at, e.tenant_id,
       e.released, e.started, e.cancelled, e.refused
FROM event e, woken;

-- name: cancel_on_event
-- An event's cancel_on (issue 43, SPEC EVT-09): every live run of one job, of the event's
-- tenant only (no tenant matches no tenant), whose input has each listed field equal to the
-- event's, cancelled as jobs.sql's cancel cancels one: the cleared lease token stops a running
-- holder (its heartbeat, step writes and settles are fenced on it), a batch member is counted
-- in its batch, what waits for it is released. The runs are found on the live-key index
-- (x_jobs_name_tenant_idempotency_live_idx: name, tenant, live states): that job's live rows
-- of that tenant, their input filtered by containment, then by equality (`@>` alone would
-- take a list that holds the value). Locked in id order, and fenced on the live states: a
-- settle that committed first leaves the run to it; one that comes second finds no token.
-- Answers how many it cancelled and those that were parked or running (the state the lock
-- read): each may be a parent whose call step waits for children, which the caller cancels
-- next, as cancel_job does (SPEC CANCEL-07, CHILD-06).
WITH matched AS (
    SELECT id, state
    FROM x_jobs
    WHERE name = %(name)s
      AND COALESCE(tenant_id, '') = COALESCE(%(tenant_id)s::text, '')
      AND tenant_id IS NOT DISTINCT FROM %(tenant_id)s::text
      AND state IN ('ready', 'delayed', 'running', 'suspended')
      AND input @> %(match)s::jsonb
      AND NOT EXISTS (SELECT 1 FROM jsonb_each(%(match)s::jsonb) AS f
                      WHERE input -> f.key <> f.value)
    ORDER BY id
    FOR UPDATE
), settled AS (
UPDATE x_jobs
SET state = 'cancelled',
    stop_reason = 'cancelled',
    lease_expiries = 0,
    lapsed_holder = NULL,
    last_error = %(reason)s::text,
    visible_at = NULL,
    claimed_by = NULL,
    lease_token = NULL,
    updated_at = now()
WHERE id = ANY (ARRAY(SELECT id FROM matched))
  AND (state IN ('ready', 'delayed', 'running', 'suspended')) IS TRUE
RETURNING id, queue, state, batch_id, dependants
-- include: batch_members
-- include: batch_counted
-- include: fired
), woken AS (
    SELECT count(pg_notify('xjobs', queue)) AS queues
    FROM (SELECT DISTINCT queue FROM fired WHERE state = 'ready') AS q
)
SELECT count(*),
       COALESCE(array_agg(s.id ORDER BY s.id)
                FILTER (WHERE m.state IN ('suspended', 'running')), '{}'::uuid[])
FROM settled s
JOIN matched m ON m.id = s.id
CROSS JOIN woken;

-- name: find_event
-- The earliest live event (SPEC EVT-02); `match` holds scalar fields, so containment is equality.
-- Of the waiter's tenant only (no tenant matches no tenant) unless it opted into any tenant. No
-- match takes any data: `'null' @> '{}'` is false, and an event published without data (or with
-- a list) was never found here, while the memory driver found it.
SELECT id, name, payload, correlation_key, published_at, expires_at, tenant_id, released,
       started, cancelled, refused
FROM x_job_events
WHERE name = %(name)s
  AND expires_at > now()
  AND published_at >= %(after)s
  AND (%(correlation_key)s::text IS NULL OR correlation_key = %(correlation_key)s)
  AND (%(any_tenant)s OR tenant_id IS NOT DISTINCT FROM %(tenant_id)s::text)
  AND (%(match)s::jsonb = '{}'::jsonb OR payload @> %(match)s::jsonb)
ORDER BY published_at, id
LIMIT 1;

-- name: find_event_candidates
-- find_event for a waiter with match fields while ENCRYPTION_KEYS are set (SPEC CRYPT-09): the
-- events of its name, tenant and key that match in clear, and every sealed one (the database
-- cannot look inside it: the store opens and matches those in the process), in find_event's
-- order, a page at a time from past the last row read.
SELECT id, name, payload, correlation_key, published_at, expires_at, tenant_id, released,
       started, cancelled, refused
FROM x_job_events
WHERE name = %(name)s
  AND expires_at > now()
  AND published_at >= %(after)s
  AND (%(correlation_key)s::text IS NULL OR correlation_key = %(correlation_key)s)
  AND (%(any_tenant)s OR tenant_id IS NOT DISTINCT FROM %(tenant_id)s::text)
  AND (payload @> %(match)s::jsonb
       OR (jsonb_typeof(payload) = 'object' AND payload ? 'xjobs:fernet'))
  AND (%(from_at)s::timestamptz IS NULL
       OR (published_at, id) > (%(from_at)s::timestamptz, %(from_id)s::uuid))
ORDER BY published_at, id
LIMIT %(limit)s;

-- name: purge_events
DELETE FROM x_job_events WHERE expires_at <= now();

-- name: recent_events
-- The operator's list (SPEC EVT-13): live events newest first, with what each publish did and
-- without their payloads. An operator's read, never on a hot path: given a name, the planner
-- can read x_job_events_lookup_idx (name, published_at); without one it reads the live rows
-- and keeps the newest `limit`.
SELECT id, name, NULL::jsonb, correlation_key, published_at, expires_at, tenant_id,
       released, started, cancelled, refused
FROM x_job_events
WHERE expires_at > now()
  AND (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s::text)
  AND (%(since)s::timestamptz IS NULL OR published_at >= %(since)s::timestamptz)
ORDER BY published_at DESC, id DESC
LIMIT %(limit)s;

-- name: get_event
-- One live event with its payload and what its publish did (SPEC EVT-13).
SELECT id, name, payload, correlation_key, published_at, expires_at, tenant_id,
       released, started, cancelled, refused
FROM x_job_events
WHERE id = %(id)s AND expires_at > now();
