"""The repair ladder with real Celery workers polling through the broker, as beat drives
them: each fault's first rung, back only after its check, ignore-class events untouched,
the blast radius per workload held across two workers racing on the same cycles."""

import time

import pytest

from fleet.choices import ActionStatus, DeviceState
from fleet.models import Action, Device, DriverError
from fleet.polling import poller
from fleet.tasks import poll_fleet
from tests.fleet.driver_errors.conftest import inject
from tests.support.processes import child_env, start_worker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def beat_until(predicate, within_s: float = 60.0) -> bool:
    """Queues one fleet poll per second through the broker until ``predicate()``."""
    deadline = time.time() + within_s
    while time.time() < deadline:
        poll_fleet.delay(poller.current_cycle())
        time.sleep(1.0)
        if predicate():
            return True
    return predicate()


def _ladder(device):
    return list(Action.objects.filter(serial=device.serial, rule="driver_error").order_by("created_at", "id"))


def test_workers_climb_the_right_rung_and_hold_the_blast_radius(gpu_ladder_fleet, settings):
    settings.LADDER_MAX_PER_WORKLOAD = 1
    workers = [start_worker(child_env(), concurrency=2) for _ in range(2)]
    workers[1].name = "worker-2"
    try:
        by_host = {}
        for d in gpu_ladder_fleet:
            by_host.setdefault(d.host.name, []).append(d)
        off_bus, app_fault = by_host["host-00"]  # one workload: only one at a time
        ignored = by_host["host-02"][0]
        beat_until(lambda: False, within_s=2)
        inject(off_bus, "xid_79")
        inject(app_fault, "xid_31")
        inject(ignored, "xid_43")

        def settled():
            return all(_ladder(d) and _ladder(d)[-1].status == ActionStatus.SUCCEEDED
                       and Device.objects.get(id=d.id).state == DeviceState.IN_SERVICE for d in (off_bus, app_fault))

        assert beat_until(settled, within_s=90), [(a.serial, a.rung, a.status, a.outcome) for a in Action.objects.all()]
        assert [a.rung for a in _ladder(off_bus)] == ["reboot_host"]
        assert [a.rung for a in _ladder(app_fault)] == ["restart_application"]
        for device in (off_bus, app_fault):
            (action,) = _ladder(device)
            assert action.check_passed and action.check_detail == "diagnostic passed"
        # Never both devices of the workload under repair at once.
        first, second = sorted((_ladder(off_bus)[0], _ladder(app_fault)[0]), key=lambda a: a.created_at)
        assert second.created_at >= first.finished_at
        assert _ladder(ignored) == [] and DriverError.objects.get(serial=ignored.serial).outcome.startswith("ignored")
    finally:
        for worker in workers:
            worker.stop()
