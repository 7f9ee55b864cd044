"""fleet.tsdb.reads against real stores: the shared VictoriaMetrics (every test its own
labels) and a Prometheus taking remote writes. Raw reads give back exactly the points
written; bands equal min/mean/max/count of the samples in each step, computed here; the
fleet-wide quantile equals PromQL's definition computed here; oversized reads are refused."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from fleet import tsdb
from fleet.tsdb import reads
from tests.support.history import write_points

METRICS = {"temperature_c": "asicmon_temperature_c", "power_w": "asicmon_power_w"}


def a_device(pk: int, host: str = "host-a", device_type: str = "gpu"):
    return SimpleNamespace(pk=pk, host=SimpleNamespace(name=host), serial=f"SN-{pk}", device_type=device_type, model="m1")


def wave(start: float, count: int, every: float, base: float) -> list[tuple[float, float]]:
    return [(start + i * every, base + (i * 7 % 11) + i / 1000) for i in range(count)]


def expected_bands(points, step: float, first: float, last: float) -> list[tuple]:
    """(t, mean, min, max, count) of the points in each window (t - step, t]."""
    out = []
    t = first
    while t <= last + 1e-9:
        values = [v for s, v in points if t - step < s <= t]
        if values:
            out.append((t, sum(values) / len(values), min(values), max(values), len(values)))
        t += step
    return out


def close(got, want) -> bool:
    """The same points: times exactly, values to 1e-9 (VictoriaMetrics keeps a float as a
    decimal: 14.274 may come back as 14.274000000000001)."""
    assert [p[0] for p in got] == [p[0] for p in want]
    for g, w in zip(got, want, strict=True):
        assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(g[1:], w[1:], strict=True)), (g, w)
    return True


def check_raw_and_bands(client, extra: str, metricsql: bool) -> None:
    """What every store must answer alike (the samples span under an hour, as a fresh
    Prometheus accepts them)."""
    end = float(int(time.time()) // 600 * 600)
    start = end - 50 * 60  # on the 2-minute bands' boundaries
    device = a_device(101)
    temperature = wave(start, 600, 5.0, 40.0)
    power = wave(start + 2.5, 600, 5.0, 200.0)
    # The device moved to another host half-way (after the end of a band, 288 × 5 s after
    # `start`): a second series of the same counter.
    write_points(device, {"temperature_c": temperature[:289], "power_w": power}, client=client, extra=extra)
    write_points(device, {"temperature_c": temperature[289:]}, host="host-b", client=client, extra=extra)
    labels = {"device": "101"}

    since, until = temperature[100][0], temperature[250][0]
    raw = reads.raw_points(client, METRICS, labels, since, until, interval_s=5, extra=extra)
    assert close(raw["temperature_c"], temperature[100:251])  # both ends included, nothing else
    assert close(raw["power_w"], [p for p in power if since <= p[0] <= until])
    latest = reads.raw_points(client, METRICS, labels, since, until, interval_s=5, extra=extra, limit=7)
    assert close(latest["power_w"], [p for p in power if since <= p[0] <= until][-7:])
    across = reads.raw_points(client, {"temperature_c": METRICS["temperature_c"]}, labels, start, end, interval_s=5, extra=extra)
    assert close(across["temperature_c"], temperature)  # one line across the host move

    got = reads.bands(client, METRICS, labels, start, end, 120, extra=extra, count=True)
    first, last = reads.aligned(start, end, 120)
    assert close(got["temperature_c"], expected_bands(temperature, 120, first, last))
    assert close(got["power_w"], expected_bands(power, 120, first, last))
    assert sum(p[4] for p in got["temperature_c"]) == 600
    # Without the count, VictoriaMetrics answers from rollup() and others from the portable
    # expression: the same bands either way, also where the host move falls inside a band
    # (600 s: a band holds samples of both series).
    for step in (120, 600):
        with_count = reads.bands(client, METRICS, labels, start, end, step, extra=extra, count=True)
        plain = reads.bands(client, METRICS, labels, start, end, step, extra=extra)
        for key in METRICS:
            assert plain[key] and all(len(p) == 4 and p[2] <= p[1] <= p[3] for p in plain[key])
            assert close(plain[key], [p[:4] for p in with_count[key]]), (key, step)
    assert (client.read_url in reads._NO_ROLLUP) is not metricsql

    stats = reads.window_stats(client, METRICS, labels, since, until, extra=extra)
    values = [v for _, v in temperature[100:251]]
    assert stats["temperature_c"]["n"] == 151
    assert math.isclose(stats["temperature_c"]["min"], min(values)) and math.isclose(stats["temperature_c"]["max"], max(values))
    assert math.isclose(stats["temperature_c"]["mean"], sum(values) / len(values), rel_tol=1e-9)


def test_raw_points_bands_and_window_statistics_on_victoria_metrics(own_tsdb_labels):
    check_raw_and_bands(tsdb.client(), own_tsdb_labels, metricsql=True)


def test_raw_points_bands_and_window_statistics_on_prometheus(prometheus_store, own_tsdb_labels):
    check_raw_and_bands(tsdb.client(), own_tsdb_labels, metricsql=False)


def test_bands_of_a_long_range_are_queried_in_chunks(own_tsdb_labels):
    """More steps than one query may return (Prometheus stops at 11,000): several queries, one answer."""
    client = tsdb.client()
    end = float(int(time.time()) // 60 * 60)
    points = wave(end - 12_000 * 60, 12_000, 60.0, 10.0)  # a point a minute for 200 hours
    write_points(a_device(102), {"temperature_c": points})
    got = reads.bands(client, {"t": "asicmon_temperature_c"}, {"device": "102"}, end - 12_000 * 60, end, 60,
                      extra=own_tsdb_labels, count=True)
    assert len(got["t"]) == 12_000 > reads.MAX_STEPS_PER_QUERY
    assert close([p[:2] for p in got["t"]], points) and {p[4] for p in got["t"]} == {1}


def test_the_fleet_quantile_by_type_is_promqls_quantile(own_tsdb_labels):
    client = tsdb.client()
    at = float(int(time.time()) // 60 * 60)
    values = {"gpu": [41.0, 55.0, 60.0, 62.0, 90.0], "video": [30.0, 35.0]}
    pk = 200
    for device_type, temps in values.items():
        for temp in temps:
            pk += 1
            write_points(a_device(pk, device_type=device_type), {"temperature_c": [(at - 60, temp - 5), (at, temp)]})

    def quantile(q, xs):  # PromQL's: linear between the ranks
        xs = sorted(xs)
        rank = q * (len(xs) - 1)
        low = math.floor(rank)
        return xs[low] + (xs[min(low + 1, len(xs) - 1)] - xs[low]) * (rank - low)

    series = reads.fleet_quantile(client, "asicmon_temperature_c", 0.95, at - 60, at, 60, extra=own_tsdb_labels)
    assert series[("gpu",)] == [(at - 60, quantile(0.95, [t - 5 for t in values["gpu"]])), (at, quantile(0.95, values["gpu"]))]
    assert series[("video",)][-1] == (at, quantile(0.95, values["video"]))
    over = reads.fleet_quantile_over(client, "asicmon_temperature_c", 0.5, at - 120, at, extra=own_tsdb_labels)
    # Each device's median of (t - 5, t) is t - 2.5; the median across the video devices:
    assert over[("video",)] == quantile(0.5, [t - 2.5 for t in values["video"]])


def test_the_step_of_a_chart_follows_its_range():
    assert reads.chart_step(15 * 60, 5) is None  # 180 polls: raw
    assert reads.chart_step(3600, 5) is None  # 720 polls
    assert reads.chart_step(6 * 3600, 5) == 60  # 4,320 polls: one-minute bands (360 points)
    assert reads.chart_step(86_400, 5) == 180  # 480 points
    assert reads.chart_step(7 * 86_400, 5) == 1020  # 593 points
    assert reads.chart_step(30 * 86_400, 5) == 4320  # 600 points
    assert reads.chart_step(6 * 3600, 30) is None  # a slow poll: 720 polls, raw


def test_oversized_reads_are_refused_before_the_store_is_asked():
    nowhere = tsdb.Client("http://127.0.0.1:9")  # would fail if asked
    ten_years = 10 * 365 * 86_400
    with pytest.raises(reads.TooManyPoints, match="at most 100,000"):
        reads.raw_points(nowhere, METRICS, {"device": "1"}, 0, ten_years, interval_s=1)
    with pytest.raises(reads.TooManyPoints, match="at most 100,000"):
        reads.bands(nowhere, METRICS, {"device": "1"}, 0, ten_years, 60)
    with pytest.raises(ValueError, match="at least 1 s"):
        reads.bands(nowhere, METRICS, {"device": "1"}, 0, 60, 0.5)
    with pytest.raises(reads.TooManyPoints):
        reads.fleet_quantile(nowhere, "asicmon_temperature_c", 0.95, 0, ten_years, 60)
    with pytest.raises(ValueError, match="between 0 and 1"):
        reads.fleet_quantile(nowhere, "asicmon_temperature_c", 95, 0, 60, 60)


def test_a_store_that_does_not_answer_is_unavailable():
    nowhere = tsdb.Client("http://127.0.0.1:9", read_timeout_s=1)
    with pytest.raises(tsdb.TsdbUnavailable):
        reads.raw_points(nowhere, METRICS, {"device": "1"}, 0, 60, interval_s=5)
    with pytest.raises(tsdb.TsdbUnavailable):
        reads.bands(nowhere, METRICS, {"device": "1"}, 0, 3600, 60)


def test_a_selector_of_several_names_escapes_label_values():
    chosen = reads.names_selector(["asicmon_b", "asicmon_a"], {"device": '7"x'}, extra="site=lab")
    assert chosen == '{__name__=~"asicmon_a|asicmon_b",device="7\\"x",site="lab"}'
    assert reads.names_selector(["asicmon_a"], {}, extra="") == '{__name__=~"asicmon_a"}'
    with pytest.raises(ValueError, match="not a series name"):
        reads.names_selector(['a"}or{b'], {}, extra="")
