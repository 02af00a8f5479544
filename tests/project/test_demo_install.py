"""``make demo``'s first run installs only what the demo needs, the quick way (issue 23).

A first run was 26-31 s on a busy 2-core machine, most of it set-up: ensurepip in the new venv,
an editable wheel built in an isolated environment (setuptools fetched into it), and every
installed module compiled ahead. The demo's path now makes the venv without pip (the host's pip
installs into it), installs the requirements of the project and its ``demo`` extra without the
project itself (``run_demo.py`` imports it from the checkout) and compiles nothing ahead.
"""

from __future__ import annotations

import importlib.util
import subprocess
import tomllib

import pytest

from tests.support.process import ROOT

spec = importlib.util.spec_from_file_location("requirements", ROOT / "scripts" / "requirements.py")
assert spec and spec.loader
requirements = importlib.util.module_from_spec(spec)
spec.loader.exec_module(requirements)
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_demo_requirements_are_the_projects_and_the_demo_extras():
    expected = list(PROJECT["dependencies"])
    expected += [r for r in PROJECT["optional-dependencies"]["demo"] if r not in expected]
    assert requirements.requirements(["demo"]) == expected


def test_an_extra_that_names_the_project_is_expanded():
    dev = requirements.requirements(["dev"])
    assert not [r for r in dev if r.startswith(PROJECT["name"])], dev
    assert set(PROJECT["optional-dependencies"]["test"]) <= set(dev)


def dry_run(target: str) -> str:
    return subprocess.run(
        ["make", "-n", target, "VENV=/nonexistent-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.process  # runs make or bash
def test_make_demo_builds_nothing_and_compiles_nothing_ahead():
    demo = dry_run("demo")
    assert "venv --without-pip" in demo
    assert "scripts/requirements.py demo" in demo
    assert "--no-compile" in demo
    assert "install -e" not in demo and "--upgrade pip" not in demo, demo


@pytest.mark.process  # runs make or bash
def test_the_targets_that_use_the_venvs_pip_add_it_first():
    for target in ("test", "lint", "docs"):
        steps = dry_run(target)
        assert steps.index("ensurepip") < steps.index("-m pip"), (target, steps)
