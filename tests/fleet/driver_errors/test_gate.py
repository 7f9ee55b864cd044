"""The validation gate on a host with an agent, with a fake `dcgmi` (a real program) that
passes, fails, hangs or takes its time: three outcomes (passed, failed, not validated), a
timeout over the whole diagnostic, its output stored as it comes, one diagnostic per host at
a time, and the command run as an argument list, never through a shell."""

import json
import os
import stat
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.choices import ActionKind, ActionStatus, DeviceState, Rung
from fleet.driver_errors import gate
from fleet.models import Action, Device
from tests.fleet.agent.conftest import agent_settings  # noqa: F401 - the fixture, here too

pytestmark = pytest.mark.django_db

FAKE_DCGMI = """#!{python}
import json, os, sys, time
log, mode = sys.argv[-2], sys.argv[-1]
def note(what):
    with open(log, "a") as f:
        f.write(json.dumps({{"what": what, "pid": os.getpid(), "at": time.time(),
                            "serial": os.environ.get("ASICMON_DEVICE_SERIAL"), "env": sorted(os.environ)}}) + "\\n")
note("start")
print("Diagnostic | Result", flush=True)
if mode == "hang":
    time.sleep(600)
if mode == "slow":
    print("Deployment | Pass", flush=True)
    while not os.path.exists(log + ".go"):
        time.sleep(0.05)
    print("Memory | Pass", flush=True)
note("end")
if mode == "fail":
    print("Memory | Fail - row remap pending", flush=True)
    sys.exit(226)
print("Memory | Pass", flush=True)
"""


@pytest.fixture
def node(agent_settings, seeded_fleet, tmp_path, monkeypatch):  # noqa: F811 - the imported fixture
    """node-a's devices under repair (their rung issued a moment ago), and a fake dcgmi."""
    agent_settings.LADDER_DIAGNOSTIC_TIMEOUT_S = 30.0
    monkeypatch.setenv("SECRET_KEY", "the-agent-s-own")
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    program = tmp_path / "dcgmi"
    program.write_text(FAKE_DCGMI.format(python=sys.executable))
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    devices = list(Device.objects.filter(host__name="node-a").select_related("host").order_by("serial"))
    log = tmp_path / "dcgmi.jsonl"
    yield devices, program, log
    for running in list(gate._running.values()):  # what a failing test left running
        gate._stop(running.proc)
    gate._running.clear()


def _issued(device) -> Action:
    Device.objects.filter(id=device.id).update(state=DeviceState.UNDER_REPAIR)
    return Action.objects.create(device=device, kind=ActionKind.REBOOT, rung=Rung.RESET_DEVICE, cause="memory",
                                 serial=device.serial, rule="driver_error", status=ActionStatus.ISSUED,
                                 issued_at=timezone.now() - timedelta(seconds=5))


def _diagnose(monkeypatch, device, command) -> None:
    monkeypatch.setattr(agent_host().monitor(device.serial), "DIAGNOSTIC", command)


def _until_verdict(device, action, within_s: float = 15.0):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        verdict = gate.run_check(device, Action.objects.get(id=action.id), {"health": "healthy"})
        if verdict is not None:
            return verdict
        time.sleep(0.1)
    return None


def _log(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_passing_diagnostic_returns_the_device_validated(node, monkeypatch):
    (device, *_), program, log = node
    _diagnose(monkeypatch, device, f"{program} diag -r 1 --api-key=k3y {log} pass")
    action = _issued(device)
    passed, detail = _until_verdict(device, action)
    assert passed is True and detail == "diagnostic dcgmi passed: exit 0; Memory | Pass"
    stored = Action.objects.get(id=action.id)
    assert stored.check_output == f"$ {program} diag -r 1 '--api-key=***' {log} pass\nDiagnostic | Result\nMemory | Pass"
    (start, _end) = _log(log)
    assert start["serial"] == device.serial and "SECRET_KEY" not in start["env"]  # the minimal environment


def test_a_failing_diagnostic_fails_the_check_with_its_last_line(node, monkeypatch):
    (device, *_), program, log = node
    _diagnose(monkeypatch, device, [str(program), "diag", "-r", "1", str(log), "fail"])  # a list, as given
    passed, detail = _until_verdict(device, _issued(device))
    assert passed is False and detail == "diagnostic dcgmi failed: exit 226; Memory | Fail - row remap pending"


def test_without_a_diagnostic_the_device_returns_not_validated(node):
    device, *_ = node[0]  # the hwmon spec has no diagnose statement
    action = _issued(device)
    snapshot = {"health": "healthy", "driver_status": "ok", "sample_ts": time.time()}
    gate.follow_up({device.id: snapshot})
    stored = Action.objects.get(id=action.id)
    assert stored.status == ActionStatus.NOT_VALIDATED and stored.check_passed is None
    assert stored.check_detail == "not validated: no diagnostic for hwmon; back on health healthy"
    assert Device.objects.get(id=device.id).state == DeviceState.IN_SERVICE


def test_a_diagnostic_not_installed_is_not_validated_either(node, monkeypatch):
    (device, *_), _, _ = node
    _diagnose(monkeypatch, device, "/opt/no/dcgmi diag -r 1")
    assert gate.run_check(device, _issued(device), {"health": "healthy"}) == (
        None, "not validated: dcgmi not installed; back on health healthy")
    assert gate.run_check(device, _issued(device), {"health": "critical"}) == (False, "dcgmi not installed; health critical")


def test_a_hung_diagnostic_is_stopped_at_its_timeout(node, monkeypatch, agent_settings):  # noqa: F811
    (device, *_), program, log = node
    agent_settings.LADDER_DIAGNOSTIC_TIMEOUT_S = 1.0
    _diagnose(monkeypatch, device, f"{program} diag -r 3 {log} hang")
    started = time.monotonic()
    passed, detail = _until_verdict(device, _issued(device), within_s=10.0) or (None, "no verdict")
    assert passed is False and detail == "diagnostic dcgmi still running after 1 s: stopped"
    assert time.monotonic() - started < 5.0
    (start,) = _log(log)
    with pytest.raises(ProcessLookupError):
        os.kill(start["pid"], 0)  # the process is gone


def test_the_output_is_stored_as_it_comes(node, monkeypatch):
    (device, *_), program, log = node
    _diagnose(monkeypatch, device, f"{program} diag -r 1 {log} slow")
    action = _issued(device)
    deadline = time.monotonic() + 10
    while "Deployment | Pass" not in Action.objects.get(id=action.id).check_output and time.monotonic() < deadline:
        assert gate.run_check(device, Action.objects.get(id=action.id), {"health": "healthy"}) is None
        time.sleep(0.1)
    output = Action.objects.get(id=action.id).check_output
    assert output.splitlines()[1:] == ["Diagnostic | Result", "Deployment | Pass"]  # still running
    (log.parent / (log.name + ".go")).write_text("")
    assert _until_verdict(device, action) == (True, "diagnostic dcgmi passed: exit 0; Memory | Pass")


def test_one_diagnostic_at_a_time_on_a_host(node, monkeypatch):
    (first, second, *_), program, log = node
    for device in (first, second):
        _diagnose(monkeypatch, device, f"{program} diag -r 1 {log} slow")
    a, b = _issued(first), _issued(second)
    assert gate.run_check(first, a, {"health": "healthy"}) is None  # started
    for _ in range(5):
        assert gate.run_check(second, Action.objects.get(id=b.id), {"health": "healthy"}) is None  # waits its turn
        time.sleep(0.1)
    assert Action.objects.get(id=b.id).check_detail == f"waiting: the diagnostic of action {a.id} runs on node-a"
    (log.parent / (log.name + ".go")).write_text("")
    assert _until_verdict(first, a)[0] is True
    assert _until_verdict(second, b)[0] is True  # then its own
    starts_ends = [(row["what"], row["serial"]) for row in _log(log)]
    assert starts_ends == [("start", first.serial), ("end", first.serial), ("start", second.serial), ("end", second.serial)]


def test_the_diagnostic_never_goes_through_a_shell(node, monkeypatch, tmp_path):
    (device, *_), program, log = node
    marker = tmp_path / "shell-ran"
    _diagnose(monkeypatch, device, f"{program} diag; touch {marker}; {log} pass")
    _until_verdict(device, _issued(device))
    assert not marker.exists()
