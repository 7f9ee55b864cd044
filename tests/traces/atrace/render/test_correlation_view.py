"""The correlation view: latency histogram, states over time, idle gaps per stream."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.workloads.tracing import capture
from traces.atrace import correlate
from traces.atrace.render.correlation_view import STATES, correlation_view, states_over_time


@pytest.fixture(scope="module")
def gpu():
    trace = capture("gpu", 0.05, seed=4)
    return trace, correlate(trace)


def test_state_shares_cover_each_slice_and_add_up_to_the_state_totals(gpu):
    trace, corr = gpu
    view = correlation_view(trace, corr, bins=50)
    over = view["states_over_time"]
    edges = np.array(over["edges_us"])
    shares = np.array([over[s] for s in STATES])
    assert shares.shape == (4, 50)
    assert np.allclose(shares.sum(axis=0), 1.0, atol=1e-3)
    widths = np.diff(edges)
    for k, state in enumerate(STATES):
        assert (shares[k] * widths).sum() == pytest.approx(view["states"][state]["time_us"], rel=1e-3, abs=0.5)


def test_latency_histogram_counts_every_launched_device_event(gpu):
    trace, corr = gpu
    view = correlation_view(trace, corr, bins=200)
    hist = view["launch_latency_histogram"]
    # The top bin holds everything from the 99th percentile up (values are clipped into it).
    assert sum(hist["counts"]) == view["matched"] == len(corr.device_events) > 0
    assert view["launch_latency"]["count"] == view["matched"]


def test_idle_gaps_are_listed_per_accelerator_stream(gpu):
    trace, corr = gpu
    view = correlation_view(trace, corr, bins=200)
    device_tracks = {i for i, t in enumerate(trace.tracks) if t.is_device}
    assert {g["track"] for g in view["idle_gaps"]} <= device_tracks
    assert view["idle_gaps"] and all(0 <= g["utilization"] <= 1 for g in view["idle_gaps"])
    assert "bubbles" not in view and "intervals" not in view


def test_states_over_time_of_hand_made_intervals():
    intervals = [(0, 500, "idle"), (500, 1000, "device_busy")]
    over = states_over_time(intervals, (0, 1000), 4)
    assert over["idle"] == [1.0, 1.0, 0.0, 0.0]
    assert over["device_busy"] == [0.0, 0.0, 1.0, 1.0]
    assert over["host_bound"] == [0.0] * 4
