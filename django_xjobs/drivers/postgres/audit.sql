-- The operators' audit trail (issue 45, x_operator_actions): one row per action, written after
-- the action by the operator API (operations/audit.py), read newest first, pruned by age.

-- name: audit_record
INSERT INTO x_operator_actions (id, at, actor, verb, job_id, target, filter, reason, matched,
                                changed, skipped)
VALUES (%(id)s, now(), %(actor)s, %(verb)s, %(job_id)s, %(target)s, %(filter)s::jsonb,
        %(reason)s, %(matched)s, %(changed)s, %(skipped)s);

-- name: audit_recent
SELECT id, at, actor, verb, job_id, target, filter, reason, matched, changed, skipped
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
