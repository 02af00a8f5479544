"""docs/howto/testing.md's freezegun and factory examples, run as written (issue 33): each
section's Python block is executed as a user's test module and its test functions are called
inside this test's transaction, under the default settings (the outbox on)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "testing.md"


def example(heading: str) -> str:
    section = PAGE.read_text().split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def run_module(source: str, name: str) -> list[str]:
    namespace: dict[str, Any] = {"__name__": f"tests.howto_testing.{name}"}
    exec(compile(source, str(PAGE), "exec"), namespace)
    ran = []
    for test_name, function in namespace.items():
        if test_name.startswith("test_") and callable(function):
            function(db=None)
            ran.append(test_name)
    return ran


@pytest.mark.parametrize(
    ("heading", "name"),
    [("Time follows freezegun", "freezegun"), ("Rows in any state: factories", "factories")],
)
def test_the_howto_example_runs(db, heading, name):
    with override_settings(XJOBS={}):
        assert run_module(example(heading), name)
