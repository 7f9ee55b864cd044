"""Building a trace event by event keeps its memory near the columns' size: events are moved
into column chunks as they come (orjson's bytes hold a 4 KB block each, so args kept one by
one cost 4 KB an event), and edges are kept as numbers, not an array each."""

from __future__ import annotations

import tracemalloc

from traces.atrace.model.builder import TraceBuilder
from traces.atrace.model.trace import EdgeKind, Kind

EVENTS = 40_000


def test_an_event_with_args_and_an_edge_costs_well_under_a_kilobyte_while_building():
    builder = TraceBuilder()
    track = builder.track("gpu 0", 1, is_device=True)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for k in range(EVENTS):
            e = builder.add("attention.q_proj", 1_700_000_000_000_000_000 + k * 1000, 900, track, kind=Kind.KERNEL,
                            cat="kernel", op="linear", corr=k,
                            args={"node_id": k % 40, "shapes": [[256, 768], [768, 768]], "flops": 2.0e9, "bytes": 1.0e6})
            if k:
                builder.edge(e - 1, e, EdgeKind.DATA)
        per_event = (tracemalloc.get_traced_memory()[0] - base) / EVENTS
    finally:
        tracemalloc.stop()
    assert per_event < 400, f"{per_event:.0f} bytes an event"
    trace = builder.build()
    assert len(trace) == EVENTS and len(trace.edge_src) == EVENTS - 1
    assert trace.args.get(7)["node_id"] == 7 and trace.edge_dst[-1] == EVENTS - 1
