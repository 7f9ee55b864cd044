"""Server-rendered pages: sign-in, permissions, content, query counts."""

from pathlib import Path

import pytest

from fleet.hosts import emulated_fleet
from fleet.polling import poller

pytestmark = pytest.mark.django_db


def test_fleet_page_needs_sign_in(client, polled_fleet):
    response = client.get("/")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/accounts/login/")


def test_fleet_page_is_forbidden_without_a_role(client, outsider, polled_fleet):
    client.force_login(outsider)
    assert client.get("/").status_code == 403


def test_fleet_page_lists_every_device_with_counters(client, viewer, polled_fleet, django_assert_max_num_queries):
    client.force_login(viewer)
    # session, user, permissions, automation, summary (2), table (2), types
    with django_assert_max_num_queries(12):  # 10, the driver errors' counts, the machines with an agent
        response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    for device in polled_fleet:  # a small fleet fits the first page
        assert f'data-device-id="{device.id}"' in html
        assert device.serial in html
    assert "°C" in html and " W<" in html and "GiB" in html
    assert 'data-ws-path="/ws/fleet/"' in html
    assert f"1–{len(polled_fleet)} of {len(polled_fleet)} devices" in html


def test_device_page_has_graph_data_and_counters(client, viewer, polled_fleet):
    client.force_login(viewer)
    device = polled_fleet[0]
    response = client.get(f"/devices/{device.id}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="device-figures"' in html
    assert "chart-temperature_c" in html
    assert "/static/vendor/plotly/plotly.min.js" in html
    assert "temperature_c" in response.context["snapshot"]


def test_unknown_device_page_is_404(client, viewer, polled_fleet):
    client.force_login(viewer)
    assert client.get("/devices/999999/").status_code == 404


def test_plotly_is_served_from_our_static_files(client):
    response = client.get("/static/vendor/plotly/plotly.min.js")
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert b"plotly.js v3" in body[:200]


def test_a_hung_device_is_critical_with_its_reason_on_both_pages(client, viewer, seeded_fleet, fleet_settings):
    fleet_settings.PROBE_TIMEOUT = 0.2
    emulated_fleet.host_monitor.cache_clear()
    hung = seeded_fleet[0]
    emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")
    for shard in poller.shards():
        poller.poll_shard(shard, poller.current_cycle())
    client.force_login(viewer)

    fleet_html = client.get("/").content.decode()
    assert 'title="driver hung"' in fleet_html
    assert fleet_html.count("health-critical") >= 2  # the summary count and the row's badge
    device_html = client.get(f"/devices/{hung.id}/").content.decode()
    assert 'data-field="reasons">driver hung<' in device_html


def test_fleet_page_filters_by_host_type_and_health(client, viewer, polled_fleet, django_assert_max_num_queries):
    client.force_login(viewer)
    host = polled_fleet[0].host.name
    with django_assert_max_num_queries(12):  # 10, the driver errors' counts, the machines with an agent
        response = client.get("/", {"host": host, "type": "gpu"})
    shown = {row.device.id for row in response.context["table"].rows}
    assert shown == {d.id for d in polled_fleet if d.host.name == host and d.device_type == "gpu"} != set()

    healths = {row.device.id: row.health.value for row in client.get("/").context["table"].rows}
    some = next(iter(healths.values()))
    filtered = client.get("/", {"health": some}).context
    assert {row.device.id for row in filtered["table"].rows} == {i for i, h in healths.items() if h == some}
    assert filtered["summary"].devices == len(polled_fleet)  # the summaries stay fleet-wide
    assert "No device matches these filters." in client.get("/", {"type": "tpu"}).content.decode()


def test_fleet_page_refuses_a_bad_filter_with_a_message(client, viewer, polled_fleet):
    client.force_login(viewer)
    response = client.get("/", {"health": "sparkly"})
    assert response.status_code == 400
    assert "health" in response.content.decode() and "sparkly" in response.content.decode()


def test_admin_lists_devices_and_counters(client, polled_fleet, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="root-password-123")
    client.force_login(admin)
    devices = client.get("/admin/fleet/device/", {"device_type__exact": "gpu"})
    assert devices.status_code == 200
    gpus = [d for d in polled_fleet if d.device_type == "gpu"]
    assert all(d.serial in devices.content.decode() for d in gpus)
    counters = client.get("/admin/fleet/counter/")
    assert counters.status_code == 200 and "temperature_c" in counters.content.decode()


def test_device_page_shows_events_actions_human_units_and_the_counters_behind_its_reasons(client, operator, viewer, polled_fleet):
    from django.utils import timezone

    from fleet.models import Action, HealthEvent
    from fleet.polling import snapshots

    device = polled_fleet[0]
    HealthEvent.objects.create(device=device, rule="memory_leak", level="warning", reason="memory leak: 8.0 MiB/s, out of memory in 9 min",
                               started_at=timezone.now())
    Action.objects.create(device=device, kind="drain", status="succeeded", user=operator, reason="rack work", outcome="done")
    snapshot = snapshots.read_snapshot(device.id)
    snapshot["health_findings"] = [{"rule": "memory_leak", "level": "warning", "reason": "memory leak", "values": {}}]
    snapshots.write_snapshots(snapshot["cycle"], {device.id: snapshot})

    client.force_login(viewer)
    response = client.get(f"/devices/{device.id}/")
    html = response.content.decode()
    assert "memory leak: 8.0 MiB/s, out of memory in 9 min" in html
    assert "rack work" in html and "otto" in html
    assert 'data-action="reboot"' not in html  # viewers get no buttons
    assert " GiB<" in html and str(snapshot["memory_total_bytes"]) not in html  # human units
    figures = {f["counter"]: f for f in response.context["figures"]}
    memory = figures["memory_used_bytes"]
    assert memory["layout"]["shapes"][0]["y0"] == snapshot["memory_total_bytes"] / 2**30  # used of total
    assert [s["y0"] for s in figures["temperature_c"]["layout"]["shapes"]] == [85.0, 95.0]  # thresholds

    client.force_login(operator)
    assert 'data-action="reboot"' in client.get(f"/devices/{device.id}/").content.decode()


def test_graphs_break_where_polls_stopped():
    from fleet.reading.charts import counter_figure

    figure = counter_figure("temperature_c", [(0.0, 50.0), (5.0, 51.0), (60.0, 52.0)], gap_s=12.5)
    assert figure["data"][0]["y"] == [50.0, 51.0, None, 52.0]
    assert figure["data"][0]["connectgaps"] is False


def test_the_readme_describes_the_fleet_page_there_is(client, viewer, polled_fleet):
    """The README promised "a tile per device grouped by host"; the page is a table with
    summaries above it (issue 20). What the README says the page has, the page has."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("Open http://127.0.0.1:8000/")
    described = readme[start : readme.index("\n\n", start)].replace("\n", " ")
    assert "tile" not in readme.lower()
    client.force_login(viewer)
    html = client.get("/").content.decode()
    parts = {
        "healthy, warning, critical or unknown": 'data-health-count="critical"',
        "the hosts with a device that is not healthy": 'id="problem-hosts"',
        "a table of the devices": 'id="fleet-table"',
        "paged": 'id="fleet-pager"',
        "search, host, type, health, state": 'name="q"',
        "sorted by the server": 'name="sort"',
        "updated in place at every poll": 'data-ws-path="/ws/fleet/"',
    }
    for words, element in parts.items():
        assert words in described, words
        assert element in html, element
    for field in ("host", "type", "health", "state"):
        assert f'name="{field}"' in html
