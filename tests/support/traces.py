"""Helpers of the trace tests: real trace files, in-memory uploads, exact sums."""

import gzip
import io
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL_TRACES = ROOT.parent / "shared" / "data" / "real-traces"
HOST_OP_CATEGORIES = {"cpu_op"}


def real_trace(name: str) -> Path:
    path = REAL_TRACES / name
    if not path.exists():
        pytest.fail(f"real trace {path} is missing (see ../shared/data/real-traces/README.md)")
    return path


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
