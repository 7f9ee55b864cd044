"""Reading a trace's joined requests: the latency histogram the requests page draws."""

import pytest

from traces.requests.reading import latency_histogram


def test_the_histogram_counts_every_request_once_in_equal_bins_up_to_the_slowest():
    latencies = [1.0, 2.0, 2.5, 3.0, 9.0, 10.0, 40.0, 100.0, 100.0]
    h = latency_histogram(latencies)
    assert len(h["counts"]) == 3 and sum(h["counts"]) == len(latencies)  # √9 bins
    assert h["edges_ms"] == pytest.approx([0.0, 33.333, 66.667, 100.0], abs=1e-3)
    assert h["counts"] == [6, 1, 2]  # the slowest falls in the last bin, not past it


def test_many_requests_are_at_most_forty_bins_and_none_is_empty():
    h = latency_histogram([float(i % 500) for i in range(10_000)])
    assert len(h["counts"]) == 40 and sum(h["counts"]) == 10_000
    assert latency_histogram([]) == {"edges_ms": [], "counts": []}
    same = latency_histogram([0.0, 0.0])
    assert same["counts"] == [2] and same["edges_ms"] == [0.0, 1.0]
