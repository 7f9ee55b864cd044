"""The fleet page at scale: summaries first, a device table paged, filtered and sorted by
the server, a query count that does not grow with the fleet."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from fleet.health import index as health_index
from fleet.models import Device, Host

pytestmark = pytest.mark.django_db


def add_hosts(count: int, per_host: int = 8, prefix: str = "zz") -> list[Device]:
    """Hosts of never-polled GPUs, sorted after the seeded ones (host-00, host-01)."""
    hosts = Host.objects.bulk_create([Host(name=f"{prefix}-{i:04d}") for i in range(count)])
    return Device.objects.bulk_create(
        [Device(host=h, serial=f"{h.name}-gpu{j}", device_type="gpu", index=j) for h in hosts for j in range(per_host)]
    )


def mark(devices: list[Device], health: str, now: float) -> None:
    health_index.record({d.id: {"health": health, "sample_ts": now} for d in devices}, now)


def ids_shown(response) -> list[int]:
    return [row.device.id for row in response.context["table"].rows]


def queries_of(client, url: str, params: dict) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, params).status_code == 200
    return len(captured.captured_queries)


def test_the_table_is_paged_filtered_and_sorted_by_the_server(client, viewer, seeded_fleet):
    import time

    extra = add_hosts(4)  # 32 GPUs + the 8 seeded devices
    now = time.time()
    mark(extra[:30], "healthy", now)
    mark([extra[30]], "critical", now)
    mark([extra[31]], "warning", now)
    client.force_login(viewer)
    everything = [d.id for d in Device.objects.for_dashboard()]

    first = client.get("/", {"per_page": 25})
    assert ids_shown(first) == everything[:25]
    assert "1–25 of 40 devices" in first.content.decode()
    second = client.get("/fleet/table/", {"per_page": 25, "page": 2})
    assert second.status_code == 200 and ids_shown(second) == everything[25:]
    assert '<table class="fleet" id="fleet-table"' in second.content.decode()
    assert "<html" not in second.content.decode()  # a partial, swapped in by the page
    assert ids_shown(client.get("/fleet/table/", {"per_page": 25, "page": 99})) == everything[25:]  # the last page

    assert ids_shown(client.get("/fleet/table/", {"host": "zz-0001"})) == [d.id for d in extra[8:16]]
    assert ids_shown(client.get("/fleet/table/", {"q": "zz-0003-gpu7"})) == [extra[31].id]
    assert set(ids_shown(client.get("/fleet/table/", {"type": "gpu", "health": "healthy"}))) == {d.id for d in extra[:30]}
    assert ids_shown(client.get("/fleet/table/", {"health": "critical"})) == [extra[30].id]
    worst_first = ids_shown(client.get("/fleet/table/", {"sort": "health"}))
    assert worst_first[:2] == [extra[30].id, extra[31].id]
    assert set(worst_first[2:10]) == {d.id for d in seeded_fleet}  # never polled: unknown, before healthy
    Device.objects.filter(pk=extra[5].pk).update(state="repair")
    assert ids_shown(client.get("/fleet/table/", {"state": "repair"})) == [extra[5].id]

    summary = first.context["summary"]
    assert summary.devices == 40 and summary.hosts == 6
    assert summary.health_counts == {"healthy": 30, "warning": 1, "critical": 1, "unknown": 8}
    assert [h.name for h in summary.problem_hosts[:1]] == ["zz-0003"]  # the critical device's host first
    assert summary.problem_hosts[0].counts == {"critical": 1, "warning": 1}


def test_a_stale_entry_of_the_health_index_counts_as_unknown(client, viewer, seeded_fleet, settings):
    import time

    mark(seeded_fleet[:2], "healthy", time.time() - 10 * settings.POLL_INTERVAL)
    mark(seeded_fleet[2:], "healthy", time.time())
    client.force_login(viewer)
    counts = client.get("/").context["summary"].health_counts
    assert counts["unknown"] == 2 and counts["healthy"] == len(seeded_fleet) - 2


@pytest.mark.parametrize(
    "params",
    [{"page": 0}, {"page": "9223372036854775808"}, {"per_page": 7}, {"sort": "colour"}, {"state": "asleep"},
     {"host": "h" * 200}, {"q": "x" * 200}],
)
def test_a_bad_table_query_is_a_400_with_the_reason(client, viewer, seeded_fleet, params):
    client.force_login(viewer)
    for url in ("/", "/fleet/table/"):
        response = client.get(url, params)
        assert response.status_code == 400, (url, params)
        assert next(iter(params)) in response.content.decode()


def test_the_table_needs_the_view_permission(client, outsider, seeded_fleet):
    assert client.get("/fleet/table/").status_code == 302
    client.force_login(outsider)
    assert client.get("/fleet/table/").status_code == 403


def test_the_page_query_count_does_not_grow_with_the_fleet(client, viewer, seeded_fleet):
    import time

    client.force_login(viewer)
    asks = [("/", {}), ("/", {"health": "unknown", "sort": "health", "per_page": 200}), ("/fleet/table/", {"q": "gpu"})]
    small = [queries_of(client, url, params) for url, params in asks]
    extra = add_hosts(150)  # 1,200 more devices, some of them with a problem
    mark(extra[::7], "warning", time.time())
    large = [queries_of(client, url, params) for url, params in asks]
    assert large == small
    assert small[0] <= 12  # 10, the driver errors' counts, the machines with an agent
