"""The store goes away under a polling fleet and comes back: nothing is lost, nothing is
written twice (issue 17, "nothing lost when the store goes away").

The fleet is polled slot by slot in real time, as the workers poll it (the same
`poller.poll_shard`), so that every cycle polled and the samples each kept are known
exactly; the store is a real VictoriaMetrics (stopped for 60 s, as the issue asks) or a real
Prometheus (stopped for 10 s) of the test's own, restarted on the same data.
"""

import time
from collections import Counter

import pytest

from fleet.polling import poller
from fleet.tasks import flush_samples
from fleet.tsdb.series import series_name
from tests.support.tsdb import ALL_SERIES, flush, raw_samples

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def poll_for(seconds: float, results: list) -> None:
    """Poll every shard at each slot for `seconds`, as beat would."""
    end = time.time() + seconds
    while time.time() < end:
        cycle = poller.current_cycle()
        results.extend(poller.poll_shard(shard, cycle) for shard in poller.shards())
        time.sleep(max(0.0, cycle + poller.settings.POLL_INTERVAL - time.time()) + 0.01)


def outage(store, seeded_fleet, settings, seconds: float) -> dict:
    settings.POLL_INTERVAL = 1.0
    settings.TSDB_WRITE_TIMEOUT_S = 0.5
    settings.TSDB_FLUSH_BUDGET_S = 0.5
    results = []
    poll_for(4, results)
    store.stop()
    poll_for(seconds, results)
    waiting = results[-1].waiting
    store.start()
    poll_for(6, results)
    while flush_samples()["waiting"]:
        pass
    cycles = sorted({r.cycle for r in results})
    flush(newest=cycles[-1])
    stored = raw_samples(cycles[0] - 0.5, cycles[-1], ALL_SERIES)
    points = [(tuple(sorted(s.labels.items())), t) for s in stored for t, _ in s.points]
    distinct = Counter(points)
    temperature = series_name("temperature_c")
    polled = {r.cycle for r in results if r.devices}
    return {
        "waiting at the end of the outage": waiting,
        "expected": sum(r.samples for r in results),
        "missing": sum(r.samples for r in results) - len(distinct),
        "duplicated": sum(n - 1 for n in distinct.values()),
        "gaps": [r.gap for r in results if r.gap],
        "cycles without every device": sorted(
            c for c in polled
            if sum(1 for (labels, t) in distinct if t == c and dict(labels)["__name__"] == temperature) != len(seeded_fleet)
        ),
        "cycles": len(cycles),
    }


def test_victoria_metrics_stopped_60_s_under_a_polling_fleet_loses_and_duplicates_nothing(
    victoria_metrics, seeded_fleet, settings
):
    counts = outage(victoria_metrics, seeded_fleet, settings, 60)
    print(counts)
    assert counts["waiting at the end of the outage"] >= 100  # 2 shards x ~60 cycles waited
    assert counts["expected"] > 0 and counts["cycles"] >= 65
    assert (counts["missing"], counts["duplicated"], counts["gaps"]) == (0, 0, [])
    assert counts["cycles without every device"] == []


def test_prometheus_stopped_under_a_polling_fleet_loses_and_duplicates_nothing(prometheus_store, seeded_fleet, settings):
    counts = outage(prometheus_store, seeded_fleet, settings, 10)
    print(counts)
    assert counts["waiting at the end of the outage"] >= 15
    assert (counts["missing"], counts["duplicated"], counts["gaps"]) == (0, 0, [])
    assert counts["cycles without every device"] == []
