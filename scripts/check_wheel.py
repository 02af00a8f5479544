"""Install a built wheel into a fresh virtualenv and check a minimal site that uses it.

    python scripts/check_wheel.py dist/django_xjobs-0.1.0-py3-none-any.whl

What ``make dist`` runs after building: a new virtualenv (outside the checkout, so nothing is
imported from it) gets the wheel with its ``binary`` extra; ``django-admin startproject`` makes
a site whose settings add ``django_xjobs`` and a PostgreSQL database (``check`` does not connect);
then ``manage.py check`` runs, and a shell imports every module of the package (each store
loads its ``.sql`` file at import) and loads every admin template, from the installed copy.
Any failure exits non-zero with the command's output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

SETTINGS = """
INSTALLED_APPS += ["django_xjobs"]
DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "shop"}}
XJOBS = {"DATABASE": "default"}
"""

#: the modules that need an extra the wheel is checked without (it is installed with `binary`
#: alone), each with its extra and the top-level modules that extra brings: such a module may
#: fail to import here only for want of one of those. tests/project/test_extras.py checks that
#: every other module imports with the project's own dependencies, and that each extra
#: declares what its modules import.
EXTRA_MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "django_xjobs.health_check": ("health", ("health_check",)),
    "django_xjobs.testing": ("testing", ("factory", "freezegun")),
    # Django 6 has django.tasks; on Django 5.2 the backport comes with the extra
    "django_xjobs.backends": ("tasks", ("django_tasks",)),
}

# run inside the installed site: the package must come from the venv, whole
SMOKE = """
import importlib, pkgutil, sys
from pathlib import Path
import django_xjobs
from django.template.loader import get_template

root = Path(django_xjobs.__file__).parent
if IN_VENV:
    assert root.is_relative_to(sys.prefix), f"django_xjobs imported from {root}, not the venv"
extra_modules = EXTRA_MODULES
modules = [info.name for info in pkgutil.walk_packages([str(root)], "django_xjobs.")]
for name in modules:
    try:
        importlib.import_module(name)
    except ImportError as error:
        # a module may say what to install in its own ImportError, raised from the original
        missing = (error.name or getattr(error.__cause__, "name", None) or "").split(".")[0]
        allowed = [
            brings
            for prefix, (extra, brings) in extra_modules.items()
            if name == prefix or name.startswith(prefix + ".")
        ]
        if not any(missing in brings for brings in allowed):
            raise
templates = sorted((root / "templates").rglob("*.html"))
for path in templates:
    get_template(path.relative_to(root / "templates").as_posix())
sql = sorted(root.rglob("*.sql"))
assert sql and templates, (sql, templates)
print(f"imported {len(modules)} modules ({len(sql)} .sql files), loaded {len(templates)} templates")
"""


def smoke(*, in_venv: bool = True) -> str:
    """The check run inside the site (``in_venv``: the package must come from the venv)."""
    return SMOKE.replace("EXTRA_MODULES", repr(EXTRA_MODULES)).replace("IN_VENV", repr(in_venv))


def run(*command: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True
    )
    if result.returncode:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def main(wheel: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="xjobs-wheel-") as folder:
        tmp = Path(folder)
        venv = tmp / "venv"
        run(sys.executable, "-m", "venv", "--without-pip", venv)
        python = venv / "bin" / "python"
        run(
            sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check",
            "--python", python, "install", f"{wheel.resolve()}[binary]",
        )  # fmt: skip
        run(venv / "bin" / "django-admin", "startproject", "shop", cwd=tmp)
        with (tmp / "shop" / "shop" / "settings.py").open("a") as settings:
            settings.write(SETTINGS)
        print(run(python, "manage.py", "check", cwd=tmp / "shop").strip())
        print(run(python, "manage.py", "shell", "-c", smoke(), cwd=tmp / "shop").strip())
        run(python, "manage.py", "xjobs", "--help", cwd=tmp / "shop")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
