"""Sphinx configuration for the django-xjobs documentation (``make docs``).

The pages are Markdown, read by MyST; the theme is Furo. The Python API reference
(reference/api.md) is read from the package's docstrings by autodoc, which imports the package:
Django is configured here with the smallest settings that let it import. Nothing connects to a
database, so the site still builds without one (the `docs` extra brings what the import needs).
"""

import sys
from pathlib import Path

import django
from django.conf import settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if not settings.configured:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_xjobs"],
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "docs"}},
        USE_TZ=True,
    )
    django.setup()

project = "django-xjobs"
author = "the django-xjobs authors"
copyright = "the django-xjobs authors"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns: list[str] = []
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # links such as settings.md#durations resolve to headings

# the reference reads as the code is written: in source order, hints in the signature only
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
add_module_names = False


def add_error_code(app, what, name, obj, options, lines):  # type: ignore[no-untyped-def]
    """Each error class's page entry ends with the code it carries, read from the class, so the
    reference cannot disagree with what ``str(error)`` starts with."""
    code = getattr(obj, "code", None) if what in ("exception", "class") else None
    if isinstance(code, str) and code.startswith("X_") and "code" in vars(obj):
        lines.extend(["", f"Code: ``{code}`` (see :doc:`errors`)."])


#: classes the package builds for you (a decorator, ``ctx``, ``TASKS``): their constructor's
#: arguments are not an API, so the reference shows none
BUILT_FOR_YOU = {
    "django_xjobs.JobHandle",
    "django_xjobs.CronHandle",
    "django_xjobs.steps.Steps",
    "django_xjobs.steps.asynchronous.AsyncSteps",
    "django_xjobs.Signal",
    "django_xjobs.backends.XJobsBackend",
}


def hide_constructor(app, what, name, obj, options, signature, return_annotation):  # type: ignore[no-untyped-def]
    if what == "class" and name in BUILT_FOR_YOU:
        return "", None
    return None


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-process-docstring", add_error_code)
    app.connect("autodoc-process-signature", hide_constructor)


html_theme = "furo"
html_title = "django-xjobs"
html_static_path: list[str] = []
pygments_style = "friendly"
pygments_dark_style = "monokai"
