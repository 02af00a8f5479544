"""JOB-16: the committed manifest (``xjobs manifest --write``) and its drift check (``--check``)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_xjobs.declarations import registry
from django_xjobs.operations import manifest
from tests import jobs


def xjobs(*args: str) -> str:
    out = StringIO()
    call_command("xjobs", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def committed(tmp_path):
    path = tmp_path / "xjobs-manifest.json"
    xjobs("manifest", "--write", str(path))
    return path


def test_job_16_a_written_manifest_round_trips_to_a_clean_check(committed):
    assert "matches the code" in xjobs("manifest", "--check", str(committed))
    assert json.loads(xjobs("manifest", "--check", str(committed), "--json"))["drift"] == []


def test_job_16_two_writes_give_the_same_bytes(committed, tmp_path):
    again = tmp_path / "again.json"
    xjobs("manifest", "--write", str(again))
    assert committed.read_bytes() == again.read_bytes()
    text = committed.read_text()
    assert text.endswith("}\n") and not text.endswith("\n\n")


def test_job_16_the_file_is_sorted_and_free_of_clock_values(committed):
    data = json.loads(committed.read_text())
    assert list(data) == sorted(data)  # sorted keys
    for kind in ("jobs", "crons", "backfills"):
        names = [row["name"] for row in data[kind]]
        assert names == sorted(names) and names  # code-unit order (SE-26)
    assert "next_run" not in committed.read_text()
    ok = next(j for j in data["jobs"] if j["name"] == "tests.jobs.ok")
    assert ok["input"] == ["n"] and ok["required"] == [] and ok["queue"] == "default"
    fill = next(b for b in data["backfills"] if b["name"] == "tests.fill_currency")
    assert fill == {
        "name": "tests.fill_currency",
        "queue": "default",
        "batch": 3,
        "rate": 1e6,
        "environments": None,
        "requires": None,
    }


def test_job_16_a_moved_queue_is_drift_with_a_readable_diff(committed, monkeypatch):
    monkeypatch.setattr(jobs.ok, "queue", "elsewhere")
    out = StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("xjobs", "manifest", "--check", str(committed), stdout=out)
    assert str(raised.value).startswith("X_MANIFEST_DRIFT: ")
    assert "--write" in str(raised.value)
    text = out.getvalue()
    assert "changed job tests.jobs.ok: queue" in text
    assert '-      "queue": "default",' in text and '+      "queue": "elsewhere",' in text
    assert f"--- {committed}" in text and "+++ the code" in text


def test_job_16_a_job_that_disappears_is_drift(committed):
    registry.unregister("tests.jobs.ok")
    try:
        out = StringIO()
        with pytest.raises(CommandError, match="X_MANIFEST_DRIFT"):
            call_command("xjobs", "manifest", "--check", str(committed), stdout=out)
        assert "removed job tests.jobs.ok" in out.getvalue()
        drift = StringIO()
        with pytest.raises(CommandError):
            call_command("xjobs", "manifest", "--check", str(committed), "--json", stdout=drift)
        assert json.loads(drift.getvalue())["drift"] == ["removed job tests.jobs.ok"]
    finally:
        registry.register(jobs.ok)
    assert "matches the code" in xjobs("manifest", "--check", str(committed))


def test_job_16_changes_name_added_removed_and_changed_rows():
    old = {"jobs": [{"name": "a", "queue": "q"}, {"name": "b", "queue": "q"}]}
    new = {"jobs": [{"name": "b", "queue": "r", "priority": 1}, {"name": "c", "queue": "q"}]}
    assert manifest.changes(old, new) == [
        "removed job a",
        "changed job b: priority, queue",
        "added   job c",
    ]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no manifest file at"),
        ("{not json", "is not JSON"),
        ('{"jobs": []}', "is not an xjobs manifest"),
        ('{"xjobs_manifest": 99, "jobs": [], "crons": [], "backfills": []}', "format-1"),
        ('{"xjobs_manifest": 1, "jobs": [1], "crons": [], "backfills": []}', "malformed"),
    ],
)
def test_job_16_a_missing_or_foreign_file_is_one_line_with_its_fix(tmp_path, content, says):
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CommandError) as raised:
        xjobs("manifest", "--check", str(path))
    message = str(raised.value)
    assert message.startswith("X_MANIFEST_INVALID: ") and says in message
    assert "\n" not in message and f"--write {path}" in message


def test_job_16_write_and_check_are_exclusive(tmp_path):
    with pytest.raises(CommandError, match="not allowed with"):
        xjobs("manifest", "--write", str(tmp_path / "a"), "--check", str(tmp_path / "b"))


def test_job_16_the_printed_manifest_lists_backfills():
    assert "backfill tests.fill_currency  queue=default batch=3" in xjobs("manifest")
    listed = json.loads(xjobs("manifest", "--json"))
    assert "tests.fill_currency" in [b["name"] for b in listed["backfills"]]


@pytest.mark.process
def test_job_16_the_ci_step_exits_0_then_1_with_one_line_and_needs_no_database(tmp_path):
    """Real ``manage.py`` processes, as CI runs them, against a closed port: the manifest reads
    the code only."""
    from tests.support.database import closed_port_url
    from tests.support.process import run_manage

    path = tmp_path / "xjobs-manifest.json"
    url = closed_port_url()

    def manage(*args: str):
        return run_manage("xjobs", "manifest", *args, "--settings=tests.settings", url=url)

    assert manage("--write", str(path)).returncode == 0
    done = manage("--check", str(path))
    assert done.returncode == 0, done.stderr
    data = json.loads(path.read_text())
    next(j for j in data["jobs"] if j["name"] == "tests.jobs.ok")["queue"] = "renamed"
    path.write_text(manifest.render(data))
    drifted = manage("--check", str(path))
    assert drifted.returncode == 1
    assert "changed job tests.jobs.ok: queue" in drifted.stdout
    [line] = drifted.stderr.strip().splitlines()
    assert line.startswith("CommandError: X_MANIFEST_DRIFT: ")
    missing = manage("--check", str(tmp_path / "absent.json"))
    assert missing.returncode == 1
    [line] = missing.stderr.strip().splitlines()
    assert line.startswith("CommandError: X_MANIFEST_INVALID: no manifest file at ")
