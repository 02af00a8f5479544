"""The runtime dependency floors are patched releases (issue 26, item 5): a floor such as
``Django>=5.2`` admits 5.2.0, which predates the line's security releases; CONTRIBUTING.md says
how the floors are kept current."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _floors() -> dict[str, tuple[int, ...]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {}
    for requirement in project["dependencies"]:
        # an environment marker may follow (uuid-utils: Python 3.14's standard library has it)
        name, floor = re.fullmatch(
            r"([A-Za-z0-9_.-]+)>=([0-9.]+)(?:; python_version < '[0-9.]+')?", requirement
        ).groups()
        floors[name] = tuple(int(part) for part in floor.split("."))
    return floors


def test_each_runtime_floor_names_a_patch_release_that_is_installed_here():
    floors = _floors()
    assert set(floors) == {"Django", "psycopg", "croniter", "uuid-utils"}
    for name, floor in floors.items():
        assert len(floor) == 3, f"{name}>={'.'.join(map(str, floor))} is not a patch release"
        installed = tuple(int(p) for p in re.findall(r"\d+", version(name))[:3])
        assert installed >= floor, name
    assert floors["Django"] >= (5, 2, 19)


def test_contributing_says_how_the_floors_are_kept_current():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    assert "## Dependency floors" in text and "pip index versions" in text
