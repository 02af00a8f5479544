"""``manage.py xjobs crons`` and ``xjobs cron pause|resume|run NAME``: the cron controls' text
and JSON, each a (json-able result, text) pair like every ``xjobs`` action."""

from __future__ import annotations

from ..operations import cron_controls


def crons_report() -> tuple[object, str]:
    crons = cron_controls.inspect_crons()
    if not crons:
        return crons, "no cron is declared"
    lines = []
    for c in crons:
        state = (
            f"paused by {c['paused_by'] or '-'} since {c['paused_at']}"
            if c["paused"]
            else "running"
        )
        lines += [
            f"{c['name']}  schedule={c['schedule']!r} tz={c['tz']} catch_up={c['catch_up']}  {state}",
            f"    last fired {c['last_fired'] or 'never'}",
            f"    next {', '.join(c['next_fires'])}",
        ]
    return crons, "\n".join(lines)


def cron_action(verb: str, name: str, *, key: str | None, by: str) -> tuple[object, str]:
    if verb == "pause":
        state = cron_controls.pause_cron(name, by=by)
        return cron_controls.cron_state(state), (
            f"paused cron {state.cron} since {state.paused_at.isoformat() if state.paused_at else '-'}: "
            f"the scheduler fires nothing of it until python manage.py xjobs cron resume {state.cron}"
        )
    if verb == "resume":
        state = cron_controls.resume_cron(name, by=by)
        return cron_controls.cron_state(state), (
            f"resumed cron {state.cron}: the missed occurrences follow its catch_up rule"
        )
    run = cron_controls.run_cron_now(name, key=key, by=by)
    result = {
        "cron": run.cron,
        "key": run.key,
        "occurrence": run.occurrence.isoformat() if run.occurrence else None,
        "job_ids": list(run.job_ids),
        "deduped": run.deduped,
    }
    if run.deduped:
        return result, f"cron {run.cron} already ran now under key {run.key}: nothing enqueued"
    ids = ", ".join(run.job_ids) or "no job (the cron returned none)"
    return result, f"ran cron {run.cron} now (key {run.key}): {ids}"
