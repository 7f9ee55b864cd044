"""The web process's cap on malloc arenas (dashboard/memory.py)."""

import json
import subprocess
import sys

import pytest

from tests.support.processes import ROOT, child_env

ARENAS = """
import json, os
from dashboard.memory import limit_malloc_arenas
print(json.dumps(limit_malloc_arenas()))
"""


@pytest.mark.parametrize(("preset", "capped"), [("", True), ("4", False)], ids=["capped", "MALLOC_ARENA_MAX set"])
def test_the_web_process_caps_malloc_arenas_unless_told_a_cap(preset, capped):
    """glibc takes the cap (mallopt answers 1); a cap named in MALLOC_ARENA_MAX is left as it is."""
    done = subprocess.run([sys.executable, "-c", ARENAS], cwd=ROOT, env=child_env(MALLOC_ARENA_MAX=preset),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) is capped
