"""Atrace's own binary form of a trace: every column, string, track, argument and meta
field back as it was; other bytes refused."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.traces import real_trace
from traces.atrace.errors import TraceFormatError
from traces.atrace.io.jobs import read_job
from traces.atrace.io.npz import npz_bytes, read_npz, write_npz

SHARED = ("multirank_sampled_rank0.json.gz",)


@pytest.fixture
def shared() -> list:
    """Two ranks of a sampled multi-rank job and a DDP rank (skipped without the real traces)."""
    return [real_trace(name) for name in SHARED]


def test_npz_round_trip_keeps_everything_and_refuses_other_bytes(shared):
    (trace,) = read_job([shared[0]])
    back = read_npz(npz_bytes(trace))
    for column in (
        "name",
        "cat",
        "op",
        "kind",
        "ph",
        "ts",
        "dur",
        "track",
        "corr",
        "ext",
        "flags",
        "edge_src",
    ):
        assert np.array_equal(getattr(back, column), getattr(trace, column)), column
    assert back.strings.strings == trace.strings.strings and back.tracks == trace.tracks
    assert back.meta["distributedInfo"] == trace.meta["distributedInfo"]
    assert [back.args.get(i) for i in range(0, len(trace), 97)] == [
        trace.args.get(i) for i in range(0, len(trace), 97)
    ]
    with pytest.raises(TraceFormatError, match="not an Atrace npz trace"):
        read_npz(b"PK\x03\x04 not a zip at all")


def test_a_file_written_uncompressed_reads_back_the_same(tmp_path, shared):
    (trace,) = read_job([shared[0]])
    path = tmp_path / "rank0.npz"
    write_npz(trace, path, compress=False)
    back = read_npz(path)
    assert np.array_equal(back.ts, trace.ts) and back.names() == trace.names()
    assert len(npz_bytes(trace)) < path.stat().st_size  # compressed by default
