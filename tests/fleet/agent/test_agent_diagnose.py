"""The validation gate on a machine with an agent runs its spec's ``diagnose`` command as an
argument list, without a shell, and only for a spec of a configured spec folder
(fleet/driver_errors/gate.py, fleet.asimov.loader.diagnostic_argv)."""

import time

import pytest
from django.utils import timezone

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.choices import ActionKind, ActionStatus
from fleet.driver_errors.gate import run_check
from fleet.driver_errors.ladder import RULE
from fleet.models import Action, Device
from tests.support.sysfs import materialise, user_spec

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def diagnosed(agent_settings, fleet_settings, clean_redis, tmp_path):
    """node-a's VT-100s, read through a user spec whose diagnose command would, through a
    shell, create ``ran`` (and ``also``); without one it creates a file named ``ran;touch``."""
    fleet_settings.FLEET_HOSTS = 0
    sysfs = materialise(tmp_path / "sysfs")
    spec = user_spec(tmp_path / "specs", sysfs)
    out = tmp_path / "out"
    out.mkdir()
    spec.write_text(spec.read_text() + f'diagnose "touch {out}/ran;touch {out}/also"\n')
    agent_settings.ASIMOV_SPEC_DIRS = [tmp_path / "specs"]
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    device = Device.objects.get(serial=(sysfs / "vt0" / "serial").read_text().strip())
    action = Action.objects.create(device=device, kind=ActionKind.REBOOT, rule=RULE,
                                   status=ActionStatus.ISSUED, issued_at=timezone.now())
    return device, action, out


def _verdict(device, action, within_s: float = 20.0):
    deadline = time.monotonic() + within_s
    while (verdict := run_check(device, action, {"health": "healthy"})) is None:
        assert time.monotonic() < deadline, "the diagnostic never finished"
        time.sleep(0.1)
    return verdict


def test_the_diagnose_command_runs_as_arguments_without_a_shell(diagnosed):
    device, action, out = diagnosed
    passed, detail = _verdict(device, action)
    assert passed is True and detail.startswith("diagnostic touch passed: exit 0")
    assert Action.objects.get(id=action.id).check_output.startswith(f"$ touch '{out}/ran;touch' {out}/also")  # its arguments
    assert sorted(p.name for p in out.iterdir()) == ["also", "ran;touch"]  # ';' was no shell's


def test_a_spec_outside_the_spec_folders_runs_no_command(diagnosed, agent_settings, tmp_path):
    device, action, out = diagnosed
    agent_settings.ASIMOV_SPEC_DIRS = [tmp_path / "other-specs"]  # its folder is no longer one
    passed, detail = _verdict(device, action)
    assert "diagnose of" in detail and "refused: only specs in the spec folders" in detail
    assert passed is None and detail.startswith("not validated: ") and detail.endswith("; back on health healthy")
    assert list(out.iterdir()) == []
