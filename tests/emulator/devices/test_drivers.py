"""The emulator's command line lists a host's devices, shows one as its driver does and injects
faults (each driver interface has its tests in drivers/)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow  # runs the emulator's command line several times: seconds of CPU (make test runs it, make test-fast does not)
def test_cli_lists_shows_and_injects(tmp_path):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "emulator", "--hosts", "1", "--state-dir", str(tmp_path), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    listing = cli("list")
    serial = re.search(r"(EVT-\S+)", listing).group(1)
    assert "host-00" in listing
    assert "power" in cli("show", serial)
    assert "injected overheat" in cli("inject", serial, "overheat")
    assert "faults: overheat" in cli("show", serial)
