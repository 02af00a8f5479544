"""The tutorial (docs/tutorial.md) as a reader follows it, in a project ``startproject`` made
with the Django this lane runs (5.2 on Python 3.11, 6.x on 3.12): its settings blocks pasted
into that settings file, its files written from the page, its commands run, and the tests of
its step 9 run with pytest-django (issue 42).

A settings file written by hand hid what a new Django 6.1 project does: its ``startproject``
writes ``MAILERS``, beside which Django 6.1 refuses ``EMAIL_BACKEND``, so the page's line broke
every command. The only glue here is the database: the page's ``DATABASES`` names a local
``shop`` database; the test points it at a scratch database on the test server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import django
import pytest

from tests.support.database import unmigrated_database
from tests.support.process import ROOT

pytestmark = pytest.mark.process

TUTORIAL = ROOT / "docs" / "tutorial.md"
#: the Django of this lane, as the page's settings blocks are labelled
DJANGO_61 = django.VERSION[:2] >= (6, 1)
THIS_DJANGO = "Django 6.1" if DJANGO_61 else "Django 5.2 and 6.0"


def blocks(first_line: str) -> list[str]:
    """The page's Python blocks whose first line starts with ``first_line``."""
    found = re.findall(r"^```python\n(.*?)^```", TUTORIAL.read_text(), flags=re.S | re.M)
    return [block for block in found if block.startswith(first_line)]


def block(first_line: str) -> str:
    [found] = blocks(first_line)
    return found


def database_glue(url: str) -> str:
    """The test's one change to the page's settings: where the ``shop`` database is."""
    import environ

    where = {
        key: value
        for key, value in environ.Env.db_url_config(url).items()
        if key in ("NAME", "HOST", "PORT", "USER", "PASSWORD", "OPTIONS")
    }
    return (
        "\n# the test's scratch database, not the reader's local `shop`\n"
        f"DATABASES['default'].update({where!r})\n"
    )


class Project:
    def __init__(self, root: Path, url: str) -> None:
        self.root = root
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH")
        }
        self.env["PYTHONUNBUFFERED"] = "1"
        self.url = url

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # warnings are errors, as they are for the rest of the suite: a deprecated setting the
        # page tells a reader to paste fails here
        return subprocess.run(
            [sys.executable, "-W", "error", *argv],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def manage(self, *argv: str) -> str:
        result = self.run("manage.py", *argv)
        assert result.returncode == 0, (
            f"manage.py {' '.join(argv)}:\n{result.stdout}{result.stderr}"
        )
        return result.stdout + result.stderr

    def paste(self, path: str, text: str, *, append: bool = False) -> None:
        target = self.root / path
        if append:
            with target.open("a") as out:
                out.write("\n" + text)
        else:
            target.write_text(text)


@pytest.fixture
def project(tmp_path) -> Iterator[Project]:
    with unmigrated_database("xjobs_tutorial") as url:
        made = Project(tmp_path, url)
        result = made.run("-m", "django", "startproject", "config", ".")
        assert result.returncode == 0, result.stderr
        made.manage("startapp", "shop")
        yield made


def test_the_tutorial_runs_in_a_project_startproject_made(project):
    settings = (project.root / "config" / "settings.py").read_text()
    assert ("MAILERS" in settings) is DJANGO_61  # what the page tells apart

    # 1. the settings, as the page says for this Django
    project.paste("config/settings.py", block("# config/settings.py: replace"), append=True)
    # step 1 has a mail block for 5.2 and 6.0 only (6.1's startproject wrote MAILERS); step 6
    # has one for each
    *console, down = blocks(f"# config/settings.py ({THIS_DJANGO})")
    for mail in console:
        project.paste("config/settings.py", mail, append=True)
    project.paste("config/settings.py", database_glue(project.url), append=True)
    project.manage("check")

    # 2.-4. the app's files, from the page
    for path in ("shop/models.py", "shop/jobs.py", "shop/views.py", "config/urls.py"):
        project.paste(path, block(f"# {path}\n"))
    project.manage("check")
    project.manage("makemigrations", "shop")
    project.manage("migrate")
    assert "shop.jobs.send_receipt" in project.manage("xjobs", "manifest")

    # 9. the page's tests, with pytest-django, as the page runs them
    project.paste("shop/tests.py", block("# shop/tests.py\n"))
    tests = project.run(
        "-m", "pytest", "--ds=config.settings", "shop/tests.py", "-p", "no:randomly",
        "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
        timeout=300,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "3 passed" in tests.stdout, tests.stdout

    # 6. the mail server that is down: the page's settings for this Django still load
    project.paste("config/settings.py", down, append=True)
    project.manage("check")


def test_the_page_has_each_djangos_settings_for_both_mail_steps():
    """Two blocks per Django line: step 1's console and step 6's unreachable server."""
    for line in ("Django 6.1", "Django 5.2 and 6.0"):
        assert len(blocks(f"# config/settings.py ({line})")) == (1 if line == "Django 6.1" else 2)
    assert "MAILERS" in block("# config/settings.py (Django 6.1)")
    assert "EMAIL_BACKEND" not in block("# config/settings.py: replace")
