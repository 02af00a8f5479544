"""What a user installs works: the wheel ships the whole package, ``make dist`` checks a built
wheel in a fresh venv, and the install lines name something installable (issue 23).

The wheel is built here without build isolation (setuptools and ``build`` are in the dev
extra), from a copy of the package's files: a few seconds, and nothing is written into the
checkout. ``make dist`` does the slower half (install into a new venv, ``manage.py check``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest

from tests.support.process import ROOT

PACKAGE = ROOT / "django_xjobs"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def package_files() -> set[str]:
    """Every file of the package in the source tree, as a path from the checkout's root."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.mark.process
def test_the_sdist_and_the_wheel_ship_every_file_of_the_package(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "django_xjobs", ignore=shutil.ignore_patterns("__pycache__"))
    # the sdist first, then the wheel from the unpacked sdist: what an installer from either gets
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist")],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = (tmp_path / "dist").glob(f"django_xjobs-{VERSION}-py3-none-any.whl")
    (sdist,) = (tmp_path / "dist").glob(f"django_xjobs-{VERSION}.tar.gz")
    expected = package_files()
    assert {p for p in expected if p.endswith(".sql")}, "the stores' SQL is in the package"
    assert {p for p in expected if "/templates/" in p}, "the admin templates are in the package"
    assert "django_xjobs/py.typed" in expected
    assert "django_xjobs/migrations/0001_initial.py" in expected

    in_wheel = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("django_xjobs/")}
    assert in_wheel == expected, {
        "missing": sorted(expected - in_wheel),
        "extra": sorted(in_wheel - expected),
    }
    prefix = f"django_xjobs-{VERSION}/"
    with tarfile.open(sdist) as archive:
        in_sdist = {
            m.name.removeprefix(prefix)
            for m in archive.getmembers()
            if m.isfile() and m.name.startswith(prefix + "django_xjobs/")
        }
    assert expected <= in_sdist, sorted(expected - in_sdist)


@pytest.mark.process  # runs make or bash
def test_make_dist_builds_checks_and_installs_the_wheel():
    dry_run = subprocess.run(
        ["make", "-n", "dist", "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    steps = ["rm -rf build dist", "-m build ", "twine check --strict dist/*", "check_wheel.py"]
    at = [dry_run.find(step) for step in steps]
    assert -1 not in at and at == sorted(at), dry_run


def released(version: str) -> bool:
    """True once the changelog has the version's own heading (``## [0.1.0] - 2026-...``)."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    return re.search(rf"^## \[{re.escape(version)}\]", changelog, re.M) is not None


def install_targets(text: str) -> list[str]:
    """What each ``pip install`` command of ``text`` installs (options left out)."""
    targets = []
    for command in re.findall(r"pip install\s+([^\n`#]+)", text):
        for word in command.split():
            word = word.strip("\"'")
            if word and not word.startswith("-"):
                targets.append(word)
    return targets


def test_install_targets_reads_the_commands():
    text = 'x `pip install -e "./django-xjobs[binary]"` and\npip install "django-xjobs[tasks]" # y'
    assert install_targets(text) == ["./django-xjobs[binary]", "django-xjobs[tasks]"]


PAGES = [
    "README.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")),
]
CODE = sorted(p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("page", PAGES + CODE)
def test_before_the_first_release_install_lines_name_a_checkout_or_a_wheel(page):
    """Every page and every hint the code prints: a by-name line would fail for the reader."""
    if released(VERSION):
        return  # on the index: installing by name works
    by_name = [
        target
        for target in install_targets((ROOT / page).read_text())
        if re.fullmatch(r"django[-_]xjobs(\[[^\]]*\])?([<>=!~].*)?", target, re.I)
    ]
    assert not by_name, (
        f"{page}: {by_name} is on no index until {VERSION} is released: install from a "
        "checkout (pip install './django-xjobs[binary]') or a wheel built by make dist"
    )
