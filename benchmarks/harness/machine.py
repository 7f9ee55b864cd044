"""Where the benchmarks live, and what the machine and its processes are doing: CPUs, load
average, a process's CPU seconds and peak memory (from /proc)."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
HERE = ROOT / "benchmarks"
OUT = HERE / "out"  # generated inputs and JSON reports (git-ignored)
BIN = Path(sys.executable).parent  # the virtualenv's scripts (celery, moto_server, ...)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: ``0.52 0.61 0.70``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_line() -> str:
    """What figures depend on: ``16 CPUs, load average 0.52 0.61 0.70``."""
    return f"{os.cpu_count()} CPUs, load average {load_average()}"


def cpu_seconds(pid: int | None = None, *, children: bool = False) -> float:
    """User + system CPU seconds of a process so far (this one when `pid` is None); with
    `children`, those of its waited-for children too."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        own = usage.ru_utime + usage.ru_stime
        if children:
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            own += kids.ru_utime + kids.ru_stime
        return own
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = fields[11:15] if children else fields[11:13]
    return sum(int(f) for f in ticks) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int | None = None) -> float:
    """A process's peak resident memory in MB (this one when `pid` is None); NaN when /proc
    does not say."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak(pid: int) -> None:
    """Starts a process's peak memory over from its current size (Linux's clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
