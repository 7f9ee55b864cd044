"""The spool says so loudly while the store refuses its writes (issue 25, point 3): a banner
on the fleet page for staff, /metrics series; and the scenario of the issue's figure at a
small scale: the store answers 401 for a while under a polling fleet, the credential is
fixed, no sample is lost (benchmarks/bench_spool_refusals.py runs it for 10 minutes of cycles).
"""

import re
import time

import pytest
from django.urls import reverse

from fleet import tsdb
from fleet.polling import poller
from fleet.tsdb.buffer import Spool
from fleet.tsdb.status import spool_name
from tests.fleet.tsdb.test_buffer import batch, devices, small_disk
from tests.support.tsdb import flush, raw_samples, store_proxy  # noqa: F401 (fixture)

TOKEN = "spool-scrape-token"


def scrape(client, settings) -> str:
    settings.METRICS_TOKEN = TOKEN
    answer = client.get(reverse("fleet:metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200
    return answer.content.decode()


def series(text: str, name: str) -> dict[str, float]:
    """The samples of one family in /metrics: labels text → value."""
    return {labels: float(value) for labels, value in re.findall(rf"^{name}\{{(.*)\}} (\S+)$", text, re.M)}


@pytest.mark.django_db
def test_while_the_store_refuses_staff_see_a_banner_and_metrics_count_every_refusal(
    store_proxy, clean_redis, client, admin_user, viewer, settings, caplog  # noqa: F811 (fixture)
):
    store_proxy.status = 401
    start = poller.current_cycle() - 60
    with caplog.at_level("WARNING", logger="fleet.tsdb"):
        for n in range(3):
            assert tsdb.writer().write(batch(start + 5 * n, devices(2))).buffered == 2
    assert caplog.text.count("refuses writes") == 1  # one line a minute, whichever process is first

    client.force_login(admin_user)
    page = client.get(reverse("fleet:fleet")).content.decode()
    assert 'id="tsdb-spool"' in page and "It refuses the writes of" in page
    assert "3 batches" in page and "unauthorized: HTTP 401" in page
    text = scrape(client, settings)
    spool = f'spool="{spool_name(settings.TSDB_BUFFER_DIR)}"'
    assert series(text, "asicmon_tsdb_spool_batches") == {spool: 3.0}
    assert series(text, "asicmon_tsdb_spool_bytes")[spool] > 0
    assert series(text, "asicmon_tsdb_store_refusing") == {spool: 1.0}
    assert series(text, "asicmon_tsdb_write_failures_total") == {f'reason="unauthorized",{spool}': 3.0}
    assert "asicmon_tsdb_last_write_success_timestamp_seconds{" not in text

    client.force_login(viewer)  # not staff: the fleet as ever, no banner
    assert 'id="tsdb-spool"' not in client.get(reverse("fleet:fleet")).content.decode()

    store_proxy.status = None
    assert tsdb.writer().flush().waiting == 0
    client.force_login(admin_user)
    assert 'id="tsdb-spool"' not in client.get(reverse("fleet:fleet")).content.decode()
    text = scrape(client, settings)
    assert series(text, "asicmon_tsdb_spool_batches") == {spool: 0.0}
    assert series(text, "asicmon_tsdb_store_refusing") == {spool: 0.0}
    assert series(text, "asicmon_tsdb_last_write_success_timestamp_seconds")[spool] > start


@pytest.mark.slow  # fills a disk-sized spool: seconds of CPU (make test runs it, make test-fast does not)
@pytest.mark.django_db
def test_samples_lost_to_a_full_disk_are_counted_in_metrics_and_named_on_the_banner(
    clean_redis, client, admin_user, settings, tmp_path
):
    from tests.support.tsdb import free_port

    settings.TSDB_WRITE_URL = f"http://127.0.0.1:{free_port()}"  # away: everything goes to the spool
    settings.TSDB_WRITE_TIMEOUT_S = 0.5
    start = poller.current_cycle() - 600
    lost = 0
    with small_disk(tmp_path / "small", "32k") as folder:
        settings.TSDB_BUFFER_DIR = folder
        for n in range(12):
            lost += tsdb.writer().write(batch(start + 5 * n, devices(300))).lost
        waiting = sum(b.samples for b in map(Spool(folder, 1).read, Spool(folder, 1).entries()))
        text = scrape(client, settings)
        client.force_login(admin_user)
        page = client.get(reverse("fleet:fleet")).content.decode()
    assert lost > 0 and waiting + lost == 12 * 300
    spool = f'spool="{spool_name(folder)}"'
    assert series(text, "asicmon_tsdb_samples_lost_total") == {f'reason="disk_full",{spool}': float(lost)}
    assert "Samples lost from" in page and "No space left on device" in page


@pytest.mark.slow  # polls a fleet through a refusing proxy, then through a mended one: seconds of CPU (make test runs it, make test-fast does not)
@pytest.mark.django_db(transaction=True)
def test_a_polling_fleet_behind_a_store_answering_401_loses_nothing_once_the_credential_is_fixed(
    store_proxy, seeded_fleet, settings  # noqa: F811 (fixture)
):
    """24 cycles (2 minutes of a 5 s interval, in compressed time) of 401s, then fixed."""
    counts = refusal_scenario(store_proxy, cycles_refused=24, cycles_after=3)
    print(counts)
    assert counts["refused requests"] >= 24 * len(poller.shards())
    assert counts["waiting at the fix"] >= 24 * len(poller.shards())
    assert counts["polled"] > 0 and (counts["lost"], counts["duplicated"], counts["waiting"]) == (0, 0, 0)


def refusal_scenario(proxy, *, cycles_refused: int, cycles_after: int, refused_status: int = 401) -> dict:
    """Poll every shard at simulated cycles (every POLL_INTERVAL seconds, one after another as
    fast as they go) with the store behind `proxy` answering `refused_status`, then with the
    proxy fixed; flush; count what the poll kept and what the store holds."""
    interval = poller.settings.POLL_INTERVAL
    start = poller.current_cycle() - (cycles_refused + cycles_after + 2) * interval
    results = []
    proxy.status = refused_status
    for n in range(cycles_refused):
        results += [poller.poll_shard(shard, start + n * interval) for shard in poller.shards()]
    waiting_at_fix = results[-1].waiting
    refused = proxy.answered[refused_status]
    proxy.status = None
    for n in range(cycles_refused, cycles_refused + cycles_after):
        results += [poller.poll_shard(shard, start + n * interval) for shard in poller.shards()]
    deadline = time.monotonic() + 120  # a loaded machine's store may time a request out now and then
    while (flushed := tsdb.writer().flush(budget_s=30)).waiting:
        assert time.monotonic() < deadline, f"the spool does not drain: {flushed}"
    end = start + (cycles_refused + cycles_after - 1) * interval
    flush(newest=end)
    stored = raw_samples(start - 0.5, end)
    points = [(tuple(sorted(s.labels.items())), t) for s in stored for t, _ in s.points]
    polled = sum(r.samples for r in results)
    return {
        "cycles": cycles_refused + cycles_after,
        "polled": polled,
        "stored": len(set(points)),
        "lost": polled - len(set(points)),
        "duplicated": len(points) - len(set(points)),
        "refused requests": refused,
        "waiting at the fix": waiting_at_fix,
        "waiting": flushed.waiting,
    }
