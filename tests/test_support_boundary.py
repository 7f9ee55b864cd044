"""The project never imports the tests' support code (tests/support: fixtures, the
synthetic trace generators of tests/support/tracegen): that is for the tests and the
benchmarks only, so the library and the apps ship and run without it."""

import ast
import subprocess
import sys
from pathlib import Path

from tests.support.sources import syntax_tree

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("traces", "fleet", "emulator", "dashboard")


def _dunder_import(node) -> bool:
    """``__import__("name", ...)`` with the name written out."""
    return (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__" and bool(node.args)
            and isinstance(node.args[0], ast.Constant))


def _imported(path: Path) -> set[str]:
    """Every module an import statement of the file names, at any depth (function bodies too)."""
    names = set()
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif _dunder_import(node):
            names.add(str(node.args[0].value))
    return names


def test_no_module_of_the_project_imports_from_tests():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in sorted(_imported(path))
        if name == "tests" or name.startswith("tests.")
    ]
    assert offenders == []


def test_the_generators_left_the_engine():
    assert not list((ROOT / "traces/atrace").rglob("synthetic*.py"))
    assert (ROOT / "tests/support/tracegen/kineto.py").exists()


def test_atrace_and_the_traces_app_load_nothing_from_tests():
    code = (
        "import sys, traces.atrace, traces.atrace.cli;"
        "print(sorted(m for m in sys.modules if m == 'tests' or m.startswith('tests.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
