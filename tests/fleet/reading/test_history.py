"""Every reader of a device's history reads the time-series store: the samples API (exact
points, bands a step apart, `resolution` as the step, bad ranges refused), the device page
(raw for short ranges, bands for long ones, "history unavailable" with live values when the
store is down) and a job's device health."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from fleet.polling import snapshots
from fleet.reading import history
from fleet.tsdb import reads
from tests.support.history import write_points
from tests.support.processes import free_port
from traces.jobs.health import device_health, health_reasons

pytestmark = pytest.mark.django_db


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


@pytest.fixture
def device_history(seeded_fleet):
    """Three hours of a device's temperature and power, every 5 s, ending on the last whole
    minute; returns (device, end, temperature points, power points)."""
    device = seeded_fleet[0]
    end = float(int(datetime.now(tz=UTC).timestamp()) // 60 * 60)
    temperature = [(end - 5 * i, 40.0 + (i * 7 % 13) + i / 997) for i in range(2160)][::-1]
    power = [(t, 200.0 + v) for t, v in temperature]
    write_points(device, {"temperature_c": temperature, "power_w": power})
    return device, end, temperature, power


@pytest.fixture
def store_down(settings):
    settings.TSDB_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    return settings.TSDB_URL


def summed(points, t, step):
    values = [v for s, v in points if t - step < s <= t]
    return sum(values) / len(values), min(values), max(values), len(values)


# --- The samples API -------------------------------------------------------------------------

def get_samples(api_client, device, **query):
    response = api_client.get(f"/api/devices/{device.pk}/samples/", {"counter": "temperature_c", **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_raw_samples_are_the_points_written(api_client, viewer, device_history):
    device, end, temperature, _ = device_history
    api_client.force_authenticate(viewer)
    body = get_samples(api_client, device, since=str(end - 1800), until=str(end), resolution="raw")
    assert body["resolution"] == "raw" and body["step"] is None and body["unit"] == "C"
    want = [p for p in temperature if end - 1800 <= p[0] <= end]
    assert len(body["points"]) == len(want) == 361
    for (iso, value), (t, v) in zip(body["points"], want, strict=True):
        assert datetime.fromisoformat(iso).timestamp() == t and math.isclose(value, v, rel_tol=1e-12)
    latest = get_samples(api_client, device, since=str(end - 1800), until=str(end), limit="3")
    assert latest["resolution"] == "raw" and [p[1] for p in latest["points"]] == pytest.approx([v for _, v in want[-3:]])


def test_one_minute_and_one_hour_points_sum_up_their_step(api_client, viewer, device_history):
    device, end, temperature, _ = device_history
    api_client.force_authenticate(viewer)
    minutes = get_samples(api_client, device, since=str(end - 6 * 3600), until=str(end))
    assert minutes["resolution"] == "1m" and minutes["step"] == 60  # auto: 6 h is 1-minute points
    assert len(minutes["points"]) == 180  # the three hours that have samples
    for iso, mean, low, high, count in minutes["points"]:
        t = datetime.fromisoformat(iso).timestamp()
        assert t % 60 == 0
        assert (mean, low, high, count) == pytest.approx(summed(temperature, t, 60), rel=1e-12)
    hours = get_samples(api_client, device, since=str(end - 3 * 86_400), until=str(end))
    assert hours["resolution"] == "1h" and hours["step"] == 3600
    assert sum(p[4] for p in hours["points"]) == 2160
    last = get_samples(api_client, device, since=str(end - 3 * 86_400), until=str(end), resolution="1m", limit="5")
    assert [p[0] for p in last["points"]] == [at(end - 60 * k).isoformat() for k in (4, 3, 2, 1, 0)]


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"resolution": "5m"}, "resolution", "'5m' is not one of: auto, raw, 1m, 1h"),
        ({"since": "2016-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z", "resolution": "raw"}, "since",
         "the range may span at most 31 days; this one spans 3653 days"),
        ({"counter": "throttle_reasons"}, "counter", "unknown counter 'throttle_reasons'; counters with a time series:"),
    ],
)
def test_bad_ranges_and_resolutions_are_400_and_name_the_limit(api_client, viewer, seeded_fleet, query, field, message):
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/devices/{seeded_fleet[0].pk}/samples/", {"counter": "temperature_c", **query})
    assert response.status_code == 400
    assert message in str(response.json()[field])


def test_the_longest_range_follows_the_stores_retention(api_client, viewer, seeded_fleet, settings):
    settings.SAMPLE_RETENTION_DAYS = 90
    api_client.force_authenticate(viewer)
    url = f"/api/devices/{seeded_fleet[0].pk}/samples/"
    ok = api_client.get(url, {"counter": "temperature_c", "since": "2026-01-01T00:00:00Z", "until": "2026-03-31T00:00:00Z",
                              "resolution": "1h"})
    assert ok.status_code == 200 and ok.json()["points"] == []
    too_long = api_client.get(url, {"counter": "temperature_c", "since": "2026-01-01T00:00:00Z", "until": "2026-04-05T00:00:00Z"})
    assert too_long.status_code == 400 and "at most 91 days; this one spans 94 days" in str(too_long.json()["since"])


def test_a_raw_read_of_a_whole_month_looks_back_a_bounded_number_of_polls(api_client, viewer, device_history):
    """The widest raw request (31 days at a 5 s poll: 535,680 points) reads at most
    MAX_POINTS polls back from `until`, and answers the latest `limit` of them."""
    device, end, temperature, _ = device_history
    api_client.force_authenticate(viewer)
    body = get_samples(api_client, device, since=str(end - 31 * 86_400), until=str(end), resolution="raw", limit="100000")
    assert len(body["points"]) == len(temperature) and reads.MAX_POINTS * 5 > 3 * 3600


def test_a_read_over_the_points_bound_is_a_400_not_a_500(api_client, viewer, seeded_fleet, monkeypatch):
    monkeypatch.setattr(reads, "MAX_POINTS", 50)  # the bound every read keeps, made small
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/devices/{seeded_fleet[0].pk}/samples/",
                              {"counter": "temperature_c", "resolution": "1m", "since": "0", "until": "7200", "limit": "100"})
    assert response.status_code == 400 and "at most 50" in str(response.json()["since"])


def test_the_api_answers_503_when_the_store_is_down(api_client, viewer, seeded_fleet, store_down):
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/devices/{seeded_fleet[0].pk}/samples/", {"counter": "temperature_c"})
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert "time-series store" in response.json()["detail"] and "not answering" in response.json()["detail"]


# --- The device page -------------------------------------------------------------------------

def figure_of(response, counter="temperature_c"):
    return next(f for f in response.context["figures"] if f["counter"] == counter)


def test_the_device_page_draws_raw_samples_short_and_bands_long(client, viewer, device_history):
    device, end, temperature, _ = device_history
    client.force_login(viewer)
    short = client.get(f"/devices/{device.pk}/", {"range": "1h"})
    assert short.status_code == 200 and short.context["resolution"] == "raw"
    figure = figure_of(short)
    assert len(figure["data"]) == 1 and figure["live"]
    assert len(figure["data"][0]["x"]) >= 700  # a point per poll (720 in the hour, less what the clock moved on)

    day = client.get(f"/devices/{device.pk}/", {"range": "24h"})
    assert day.context["resolution"] == "180s" and 'data-resolution="180s"' in day.content.decode()
    assert "3-minute mean, min–max band" in day.content.decode()
    figure = figure_of(day)
    assert [trace.get("name") for trace in figure["data"]][1:] == ["max", "min"] and not figure["live"]
    x = [datetime.fromisoformat(t).timestamp() for t in figure["data"][0]["x"]]
    buckets = sorted({math.ceil(t / 180) * 180 for t, _ in temperature})  # a band every 3 minutes that has samples
    window_end = datetime.fromisoformat(figure["layout"]["xaxis"]["range"][1]).timestamp()
    assert x == [min(t, window_end) for t in buckets]  # the bucket that holds "now" is drawn at the axis' end
    assert 60 <= len(x) <= 61
    means, lows, highs = figure["data"][0]["y"], figure["data"][2]["y"], figure["data"][1]["y"]
    for t, mean, low, high in zip(buckets, means, lows, highs, strict=True):
        assert (mean, low, high) == pytest.approx(summed(temperature, t, 180)[:3], rel=1e-12)

    month = client.get(f"/devices/{device.pk}/", {"range": "30d"})
    assert month.context["resolution"] == "4320s" and len(figure_of(month)["data"][0]["x"]) <= 4


def test_the_device_page_says_history_is_unavailable_and_keeps_live_values(client, viewer, seeded_fleet, store_down):
    device = seeded_fleet[0]
    snapshots.write_snapshots(1.0, {device.pk: {"temperature_c": 61.5, "power_w": 240.0}})
    client.force_login(viewer)
    response = client.get(f"/devices/{device.pk}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="history-unavailable"' in page and "History unavailable: the time-series store at" in page
    assert store_down in page and "not answering" in page
    assert "Temperature (°C): history unavailable; the graph starts with the next poll." in page
    assert "61.5" in page  # the latest counters, from Redis
    assert figure_of(response)["live"] and figure_of(response)["data"][0]["x"] == []


# --- A job's device health --------------------------------------------------------------------

def test_a_jobs_device_health_has_the_statistics_of_its_window(device_history):
    device, end, temperature, power = device_history
    since, until = at(end - 600), at(end - 300)
    facts = device_health(device, since, until)
    window = [v for t, v in temperature if end - 630 <= t <= end - 300]  # from LEAD (30 s) before the window
    got = facts["series"]["temperature_c"]
    assert got["n"] == len(window) == 67 and facts["series_unavailable"] is None
    assert (got["min"], got["mean"], got["max"]) == pytest.approx((min(window), sum(window) / len(window), max(window)))
    assert facts["series"]["power_w"]["max"] == pytest.approx(max(window) + 200)
    # A long window: the statistics come from the store, equal all the same.
    long = device_health(device, at(end - 3 * 3600 + 30), at(end))["series"]["temperature_c"]
    values = [v for _, v in temperature]
    assert long["n"] == 2160 and long["mean"] == pytest.approx(sum(values) / len(values), rel=1e-12)
    assert history.RAW_STATS_MAX_POLLS * 5 < 3 * 3600  # that window was past the raw limit


def test_a_jobs_device_health_without_the_store_says_so(seeded_fleet, store_down):
    device = seeded_fleet[0]
    now = datetime.now(tz=UTC)
    facts = device_health(device, now - timedelta(minutes=5), now)
    assert facts["series"] == {} and "not answering" in facts["series_unavailable"]
    reasons = health_reasons(facts)
    assert reasons[-1]["kind"] == "history_unavailable"
    assert reasons[-1]["text"].endswith("These reasons come from the health events and snapshots only.")
