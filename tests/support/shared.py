"""Files a test run makes once and every pytest-xdist worker of the run reads."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import tiers


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name`, filled by `make(folder)` once per test run: under pytest-xdist the
    first worker to ask makes it while the others wait for it, then all read the same files.
    The folder is in the run's temporary folder, so every run makes it afresh."""
    run = tmp_path_factory.getbasetemp()
    if tiers.xdist_worker():
        run = run.parent  # the workers' folders (popen-gw0, ...) are in the run's
    folder = run / name
    with (run / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed left
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder
