"""A job's device health right after a capture: the store may not hold the window's last
polls yet. The facts wait for them (bounded), fall back on the capture's snapshots for every
fact a snapshot carries, and say when the series were missing."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from fleet.polling import snapshots
from tests.support.history import write_points
from traces.jobs.health import device_health, health_reasons, wait_for_window

pytestmark = pytest.mark.django_db

STORM = {"ecc_corrected_per_s": 48.0, "clock_mhz": 1980.0, "clock_max_mhz": 1980.0, "temperature_c": 61.0}


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def polled(device, sample_ts: float) -> None:
    """The device's latest poll, as the poller leaves it in Redis."""
    snapshots.write_snapshots(sample_ts, {device.pk: {"sample_ts": sample_ts, **STORM}})


def test_an_ecc_storm_seen_only_by_the_capture_s_snapshots_is_a_reason(seeded_fleet):
    device = seeded_fleet[0]
    now = time.time()
    polled(device, now - 1)
    facts = device_health(device, at(now - 3), at(now), {"start": STORM, "end": STORM}, wait_s=0.3)
    assert facts["series"] == {} and facts["series_complete"] is False
    reasons = health_reasons(facts)
    kinds = [r["kind"] for r in reasons]
    assert kinds[0] == "ecc" and "ECC storm: up to 48 corrected" in reasons[0]["text"]
    assert kinds[-1] == "history_pending" and "computed again" in reasons[-1]["text"]


def test_the_snapshots_add_to_the_series_the_store_has(seeded_fleet):
    device = seeded_fleet[0]
    now = float(int(time.time()))
    write_points(device, {"ecc_corrected_per_s": [(now - 10, 0.0), (now - 5, 0.0)], "clock_mhz": [(now - 5, 1980.0)]})
    polled(device, now - 5)
    facts = device_health(device, at(now - 8), at(now), {"start": {"ecc_corrected_per_s": 0.0},
                                                         "end": {"ecc_corrected_per_s": 31.0}}, wait_s=5)
    assert facts["series_complete"] is True and facts["series"]["ecc_corrected_per_s"]["max"] == 0.0
    reasons = health_reasons(facts)
    assert [r["kind"] for r in reasons] == ["ecc"] and "up to 31 corrected" in reasons[0]["text"]


def test_the_wait_ends_when_the_store_holds_the_window_s_last_poll(seeded_fleet):
    device = seeded_fleet[0]
    now = float(int(time.time()))
    polled(device, now - 2)
    started = time.monotonic()
    assert wait_for_window(device.pk, at(now - 20), at(now), 0.5) is False  # not in the store: bounded wait
    assert 0.5 <= time.monotonic() - started < 3
    write_points(device, {"temperature_c": [(now - 7, 50.0)]})
    assert wait_for_window(device.pk, at(now - 20), at(now), 0.3) is False  # an older poll is not the last
    write_points(device, {"temperature_c": [(now - 2, 51.0)]})
    started = time.monotonic()
    assert wait_for_window(device.pk, at(now - 20), at(now), 10) is True
    assert time.monotonic() - started < 2
    # A device not polled in the window has nothing to wait for.
    polled(device, now - 3600)
    assert wait_for_window(device.pk, at(now - 20), at(now), 10) is True


def test_the_store_s_stamp_is_the_poll_s_cycle_not_its_refresh_time(seeded_fleet, settings):
    """The poller stamps a cycle's samples with the cycle's slot; the device's refresh inside
    that cycle (``sample_ts``) comes a little later. The window is complete once the store
    holds the cycle's samples: waiting for the refresh time waited out every bound."""
    device = seeded_fleet[0]
    now = float(int(time.time()))
    cycle = now - settings.POLL_INTERVAL - 2  # the device's last poll, before the window's last interval
    snapshots.write_snapshots(cycle, {device.pk: {"sample_ts": cycle + 0.4, **STORM}})
    write_points(device, {"temperature_c": [(cycle, 51.0)]})
    started = time.monotonic()
    assert wait_for_window(device.pk, at(now - 20), at(now), 5) is True
    assert time.monotonic() - started < 1


def test_a_window_the_device_was_polled_past_waits_for_its_last_interval(seeded_fleet, settings):
    device = seeded_fleet[0]
    now = float(int(time.time()))
    polled(device, now + 60)  # polled since the window ended
    write_points(device, {"temperature_c": [(now - 3 * settings.POLL_INTERVAL, 50.0)]})
    assert wait_for_window(device.pk, at(now - 60), at(now), 0.3) is False
    write_points(device, {"temperature_c": [(now - settings.POLL_INTERVAL + 1, 50.0)]})
    assert wait_for_window(device.pk, at(now - 60), at(now), 0.3) is True


def test_reasons_from_a_complete_window_do_not_say_pending(seeded_fleet):
    device = seeded_fleet[0]
    now = time.time()
    facts = device_health(device, at(now - 600) - timedelta(hours=5), at(now - 600), wait_s=0)
    assert facts["series_complete"] is True
    assert all(r["kind"] != "history_pending" for r in health_reasons(facts))
