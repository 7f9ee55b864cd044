"""A disk that fills: a small tmpfs mounted for a test (the tests run as root; CI too)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax: "256k", "4m") at `path`, unmounted after."""
    path.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"mounting a tmpfs needs root (CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)
