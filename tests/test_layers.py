"""The layers stay where the README says: the Django-free libraries load no Django, Celery,
Channels or Redis; the packages import each other only along the edges listed here; no
module imports itself back through others; no module outgrows its room."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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


def _imports(module: str, path: Path, *, top_level_only: bool, type_checking: bool = True) -> set[str]:
    """Modules of this project that ``module`` imports (``top_level_only``: at import time,
    leaving out function bodies and ``if TYPE_CHECKING:`` blocks; ``type_checking=False``
    leaves those blocks out in any case)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()

    def visit(node, nested):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and top_level_only:
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test) and (top_level_only or not type_checking):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in child.names)
            visit(child, nested)

    visit(tree, False)
    return {m for m in (_known(name) for name in found) if m and m != module}


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
