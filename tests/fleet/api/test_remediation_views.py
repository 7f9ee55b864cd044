"""Health events, actions, the brake, capacity and /metrics through the API (real Redis and
database, the fleet polled in-process)."""

import shutil
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.choices import ActionKind, ActionStatus, DeviceState
from fleet.models import Action, Automation, Device, HealthEvent

pytestmark = pytest.mark.django_db



def post_action(client, device, **body):
    return client.post(f"/api/devices/{device.id}/actions/", body, format="json")


def actions_and_state(device) -> tuple[list, str]:
    """What a refused request must leave as it was: every action, and the device's state
    (the fleet's polls may have acted already: automation on a loaded machine)."""
    return list(Action.objects.order_by("id").values_list("id", "kind", "status")), Device.objects.get(id=device.id).state


def test_viewers_read_events_actions_capacity_and_automation_but_cannot_act(api_client, viewer, polled_fleet):
    before = actions_and_state(polled_fleet[0])
    api_client.force_authenticate(viewer)
    for url in ["/api/health-events/", "/api/actions/", "/api/capacity/", "/api/automation/"]:
        assert api_client.get(url).status_code == 200, url
    response = post_action(api_client, polled_fleet[0], action="reboot", reason="looks stuck")
    assert response.status_code == 403
    assert "operate device" in response.json()["detail"]
    assert api_client.post("/api/automation/", {"paused": False}, format="json").status_code == 403
    assert actions_and_state(polled_fleet[0]) == before


def test_anonymous_gets_401_everywhere(api_client, polled_fleet):
    for url in ["/api/health-events/", "/api/actions/", "/api/capacity/", "/api/automation/"]:
        assert api_client.get(url).status_code == 401, url
    assert post_action(api_client, polled_fleet[0], action="reboot").status_code == 401


def test_an_operator_reboot_is_recorded_and_a_second_one_conflicts(api_client, operator, polled_fleet):
    api_client.force_authenticate(operator)
    device = polled_fleet[0]
    response = post_action(api_client, device, action="reboot", reason="driver upgrade")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["kind"] == "reboot" and body["status"] == "pending" and body["actor"] == "otto"
    assert body["reason"] == "driver upgrade"
    assert Device.objects.get(id=device.id).state == DeviceState.REBOOTING
    again = post_action(api_client, device, action="drain")
    assert again.status_code == 409 and "being rebooted" in again.json()["detail"]
    listed = api_client.get("/api/actions/", {"device": device.id, "kind": "reboot"}).json()["results"]
    assert [a["id"] for a in listed] == [body["id"]]


@pytest.mark.parametrize(
    ("action", "state"),
    [("drain", DeviceState.DRAINED), ("repair", DeviceState.REPAIR)],
)
def test_drain_and_repair_then_return_to_service(api_client, operator, polled_fleet, action, state):
    api_client.force_authenticate(operator)
    device = polled_fleet[1]
    assert post_action(api_client, device, action=action, reason="rack work").status_code == 202
    assert Device.objects.get(id=device.id).state == state
    capacity = api_client.get("/api/capacity/").json()
    row = next(d for d in capacity["devices"] if d["id"] == device.id)
    assert row["weight"] == 0 and row["may_serve"] is False
    assert post_action(api_client, device, action="return_to_service").status_code == 202
    assert Device.objects.get(id=device.id).state == DeviceState.IN_SERVICE
    kinds = list(Action.objects.filter(device=device).order_by("id").values_list("kind", "status"))
    assert kinds == [(action, ActionStatus.SUCCEEDED), (ActionKind.RETURN_TO_SERVICE, ActionStatus.SUCCEEDED)]


def test_maintenance_takes_a_future_until(api_client, operator, polled_fleet):
    api_client.force_authenticate(operator)
    device = polled_fleet[2]
    until = timezone.now() + timedelta(hours=2)
    response = post_action(api_client, device, action="maintenance", until=until.isoformat())
    assert response.status_code == 202
    stored = Device.objects.get(id=device.id)
    assert stored.state == DeviceState.MAINTENANCE
    assert abs((stored.maintenance_until - until).total_seconds()) < 1
    detail = api_client.get(f"/api/devices/{device.id}/").json()
    assert detail["state"] == "maintenance" and detail["maintenance_until"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"action": "explode"}, "action", "not a valid choice"),
        ({}, "action", "required"),
        ({"action": "maintenance"}, "until", "maintenance needs 'until'"),
        ({"action": "maintenance", "until": "2001-01-01T00:00:00Z"}, "until", "in the future"),
        ({"action": "maintenance", "until": "next tuesday"}, "until", "Datetime has wrong format"),
        ({"action": "drain", "until": "2099-01-01T00:00:00Z"}, "until", "only maintenance"),
        ({"action": "drain", "reason": "x" * 501}, "reason", "no more than 500"),
    ],
)
def test_bad_action_requests_get_400_and_change_nothing(api_client, operator, polled_fleet, body, field, message):
    before = actions_and_state(polled_fleet[0])
    api_client.force_authenticate(operator)
    response = post_action(api_client, polled_fleet[0], **body)
    assert response.status_code == 400
    assert message in str(response.json()[field])
    assert actions_and_state(polled_fleet[0]) == before


def test_acting_on_a_missing_device_is_404(api_client, operator, polled_fleet):
    api_client.force_authenticate(operator)
    assert api_client.post("/api/devices/999999/actions/", {"action": "drain"}, format="json").status_code == 404


def test_health_events_filter_by_device_open_and_level(api_client, viewer, polled_fleet):
    now = timezone.now()
    a, b = polled_fleet[0], polled_fleet[1]
    HealthEvent.objects.create(device=a, rule="driver", level="critical", reason="driver hung", started_at=now)
    HealthEvent.objects.create(device=a, rule="pcie", level="warning", reason="PCIe link degraded",
                               started_at=now - timedelta(minutes=5), ended_at=now)
    HealthEvent.objects.create(device=b, rule="cooling", level="warning", reason="hot", started_at=now)
    api_client.force_authenticate(viewer)

    def events(**query):
        return api_client.get("/api/health-events/", query).json()["results"]

    def reasons(**query):
        return [e["reason"] for e in events(**query)]

    # The polled fleet may have raised events of its own (a device the emulator made noisy
    # in these cycles: CI once saw a corrected-ECC warning on another device), so a filter
    # over the whole fleet is checked by what it keeps and what it must leave out.
    assert reasons(device=a.id) == ["driver hung", "PCIe link degraded"]  # newest first
    assert reasons(device=a.id, open="true") == ["driver hung"]
    closed = events(open="false")
    assert "PCIe link degraded" in [e["reason"] for e in closed] and all(e["ended_at"] for e in closed)
    assert not {"driver hung", "hot"} & {e["reason"] for e in closed}
    open_warnings = events(level="warning", open="true")
    assert "hot" in [e["reason"] for e in open_warnings]
    assert all(e["level"] == "warning" and not e["ended_at"] for e in open_warnings)
    assert not {"driver hung", "PCIe link degraded"} & {e["reason"] for e in open_warnings}
    for query, field in [({"device": "x"}, "device"), ({"device": "9" * 23}, "device"), ({"open": "maybe"}, "open"),
                         ({"level": "fine"}, "level")]:
        response = api_client.get("/api/health-events/", query)
        assert response.status_code == 400 and field in response.json()


def test_capacity_weighs_devices_by_health_state_and_utilization(api_client, viewer, polled_fleet):
    Device.objects.filter(id=polled_fleet[0].id).update(state=DeviceState.REPAIR)
    api_client.force_authenticate(viewer)
    body = api_client.get("/api/capacity/").json()
    rows = {d["id"]: d for d in body["devices"]}
    assert rows[polled_fleet[0].id]["weight"] == 0
    serving = [d for d in body["devices"] if d["may_serve"]]
    assert len(serving) == len(polled_fleet) - 1
    for d in serving:
        assert d["weight"] == max(1, round(100 * (1 - d["utilization"]) * (1 if d["health"] == "healthy" else 0.5)))
        assert d["headroom"] == pytest.approx(1 - d["utilization"], abs=1e-4)
    assert body["total"]["devices"] == len(polled_fleet)
    assert body["total"]["serving"] == len(serving)
    assert sum(g["weight"] for g in body["by_type"].values()) == body["total"]["weight"]
    assert sum(g["devices"] for g in body["by_host"].values()) == len(polled_fleet)


def test_an_operator_resumes_paused_automation(api_client, operator, polled_fleet):
    Automation.objects.update_or_create(id=1, defaults={"paused": True, "reason": "5 devices critical at once"})
    api_client.force_authenticate(operator)
    assert api_client.get("/api/automation/").json()["paused"] is True
    response = api_client.post("/api/automation/", {"paused": False, "reason": "false alarm"}, format="json")
    assert response.status_code == 200 and response.json()["paused"] is False
    resumed = Action.objects.get(kind=ActionKind.RESUME)
    assert resumed.user == operator and resumed.reason == "false alarm"
    assert api_client.post("/api/automation/", {"paused": "perhaps"}, format="json").status_code == 400


# --- /metrics ---------------------------------------------------------------------------


def test_metrics_are_off_without_a_token_and_say_how_to_turn_them_on(client, settings, polled_fleet):
    settings.METRICS_TOKEN = ""
    response = client.get("/metrics")
    assert response.status_code == 503
    assert b"set METRICS_TOKEN" in response.content


def test_metrics_need_the_bearer_token(client, settings, polled_fleet):
    settings.METRICS_TOKEN = "s3cret-token"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Token s3cret-token"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200


def scraped(text: str) -> dict[tuple, float]:
    """(sample name, sorted labels) -> value, as Prometheus would read the page."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def series(name: str, **labels) -> tuple:
    return name, tuple(sorted(labels.items()))


def test_metrics_carry_every_counter_with_labels_and_dcgm_names_for_gpus(client, settings, polled_fleet, tmp_path):
    from fleet.polling import snapshots

    settings.METRICS_TOKEN = "s3cret-token"
    Device.objects.filter(id=polled_fleet[0].id).update(state=DeviceState.REPAIR)
    text = client.get("/metrics", headers={"Authorization": "Bearer s3cret-token"}).content.decode()
    values = scraped(text)
    latest = snapshots.read_snapshots()
    video = next(d for d in polled_fleet if d.device_type == "video")
    gpu = next(d for d in polled_fleet if d.device_type == "gpu")
    labels = {"host": video.host.name, "device": str(video.id), "serial": video.serial, "type": "video", "model": video.model}
    assert values[series("asicmon_temperature_c", **labels)] == latest[video.id]["temperature_c"]
    assert values[series("asicmon_work_items_total", **labels)] == latest[video.id]["work_items_total"]
    assert values[series("asicmon_core_utilization", **labels, core="0")] == latest[video.id]["core_utilization"][0]
    assert values[series("asicmon_driver_status", **labels, state="ok")] == 1
    assert values[series("asicmon_driver_status", **labels, state="hung")] == 0
    assert values[series("asicmon_devices_in_state", state="repair")] == 1
    assert values[series("asicmon_automation_paused")] == 0
    gpu_labels = {"gpu": str(gpu.index), "UUID": gpu.serial, "device": f"nvidia{gpu.index}",
                  "modelName": gpu.model, "Hostname": gpu.host.name}
    assert values[series("DCGM_FI_DEV_GPU_UTIL", **gpu_labels)] == pytest.approx(100 * latest[gpu.id]["device_utilization"])
    assert values[series("DCGM_FI_DEV_FB_USED", **gpu_labels)] == pytest.approx(latest[gpu.id]["memory_used_bytes"] / 2**20)
    for field in ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"]:
        assert series(field, **gpu_labels) in values
    assert not any(name.startswith("DCGM") and dict(lbl)["UUID"] == video.serial for name, lbl in values)  # GPUs only

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make prometheus-deps` (or .ci/run) installs Debian's prometheus package")
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    complaints = [line for line in (check.stdout + check.stderr).splitlines() if line.strip()]
    # dcgm-exporter's own names and camelCase labels are kept as they are, on purpose.
    ours = [c for c in complaints if not c.startswith("DCGM_FI_")]
    assert ours == [], "\n".join(ours)
    theirs = {c.split(" ", 1)[1] for c in complaints if c.startswith("DCGM_FI_")}
    assert theirs <= {"label names should be written in 'snake_case' not 'camelCase'",
                      "metric name should not include type 'counter'",
                      'counter metrics should have "_total" suffix'}, theirs
