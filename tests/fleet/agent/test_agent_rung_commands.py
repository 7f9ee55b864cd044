"""The repair ladder's host rungs on a machine with an agent: the agent runs the host's own
commands (AGENT_RESTART_APP_COMMAND, AGENT_REBOOT_COMMAND) with a timeout, in a minimal
environment, and records their result on the action (the command line, masked, apart); a
rung with no command is skipped (no attempt) and the ladder climbs past it, to a person
when none above can run. The commands here are a real script that writes what it was told
to a file."""

import json
import sys
import time

import pytest

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.agent.run import start_kernel_log
from fleet.choices import ActionStatus, DeviceState, Rung
from fleet.driver_errors.host_commands import NotConfigured, RungCommandFailed, run_rung_command
from fleet.models import Action, Device, Host
from fleet.polling import poller
from tests.support.hwmon import PCI_GPU

pytestmark = pytest.mark.django_db

AMD = "hwmon:node-a:0000:03:00.0:amdgpu"
RING_TIMEOUT = f"[ 7.1] amdgpu {PCI_GPU}: amdgpu: ring gfx_0.0.0 timeout, signaled seq=12, emitted seq=14\n"
SCRIPT = """import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(dict(os.environ)) + "\\n")
print("done for", os.environ["ASICMON_DEVICE_SERIAL"])
"""


@pytest.fixture
def node_a(agent_settings, seeded_fleet, tmp_path, monkeypatch):
    # The agent's own secrets, which a rung's command must never see.
    monkeypatch.setenv("OTLP_TOKEN", "otlp-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cloud-secret")
    agent_settings.LADDER_BREAKER_SHARE = 1.0  # one device of a small fleet under repair is no storm
    log_file = tmp_path / "kern.log"
    log_file.write_text("")
    agent_settings.AGENT_KERNEL_LOG = str(log_file)
    agent_settings.AGENT_RESTART_APP_COMMAND = agent_settings.AGENT_REBOOT_COMMAND = ""
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    script = tmp_path / "rung.py"
    script.write_text(SCRIPT)
    pump = start_kernel_log(agent_host())
    time.sleep(3.0)  # the child process starts and takes its place at the end of the file
    yield Host.objects.get(name="node-a"), log_file, f"{sys.executable} {script} {tmp_path / 'done.jsonl'}"
    pump.stop()


def _ring_timeout_until(host, log_file, done, within_s: float = 30.0) -> list[Action]:
    with log_file.open("a") as f:
        f.write(RING_TIMEOUT)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        poller.poll_agent_host(host.id, poller.current_cycle())
        actions = list(Action.objects.filter(device__serial=AMD).order_by("id"))
        if actions and done(actions):
            return actions
        time.sleep(0.3)
    return list(Action.objects.filter(device__serial=AMD).order_by("id"))


@pytest.mark.integration  # a child process follows the log; the rungs are real processes
def test_the_agent_restarts_the_application_with_the_hosts_command(node_a, agent_settings, tmp_path):
    host, log_file, command = node_a
    agent_settings.AGENT_RESTART_APP_COMMAND = command
    actions = _ring_timeout_until(host, log_file, lambda a: a[0].status != ActionStatus.PENDING)
    assert [a.rung for a in actions] == [Rung.RESTART_APPLICATION]
    restart = actions[0]
    assert restart.status in (ActionStatus.ISSUED, ActionStatus.NOT_VALIDATED)
    assert f"AGENT_RESTART_APP_COMMAND: exit 0; done for {AMD}" in restart.outcome
    assert command not in restart.outcome and restart.command == command  # nothing secret in this one
    (told,) = [json.loads(line) for line in (tmp_path / "done.jsonl").read_text().splitlines()]
    # Its whole environment: PATH, LANG and the device's variables; none of the agent's.
    assert {k: v for k, v in told.items() if k not in ("PATH", "LANG")} == {
        "ASICMON_RUNG": "restart_application", "ASICMON_DEVICE_SERIAL": AMD, "ASICMON_HOST": "node-a",
        "ASICMON_WORKLOAD": ""}
    assert "PATH" in told


@pytest.mark.integration
def test_rungs_not_configured_are_skipped_and_the_ladder_climbs_to_the_reboot_command(node_a, agent_settings, tmp_path):
    host, log_file, command = node_a
    agent_settings.AGENT_REBOOT_COMMAND = command
    actions = _ring_timeout_until(host, log_file, lambda a: a[-1].rung == Rung.REBOOT_HOST
                                  and a[-1].status != ActionStatus.PENDING)
    assert [a.rung for a in actions] == [Rung.RESTART_APPLICATION, Rung.RESET_DEVICE, Rung.REBOOT_HOST]
    restart, reset, reboot = actions
    assert restart.status == ActionStatus.SKIPPED
    assert restart.outcome == "no restart-application command configured on node-a (AGENT_RESTART_APP_COMMAND is empty)"
    assert reset.status == ActionStatus.SKIPPED and "declares no reboot" in reset.outcome  # the hwmon spec
    assert reboot.status in (ActionStatus.ISSUED, ActionStatus.NOT_VALIDATED, ActionStatus.FAILED)
    assert "AGENT_REBOOT_COMMAND: exit 0" in reboot.outcome
    assert "attempts" not in reboot.reason  # the skipped rungs were no attempts: still its first
    told = json.loads((tmp_path / "done.jsonl").read_text())
    assert told["ASICMON_RUNG"] == "reboot_host" and told["ASICMON_DEVICE_SERIAL"] == AMD


@pytest.mark.integration
def test_a_default_host_with_no_rung_that_can_run_hands_the_device_to_a_person_drained(node_a):
    host, log_file, _ = node_a  # no commands configured; the hwmon spec declares no reset
    actions = _ring_timeout_until(host, log_file, lambda a: a[-1].status == ActionStatus.NEEDS_PERSON)
    assert [(a.rung, a.status) for a in actions] == [
        (Rung.RESTART_APPLICATION, ActionStatus.SKIPPED), (Rung.RESET_DEVICE, ActionStatus.SKIPPED),
        (Rung.REBOOT_HOST, ActionStatus.SKIPPED), (Rung.NEEDS_PERSON, ActionStatus.NEEDS_PERSON)]
    assert "needs a person: no reboot command configured on node-a" in actions[-1].reason
    device = Device.objects.get(serial=AMD)
    assert device.state == DeviceState.DRAINED  # off the scheduler (weight 0), not pulled for inspection
    assert not Action.objects.filter(serial=AMD, status__in=[ActionStatus.FAILED, ActionStatus.PULLED]).exists()


@pytest.mark.parametrize(("command", "message"), [
    ("", "no restart-application command configured on node-a"),
    ("sh -c 'echo no scheduler here >&2; exit 3'", "AGENT_RESTART_APP_COMMAND: exit 3; no scheduler here"),
    ("sleep 5", "still running after 1 s: stopped"),
    ("/no/such/program", "could not start"),
])
def test_a_rung_command_that_fails_says_how(agent_settings, seeded_fleet, command, message):
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    agent_settings.AGENT_RESTART_APP_COMMAND, agent_settings.AGENT_RUNG_TIMEOUT_S = command, 1.0
    device = Device.objects.select_related("host").get(serial=AMD)
    started = time.monotonic()
    with pytest.raises(NotConfigured if not command else RungCommandFailed) as raised:
        run_rung_command(Rung.RESTART_APPLICATION, device)
    assert message in str(raised.value)
    assert time.monotonic() - started < 4.0
