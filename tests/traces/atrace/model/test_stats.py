"""The small vectorised helpers the analyses share, checked against plain Python."""

from __future__ import annotations

import numpy as np
import pytest

from traces.atrace.model.stats import (
    covered,
    distribution,
    group_percentiles,
    group_stats,
    merge_intervals,
    us,
)


def test_nanoseconds_become_rounded_microseconds():
    assert (
        us(1_234_567) == 1234.567
        and us(np.int64(1500)) == 1.5
        and isinstance(us(np.int64(1)), float)
    )


def test_a_distribution_of_durations_in_microseconds():
    d = distribution(np.array([1000, 2000, 3000, 4000]))
    assert d["count"] == 4 and d["mean_us"] == 2.5 and d["p50_us"] == 2.5 and d["max_us"] == 4.0
    assert distribution(np.array([]))["count"] == 0


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_group_percentiles_match_numpy_per_group(dtype):
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 4, 200)
    values = rng.integers(0, 1000, 200).astype(dtype)
    got, top = group_stats(groups, values, 5, [0.5, 0.95])
    for g in range(4):
        mine = values[groups == g]
        assert got[g] == pytest.approx(np.percentile(mine, [50, 95]))
        assert top[g] == mine.max()
    assert got[4].tolist() == [0.0, 0.0] and top[4] == 0.0  # an empty group
    assert np.array_equal(group_percentiles(groups, values, 5, [0.5]), got[:, :1])


def test_intervals_merge_into_their_union_and_cover_their_inside():
    start = np.array([10, 0, 5, 30, 40])
    end = np.array([20, 6, 8, 35, 41])
    s, e = merge_intervals(start, end)
    assert s.tolist() == [0, 10, 30, 40] and e.tolist() == [8, 20, 35, 41]
    assert covered(s, e, np.array([-1, 0, 8, 9, 19, 20, 40])).tolist() == [
        False,
        True,
        False,
        False,
        True,
        False,
        True,
    ]
    empty = np.zeros(0, np.int64)
    assert (
        merge_intervals(empty, empty)[0].size == 0
        and not covered(empty, empty, np.array([1])).any()
    )
