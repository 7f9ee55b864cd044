"""The project's source files parsed once per test process: the tests of its layers
(tests/test_layers.py) and of its boundary with the tests (tests/test_support_boundary.py)
walk the same 370 syntax trees, and parsing them all is over a second of CPU."""

import ast
import functools
from pathlib import Path


@functools.cache
def syntax_tree(path: Path) -> ast.Module:
    """The module at ``path``, parsed (once per process: the trees are only read)."""
    return ast.parse(path.read_text(), str(path))
