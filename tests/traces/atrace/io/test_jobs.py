"""Reading a distributed job: ranks from distributedInfo, else the file name, else the
position; folders and archives read alike; nothing to read is refused."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from traces.atrace.errors import TraceFormatError
from traces.atrace.io.jobs import rank_numbers, read_job


def _rank_trace(marker: str, rank: int | None = None) -> bytes:
    doc = {"traceEvents": [{"name": marker, "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    return json.dumps(doc).encode()


def _marker(trace) -> str:
    return trace.names()[0]


def test_the_rank_comes_from_distributed_info_then_the_name_then_the_position():
    metas = [{"distributedInfo": {"rank": 7}}, {}, {}]
    assert rank_numbers(metas, ["a.json", "trace_rank-3.json", "b.json"]) == [7, 3, 2]


def test_repeated_ranks_fall_back_to_the_files_positions():
    # Two copies of one rank's file: numbering by position keeps them apart.
    metas = [{"distributedInfo": {"rank": 0}}, {"distributedInfo": {"rank": 0}}]
    assert rank_numbers(metas, ["x.json", "y.json"]) == [0, 1]


def test_a_folder_is_read_in_rank_order_whatever_the_file_names_sort_as(tmp_path):
    (tmp_path / "a_rank1.json").write_bytes(_rank_trace("one"))
    (tmp_path / "b_rank0.json").write_bytes(_rank_trace("zero"))
    (tmp_path / "notes.txt").write_text("not a trace")
    traces = read_job(tmp_path)
    assert [t.meta["rank"] for t in traces] == [0, 1]
    assert [_marker(t) for t in traces] == ["zero", "one"]
    assert [t.meta["file"] for t in traces] == ["b_rank0.json", "a_rank1.json"]


def test_an_archive_is_read_member_by_member(tmp_path):
    archive = tmp_path / "job.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (
            ("job/first.json", _rank_trace("r1", rank=1)),
            ("job/second.json", _rank_trace("r0", rank=0)),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    traces = read_job(archive)
    assert [(t.meta["rank"], _marker(t)) for t in traces] == [(0, "r0"), (1, "r1")]


def test_an_empty_folder_is_refused(tmp_path):
    with pytest.raises(TraceFormatError, match="no trace files"):
        read_job(tmp_path)
