"""Writing a trace as a Chakra execution trace: whole microseconds that never round a real
duration to zero, exact nanoseconds beside them, and a file that reads back as the trace."""

from __future__ import annotations

import orjson

from traces.atrace import Kind, TraceBuilder, read_trace
from traces.atrace.io.chakra.writer import chakra_dict, micros, write_chakra_json


def _trace():
    b = TraceBuilder(source="test")
    host = b.track(1, 1)
    dev = b.track(0, 7, is_device=True, device=0, stream=7)
    b.add("ProfilerStep#0", 0, 100_000, host, kind=Kind.ANNOTATION)
    b.add("aten::mm", 1_000, 40_400, host, kind=Kind.HOST_OP)
    b.add("gemm", 50_000, 300, dev, kind=Kind.KERNEL)
    b.add("marker", 60_000, 0, host, kind=Kind.INSTANT)
    return b.build()


def test_microseconds_round_to_nearest_but_never_to_zero():
    assert [micros(n) for n in (0, -5, 1, 499, 500, 1_499, 1_500)] == [0, 0, 1, 1, 1, 1, 2]


def test_work_and_ranges_become_nodes_and_instants_do_not():
    doc = chakra_dict(_trace())
    assert doc["schema"] == "chakra-et-json"
    names = [n["name"] for n in doc["nodes"]]
    assert names == ["ProfilerStep#0", "aten::mm", "gemm"]
    assert [n["id"] for n in doc["nodes"]] == [0, 1, 2]
    kernel = doc["nodes"][2]
    assert kernel["duration_micros"] == 1  # 300 ns, not 0


def test_a_written_file_reads_back_with_the_exact_times(tmp_path):
    path = tmp_path / "t.json"
    write_chakra_json(_trace(), path)
    assert orjson.loads(path.read_bytes())["schema"] == "chakra-et-json"
    back = read_trace(path)
    got = {name: int(d) for name, d in zip(back.names(), back.dur.tolist())}
    assert got == {"ProfilerStep#0": 100_000, "aten::mm": 40_400, "gemm": 300}
