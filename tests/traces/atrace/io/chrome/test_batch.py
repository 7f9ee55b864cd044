"""One batch of events decoded into columns: complete events, flows and the rest."""

import numpy as np
import orjson

from traces.atrace.io.chrome.batch import _code, parse_batch


def _text(events: list[dict]) -> bytes:
    return orjson.dumps(events)


def test_values_are_coded_in_order_of_first_appearance():
    values = [("b", 1), ("a", 2), ("b", 1), ("c", 0), ("a", 2), ("a", 3)]
    distinct, index = _code(values)
    assert distinct == [("b", 1), ("a", 2), ("c", 0), ("a", 3)]
    assert index.tolist() == [0, 1, 0, 2, 1, 3]
    empty, none = _code([])
    assert empty == [] and len(none) == 0


def test_a_mixed_batch_splits_into_complete_events_flows_and_others():
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p"}},
        {"ph": "X", "name": "k", "cat": "kernel", "pid": 1, "tid": 7, "ts": 2.5, "dur": 1, "args": {"correlation": 9}},
        {"ph": "s", "name": "f", "cat": "fwdbwd", "pid": 1, "tid": 2, "ts": 1.001, "id": 4},
        {"ph": "X", "name": "op", "cat": "cpu_op", "pid": 1, "tid": 2, "ts": 1, "dur": 3.25,
         "args": {"External id": 5, "op_type": "Conv"}},
        # A complete event with a binding point: its key is still (name, cat, pid, tid).
        {"ph": "X", "name": "k", "cat": "kernel", "pid": 1, "tid": 7, "ts": 4, "dur": 0.5, "bp": "e"},
        {"ph": "f", "name": "f", "cat": "fwdbwd", "pid": 1, "tid": 3, "ts": 9, "id": 4, "bp": "e"},
    ]
    batch = parse_batch(_text(events))
    assert batch.n == 6
    x = batch.x
    assert x.local.tolist() == [1, 3, 4]
    assert x.keys == [("k", "kernel", 1, 7), ("op", "cpu_op", 1, 2)]
    assert x.key.tolist() == [0, 1, 0]
    assert x.ts.tolist() == [2_500, 1_000, 4_000] and x.dur.tolist() == [1_000, 3_250, 500]
    assert x.corr.tolist() == [9, -1, -1] and x.ext.tolist() == [-1, 5, -1]
    assert x.op_types == [(1, "Conv")]
    assert bytes(x.args) == b'{"correlation":9}{"External id":5,"op_type":"Conv"}'
    assert x.arg_len.tolist() == [17, 34, 0]
    fl = batch.flows
    assert fl.local.tolist() == [2, 5]
    assert fl.keys == [("fwdbwd", "s", None, 1, 2), ("fwdbwd", "f", "e", 1, 3)]
    assert fl.key.tolist() == [0, 1] and fl.ids == [4, 4] and fl.ts.tolist() == [1_001, 9_000]
    assert [o[:3] for o in batch.others] == [(0, "M", "process_name")]


def test_kernels_with_correlation_ids_leave_ac2g_flows_out():
    events = [
        {"ph": "X", "name": "k", "cat": "kernel", "pid": 0, "tid": 7, "ts": 2, "dur": 1, "args": {"correlation": 3}},
        {"ph": "s", "name": "ac2g", "cat": "ac2g", "pid": 1, "tid": 2, "ts": 1, "id": 3},
        {"ph": "s", "name": "fwdbwd", "cat": "fwdbwd", "pid": 1, "tid": 2, "ts": 1, "id": 8},
        {"ph": "f", "name": "ac2g", "cat": "ac2g", "pid": 0, "tid": 7, "ts": 2, "id": 3, "bp": "e"},
    ]
    batch = parse_batch(_text(events))
    assert batch.flows.local.tolist() == [2]
    assert batch.flows.keys == [("fwdbwd", "s", None, 1, 2)]


def test_a_batch_of_complete_events_only_keeps_them_all_in_order():
    events = [{"ph": "X", "name": f"op{k % 3}", "cat": "cpu_op", "pid": 1, "tid": k % 2, "ts": 1000 + k, "dur": 1} for k in range(10)]
    batch = parse_batch(_text(events))
    assert batch.flows is None and not batch.others and batch.x.local is None
    assert batch.x.keys[:3] == [("op0", "cpu_op", 1, 0), ("op1", "cpu_op", 1, 1), ("op2", "cpu_op", 1, 0)]
    assert [batch.x.keys[i][0] for i in batch.x.key.tolist()] == [f"op{k % 3}" for k in range(10)]
    assert np.array_equal(batch.x.ts, (1000 + np.arange(10)) * 1000)
