"""Ages and durations read as people say them ("55 min 53 s"), not as raw seconds ("3353 s"):
one formatter (fleet.durations) behind every one the pages and the API show."""

from datetime import UTC, datetime, timedelta

import pytest

from fleet.agent.queues import agent_status
from fleet.durations import human_duration
from fleet.health.detection import assess_with_reasons
from fleet.models import Host


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"), (0.4, "0.4 s"), (2.5, "2.5 s"), (42, "42 s"), (59.6, "1 min"), (65, "1 min 5 s"),
        (3353, "55 min 53 s"), (3600, "1 h"), (3661, "1 h 1 min"), (7260, "2 h 1 min"),
        (86400, "1 d"), (90061, "1 d 1 h"),
    ],
)
def test_durations_read_in_the_two_largest_units(seconds, shown):
    assert human_duration(seconds) == shown


@pytest.mark.django_db
def test_an_agent_stopped_for_an_hour_says_so_in_minutes_on_the_fleet_page(client, viewer, clean_redis):
    """It said "agent stopped: not seen for 3353 s"."""
    now = datetime.now(tz=UTC)
    host = Host.objects.create(name="node-q", agent_queue="asicmon.host.node-q", agent_seen_at=now - timedelta(seconds=3353))
    host.devices.create(serial="node-q-gpu0", device_type="nvml", index=0)
    assert agent_status(host, now) == "agent stopped: not seen for 55 min 53 s"
    client.force_login(viewer)
    page = client.get("/?host=node-q").content.decode()
    assert "not seen for 55 min" in page and "3353" not in page


def test_stale_health_says_how_long_without_data_in_minutes():
    assessment = assess_with_reasons({"sample_ts": 1000.0}, now=1000.0 + 3353, poll_interval=5.0)
    assert assessment.reasons == ["no data for 55 min 53 s"]
