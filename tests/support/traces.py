"""Helpers of the trace tests: real trace files, in-memory uploads, exact sums."""

import gzip
import io
import json
import os
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Traces recorded on real NVIDIA, AMD and MTIA machines, which every check "on real traces"
# runs on. The one place that says where they are: ASICMON_REAL_TRACES, by default the
# shared data folder beside the repository (its README.md says where each file comes from).
REAL_TRACES = Path(os.environ.get("ASICMON_REAL_TRACES") or ROOT.parent / "shared" / "data" / "real-traces")
NO_REAL_TRACES = (
    f"the real traces are not here ({REAL_TRACES} is absent): set ASICMON_REAL_TRACES to their "
    "folder (README.md, 'Real traces')"
)
HOST_OP_CATEGORIES = {"cpu_op"}
# A real trace whose JSON is larger than this runs its checks in the slow tier (`make test`,
# not `make test-fast`): the exact references read it as Decimals, seconds of CPU per check
# (the 15 MB SGLang step and the 87 MB MTIA trace; the 10 MB ones stay in the edit loop).
LARGE_TRACE_BYTES = 12 << 20


def real_traces() -> Path:
    """The folder of real traces; the test is skipped (saying how to get them) when it is absent."""
    if not REAL_TRACES.is_dir():
        pytest.skip(NO_REAL_TRACES)
    return REAL_TRACES


def real_trace(name: str) -> Path:
    """A real trace by file name; the test is skipped when the folder is absent, and fails when
    the folder lacks the file."""
    path = real_traces() / name
    if not path.exists():
        pytest.fail(f"real trace {name} is missing from {REAL_TRACES} (its README.md lists the files)")
    return path


def json_size(path: Path) -> int:
    """The size of a trace's text: a gzip file's own count of it (modulo 4 GiB), else the file's."""
    if path.suffix != ".gz":
        return path.stat().st_size
    with path.open("rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def each_real_trace(paths: list[Path]) -> list:
    """Parameters for a test that runs on each of `paths` (named by file; those over
    LARGE_TRACE_BYTES marked slow), or one skipped case that says why when the real traces
    are absent."""
    if not REAL_TRACES.is_dir():
        return [pytest.param(None, id="no-real-traces", marks=pytest.mark.skip(reason=NO_REAL_TRACES))]
    return [pytest.param(path, id=path.name.split(".")[0], marks=[pytest.mark.slow] if json_size(path) > LARGE_TRACE_BYTES else [])
            for path in paths]


def upload_file(name: str, data: bytes):
    f = io.BytesIO(data)
    f.name = name
    return f


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6)


def files_in(location: Path) -> list[Path]:
    return [p for p in location.rglob("*") if p.is_file()] if location.exists() else []


def exact_totals_by_name(path: Path, categories: set[str]) -> dict[str, tuple[int, Decimal]]:
    """Count and exact summed duration (µs, decimal) of complete events per name, straight
    from the raw JSON, for events of the given categories."""
    with gzip.open(path, "rb") as f:
        doc = json.load(f, parse_float=Decimal)
    sums: dict[str, list] = defaultdict(lambda: [0, Decimal(0)])
    for event in doc["traceEvents"]:
        if event.get("ph") == "X" and event.get("cat") in categories:
            entry = sums[event["name"]]
            entry[0] += 1
            entry[1] += Decimal(event.get("dur", 0))
    return {name: (n, total) for name, (n, total) in sums.items()}
