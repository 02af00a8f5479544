"""The reference pages keep step with the code: every error code, ``XJOBS`` key and default,
system check, log event and metric the package defines is documented, and nothing documented
there is gone from the code.

The names are read from the code (the error classes, ``conf.DEFAULTS``, the ``log.event`` calls,
the metric names in ``metrics/__init__.py``), not from a list kept here, so a name added later fails
these tests until the reference page lists it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from django_xjobs import conf, errors

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "django_xjobs"
REFERENCE = ROOT / "docs" / "reference"


def page(name: str) -> str:
    return (REFERENCE / name).read_text()


def first_column(text: str) -> set[str]:
    """The backquoted names in the first cell of every table row of a page."""
    return {m for m in re.findall(r"^\| `([^`]+)` \|", text, flags=re.M)}


@cache
def modules() -> tuple[tuple[Path, ast.Module], ...]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" not in path.parts:
            found.append((path, ast.parse(path.read_text(), filename=str(path))))
    return tuple(found)


def string_constants() -> Iterator[tuple[Path, str]]:
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield path, node.value


# --- error codes ------------------------------------------------------------------------------


def coded_classes(base: type) -> Iterator[type]:
    for cls in base.__subclasses__():
        yield cls
        yield from coded_classes(cls)


def error_codes() -> set[str]:
    """Every code the package can raise: each error class's own ``code``, the ``CODES`` table,
    and every ``code="X_..."`` given to a class at a raise site."""
    codes = {cls.code for cls in coded_classes(errors._Coded)} | set(errors.CODES)
    for _path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "code":
                value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    codes.add(value.value)
    return codes


def test_every_error_code_is_in_the_error_reference():
    """The docs list every error code (issue 16 item 7): each code the package can raise has a
    row in docs/reference/errors.md (SPEC ERR-01)."""
    documented = first_column(page("errors.md"))
    codes = error_codes()
    assert len(codes) > 20  # the reading above found the classes
    assert sorted(codes - documented) == []


def test_the_error_reference_lists_no_code_the_package_lacks():
    documented = {name for name in first_column(page("errors.md")) if name.startswith("X_")}
    assert sorted(documented - error_codes()) == []


def test_the_codes_table_holds_every_error_class():
    """``errors.CODES`` maps the codes our errors carry to their classes; a class added
    without its row (the two atomic-step errors once were) is found here, not by a reader
    (SPEC ERR-01)."""
    classes = [c for c in coded_classes(errors.XJobsError) if c.__module__ == errors.__name__]
    assert len(classes) > 20
    tabled = set(errors.CODES.values())
    # a declaration's error for a rule (InvariantDefinitionError, or one JobDefinitionError.of
    # made) carries its rule's code and is an instance of the rule's class, which stands for it;
    # JobDefinitionError itself is their base and is never raised as itself
    untabled = [
        c.__name__
        for c in classes
        if c not in tabled
        and c is not errors.JobDefinitionError
        and not (c.code in errors.CODES and issubclass(c, errors.CODES[c.code]))
    ]
    assert untabled == []


# --- settings ---------------------------------------------------------------------------------


def literal(value: Any) -> str:
    """A default as the settings page writes it: JSON-style strings, Python for the rest."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def settings_rows() -> dict[str, str]:
    rows = re.findall(r"^\| `([A-Z][A-Z_]+)` \| ([^|]+) \|", page("settings.md"), flags=re.M)
    return dict(rows)


def test_every_xjobs_key_and_its_default_is_in_the_settings_reference():
    rows = settings_rows()
    missing = sorted(set(conf.DEFAULTS) - set(rows))
    assert missing == [], f"XJOBS keys without a row in docs/reference/settings.md: {missing}"
    wrong = {
        key: (rows[key].strip(), literal(default))
        for key, default in conf.DEFAULTS.items()
        if f"`{literal(default)}`" not in rows[key]
    }
    assert wrong == {}, "the settings page's default cell must show the default in backquotes"


def test_the_settings_reference_lists_no_key_the_code_lacks():
    assert sorted(set(settings_rows()) - set(conf.DEFAULTS)) == []


def test_every_system_check_id_is_in_the_settings_reference():
    ids = {
        match
        for _path, text in string_constants()
        for match in re.findall(r"^django_xjobs\.[EW]\d{3}$", text)
    }
    assert len(ids) >= 6
    documented = first_column(page("settings.md"))
    assert sorted(ids - documented) == []


# --- log events -------------------------------------------------------------------------------


def log_aliases(tree: ast.Module) -> set[str]:
    """The names this module gave ``django_xjobs.log`` (``from . import log as events``)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module is None
        for alias in node.names
        if alias.name == "log"
    }


def calls_of_log_event(
    node: ast.AST, aliases: set[str], outer: list[ast.AST]
) -> Iterator[tuple[ast.Call, list[ast.AST]]]:
    """Each ``log.event(...)`` (or ``log.throttled``) call under ``node``, with its functions."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        outer = [*outer, node]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("event", "throttled")  # throttled: rate-limited events
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in aliases
    ):
        yield node, outer
    for child in ast.iter_child_nodes(node):
        yield from calls_of_log_event(child, aliases, outer)


def event_calls() -> Iterator[tuple[Path, ast.Call, list[ast.AST]]]:
    for path, tree in modules():
        for call, outer in calls_of_log_event(tree, log_aliases(tree), []):
            yield path, call, outer


def constant_arguments(function: str, index: int) -> set[str]:
    """Every string literal passed as positional argument ``index`` to ``function``."""
    found = set()
    for _path, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or len(node.args) <= index:
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            argument = node.args[index]
            if name == function and isinstance(argument, ast.Constant):
                found.add(argument.value)
    return found


def event_names() -> set[str]:
    """Every event name the package logs. A name built from a parameter
    (``f"{name}.signal"``) is expanded with the literals the callers pass for it; a name
    that cannot be read from the code fails, so it cannot go undocumented unseen."""
    names: set[str] = set()
    for path, call, outer in event_calls():
        where = f"{path.relative_to(ROOT)}:{call.lineno}"
        assert len(call.args) >= 2, f"log.event without a name at {where}"
        name = call.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            names.add(name.value)
            continue
        parts = name.values if isinstance(name, ast.JoinedStr) else []
        shape = [type(part).__name__ for part in parts]
        assert shape == ["FormattedValue", "Constant"], f"unreadable event name at {where}"
        head, tail = parts
        assert isinstance(head, ast.FormattedValue) and isinstance(head.value, ast.Name)
        assert isinstance(tail, ast.Constant)
        function = outer[-1]
        assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef), where
        index = [a.arg for a in function.args.args].index(head.value.id)
        prefixes = constant_arguments(function.name, index)
        assert prefixes, f"no caller of {function.name} names the event prefix at {where}"
        names |= {f"{prefix}{tail.value}" for prefix in prefixes}
    return names


def documented_events() -> set[str]:
    """Events in the tables of the log events page; one row may name two (`a` / `b`)."""
    text = page("log-events.md")
    rows = re.findall(r"^\| (`xjobs\.[^|]+) \|", text, flags=re.M)
    return {name for row in rows for name in re.findall(r"`(xjobs\.[a-z_.]+)`", row)}


def test_every_log_event_is_in_the_log_events_reference():
    names = event_names()
    assert len(names) > 30
    assert "xjobs.worker.signal" in names  # the f-string names were expanded
    assert sorted(names - documented_events()) == []


def test_the_log_events_reference_lists_no_event_the_code_lacks():
    assert sorted(documented_events() - event_names()) == []


# --- metrics ----------------------------------------------------------------------------------


def metric_names() -> set[str]:
    source = PACKAGE / "metrics"  # the package: the limits' series are in metrics/limits.py
    return {
        text
        for path, text in string_constants()
        if path.parent == source and re.fullmatch(r"xjobs_[a-z_]+", text)
    }


def test_every_metric_is_in_the_metrics_reference():
    names = metric_names()
    assert {"xjobs_queue_depth", "xjobs_jobs_total"} <= names
    documented = first_column(page("metrics.md"))
    assert sorted(names - documented) == []


def test_the_metrics_reference_lists_no_series_the_code_lacks():
    documented = {name for name in first_column(page("metrics.md")) if name.startswith("xjobs_")}
    assert sorted(documented - metric_names()) == []


# --- the Python API reference -----------------------------------------------------------------

#: the modules an application imports from; each one's ``__all__`` is its public surface
PUBLIC_MODULES = ("django_xjobs", "django_xjobs.testing", "django_xjobs.backends")
#: the ``ctx.step`` and handle methods a handler or a view writes, shown with their class
PUBLIC_METHODS = {
    "django_xjobs.steps.Steps": (
        "run",
        "sleep",
        "sleep_until",
        "wait_for_event",
        "atomic",
        "patched",
    ),
    "django_xjobs.JobHandle": ("enqueue", "enqueue_as", "enqueue_many", "using"),
}


def api_directives() -> list[tuple[str, str, list[str]]]:
    """``(kind, dotted target, :members: names)`` of each autodoc directive on the API page."""
    text = page("api.md")
    found = []
    pattern = r"^\.\. auto(\w+):: (\S+)\n((?:   :[\w-]+:.*\n)*)"
    for kind, target, options in re.findall(pattern, text, flags=re.M):
        members = re.search(r":members: (.+)", options)
        names = [n.strip() for n in members.group(1).split(",")] if members else []
        found.append((kind, target, names))
    return found


def resolve(dotted: str) -> Any:
    module_name, _, attribute = dotted.rpartition(".")
    try:
        module = importlib.import_module(dotted)
    except ImportError:
        return getattr(importlib.import_module(module_name), attribute)
    return module


def own_docstring(obj: Any) -> str:
    """The docstring an object declares itself: not one inherited from a base class, nor the
    ``Name(field: type, ...)`` text ``@dataclass`` writes for a class that has none."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
    doc = inspect.cleandoc(doc or "")
    if inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""
    return doc


def documented() -> dict[str, Any]:
    """Every object the API page renders, by the dotted name it is shown under."""
    objects = {}
    for _kind, target, members in api_directives():
        objects[target] = resolve(target)
        for member in members:
            objects[f"{target}.{member}"] = getattr(objects[target], member)
    return objects


def test_the_api_reference_and_the_reader_pages_are_in_the_toctree():
    index = (ROOT / "docs" / "index.md").read_text()
    entries = set(re.findall(r"^([a-z][\w/-]*)$", index, flags=re.M))
    pages = ["reference/api", *(name.removesuffix(".md") for name in READER_PAGES)]
    assert sorted(set(pages) - entries) == []


def test_every_public_name_is_in_the_api_reference():
    """Issue 23: the Python API reference renders every name a public module exports, so a
    name added to an ``__all__`` fails here until the page shows it."""
    targets = set(documented())
    missing = [
        f"{module}.{name}"
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
        if f"{module}.{name}" not in targets
    ]
    assert len(targets) > 60  # the directives were read
    assert missing == []


def test_every_error_class_is_in_the_api_reference_with_its_code():
    """Every error a caller can catch is on the page, exported or not; its code is added to
    its entry by docs/conf.py from the class, so it cannot drift."""
    targets = set(documented())
    # each parks a run inside the executor (a step, a snooze); never reaches a caller
    internal = {errors.StepSuspension, errors.JobSnooze}
    # the declaration errors JobDefinitionError.of makes for other rules are documented by it
    named = {v for v in vars(errors).values() if isinstance(v, type)}
    made = set(errors.JobDefinitionError._of.values()) - named
    classes = [
        c
        for c in coded_classes(errors._Coded)
        if c.__module__ == errors.__name__ and c not in internal and c not in made
    ]
    assert len(classes) > 30
    missing = [
        c.__name__
        for c in classes
        if f"django_xjobs.{c.__name__}" not in targets
        and f"django_xjobs.errors.{c.__name__}" not in targets
    ]
    assert missing == []


def test_the_api_reference_shows_the_public_step_and_handle_methods():
    targets = set(documented())
    wanted = {f"{cls}.{name}" for cls, names in PUBLIC_METHODS.items() for name in names}
    assert sorted(wanted - targets) == []


def test_everything_in_the_api_reference_has_a_docstring():
    """Autodoc renders an object without a docstring as a bare signature: the page would list
    a name and say nothing about it."""
    bare = [name for name, obj in documented().items() if not own_docstring(obj)]
    assert bare == []


def test_the_public_api_docstrings_carry_an_example():
    """STYLE: docstrings on the public API with a short example. The errors are exempt: a
    class's docstring is its default message."""
    public = [
        (f"{module}.{name}", getattr(importlib.import_module(module), name))
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
    ]
    public += [
        (f"{cls}.{name}", getattr(resolve(cls), name))
        for cls, names in PUBLIC_METHODS.items()
        for name in names
    ]
    without = [
        name
        for name, obj in public
        if not (inspect.isclass(obj) and issubclass(obj, BaseException))
        and not re.search(r"::\n|>>> ", own_docstring(obj))
    ]
    assert without == []


def test_the_examples_in_docstrings_stay_literal_blocks():
    """A docstring whose text after its first line is only an example loses that example's
    indentation to ``inspect.cleandoc``, and the reST reader then shows it as prose (or fails
    the strict build): each ``::`` must be followed by an indented block."""
    broken = []
    for name, obj in documented().items():
        lines = own_docstring(obj).splitlines()
        for index, line in enumerate(lines):
            if not line.rstrip().endswith("::"):
                continue
            after = [text for text in lines[index + 1 :] if text.strip()]
            indent = len(line) - len(line.lstrip())
            if not after or len(after[0]) - len(after[0].lstrip()) <= indent:
                broken.append(name)
    assert broken == []


# --- commands the user-facing pages tell a reader to run --------------------------------------

#: the pages written from a reader's side, new with issue 23
READER_PAGES = (
    "tutorial.md",
    "troubleshooting.md",
    "howto/from-procrastinate.md",
    "howto/from-django-q2.md",
)
COMMANDS = ("xjobs", "xjobs_worker", "xjobs_relay", "xjobs_scheduler", "xjobs_backfill")


def command_parser(name: str) -> Any:
    from django.core.management import get_commands, load_command_class

    parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
    # argparse takes "--queue" for "--queues": a page must spell each option out
    verbs = [verb for group in subparsers(parser) for verb in group.choices.values()]
    for each in [parser, *verbs]:
        each.allow_abbrev = False
    return parser


def subparsers(parser: Any) -> list[Any]:
    return [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]


def verb_parser(parser: Any, tokens: list[str]) -> Any:
    """The parser of ``xjobs show`` for ``["show", ...]``; the command's own for a command
    without verbs. An unknown verb fails here."""
    groups = subparsers(parser)
    if not groups or not tokens or tokens[0].startswith("-"):
        return parser
    assert tokens[0] in groups[0].choices, f"no verb {tokens[0]!r}"
    return groups[0].choices[tokens[0]]


def shown_commands(text: str) -> Iterator[tuple[str, bool]]:
    """``(command line, whole)``: each ``python manage.py ...`` line of a shell block (whole:
    it must parse with its arguments), and each inline ``xjobs...`` code span (a mention: its
    verb and options must exist, its arguments may be left out)."""
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            for part in re.split(r"\|\||&&", line.split("#")[0]):
                found = re.search(r"manage\.py (\S.*)", part)
                if found:
                    yield found.group(1).strip(), True
    for span in re.findall(r"`(?:python )?(?:manage\.py )?(xjobs[a-z_]* ?[^`]*)`", text):
        if span.split()[0] in COMMANDS:
            yield span, False


def test_every_command_a_page_shows_exists():
    """Issue 23: the pages (the tutorial, troubleshooting and migration pages first among
    them) name only commands, verbs and options the code has, and each full command line in a
    shell block parses."""
    import shlex
    import uuid

    from django.core.management import CommandError, get_commands

    wrong = []
    seen = 0
    pages = sorted((ROOT / "docs").rglob("*.md"))
    assert {str(p.relative_to(ROOT / "docs")) for p in pages} >= set(READER_PAGES)
    for path in pages:
        name = str(path.relative_to(ROOT / "docs"))
        for line, whole in shown_commands(path.read_text()):
            seen += 1
            # placeholders: <id> is a job id; [--state S] an optional part
            tokens = shlex.split(re.sub(r"<[^>]+>", str(uuid.uuid4()), line.replace("[", " ")))
            tokens = [t.rstrip("]") for t in tokens if t not in ("]", "...")]
            command, arguments = tokens[0], tokens[1:]
            if command not in get_commands():
                wrong.append(f"{name}: {line!r}: no command {command!r}")
                continue
            parser = command_parser(command)
            try:
                if whole:
                    parser.parse_args(arguments)
                    continue
                verb = verb_parser(parser, arguments)
                options = {t.split("=")[0] for t in arguments if t.startswith("--")}
                unknown = options - set(verb._option_string_actions)
                assert not unknown, f"unknown options {sorted(unknown)}"
            except (CommandError, AssertionError) as error:
                wrong.append(f"{name}: {line!r}: {error}")
    assert seen > 100
    assert wrong == []


def test_every_python_block_on_a_page_parses():
    """A snippet a reader copies is at least Python. The tutorial's blocks also run
    (tests/project/test_tutorial.py); the rest stand for code around them (``Order``, ``mail``)."""
    broken = []
    blocks = 0
    for path in sorted((ROOT / "docs").rglob("*.md")):
        for block in re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M):
            blocks += 1
            try:
                ast.parse(block)
            except SyntaxError as error:
                broken.append(f"{path.relative_to(ROOT)}: {error}")
    assert blocks > 50
    assert broken == []


# --- the behaviour reference: every cited id is defined there, once ------------------------------

#: where behaviour ids are cited: the package, the tests, the docs, the benchmarks, the fault
#: scenarios, the example project and the contributing guide
CITING = ("django_xjobs", "tests", "docs", "bench", "chaos", "example_project", "CONTRIBUTING.md")
CITING_SUFFIXES = {".py", ".md", ".sql", ".html", ".txt", ".toml", ".cfg", ".sh", ".yml", ".yaml"}
#: an id: a family prefix and a two-digit number, then ``..NN`` (a range) or ``/NN`` (a list)
BEHAVIOUR_ID = re.compile(r"\b([A-Z]{1,8})-(\d{2})\b((?:(?:\.\.|/)\d{2}\b)*)")
#: an id named by its citation word, whatever its family (a new family is caught too)
SPEC_CITED = re.compile(r"\b(?:SPEC|DESIGN)\s+([A-Z]{1,8})-\d{2}\b")
#: a test named after the ids it pins: ``test_outbox_12_...``, ``test_hang_03_04_...``,
#: ``test_lease_07_se_14_...`` (each family followed by its numbers)
TEST_NAMED = re.compile(r"\bdef test_((?:[a-z]+(?:_\d{2})+_)+)")
#: one family and its numbers in such a name: ``lease_07_``, ``hang_03_04_``
NAMED_FAMILY = re.compile(r"([a-z]+)((?:_\d{2})+)_")
#: a section cited as ``SPEC §9`` or ``DESIGN §7`` (``SPEC §3, §5`` cites both)
SECTION_WORD = re.compile(r"\b(SPEC|DESIGN)\b|§(\d+)")
#: the families of behaviour ids; the page may add more, and an id cited after SPEC or DESIGN
#: brings its own family
FAMILIES = {
    *("JOB", "ENQ", "STATE", "STEP", "EVT", "RETRY", "CLASS", "EXEC", "CANCEL", "LEASE", "HANG"),
    *("WORK", "SLOT", "LIMIT", "OUTBOX", "TASK", "SCHED", "INSP", "MET", "ERR", "DB", "DRV", "BF"),
    *("SE", "Q"),
}
#: a target of the page: ``(behaviour-JOB-01)=``
PAGE_TARGET = re.compile(r"^\((behaviour-[^)\s]+)\)=$", flags=re.M)
BEHAVIOUR_PAGE = REFERENCE / "behaviour.md"


def citing_lines() -> Iterator[tuple[str, str]]:
    for name in CITING:
        root = ROOT / name
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in paths:
            if path.suffix in CITING_SUFFIXES and path.is_file() and path != BEHAVIOUR_PAGE:
                where = str(path.relative_to(ROOT))
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    yield f"{where}:{number}", line


def behaviour_targets() -> list[str]:
    """The page's targets, or none while it does not exist (every cited id is then missing)."""
    if not BEHAVIOUR_PAGE.exists():
        return []
    return PAGE_TARGET.findall(BEHAVIOUR_PAGE.read_text())


def defined_ids() -> set[str]:
    return {t.removeprefix("behaviour-") for t in behaviour_targets()}


def cited_ids(families: set[str]) -> dict[str, str]:
    """Every behaviour id cited in the repository -> where it is first cited. An id counts when
    its family is one the page defines, or when ``SPEC``/``DESIGN`` names it; ranges
    (``SE-28..36``) and lists (``Q-03/04``) cite every id they span."""
    cited: dict[str, str] = {}
    lines = list(citing_lines())
    families = families | {m for _, line in lines for m in SPEC_CITED.findall(line)}
    for where, line in lines:
        for family, first, tail in BEHAVIOUR_ID.findall(line):
            if family not in families:
                continue
            numbers = [int(first)]
            for sep, n in re.findall(r"(\.\.|/)(\d{2})", tail):
                numbers += range(numbers[-1] + 1, int(n) + 1) if sep == ".." else [int(n)]
            for n in numbers:
                cited.setdefault(f"{family}-{n:02d}", where)
        for named in TEST_NAMED.findall(line):
            for ident in named_ids(named, families):
                cited.setdefault(ident, where)
        word = None
        for keyword, section in SECTION_WORD.findall(line):
            if keyword:
                word = keyword
            elif word:
                cited.setdefault(f"{word.lower()}-{section}", where)
    return cited


def named_ids(named: str, families: set[str]) -> list[str]:
    """The ids a test's name cites: ``lease_07_se_14_`` -> LEASE-07, SE-14."""
    return [
        f"{family.upper()}-{n}"
        for family, numbers in NAMED_FAMILY.findall(named)
        if family.upper() in families
        for n in numbers.strip("_").split("_")
    ]


def ids_in(text: str, families: set[str]) -> set[str]:
    """The ids ``text`` cites, ranges (``SE-28..36``) and lists (``Q-03/04``) spelt out."""
    found = set()
    for family, first, tail in BEHAVIOUR_ID.findall(text):
        if family not in families:
            continue
        numbers = [int(first)]
        for sep, n in re.findall(r"(\.\.|/)(\d{2})", tail):
            numbers += range(numbers[-1] + 1, int(n) + 1) if sep == ".." else [int(n)]
        found |= {f"{family}-{n:02d}" for n in numbers}
    return found


def test_every_behaviour_id_the_repository_cites_is_defined_in_the_behaviour_reference():
    """A contributor who reads ``SPEC LEASE-11`` in a comment, a test named
    ``test_outbox_12_...`` or ``DESIGN §7`` finds it in docs/reference/behaviour.md."""
    defined = {d.upper() for d in defined_ids()}
    families = {d.split("-")[0] for d in defined if re.fullmatch(r"[A-Z]+-\d{2}", d)}
    cited = cited_ids(families | FAMILIES)
    assert len(cited) > 250  # the collection found the citations
    missing = sorted(
        f"{ident} (cited at {where})"
        for ident, where in cited.items()
        if ident.upper() not in defined
    )
    assert missing == []


def test_the_behaviour_reference_defines_each_id_once_as_a_labelled_entry():
    """One target per id (anchors are case-insensitive), each followed by its bold entry, and
    the page is in the documentation's table of contents."""
    text = page("behaviour.md")
    targets = behaviour_targets()
    lowered = [t.lower() for t in targets]
    assert sorted({t for t in lowered if lowered.count(t) > 1}) == []
    entries = re.findall(r"^\(behaviour-([A-Z]+-\d{2})\)=\n\*\*([A-Z]+-\d{2})\*\* — \S", text, re.M)
    assert len(entries) > 280
    assert [a for a, b in entries if a != b] == []
    bold = re.findall(r"^\*\*([A-Z]+-\d{2})\*\*", text, flags=re.M)
    assert sorted(bold) == sorted(a for a, _ in entries)
    assert "reference/behaviour" in (ROOT / "docs" / "index.md").read_text()


# --- what a page renders (issue 42) ----------------------------------------------------------

MARKDOWN = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def cells(row: str) -> int:
    """The cells of a Markdown table row: its unescaped ``|`` split it (GFM's rule, inside a
    code span too, which is why ``\\|`` is written there)."""
    parts = re.split(r"(?<!\\)\|", row.strip())
    return len(parts) - 2 if row.strip().endswith("|") else len(parts) - 1


def table_problems(text: str) -> list[str]:
    """Each run of lines starting with ``|`` outside a code fence must be a table MyST renders:
    a header row, a delimiter row, and every row with the header's cells. A run cut off from its
    header by a blank line renders as a paragraph of raw ``|`` text."""
    problems: list[str] = []
    lines = text.splitlines()
    fenced, at = False, 0
    while at < len(lines):
        line = lines[at]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            at += 1
            continue
        start = at
        while at < len(lines) and lines[at].startswith("|"):
            at += 1
        rows = lines[start:at]
        delimiter = rows[1].replace(" ", "") if len(rows) > 1 else ""
        if not re.fullmatch(r"\|(:?-{3,}:?\|)+", delimiter):
            problems.append(f"line {start + 1}: rows with no header: {rows[0][:70]}")
            continue
        width = cells(rows[0])
        problems += [
            f"line {start + n + 1}: {cells(row)} cells, its header {width}: {row[:70]}"
            for n, row in enumerate(rows)
            if cells(row) != width
        ]
    return problems


def test_a_table_cut_from_its_header_is_caught():
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert table_problems(table) == []
    assert table_problems(table + "\n| 3 | 4 |\n") == ["line 5: rows with no header: | 3 | 4 |"]
    assert table_problems(table + "| 3 | 4 | 5 |\n")
    assert table_problems("```\n| not | a table |\n```\n") == []
    assert table_problems("| `a\\|b` | c |\n|---|---|\n") == []


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_table_renders_as_a_table(path):
    """Issue 42: the worker's options table had its ``--processes`` row twice and rows after a
    stray blank line printed as raw ``|`` text (so did the ``xjobs limit`` row and two more)."""
    assert table_problems(path.read_text()) == []


def repeated_items(text: str) -> list[str]:
    """A list's items that open with the bold lead an earlier item of the same list (no
    heading between) opened with: a paragraph pasted twice, or half of one left behind."""
    seen: dict[str, int] = {}
    found = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        if line.startswith("#"):
            seen = {}
        lead = re.match(r"^- \*\*(.+?)\*\*", line)
        if lead:
            if lead.group(1) in seen:
                found.append(f"line {number}: {lead.group(1)!r} (also line {seen[lead.group(1)]})")
            seen[lead.group(1)] = number
    return found


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_list_has_an_item_twice(path):
    """Issue 42: the admin reference had a truncated copy of "A job's page" above the whole."""
    assert repeated_items(path.read_text()) == []


def test_every_public_name_is_told_on_a_page_a_reader_reads():
    """The API reference renders each name from its docstring; each is also met where a reader
    learns the feature (the README, a guide, a how-to, a concept page), so a name added to
    ``django_xjobs.__all__`` fails here until a page says what it is for."""
    import django_xjobs

    pages = [ROOT / "README.md"] + [
        p for p in (ROOT / "docs").rglob("*.md") if p.name not in ("api.md", "changelog.md")
    ]
    text = "\n".join(p.read_text() for p in pages)
    untold = [
        name for name in django_xjobs.__all__ if not re.search(rf"\b{re.escape(name)}\b", text)
    ]
    assert untold == []


def test_getting_started_names_every_table_migrate_makes(db):
    """Issue 42: the page listed 8 of the tables; it names each one ``migrate`` makes."""
    from django.db import connection

    made = {t for t in connection.introspection.table_names() if t.startswith("x_")}
    text = (ROOT / "docs" / "getting-started.md").read_text()
    named = set(re.findall(r"^\| `(x_\w+)` \|", text, flags=re.M))
    assert len(made) > 10
    assert named == made


#: each family of the product, the page the README links for it, and what its section names
README_FAMILIES = {
    "docs/concepts/workflows.md": ("Batch(", "after=", "call_many"),
    "docs/howto/limits.md": ("limit_key", "rate_limit", "RateLimited", "FAIR_SHARE"),
    "docs/howto/operating.md": (
        "xjobs pause",
        "cron pause",
        "expires_in",
        "ctx.snooze",
        "ctx.progress",
        "debounce",
    ),
    "docs/troubleshooting.md": ("xjobs why",),
    "docs/howto/kubernetes.md": ("--health-port",),
    "docs/reference/admin.md": ("overview",),
}


@pytest.mark.parametrize("page", list(README_FAMILIES))
def test_the_readme_tells_each_family_and_links_its_page(page):
    """Issue 42: the README described the product of two waves ago; each family has a short
    section there that names its features and links the page that tells the rest."""
    readme = (ROOT / "README.md").read_text()
    assert f"]({page})" in readme or f"]({page}#" in readme, page
    assert (ROOT / page).is_file()
    missing = [word for word in README_FAMILIES[page] if word not in readme]
    assert missing == []


# --- every behaviour is pinned by a test, and its entry lists where -------------------------------

TESTS = ROOT / "tests"


def page_families() -> set[str]:
    return {d.split("-")[0] for d in defined_ids() if re.fullmatch(r"[A-Z]+-\d{2}", d)}


@cache
def pinned_by() -> dict[str, set[str]]:
    """Each id -> the test files with a test function that cites it: in its name
    (``test_outbox_12_...``), its docstring (``SPEC OUTBOX-12``) or a comment in its body, what
    CONTRIBUTING calls a test that pins a behaviour. A comment above a test, or a module's
    docstring, pins nothing."""
    families = page_families()
    pinned: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, filename=where)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not node.name.startswith("test_"):
                continue
            named = TEST_NAMED.match(f"def {node.name}")
            body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            ids = ids_in(body, families)
            ids |= set(named_ids(named.group(1), families) if named else ())
            for ident in ids:
                pinned.setdefault(ident, set()).add(where)
    return pinned


def entries() -> dict[str, str]:
    """Each entry of the behaviour page, by id: its text from its target to the next target or
    heading."""
    found = {}
    chunks = re.split(r"^(?=\(behaviour-|#)", page("behaviour.md"), flags=re.M)
    for chunk in chunks:
        target = re.match(r"\(behaviour-([A-Z]+-\d{2})\)=\n", chunk)
        if target:
            found[target.group(1)] = chunk
    return found


def test_every_behaviour_on_the_page_is_pinned_by_a_test_function():
    """Issue 39: an id no test function cites is a promise nothing keeps (five child-job entries
    and a cron-control one were cited by a module's docstring and a section's comment only)."""
    defined = set(entries())
    assert len(defined) > 280  # the page was read
    assert sorted(defined - set(pinned_by())) == []


def test_every_behaviour_entry_has_one_tests_list_naming_files_that_pin_it():
    """Each entry ends with one ``*Tests:*`` list (an outbox entry once had two, 60 entries none),
    and every file it names has a test function that cites the entry's id: a list never names
    a file that no longer pins it."""
    pinned = pinned_by()
    wrong = []
    for ident, text in entries().items():
        lists = text.count("*Tests:*")
        if lists != 1:
            wrong.append(f"{ident}: {lists} Tests lists")
            continue
        named = re.findall(r"`(tests/[^`]+)`", text.split("*Tests:*")[1])
        if not named:
            wrong.append(f"{ident}: an empty Tests list")
        wrong += [
            f"{ident}: {path} is listed but none of its tests cites {ident}"
            for path in named
            if path not in pinned.get(ident, set())
        ]
    assert wrong == []
