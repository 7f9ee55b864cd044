"""Alertmanager's API v2 as an evaluator speaks it: firing alerts ending a few intervals
ahead, resolved ones ending now; an Alertmanager that does not answer is said so."""

from datetime import UTC, datetime, timedelta

import pytest

from fleet.alerts.alertmanager import Alert, AlertmanagerError, payload, post
from tests.support.processes import free_port


def test_firing_alerts_end_ahead_and_resolved_ones_now():
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    drained = Alert("AsicmonDeviceDrained", {"serial": "GPU-1", "severity": "ticket"}, {"summary": "s"})
    body = payload([drained], [Alert("AsicmonDevicePulled", {"serial": "GPU-2"}).key], now, timedelta(minutes=1))
    assert body == [
        {"labels": {"alertname": "AsicmonDeviceDrained", "serial": "GPU-1", "severity": "ticket"},
         "annotations": {"summary": "s"}, "startsAt": "2026-12-07T12:00:00Z", "endsAt": "2026-12-07T12:01:00Z"},
        {"labels": {"alertname": "AsicmonDevicePulled", "serial": "GPU-2"}, "endsAt": "2026-12-07T12:00:00Z"},
    ]


def test_an_alertmanager_that_does_not_answer_is_said_so():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AlertmanagerError, match=f"Alertmanager at {url} did not answer"):
        post(url, [], timeout_s=2)
