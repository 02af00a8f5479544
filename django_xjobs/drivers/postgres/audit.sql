-- The operators' audit trail (issue 45, x_operator_actions): one row per action, written after
-- the action by the operator API (operations/audit.py), read newest first, pruned by age.

-- name: audit_record
INSERT INTO x_operator_actions (id, at, actor, verb, job_id, target, filter, reason, matched,
                                changed, skipped, status, expected, error, by_job)
VALUES (%(id)s, now(), %(actor)s, %(verb)s, %(job_id)s, %(target)s, %(filter)s::jsonb,
        %(reason)s, %(matched)s, %(changed)s, %(skipped)s, %(status)s, %(expected)s,
        %(error)s, %(by_job)s);

-- name: audit_recent
SELECT id, at, actor, verb, job_id, target, filter, reason, matched, changed, skipped, status,
       expected, started_at, finished_at, error, by_job
FROM x_operator_actions
WHERE %(verb)s::text IS NULL OR verb = %(verb)s::text
ORDER BY at DESC, id DESC
LIMIT %(limit)s;

-- name: audit_prune
-- Oldest first, a batch per statement on the `at` index (XJOBS["AUDIT_RETENTION"]).
DELETE FROM x_operator_actions
WHERE id = ANY(ARRAY(
    SELECT id FROM x_operator_actions
    WHERE at < now() - make_interval(secs => %(older_than)s)
    ORDER BY at
    LIMIT %(batch)s));

-- name: audit_get
SELECT id, at, actor, verb, job_id, target, filter, reason, matched, changed, skipped, status,
       expected, started_at, finished_at, error, by_job
FROM x_operator_actions
WHERE id = %(id)s;

-- name: audit_progress
-- A background bulk action's progress (operations/background.py), written as its batches commit:
-- started when it first runs, finished when it is done or failed, unfinished while it runs again.
UPDATE x_operator_actions
SET status = %(status)s,
    matched = %(matched)s,
    changed = %(changed)s,
    skipped = %(skipped)s,
    error = %(error)s,
    by_job = COALESCE(%(by_job)s, by_job),
    started_at = CASE WHEN %(status)s = 'running' THEN COALESCE(started_at, now())
                      ELSE started_at END,
    finished_at = CASE WHEN %(status)s IN ('done', 'failed') THEN now() END
WHERE id = %(id)s;
