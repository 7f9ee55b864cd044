"""Keeping the scheduler in step with the fleet (SCHEDULER; run by beat every poll interval).

A host is a node of the scheduler by its name. While any of its present devices is out of
service (rebooting, under repair, in repair, drained, in maintenance) the node is drained,
with a reason naming those devices, so no new job lands on it; once every device is back in
service — after its check passed — the node is resumed, but only a drain Asicmon made (its
reason begins ``asicmon:``): an administrator's stays. The jobs running on each node, with
the GPU indexes they hold, are kept on the host's row for the pages. With SCHEDULER_REQUEUE,
a requeueable job holding a GPU that is being rebooted or repaired is requeued (it dies
with the reboot anyway).
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from django.conf import settings
from django.utils import timezone

from fleet.choices import DeviceState
from fleet.models import Host
from fleet.scheduler.slurm import SchedulerError, Slurm

log = logging.getLogger(__name__)

#: States of a device that keep its node from taking new jobs.
OUT_OF_SERVICE = (DeviceState.REBOOTING, DeviceState.UNDER_REPAIR, DeviceState.REPAIR, DeviceState.DRAINED,
                  DeviceState.MAINTENANCE)
#: States in which the job on a device dies (a requeue saves it).
INTERRUPTING = (DeviceState.REBOOTING, DeviceState.UNDER_REPAIR)


def scheduler() -> Slurm | None:
    return Slurm(settings.SLURM_CONF or None) if settings.SCHEDULER == "slurm" else None


def drain_reason(devices) -> str:
    named = [f"{d.serial} {DeviceState(d.state).label.lower()}" for d in devices[:3]]
    more = f" and {len(devices) - 3} more" if len(devices) > 3 else ""
    return "; ".join(named) + more


def sync_host(host: Host, slurm: Slurm) -> str:
    """Drain or resume the host's node as its devices say, read its jobs, requeue those a
    repair interrupts (SCHEDULER_REQUEUE); what was done, in words ("" for nothing)."""
    node = slurm.node(host.name)
    if node is None:
        _record(host, error=f"{host.name} is not a node of the scheduler")
        return ""
    devices = list(host.devices.filter(absent_since__isnull=True).order_by("index"))
    out = [d for d in devices if d.state in OUT_OF_SERVICE]
    done = ""
    if out and not node.drained:
        slurm.drain(host.name, drain_reason(out))
        done = f"drained {host.name}: {drain_reason(out)}"
    elif not out and slurm.resume(host.name, node):
        done = f"resumed {host.name}: every device back in service"
    jobs = slurm.jobs(host.name)
    if settings.SCHEDULER_REQUEUE:
        interrupted = {d.index for d in devices if d.state in INTERRUPTING}
        for job in jobs:
            if job.requeue and interrupted.intersection(job.gpus):
                slurm.requeue(job.job_id)
                done += f"{'; ' if done else ''}requeued job {job.job_id} ({job.user}) off GPU {sorted(interrupted & set(job.gpus))}"
    if done:
        log.info("scheduler: %s", done)
    if done:  # its state now
        node = slurm.node(host.name) or node
    _record(host, state=node.state, reason=node.reason, jobs=[asdict(j) for j in jobs])
    return done


def sync_all() -> list[str]:
    """Every host with devices, one at a time; a host the scheduler cannot answer for keeps
    the reason on its row and the others go on."""
    slurm = scheduler()
    if slurm is None:
        return []
    done = []
    for host in Host.objects.filter(devices__isnull=False).distinct():
        try:
            if said := sync_host(host, slurm):
                done.append(said)
        except SchedulerError as exc:
            log.warning("scheduler: %s: %s", host.name, exc)
            _record(host, error=str(exc))
    return done


def _record(host: Host, *, state: str = "", reason: str = "", jobs=None, error: str = "") -> None:
    Host.objects.filter(pk=host.pk).update(
        scheduler_state=state[:64], scheduler_reason=reason[:255], scheduler_jobs=jobs or [], scheduler_error=error[:500],
        scheduler_synced_at=timezone.now(),
    )
