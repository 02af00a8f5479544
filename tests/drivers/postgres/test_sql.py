"""The named-SQL loader (drivers/postgres/sql.py ``load``): what a ``.sql`` file of ``-- name:`` blocks
becomes, and the files it refuses rather than misread. No database: the unit lane."""

from __future__ import annotations

from pathlib import Path

import pytest

import django_xjobs
from django_xjobs.drivers.postgres import sql
from django_xjobs.errors import InvariantError

PACKAGED = sorted(Path(django_xjobs.__file__).parent.rglob("*.sql"))


def load(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "store.sql"
    path.write_text(text)
    return sql.load(path)


def test_each_block_is_one_statement_under_its_name_without_comments_or_semicolon(tmp_path):
    statements = load(
        tmp_path,
        "-- The store, by name. A file comment before the first header is fine.\n"
        "\n"
        "-- name: claim\n"
        "-- Why this statement locks what it locks.\n"
        "SELECT id\n"
        "  -- an indented comment line goes too\n"
        "FROM x_jobs WHERE state = 'ready' -- a trailing comment stays (it is SQL)\n"
        "FOR UPDATE SKIP LOCKED;\n"
        "\n"
        "-- name: touch_row\n"
        "UPDATE x_jobs SET updated_at = now() WHERE id = %(id)s;;  \n",
    )
    assert statements == {
        "claim": "SELECT id\n"
        "FROM x_jobs WHERE state = 'ready' -- a trailing comment stays (it is SQL)\n"
        "FOR UPDATE SKIP LOCKED",
        "touch_row": "UPDATE x_jobs SET updated_at = now() WHERE id = %(id)s",
    }


def test_the_order_of_the_file_is_kept(tmp_path):
    statements = load(tmp_path, "-- name: zeta\nSELECT 1;\n-- name: alpha\nSELECT 2;\n")
    assert list(statements) == ["zeta", "alpha"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-- name: one\nSELECT 1;\n-- name: one\nSELECT 2;\n", "statement 'one' is named twice"),
        ("-- name: one\nSELECT 1;\n-- name: Two\nSELECT 2;\n", "malformed header '-- name: Two'"),
        ("-- name: one\nSELECT 1;\n-- name: two-b\nSELECT 2;\n", "malformed header"),
        ("-- name: one\nSELECT 1;\n--name:two\nSELECT 2;\n", "malformed header '--name:two'"),
        ("-- name: one two\nSELECT 1;\n", "malformed header '-- name: one two'"),
        ("SELECT 0;\n-- name: one\nSELECT 1;\n", "SQL before the first '-- name:' header"),
        ("-- name: one\n-- only a comment\n;\n-- name: two\nSELECT 2;\n", "'one' is empty"),
    ],
    ids=["duplicate", "uppercase", "dash", "no-spaces", "two-words", "preamble", "empty"],
)
def test_a_file_that_would_merge_replace_or_drop_a_statement_is_refused(tmp_path, text, problem):
    """Without the refusal, a misspelt header reads as a comment (its SQL joins the block
    above), a repeated name silently replaces the first, and SQL before any header is lost."""
    with pytest.raises(InvariantError) as refused:
        load(tmp_path, text)
    message = str(refused.value)
    assert message.startswith("X_INVARIANT: store.sql: ") and problem in message, message
    assert "'-- name: <lowercase_name>'" in refused.value.hint
    assert "\n" not in message


@pytest.mark.parametrize(
    "path", [p for p in PACKAGED if p.name != sql.FRAGMENTS], ids=lambda path: path.name
)
def test_every_packaged_sql_file_loads(path):
    statements = sql.load(path)
    assert statements and all(statements.values()), path
    assert all(not body.endswith(";") for body in statements.values())
    assert not any("-- include:" in body for body in statements.values())


def test_every_packaged_fragment_stands_in_some_statement():
    """A fragment no statement includes is a copy drifting on its own."""
    [shared] = [p for p in PACKAGED if p.name == sql.FRAGMENTS]
    assert sql.load(shared) == {}  # fragments only
    names = {
        line.split(": ")[1].strip()
        for line in shared.read_text().splitlines()
        if line.startswith("-- fragment: ")
    }
    included = {
        line.split(": ")[1].strip()
        for path in PACKAGED
        for line in path.read_text().splitlines()
        if line.strip().startswith("-- include: ")
    }
    assert names and names <= included, names - included


def test_an_include_stands_for_its_fragment_from_the_file_or_its_fragments_file(tmp_path):
    (tmp_path / sql.FRAGMENTS).write_text(
        "-- fragment: ready\n-- why it is shared\nWHERE state = 'ready'\n"
    )
    statements = load(
        tmp_path,
        "-- fragment: cols\nid, queue\n"
        "-- name: one\nSELECT\n    -- include: cols\nFROM x_jobs\n-- include: ready\n;\n",
    )
    assert statements == {"one": "SELECT\nid, queue\nFROM x_jobs\nWHERE state = 'ready'"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-- name: one\nSELECT 1\n-- include: nowhere\n;\n", "no fragment 'nowhere' to include"),
        ("-- fragment: a\nx\n-- include: a\n-- name: one\nSELECT 1;\n", "'a' includes another"),
        ("-- fragment: a\nx\n-- fragment: a\ny\n-- name: one\nSELECT 1;\n", "named twice"),
        ("-- fragment: a\n-- nothing\n-- name: one\nSELECT 1;\n", "fragment 'a' is empty"),
        ("-- name: one\nSELECT 1\n--include: a\n;\n", "malformed header '--include: a'"),
    ],
    ids=["unknown", "nested", "duplicate", "empty", "misspelt"],
)
def test_an_include_that_would_drop_or_misplace_sql_is_refused(tmp_path, text, problem):
    with pytest.raises(InvariantError, match=problem):
        load(tmp_path, text)


def test_a_file_is_read_once(tmp_path):
    path = tmp_path / "store.sql"
    path.write_text("-- name: one\nSELECT 1;\n")
    first = sql.load(path)
    path.write_text("-- name: one\nSELECT 2;\n")
    assert sql.load(path) is first  # loaded at import, never re-read on the hot path


@pytest.mark.parametrize("twin", ["", "_paused"])
def test_the_two_lapsed_sweeps_are_one_text_but_the_waiting_half(twin):
    """jobs.sql's claim_lapsed and limits.sql's reclaim_lapsed take, judge and claim lapsed runs
    with the same fragments (issue 41): past the waiting half the plain sweep adds, they are one
    text. Once they were two copies, and the limited one answered a job first claimed past its
    expiry as not expired (SPEC JCTL-02). Their _paused twins alike: both step over a paused
    job's lapsed runs (SPEC PAUSE-10)."""
    folder = Path(django_xjobs.__file__).parent / "drivers" / "postgres"
    plain = sql.load(folder / "jobs.sql")["claim_lapsed" + twin]
    limited = sql.load(folder / "limits.sql")["reclaim_lapsed" + twin]
    union = "FROM (SELECT * FROM waiting UNION ALL SELECT * FROM lapsed) AS due"
    tail = plain[plain.index("lapsed AS (") :]
    assert tail.count(union) == 1
    assert limited == "WITH " + tail.replace(union, "FROM lapsed AS due")
    assert "j.expires_at <= j.started_at AS expired" in limited
