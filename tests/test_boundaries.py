"""The driver protocol is the only door to storage (STYLE "Seams"): callers never ask a driver
its name or probe it for attributes, and the PostgreSQL driver never leans on the memory one. A
third driver should need no edit outside its own module."""

from __future__ import annotations

import ast
from pathlib import Path

import django_xjobs

PACKAGE = Path(django_xjobs.__file__).parent


def modules() -> list[tuple[Path, ast.Module]]:
    return [
        (path, ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _mentions_driver(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Name | ast.Attribute) and "driver" in ast.unparse(n)
        for n in ast.walk(node)
    )


def test_no_module_switches_on_a_drivers_name():
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Attribute) and side.attr == "name" and _mentions_driver(side)
                for side in (node.left, *node.comparators)
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_no_module_probes_a_driver_with_getattr_or_hasattr():
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and node.args
                and _mentions_driver(node.args[0])
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_the_postgresql_driver_never_imports_the_memory_one():
    found = []
    for path, tree in modules():
        if not (path.parent.name == "drivers" and path.stem.startswith("postgres")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and "memory" in (node.module or ""):
                found.append(f"{path.name}:{node.lineno}: from {node.module}")
    assert found == []
