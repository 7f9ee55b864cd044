"""Which runtime call launched which device work: by correlation id, and work replayed by a
CUDA graph to its graph launch whether the tracer links it by correlation, external id or
graph args."""

from __future__ import annotations

import numpy as np
import pytest

from tests.traces.atrace.analysis import known_answers as ka
from traces.atrace.model.links import graph_launches, graph_replay_launches, launch_pairs
from traces.atrace.model.trace import Kind


def test_each_kernel_pairs_with_the_launch_of_its_correlation_id():
    trace = ka.single(None).trace
    rt, dev = launch_pairs(trace)
    assert len(rt) == len(dev) == int((trace.corr[trace.on_device] >= 0).sum())
    assert (trace.corr[rt] == trace.corr[dev]).all()
    assert trace.on_device[dev].all() and not trace.on_device[rt].any()
    assert np.all(np.diff(dev) > 0)  # by device event
    assert len(graph_launches(trace)) == 0 and len(graph_replay_launches(trace)) == 0


@pytest.mark.parametrize("link", ["correlation", "external", "args"])
def test_replayed_kernels_belong_to_the_graph_launch_that_preceded_them(link):
    trace = ka.graph_loop(host_ahead=False, link=link).trace
    launches = graph_launches(trace)
    assert len(launches) == ka.STEPS and set(trace.names(launches)) == {"cudaGraphLaunch"}
    rt, dev = launch_pairs(trace)
    replayed = dev[np.isin(rt, launches)]
    assert len(replayed) == 50 * ka.STEPS and (trace.kind[replayed] == Kind.KERNEL).all()
    for launch in launches.tolist():
        mine = dev[rt == launch]
        assert len(mine) == 50 and (trace.ts[mine] >= trace.ts[launch]).all()
    # Only a tracer that leaves correlation ids out needs the fallback links.
    fallback = graph_replay_launches(trace)
    assert (len(fallback) == 0) == (link == "correlation")
