"""Django's own task tests against ``XJobsBackend`` (``make tasks-conformance``; not in CI).

    python scripts/tasks_conformance/run.py

Downloads the sdist of the Django it runs under (6.1 or later) from the package index, takes
its ``tests/tasks`` into ``build/tasks-conformance/``, points each ``TASKS`` entry that names a
reference backend at ``XJobsBackend`` (``glue.py``: which backend, how a task is made to run;
the only changes), runs them with Django's test runner on PostgreSQL, and compares each test's
outcome with ``expected.toml``: the tests that do not apply, one reason each. It fails when a
test that applies does not pass, and when the list names a test that no longer exists or now
passes (so the list stays true). The reference code is never copied into the project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = ROOT / "build" / "tasks-conformance"

#: which backend: each reference backend the tests name, and what stands in for it
BACKENDS = {
    "django.tasks.backends.immediate.ImmediateBackend": "glue.RunAtOnceBackend",
    "django.tasks.backends.dummy.DummyBackend": "glue.QueuedBackend",
}


def download_django() -> Path:
    import django

    version = django.get_version()
    if django.VERSION[:2] < (6, 1):
        sys.exit(f"tasks-conformance runs Django 6.1's tests: this is Django {version}")
    sdists = WORK / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-binary", ":all:", "--dest", str(sdists), f"Django=={version}"],
        check=True,
    )  # fmt: skip
    [sdist] = sdists.glob(f"[dD]jango-{version}.tar.gz")
    return sdist


def extract_tests(sdist: Path) -> Path:
    """``tests/tasks`` of the sdist as the package ``tasks`` under WORK, glued."""
    target = WORK / "tasks"
    shutil.rmtree(target, ignore_errors=True)
    prefix = sdist.name.removesuffix(".tar.gz") + "/tests/tasks/"
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix) and m.isfile()]
        assert members, f"{sdist.name} has no tests/tasks"
        for member in members:
            out = target / member.name.removeprefix(prefix)
            out.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            out.write_bytes(source.read())
    used = dict.fromkeys(BACKENDS, 0)
    for path in target.glob("*.py"):
        text = path.read_text()
        for reference, ours in BACKENDS.items():
            used[reference] += text.count(reference)
            text = text.replace(reference, ours)
        path.write_text(text)
    assert all(used.values()), f"a backend the glue replaces is no longer named: {used}"
    return target


class Outcomes(unittest.TextTestResult):
    """Each test's outcome by id (``tasks.test_tasks.TaskTestCase.test_x``)."""

    outcomes: dict[str, tuple[str, str]] = {}

    def _record(self, test: unittest.TestCase, outcome: str, detail: str = "") -> None:
        Outcomes.outcomes[test.id()] = (outcome, detail)

    def addSuccess(self, test):  # type: ignore[no-untyped-def]
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):  # type: ignore[no-untyped-def]
        super().addFailure(test, err)
        self._record(test, "fail", self.failures[-1][1])

    def addError(self, test, err):  # type: ignore[no-untyped-def]
        super().addError(test, err)
        self._record(test, "error", self.errors[-1][1])

    def addSkip(self, test, reason):  # type: ignore[no-untyped-def]
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addExpectedFailure(self, test, err):  # type: ignore[no-untyped-def]
        super().addExpectedFailure(test, err)
        self._record(test, "pass")

    def addUnexpectedSuccess(self, test):  # type: ignore[no-untyped-def]
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")

    def addSubTest(self, test, subtest, err):  # type: ignore[no-untyped-def]
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "fail" if issubclass(err[0], test.failureException) else "error"
            self._record(test, kind, self._exc_info_to_string(err, test))


def run_tests() -> dict[str, tuple[str, str]]:
    sys.path[:0] = [str(WORK), str(HERE), str(ROOT)]
    os.environ["DJANGO_SETTINGS_MODULE"] = "conformance_settings"
    import django
    from django.test.runner import DiscoverRunner

    from django_xjobs.testing.postgres import start_lazily

    django.setup()
    from django.conf import settings

    start_lazily(settings.DATABASES)

    from django.test import SimpleTestCase

    # the reference backends keep results in memory; this one stores them in PostgreSQL, so a
    # SimpleTestCase may use the database (glue: how a task is made to run and read back)
    SimpleTestCase.databases = {"default"}

    class Runner(DiscoverRunner):
        def get_resultclass(self):  # type: ignore[no-untyped-def]
            return Outcomes

    Runner(verbosity=1, interactive=False, top_level=str(WORK)).run_tests(["tasks"])
    return Outcomes.outcomes


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    extract_tests(download_django())
    outcomes = run_tests()
    expected = tomllib.loads((HERE / "expected.toml").read_text())
    not_applicable: dict[str, str] = {
        test: reason for group in expected.values() for test, reason in group.items()
    }
    problems = []
    for test in sorted(set(not_applicable) - set(outcomes)):
        problems.append(f"listed as not applicable, but no such test ran: {test}")
    applicable = {t: o for t, o in outcomes.items() if t not in not_applicable}
    for test, (outcome, detail) in sorted(applicable.items()):
        if outcome != "pass":
            problems.append(f"{outcome}: {test}\n{detail}")
    for test in sorted(set(not_applicable) & set(outcomes)):
        if outcomes[test][0] == "pass":
            problems.append(f"listed as not applicable, and passes: {test} (take it off the list)")
    passed = sum(1 for outcome, _ in applicable.values() if outcome == "pass")
    print(
        f"\nDjango's tests/tasks against XJobsBackend: {len(outcomes)} tests, "
        f"{len(applicable)} apply, {passed} pass, {len(not_applicable)} not applicable "
        f"({', '.join(f'{len(g)} {name}' for name, g in expected.items())})"
    )
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
