"""Sphinx configuration for the django-xjobs documentation (``make docs``).

The pages are Markdown, read by MyST; the theme is Furo. No page imports the package, so the
site builds without a database or Django settings.
"""

project = "django-xjobs"
author = "the django-xjobs authors"
copyright = "the django-xjobs authors"
release = "0.1.0"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns: list[str] = []
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # links such as settings.md#durations resolve to headings

html_theme = "furo"
html_title = "django-xjobs"
html_static_path: list[str] = []
pygments_style = "friendly"
pygments_dark_style = "monokai"
