"""Each ``make`` target's install brings what the target imports (issue 42).

``make dist``'s wheel check installs the wheel with its ``binary`` extra alone, and imported
``django_xjobs.health_check`` (django-health-check, the ``health`` extra): exit 2 on a fresh
clone. ``make docs`` installs the ``docs`` extra, and autodoc imported
``django_xjobs.testing.factories`` (factory-boy, the ``testing`` extra): it failed after ``make
demo`` in a fresh clone, or on its own. Neither showed in a venv made by ``make test``, which
has every extra. These checks read the imports from the source and the requirements from
``pyproject.toml``, and ask the dev venv only which distribution brings which module: seconds,
no install. ``tests/project/test_fresh_clone.py`` runs the installs themselves.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import importlib.util
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.process import ROOT

PACKAGE = ROOT / "django_xjobs"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _load(name: str, path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_wheel = _load("check_wheel", ROOT / "scripts" / "check_wheel.py")
requirements = _load("requirements", ROOT / "scripts" / "requirements.py")


# --- the source: what each module imports when it is imported ----------------------------------


def module_path(name: str) -> Path | None:
    """The file of the package's module ``name``, if there is one."""
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _guarded(node: ast.Try) -> bool:
    """A ``try`` whose ``except`` takes an ImportError (and does not raise another): what it
    imports is optional."""
    for handler in node.handlers:
        names = ast.unparse(handler.type) if handler.type else "BaseException"
        raises = any(isinstance(n, ast.Raise) for n in ast.walk(handler))
        if not raises and re.search(
            r"\b(ImportError|ModuleNotFoundError|Exception|BaseException)\b", names
        ):
            return True
    return False


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run when the module is imported (not functions', not TYPE_CHECKING's,
    not those an ImportError handler guards)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                found += _statements(node.body) + _statements(node.orelse)
        elif isinstance(node, ast.Try):
            if not _guarded(node):
                found += _statements(node.body) + _statements(node.finalbody)
        elif isinstance(node, ast.ClassDef):
            found += _statements(node.body)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
    return found


@cache
def direct_imports(name: str) -> tuple[frozenset[str], frozenset[str]]:
    """``(package modules, other top-level modules)`` that importing ``name`` imports itself."""
    path = module_path(name)
    assert path is not None, name
    is_package = path.name == "__init__.py"
    ours: set[str] = set()
    others: set[str] = set()
    for node in _statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                parts = name.split(".")
                anchor = parts if is_package else parts[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            top = target.split(".")[0]
            if top == "django_xjobs":
                # a module, and each package on its way, is imported
                parts = target.split(".")
                ours.update(
                    ".".join(parts[:i])
                    for i in range(1, len(parts) + 1)
                    if module_path(".".join(parts[:i]))
                )
            elif top and top != "__future__" and top not in sys.stdlib_module_names:
                others.add(top)
    ours.discard(name)
    return frozenset(ours), frozenset(others)


@cache
def imports_of(name: str) -> frozenset[str]:
    """Every top-level module outside the package and the standard library that importing
    ``name`` imports, through the package's own modules."""
    seen, pending, found = {name}, [name], set()
    while pending:
        ours, others = direct_imports(pending.pop())
        found |= others
        for module in ours - seen:
            seen.add(module)
            pending.append(module)
    return frozenset(found)


def package_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts
    )


# --- the requirements: which distributions an install brings ------------------------------------


def _wanted(requirement: Requirement, extras: frozenset[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras or {""})


@cache
def brought_by(extras: frozenset[str]) -> frozenset[str]:
    """The distributions installing the project with ``extras`` brings, with what each of them
    requires in turn (read from the dev venv, where all are installed)."""
    pending = [
        Requirement(line)
        for line in requirements.requirements(sorted(extras))
        if _wanted(Requirement(line), frozenset())
    ]
    found: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found.add(name)
        try:
            needs = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in needs:
            nested = Requirement(line)
            if _wanted(nested, frozenset(requirement.extras)):
                pending.append(nested)
    return frozenset(found)


@cache
def distributions() -> dict[str, frozenset[str]]:
    return {
        top: frozenset(canonicalize_name(d) for d in dists)
        for top, dists in metadata.packages_distributions().items()
    }


def missing(modules: frozenset[str], extras: frozenset[str]) -> dict[str, list[str]]:
    """The modules no distribution of the install brings, each with what would."""
    have = brought_by(extras)
    return {
        top: sorted(distributions().get(top, {"an unknown distribution"}))
        for top in sorted(modules)
        if not distributions().get(top, frozenset()) & have
    }


# --- make dist: the wheel with `binary` alone --------------------------------------------------


def extra_of(module: str) -> tuple[str, tuple[str, ...]] | None:
    for prefix, entry in check_wheel.EXTRA_MODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return entry  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize("module", package_modules())
def test_each_module_imports_with_the_wheels_own_requirements_or_is_listed_with_its_extra(
    module,
):
    """What ``make dist``'s check imports, with the wheel installed with ``binary`` alone."""
    lacking = missing(imports_of(module), frozenset({"binary"}))
    if not lacking:
        return
    listed = extra_of(module)
    assert listed is not None, (
        f"{module} imports {lacking}, which the wheel's own requirements do not bring: list it "
        "in scripts/check_wheel.py EXTRA_MODULES with the extra that does"
    )
    extra, brings = listed
    assert set(lacking) <= set(brings), (module, lacking, brings)
    assert not missing(frozenset(lacking), frozenset({extra})), (
        f"the {extra!r} extra does not bring what {module} imports: {lacking}"
    )


def test_every_module_listed_with_an_extra_exists():
    for prefix in check_wheel.EXTRA_MODULES:
        assert module_path(prefix), prefix


# --- make docs: the `docs` extra --------------------------------------------------------------

AUTODOC = re.compile(r"^\.\. auto(?:module|class|function|exception|data)::\s+(\S+)", re.M)


def autodoc_modules() -> list[str]:
    """The package modules autodoc imports for the site (each directive's longest module)."""
    found: set[str] = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for target in AUTODOC.findall(page.read_text()):
            parts = target.split(".")
            for end in range(len(parts), 0, -1):
                if module_path(".".join(parts[:end])):
                    found.add(".".join(parts[:end]))
                    break
    return sorted(found)


def test_the_docs_extra_brings_what_autodoc_imports():
    modules = autodoc_modules()
    assert "django_xjobs.testing.factories" in modules and "django_xjobs" in modules
    lacking = {
        module: gaps
        for module in modules
        if (gaps := missing(imports_of(module), frozenset({"docs"})))
    }
    assert not lacking, f"`make docs` in a fresh clone would not import: {lacking}"


def test_the_reading_of_imports_sees_an_extras_module():
    """The checks above can fail: the modules that need an extra are found as needing it."""
    assert "health_check" in imports_of("django_xjobs.health_check")
    assert "factory" in imports_of("django_xjobs.testing.factories")
    assert missing(frozenset({"factory"}), frozenset({"binary"})) == {"factory": ["factory-boy"]}
    assert not missing(frozenset({"factory"}), frozenset({"testing"}))


#: run in a child process: the extras' modules cannot be imported, as in a venv without them
WITHOUT_EXTRAS = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # an import of it raises ModuleNotFoundError, as if not installed
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                    "django.contrib.sessions", "django.contrib.messages", "django_xjobs"],
    DATABASES={{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": "shop"}}}},
    TEMPLATES=[{{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                "OPTIONS": {{"context_processors": []}}}}],
    USE_TZ=True,
)
django.setup()
exec({smoke!r})
"""


@pytest.mark.process  # a child Python
def test_the_wheel_check_passes_where_no_extra_is_installed():
    """``make dist``'s check, in a process where no extra's module imports: each module that
    needs one is let off for that module alone, and every other module still imports."""
    import subprocess

    blocked = sorted({name for _, brings in check_wheel.EXTRA_MODULES.values() for name in brings})
    assert {"health_check", "factory", "django_tasks"} <= set(blocked)
    code = WITHOUT_EXTRAS.format(blocked=blocked, smoke=check_wheel.smoke(in_venv=False))
    env = {k: v for k, v in __import__("os").environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported" in result.stdout and "templates" in result.stdout
