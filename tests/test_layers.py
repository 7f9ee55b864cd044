"""The layers stay where the README says: the Django-free libraries load no Django, Celery,
Channels or Redis; the packages import each other only along the edges listed here; no
module imports itself back through others, not even for type annotations; no module
outgrows its room; inside the apps each sub-package imports only what its docstring lists,
two sub-packages never import each other both ways, and no package crowds more than 15
modules."""

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sources import syntax_tree

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dashboard", "fleet", "traces", "emulator")

# The Django-free libraries, and what none of them may load.
LIBRARIES = ("fleet.asicmon", "fleet.asimov", "traces.atrace", "emulator")
FRAMEWORKS = ("django", "celery", "kombu", "channels", "redis", "rest_framework", "daphne")

# Layers, bottom up: a Django-free library is a layer of its own; the rest of each package is
# another. `dashboard` is the project shell (settings, urls, asgi, celery, the stack runner):
# no app imports it.
LAYERS = ("fleet.asicmon", "fleet.asimov", "traces.atrace", "emulator", "fleet", "traces", "dashboard")

# Who may import whom (besides itself): only downward, to a layer listed before it. A new edge
# fails `test_only_the_listed_edges_between_layers` until it is added here on purpose. An app
# reaches one above it through a signal that app subscribes to (fleet.signals), never an import.
ALLOWED_EDGES = {
    ("fleet.asimov", "fleet.asicmon"),  # specs compile into Asicmon monitor classes
    ("emulator", "traces.atrace"),  # the emulator's tracing builds Atrace's trace model
    ("emulator", "fleet.asimov"),  # a device type's fitted performance model is in its spec
    ("emulator", "fleet.asicmon"),  # a replay asks the ladder's own rules and the error catalogue (emulator/replay)
    ("fleet", "fleet.asicmon"),
    ("fleet", "fleet.asimov"),
    ("fleet", "emulator"),  # fleet/hosts/emulated_monitors.py wires the emulated fleet to its specs
    ("traces", "traces.atrace"),
    ("traces", "emulator"),  # captures run the emulated device's workload
    ("traces", "fleet"),  # a trace belongs to a device; its socket is a fleet.consumers one
    ("dashboard", "fleet"),  # the shell's routing includes each app's
    ("dashboard", "traces"),
    ("dashboard", "emulator"),  # the settings' default fleet types are the emulator's
}

# Inside Atrace, each subpackage imports only those before it here (and errors.py).
ATRACE_SUBPACKAGES = ("model", "io", "analysis", "render")

MAX_LINES = 500
LONG_MODULES_ALLOWED = ("migrations",)


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str | None:
    return next((layer for layer in LAYERS if module == layer or module.startswith(layer + ".")), None)


def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per test process (several tests walk them all)."""
    return syntax_tree(path)


def _imports(module: str, path: Path, *, top_level_only: bool, type_checking: bool = True) -> frozenset[str]:
    """Modules of this project that ``module`` imports (``top_level_only``: at import time,
    leaving out function bodies and ``if TYPE_CHECKING:`` blocks; ``type_checking=False``
    leaves those blocks out in any case)."""
    found = {
        name for name, in_function, in_type_checking in _import_statements(module, path)
        if not (top_level_only and (in_function or in_type_checking)) and not (in_type_checking and not type_checking)
    }
    return frozenset(m for m in (_known(name) for name in found) if m and m != module)


# The nodes an import statement can be found under: statements hold statements (bodies, else
# branches), as do except clauses and match cases; an expression never holds one.
_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


@functools.cache
def _import_statements(module: str, path: Path) -> tuple[tuple[str, bool, bool], ...]:
    """What each import statement of ``module`` names, with whether the statement is in a
    function body and whether it is in an ``if TYPE_CHECKING:`` block (either branch): one
    walk of the tree for every way `_imports` is asked."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def visit(node, in_function: bool, in_type_checking: bool):
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _HOLDERS):
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function, in_type_checking) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                found.extend((f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base, in_function,
                              in_type_checking) for alias in child.names)
            visit(
                child,
                in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)),
                in_type_checking or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)),
            )

    visit(_tree(path), False, False)
    return tuple(found)


def _known(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@pytest.mark.parametrize("library", LIBRARIES)
def test_django_free_library_loads_no_framework(library):
    modules = sorted(m for m in MODULES if _layer(m) == library and "__main__" not in m)
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"{library} loads {result.stdout.strip()}"


def test_only_the_listed_edges_between_layers():
    edges: dict[tuple[str, str], str] = {}
    for module, path in MODULES.items():
        for target in _imports(module, path, top_level_only=False):
            edge = (_layer(module), _layer(target))
            if edge[0] != edge[1]:
                edges.setdefault(edge, f"{module} imports {target}")
    unexpected = {edge: why for edge, why in edges.items() if edge not in ALLOWED_EDGES}
    assert not unexpected, f"imports across layers not in ALLOWED_EDGES: {unexpected}"


def test_the_allowed_edges_point_down():
    upward = {(a, b) for a, b in ALLOWED_EDGES if LAYERS.index(a) <= LAYERS.index(b)}
    assert not upward, f"edges that do not point to a lower layer: {upward}"


def test_asicmon_knows_neither_asimov_nor_the_emulator():
    for module, path in MODULES.items():
        if _layer(module) == "fleet.asicmon":
            targets = {_layer(t) for t in _imports(module, path, top_level_only=False)}
            assert targets <= {"fleet.asicmon"}, f"{module} imports {targets}"


def _atrace_subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["traces", "atrace"] and len(parts) > 2 and parts[2] in ATRACE_SUBPACKAGES else None


def test_atrace_subpackages_import_only_those_before_them():
    checked = 0
    for module, path in MODULES.items():
        mine = _atrace_subpackage(module)
        if mine is None:
            continue
        allowed = set(ATRACE_SUBPACKAGES[: ATRACE_SUBPACKAGES.index(mine) + 1])
        for target in _imports(module, path, top_level_only=False):
            if _layer(target) != "traces.atrace" or target == "traces.atrace.errors":
                continue
            assert _atrace_subpackage(target) in allowed, f"{module} imports {target}"
            checked += 1
    assert checked > 50  # the walk saw Atrace's imports


def test_no_import_cycle_between_modules():
    """At import time: an import inside a function runs later and is left out."""
    graph = {m: _imports(m, p, top_level_only=True) for m, p in MODULES.items()}
    cycles = [scc for scc in _strongly_connected(graph) if len(scc) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_no_import_cycle_even_through_imports_inside_functions():
    """An import inside a function still ties the two modules together: no cycle either way."""
    graph = {m: _imports(m, p, top_level_only=False, type_checking=False) for m, p in MODULES.items()}
    cycles = [scc for scc in _strongly_connected(graph) if len(scc) > 1]
    assert not cycles, f"import cycles through imports inside functions: {cycles}"


BENCHMARKS = {f"benchmarks.{path.stem}": path for path in sorted((ROOT / "benchmarks").glob("*.py"))}


def _benchmark_imports(path: Path) -> set[str]:
    """The benchmarks (run as scripts: ``from bench_uploads import ...``) a benchmark imports."""
    found = set()
    for node in ast.walk(_tree(path)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for name in names:
            name = name.removeprefix("benchmarks.")
            if f"benchmarks.{name}" in BENCHMARKS:
                found.add(f"benchmarks.{name}")
    return found


def test_no_import_circle_even_for_type_checking():
    """No circle of modules at all: imports inside functions and under ``if TYPE_CHECKING:``
    count too (a table that names the class calling it is still tied to it; it depends on a
    small interface instead), and the benchmarks, which import each other as scripts."""
    graph = {m: _imports(m, p, top_level_only=False, type_checking=True) for m, p in MODULES.items()}
    graph |= {m: _benchmark_imports(p) - {m} for m, p in BENCHMARKS.items()}
    assert sum(map(len, graph.values())) > 1000  # the walk saw the project's imports
    assert any(graph[m] for m in BENCHMARKS), "the walk saw the benchmarks' imports of each other"
    circles = [scc for scc in _strongly_connected(graph) if len(scc) > 1]
    assert not circles, f"import circles (TYPE_CHECKING imports included): {circles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def test_no_module_outgrows_its_room():
    long = {
        str(path.relative_to(ROOT)): n
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
        and not any(part in str(path.relative_to(ROOT)) for part in LONG_MODULES_ALLOWED)
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# -- sub-packages -------------------------------------------------------------------------------
# Inside the apps, each sub-package says in its __init__ docstring what it may import
# ("May import: fleet, fleet.hosts, ..."): other sub-packages, a library, or an app's
# top-level modules (a bare app name; the Django conventions management/, migrations/ and
# templatetags/ count as the top level). The list is the truth: an import outside it fails,
# and so does a name on it that nothing imports any more.
APPS = ("fleet", "traces", "dashboard")
APP_SHELL = ("management", "migrations", "templatetags")
MAX_MODULES_SIDE_BY_SIDE = 15
# Packages over that count, waiting for their own split (this list may only shrink).
CROWDED_PACKAGES_ALLOWED: set[str] = set()  # none waits for its split


def _unit(module: str) -> str:
    """The sub-package ``module`` belongs to, or its library, or its app (top level)."""
    library = next((lib for lib in LIBRARIES if module == lib or module.startswith(lib + ".")), None)
    if library:
        return library
    parts = module.split(".")
    if parts[0] in APPS and len(parts) > 1 and (ROOT / parts[0] / parts[1]).is_dir() and parts[1] not in APP_SHELL:
        return ".".join(parts[:2])
    return parts[0]


def _sub_packages() -> dict[str, set[str]]:
    """Each app sub-package (not a Django-free library) and the units its docstring allows."""
    out = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py" or module.count(".") != 1 or _unit(module) != module or module in LIBRARIES:
            continue
        doc = ast.get_docstring(_tree(path)) or ""
        line = next((line for line in doc.splitlines() if line.startswith("May import:")), None)
        assert line is not None, f"{path.relative_to(ROOT)}: its docstring says what it owns, then 'May import: ...'"
        names = line.removeprefix("May import:").strip().rstrip(".")
        out[module] = set() if names == "nothing" else {name.strip() for name in names.split(",")}
    return out


def test_each_sub_package_imports_only_what_its_docstring_allows():
    declared = _sub_packages()
    assert {"fleet.polling", "fleet.health", "traces.store", "traces.jobs"} <= set(declared)
    used: dict[str, dict[str, str]] = {unit: {} for unit in declared}
    for module, path in MODULES.items():
        unit = _unit(module)
        if unit not in declared:
            continue
        for target in _imports(module, path, top_level_only=False):
            if _unit(target) != unit:
                used[unit].setdefault(_unit(target), f"{module} imports {target}")
    unexpected = {f"{unit} -> {t}": why for unit, targets in used.items() for t, why in targets.items() if t not in declared[unit]}
    assert not unexpected, f"imports not in the sub-package's 'May import:' line: {unexpected}"
    stale = {unit: sorted(declared[unit] - set(used[unit])) for unit in declared if declared[unit] - set(used[unit])}
    assert not stale, f"'May import:' names that nothing imports any more (remove them): {stale}"


def _sub_package_imports() -> dict[str, set[str]]:
    """Each sub-package and the other sub-packages its modules actually import."""
    declared = _sub_packages()
    out: dict[str, set[str]] = {unit: set() for unit in declared}
    for module, path in MODULES.items():
        unit = _unit(module)
        if unit in declared:
            out[unit] |= {_unit(t) for t in _imports(module, path, top_level_only=False)} & set(declared) - {unit}
    return out


@pytest.mark.parametrize("graph", ["declared", "imported"])
def test_sub_packages_import_each_other_one_way(graph):
    """Between two sub-packages one is the lower: no pair may import each other, neither in
    the 'May import:' lines nor in the code (the same holds for longer rings)."""
    if graph == "declared":
        edges = {unit: names & set(_sub_packages()) for unit, names in _sub_packages().items()}
    else:
        edges = _sub_package_imports()
    assert sum(len(targets) for targets in edges.values()) > 20  # the walk saw the apps' edges
    two_way = sorted({tuple(sorted((a, b))) for a, targets in edges.items() for b in targets if a in edges.get(b, ())})
    assert not two_way, f"sub-packages that may import each other ({graph}): {two_way}"
    rings = [ring for ring in _strongly_connected(edges) if len(ring) > 1]
    assert not rings, f"sub-packages that import each other through others ({graph}): {rings}"


def test_no_package_holds_more_than_15_modules_side_by_side():
    crowded = {}
    for module, path in MODULES.items():
        if path.name == "__init__.py" and "migrations" not in path.parts:
            count = sum(1 for p in path.parent.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
            if count > MAX_MODULES_SIDE_BY_SIDE:
                crowded[module] = count
    assert set(crowded) <= CROWDED_PACKAGES_ALLOWED, f"packages over {MAX_MODULES_SIDE_BY_SIDE} modules: {crowded}"
    split = CROWDED_PACKAGES_ALLOWED - set(crowded)
    assert not split, f"now under the cap, remove from CROWDED_PACKAGES_ALLOWED: {split}"
