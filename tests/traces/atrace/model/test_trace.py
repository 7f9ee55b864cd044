"""The trace model: interned strings, arguments stored as JSON in one buffer, tracks'
labels, and a trace's summary and sub-traces."""

from __future__ import annotations

import numpy as np

from traces.atrace import TraceBuilder
from traces.atrace.model.trace import ArgStore, EdgeKind, Kind, StringTable, Track


def test_strings_are_interned_once_and_looked_up_by_index():
    table = StringTable(["a", "b"])
    assert table.intern("a") == 0 and table.intern("c") == 2 and len(table) == 3
    ids = table.intern_many(["b", "d", None, "d", 7])
    assert ids.tolist() == [1, 3, 4, 3, 5]
    assert table[4] == "" and table[5] == "7"
    assert table.lookup("d") == 3 and table.lookup("zzz") == -1


def test_arguments_come_back_per_event_and_survive_a_take():
    store = ArgStore.from_dicts([{"x": 1}, None, {"shape": [2, 3]}])
    assert len(store) == 3
    assert [store.get(i) for i in range(3)] == [{"x": 1}, {}, {"shape": [2, 3]}]
    kept = store.take(np.array([2, 0]))
    assert [kept.get(0), kept.get(1)] == [{"shape": [2, 3]}, {"x": 1}]


def test_a_track_is_labelled_by_its_process_and_thread_or_its_ids():
    assert Track(1, 2, "python", "main").label == "python / main"
    assert Track(0, 7, is_device=True).label == "pid 0 / stream 7"
    assert Track(3, 4).to_dict()["label"] == "pid 3 / tid 4"


def _small():
    b = TraceBuilder()
    host = b.track(1, 1)
    dev = b.track(0, 7, is_device=True, device=0, stream=7)
    a = b.add("aten::mm", 1_000, 10_000, host, kind=Kind.HOST_OP, args={"k": 1})
    k = b.add("gemm", 5_000, 20_000, dev, kind=Kind.KERNEL)
    b.add("tick", 30_000, 0, host, kind=Kind.INSTANT)
    b.edge(a, k, EdgeKind.FLOW)
    return b.build()


def test_the_summary_counts_events_tracks_kinds_and_span():
    trace = _small()
    s = trace.summary()
    assert s["events"] == 3 and s["tracks"] == 2 and s["device_tracks"] == 1 and s["edges"] == 1
    assert s["span_us"] == 29.0 and s["start_us"] == 1.0
    assert s["kinds"] == {"host_op": 1, "kernel": 1, "instant": 1}
    assert trace.on_device.tolist() == [False, True, False] and trace.is_slice.tolist() == [
        True,
        True,
        False,
    ]


def test_a_sub_trace_keeps_only_the_edges_between_kept_events():
    trace = _small()
    both = trace.take(np.array([0, 1]))
    assert (
        len(both.edge_src) == 1
        and both.args.get(0) == {"k": 1}
        and both.names() == ["aten::mm", "gemm"]
    )
    alone = trace.take(np.array([1, 2]))
    assert len(alone.edge_src) == 0 and alone.names() == ["gemm", "tick"]
    assert trace.event(1)["track_label"] == "pid 0 / stream 7" and trace.event(1)["dur_us"] == 20.0
