"""Counter-based randomness: the same keys always give the same draw, and the draws have the
distributions they are named after."""

import statistics

import pytest

from emulator.noise import mix, mix_on, normal, poisson, string_key, uniform, unit


def test_a_draw_is_a_function_of_its_keys_and_their_order():
    assert mix(1, 2, 3) == mix(1, 2, 3) and mix(1, 2, 3) != mix(3, 2, 1)
    assert mix_on(mix(7, 11), 13) == mix(7, 11, 13)  # shared leading keys hashed once
    assert mix(-1) == mix(2**64 - 1)  # keys are taken as 64-bit words
    assert 0 <= mix(5) < 2**64
    assert uniform(4, 2) == unit(mix(4, 2))


def test_uniform_and_normal_draws_have_their_distributions():
    u = [uniform(9, i) for i in range(20_000)]
    assert min(u) >= 0.0 and max(u) < 1.0
    assert statistics.fmean(u) == pytest.approx(0.5, abs=0.01)
    assert sum(x < 0.1 for x in u) / len(u) == pytest.approx(0.1, abs=0.01)
    n = [normal(9, i) for i in range(20_000)]
    assert statistics.fmean(n) == pytest.approx(0.0, abs=0.03)
    assert statistics.pstdev(n) == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("mean", [0.2, 3.0, 150.0])
def test_poisson_draws_have_their_mean_and_variance(mean):
    draws = [poisson(mean, 5, i) for i in range(10_000)]
    assert min(draws) >= 0 and all(isinstance(d, int) for d in draws)
    assert statistics.fmean(draws) == pytest.approx(mean, rel=0.05)
    assert statistics.pvariance(draws) == pytest.approx(mean, rel=0.1)
    assert poisson(0.0, 5, 1) == 0 and poisson(-2.0, 5, 1) == 0


def test_a_string_key_is_the_same_in_every_process():
    assert string_key("") == 0xCBF29CE484222325  # FNV-1a's offset basis
    assert string_key("a") == 0xAF63DC4C8601EC8C  # FNV-1a 64 of "a", as published
    assert string_key("host-00") != string_key("host-01")
