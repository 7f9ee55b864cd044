"""Flow events become edges: numbered ids and named ids alike, finishes before starts."""

from __future__ import annotations

import orjson
import pytest

from traces.atrace import read_trace
from traces.atrace.model.trace import EdgeKind


def _x(name, tid, ts, dur):
    return {"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _flow(ph, ident, tid, ts, cat="fwdbwd", **extra):
    return {"ph": ph, "id": ident, "pid": 1, "tid": tid, "ts": ts, "cat": cat, "name": cat, **extra}


def _trace(ids):
    a, b = ids
    events = [
        _x("fwd", 1, 0, 10), _x("inner", 1, 2, 3), _x("bwd", 2, 20, 5), _x("later", 2, 40, 5),
        _flow("f", a, 2, 20, bp="e"),  # the finish is written before its start, as Kineto does
        _flow("s", a, 1, 0),
        _flow("s", b, 1, 3, cat="dependency"),  # binds to the innermost slice enclosing it
        _flow("f", b, 2, 41, cat="dependency", bp="e"),
        _flow("s", a, 2, 42, cat="dependency"),  # same id, another category: another flow
        _flow("f", a, 1, 42.5, cat="dependency", bp="e"),  # no slice there: no edge
    ]
    return read_trace(orjson.dumps({"traceEvents": events}))


@pytest.mark.parametrize("ids", [(7, 8), ("7", "eight"), (7, "eight")], ids=["numbers", "names", "both"])
def test_flows_become_the_same_edges_whatever_their_ids(ids):
    trace = _trace(ids)
    names = trace.strings.strings
    edges = [(names[trace.name[s]], names[trace.name[d]], EdgeKind(int(k)))
             for s, d, k in zip(trace.edge_src, trace.edge_dst, trace.edge_kind)]
    assert edges == [("fwd", "bwd", EdgeKind.FLOW), ("inner", "later", EdgeKind.DATA)]
