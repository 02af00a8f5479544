"""Print the requirements of the project and of the extras named on the command line, one a line.

    python scripts/requirements.py demo > requirements-demo.txt

``make demo`` installs these instead of the project itself: ``run_demo.py`` imports
``django_xjobs`` from the checkout, and building an editable wheel (an isolated build
environment, setuptools fetched into it) was a third of a first run. An extra that names the
project (``django-xjobs[test]``) is expanded in place.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    name, optional = project["name"], project.get("optional-dependencies", {})
    found: list[str] = list(project["dependencies"])
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        if extra not in optional:
            raise SystemExit(f"pyproject.toml has no extra {extra!r}: {', '.join(optional)}")
        for line in optional[extra]:
            own = re.fullmatch(rf"{re.escape(name)}\[([^\]]+)\]", line.strip())
            if own:
                pending.extend(part.strip() for part in own.group(1).split(","))
            elif line not in found:
                found.append(line)
    return found


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
