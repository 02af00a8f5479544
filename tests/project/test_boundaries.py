"""The floor plan, as tests (DESIGN §3, issue 27).

The package is layered base -> drivers -> run -> roles -> operator, and an import never climbs a
layer — not at module level, not inside a function. A module's layer is the longest dotted prefix listed for it, so a package may serve
several layers (``limits``): it then lists every module under its layer, and its ``__init__``
imports nothing. No import cycle, counting the imports inside functions and the package
``__init__`` every import of a submodule runs. Storage sits behind the driver: no module outside
``drivers/`` names a concrete driver, store or listener, and every SQL statement lives under
``drivers/postgres/``. The driver protocol is the only door to storage (STYLE "Seams"): callers
never ask a driver its name or probe it for attributes, and the PostgreSQL driver never leans on
the memory one. ``TYPE_CHECKING`` imports count like any other (issue 41): they never run, but
a module that types its arguments with a class from above it, or from a module that imports
it, depends on that module all the same — a reader cannot understand it alone, and the day the
annotation is needed at run time (a ``dataclass`` field, an ``isinstance``) the cycle is real.
No module is over 600 lines."""

from __future__ import annotations

import ast
import re
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
        if "postgres" not in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and "memory" in (node.module or ""):
                found.append(f"{path.name}:{node.lineno}: from {node.module}")
    assert found == []


# --- the layers ---------------------------------------------------------------------------------

#: each top-level module or package of django_xjobs, by layer (lowest first)
LAYERS: dict[str, list[str]] = {
    "base": [
        "classify",
        "clock",
        "conf",
        "crypt",
        "durations",
        "errors",
        "history",
        "ids",
        "limits",
        "limits.keys",
        "log",
        "models",
        "payload",
        "redact",
        "retry",
        "rollup",
        "states",
        "text",
    ],
    "drivers": ["drivers", "limits.claims"],
    "run": ["declarations", "limits.rate_limited", "metrics", "run", "steps"],
    "roles": ["backends", "backfills", "limits.worker", "outbox", "scheduler", "worker"],
    "operator": [
        "__init__",
        "admin",
        "apps",
        "health_check",
        "jobs",
        "limits.operator",
        "management",
        "operations",
        "testing",
        "views",
    ],
}
#: each module's layer is that of the longest dotted prefix listed: a package that serves several
#: layers (limits) lists every module of it, and its ``__init__`` imports nothing (importing any
#: of its modules runs the ``__init__`` first, whatever layer the importer is in)
#: what the package root holds besides the base: the public face (the package, its app config, and
#: the two paths users write into their settings and urls, and the jobs the library declares,
#: found where every app's are)
PUBLIC_FACE = {"__init__", "apps", "health_check", "jobs", "views"}
RANK = {name: rank for rank, names in enumerate(LAYERS.values()) for name in names}
#: what only drivers/ may name: the concrete drivers, their stores and the listener
CONCRETE = re.compile(r"^(Postgres|Memory)[A-Z]\w*$|^(Listener|Polling)$")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path, _ in modules()}


def imports(path: Path, tree: ast.Module) -> list[tuple[int, str, list[str]]]:
    """(line, module imported, names) for every import of django_xjobs, wherever it sits (at
    module level, in a function, under ``TYPE_CHECKING``); a name that is a submodule counts as
    that module."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, []) for a in node.names if a.name.startswith("django_xjobs")
            ]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            if not base.startswith("django_xjobs"):
                continue
            names = [a.name for a in node.names]
            for name in names:
                target = f"{base}.{name}"
                found.append((node.lineno, target if target in MODULES else base, [name]))
    return found


def _owner(module: str) -> str:
    while module not in MODULES and "." in module:
        module = module.rpartition(".")[0]
    return module


def layer(module: str) -> str:
    """The name ``LAYERS`` lists ``module`` under: the longest dotted prefix listed (below
    ``django_xjobs``), else its top-level name, which ``test_every_module_has_a_layer`` refuses."""
    parts = module.split(".")[1:] or ["__init__"]
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in RANK:
            return name
    return parts[0]


def edges() -> dict[str, set[str]]:
    """Module -> the modules importing it runs, including each package ``__init__`` on the way
    (importing ``a.b.c`` runs ``a.b`` first); the root package is left out (it imports the
    public face, so everything would meet there)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for path, tree in modules():
        here = module_name(path)
        for _, target, _names in imports(path, tree):
            target = _owner(target)
            if target != here:
                graph[here].add(target)  # what it names, its own package's __init__ too
            parts = target.split(".")
            for end in range(2, len(parts)):
                step = ".".join(parts[:end])
                # the packages on the way, but not its own: those already run before it
                if step in MODULES and step != here and not here.startswith(step + "."):
                    graph[here].add(step)
    return graph


def test_every_module_has_a_layer():
    assert sorted({layer(m) for m in MODULES} - set(RANK)) == []


def test_a_package_split_across_layers_lists_every_module_and_its_init_imports_nothing():
    layer_of = {name: layer_name for layer_name, names in LAYERS.items() for name in names}
    packages = {name.split(".")[0] for name in RANK if "." in name}
    unlisted, importing = [], []
    for package in sorted(packages):
        layers = {v for k, v in layer_of.items() if k == package or k.startswith(package + ".")}
        if len(layers) < 2:
            continue
        for module in MODULES:
            name = module.partition(".")[2]
            if name.startswith(package + ".") and name not in RANK:
                unlisted.append(name)
        init = MODULES[f"django_xjobs.{package}"]
        for node in ast.walk(ast.parse(init.read_text())):
            if isinstance(node, ast.Import) or (
                isinstance(node, ast.ImportFrom) and node.module != "__future__"
            ):
                importing.append(f"{init.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert unlisted == []
    assert importing == []


#: the most modules (``*.py`` files) the package root holds (issue 41): the base and the public
#: face, not a concept that has a package of its own
MAX_ROOT = 20


def test_the_package_root_holds_only_the_base_and_the_public_face():
    root = {path.stem for path in PACKAGE.glob("*.py")}
    assert sorted(root - set(LAYERS["base"]) - PUBLIC_FACE) == []
    assert len(root) <= MAX_ROOT, sorted(root)


def test_the_floor_plan_in_contributing_names_every_top_level_module_under_its_layer():
    text = (Path(__file__).resolve().parents[2] / "CONTRIBUTING.md").read_text()
    block = text.split("## The floor plan", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    named: dict[str, set[str]] = {}
    layer_here = ""
    for line in block.splitlines():
        if line[:1].strip():
            layer_here = line.split()[0]
        words = re.findall(r"\w+", line)
        # a module of a package split across layers by its path: limits/keys.py
        words += [path.replace("/", ".") for path in re.findall(r"\w+(?:/\w+)+", line)]
        named.setdefault(layer_here, set()).update(words)
    missing = [
        f"{layer_name}: {name}"
        for layer_name, names in LAYERS.items()
        for name in names
        if name not in named.get(layer_name, set())
    ]
    assert missing == []


def test_no_import_climbs_a_layer():
    climbs = []
    for path, tree in modules():
        here = module_name(path)
        for lineno, target, _ in imports(path, tree):
            if RANK[layer(_owner(target))] > RANK[layer(here)]:
                climbs.append(f"{path.relative_to(PACKAGE)}:{lineno}: {here} -> {target}")
    assert climbs == []


def test_no_import_cycle():
    graph = edges()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for start in sorted(graph):
        if start not in seen:
            visit(start, [start])
    assert cycles == []


#: the most lines a module of the package holds (issue 41): past it a module holds more than one
#: concept, and a reader more than one screenful of them at a time
MAX_LINES = 600


def _lines() -> dict[str, int]:
    return {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines()) for path, _ in modules()
    }


def test_no_module_is_over_600_lines():
    over = {name: n for name, n in _lines().items() if n > MAX_LINES}
    assert over == {}, f"split these: no module is over {MAX_LINES} lines: {over}"


def test_no_concrete_driver_is_named_outside_drivers():
    found = []
    for path, tree in modules():
        if "drivers" in path.relative_to(PACKAGE).parts:
            continue
        for lineno, target, names in imports(path, tree):
            concrete_module = target.startswith(
                ("django_xjobs.drivers.postgres", "django_xjobs.drivers.memory")
            )
            if concrete_module or any(CONCRETE.match(n) for n in names):
                found.append(f"{path.relative_to(PACKAGE)}:{lineno}: {target} {names}")
    assert found == []


#: a string that is a SQL statement: a verb, then what only a statement has after it
SQL = re.compile(
    r"^\s*(SELECT\s.+\bFROM\b|SELECT\s+\w+\(|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"WITH\s+\w+\s+AS|CREATE\s|ALTER\s|DROP\s|LISTEN\s|NOTIFY\s|LOCK\s|SET\s+\w+\s*(=|TO))",
    re.DOTALL,  # upper case: our statements are; prose is not
)


def test_every_sql_statement_lives_under_drivers_postgres():
    postgres = PACKAGE / "drivers" / "postgres"
    outside = [
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.sql") if postgres not in p.parents
    ]
    assert outside == []
    found = []
    for path, tree in modules():
        if postgres in path.parents:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.match(node.value)
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:60]!r}")
    assert found == []


def _builds_an_error(func: ast.expr) -> bool:
    """A call that builds an error: a class named ``...Error`` (``JobDefinitionError(...)``,
    ``errors.InvariantError(...)``) or a class computed in place (``type(error)(...)``,
    ``JobDefinitionError.of(rule)(...)``)."""
    if isinstance(func, ast.Call):
        return True
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name.endswith("Error")


def test_each_error_is_raised_with_its_own_class():
    """Issue 41: a code belongs to one class, and the package raises it with that class. No
    ``SomeError(..., code="X_OTHER")``: ``except CronInvalidError`` must catch every bad cron, and
    a class's documented code must be the code its instances carry. ``code=`` stays for an app's
    own codes on its own errors."""
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and _builds_an_error(node.func)
                and any(keyword.arg == "code" for keyword in node.keywords)
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node.func)}")
    assert found == []


# --- the driver contract: small protocols, one per store (issue 41) ----------------------------

#: the most members a protocol of the driver contract has: past it a store holds more than one
#: family of verbs
MAX_MEMBERS = 15


def _contract_protocols() -> dict[str, tuple[list[str], set[str]]]:
    """Each ``Protocol`` class of ``drivers/contract/``: its contract bases and its own members
    (methods, properties and annotated attributes in its body)."""
    found: dict[str, tuple[list[str], set[str]]] = {}
    for path in sorted((PACKAGE / "drivers" / "contract").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(base) for base in node.bases]
            if "Protocol" not in bases:
                continue
            own = {
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            } | {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
            found[node.name] = (bases, own)
    return found


def protocol_members() -> dict[str, int]:
    """Members per protocol, counting what it takes from the contract's protocols it extends:
    ``JobDriver`` answers every verb of ``JobStore``, ``RunStore``, ... it is built from."""
    protocols = _contract_protocols()

    def members(name: str) -> set[str]:
        bases, own = protocols[name]
        return own.union(*(members(base) for base in bases if base in protocols))

    return {name: len(members(name)) for name in protocols}


def test_every_driver_protocol_has_at_most_15_members():
    counts = protocol_members()
    assert counts, "no protocol found in drivers/contract/"
    over = {name: n for name, n in counts.items() if n > MAX_MEMBERS}
    assert over == {}, f"split these, a protocol has at most {MAX_MEMBERS} members: {over}"


# --- types at the seams: a ceiling that only comes down (issue 41) ------------------------------

#: defs whose parameter or return annotation names ``Any``; 359 before issue 41's types slice.
#: Lower it when you take one out; never raise it: give the value its type (``object`` for a
#: value only inspected, ``Mapping[str, object]`` for one only read, a TypeVar, a TypedDict)
MAX_ANY_SIGNATURES = 225
#: ``# type: ignore`` comments: quick_init's three and LoggerAdapter.extra's, each saying why
MAX_TYPE_IGNORES = 4


def _names_any(annotation: ast.expr) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(annotation)
    )


def _any_signatures() -> list[str]:
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            annotations = [p.annotation for p in params if p is not None and p.annotation]
            if any(_names_any(a) for a in [*annotations, *filter(None, [node.returns])]):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    return found


def test_any_in_signatures_stays_under_its_ceiling():
    found = _any_signatures()
    assert len(found) <= MAX_ANY_SIGNATURES, (
        f"{len(found)} defs name Any in a parameter or return annotation, over the ceiling of "
        f"{MAX_ANY_SIGNATURES} (counted by _any_signatures(): every def under django_xjobs/, "
        "migrations aside, with Any anywhere in a parameter's or the return's annotation). "
        "Give the new value its type instead of Any"
    )


def test_type_ignores_stay_under_their_ceiling():
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path, _ in modules()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# type: ignore" in line
    ]
    assert len(found) <= MAX_TYPE_IGNORES, (
        f"{len(found)} '# type: ignore' comments under django_xjobs/ (migrations aside), over the "
        f"ceiling of {MAX_TYPE_IGNORES}: {found}. Narrow the value, or type it, instead"
    )
