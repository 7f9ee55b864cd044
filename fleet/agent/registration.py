"""Putting the agent's host and devices in the fleet: idempotent, and history is kept."""

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction

from fleet.agent.kineto import TracedProcess
from fleet.agent.processes import ProcessInfo
from fleet.hosts.local import LocalDevice
from fleet.models import Device, Host, HostProcess


class HostNameTaken(Exception):
    """The name belongs to an emulated host: an agent must not take over its devices."""


@dataclass
class Registration:
    host: Host
    created: list[str] = field(default_factory=list)  # serials new to the fleet
    returned: list[str] = field(default_factory=list)  # serials that had been absent
    absent: list[str] = field(default_factory=list)  # serials no longer found
    refused: list[str] = field(default_factory=list)  # serials of another host's devices


@transaction.atomic
def register_host(name: str, queue: str, devices: list[LocalDevice]) -> Registration:
    """Record ``name`` as a host polled by its agent on ``queue``, with ``devices``.

    Running it again with the same devices changes nothing but the time the agent was seen.
    A device the agent no longer finds is marked absent (its samples stay); one that comes
    back is present again, in its old slot.
    """
    now = datetime.now(tz=UTC)
    host, _ = Host.objects.select_for_update().get_or_create(name=name)
    if not host.agent_queue and host.devices.exists():
        raise HostNameTaken(
            f"{name} is an emulated host of this fleet; give the agent another name with AGENT_HOST"
        )
    host.agent_queue, host.agent_seen_at = queue, now
    host.save(update_fields=["agent_queue", "agent_seen_at"])

    result = Registration(host)
    known = {d.serial: d for d in Device.objects.select_for_update().filter(host=host)}
    found = {d.serial for d in devices}
    for device in known.values():
        if device.serial not in found and device.absent_since is None:
            device.absent_since = now
            device.save(update_fields=["absent_since"])
            result.absent.append(device.serial)
    slots = _free_slots({d.index for d in known.values()})
    for local in devices:
        device = known.get(local.serial)
        if device is None:
            _create_or_move(host, local, slots, result)
            continue
        if device.absent_since is not None:
            result.returned.append(local.serial)
        _refresh(device, local)
    return result


def declared_actions(local: LocalDevice) -> list[str]:
    """The control actions the device's spec declares (its monitor's ``ACTIONS``)."""
    return list(type(local.monitor).ACTIONS)


def _refresh(device: Device, local: LocalDevice) -> None:
    """A device found again: present, with the actions its (perhaps edited) spec declares."""
    actions = declared_actions(local)
    workload = settings.AGENT_WORKLOAD or device.workload
    if device.absent_since is None and device.control_actions == actions and device.workload == workload:
        return
    device.absent_since, device.control_actions, device.workload = None, actions, workload
    device.save(update_fields=["absent_since", "control_actions", "workload"])


def _create_or_move(host: Host, local: LocalDevice, slots, result: Registration) -> None:
    """A device new to this host: created, or moved here from another agent's host (a card
    that changed machines keeps its history). An emulated device's serial is refused."""
    model = str(local.monitor.get("device_model") or "")[:64]
    elsewhere = Device.objects.filter(serial=local.serial).select_related("host").first()
    if elsewhere is not None and not elsewhere.host.has_agent:
        result.refused.append(local.serial)
        return
    if elsewhere is not None:
        elsewhere.host, elsewhere.index, elsewhere.absent_since, elsewhere.model = host, next(slots), None, model
        elsewhere.control_actions = declared_actions(local)
        elsewhere.workload = settings.AGENT_WORKLOAD or elsewhere.workload
        elsewhere.save(update_fields=["host", "index", "absent_since", "model", "control_actions", "workload"])
        result.returned.append(local.serial)
        return
    Device.objects.create(
        host=host, serial=local.serial, device_type=local.device_type, model=model, index=next(slots),
        control_actions=declared_actions(local), workload=settings.AGENT_WORKLOAD,
    )
    result.created.append(local.serial)


def _free_slots(used: set[int]):
    slot = 0
    while True:
        if slot not in used:
            yield slot
        slot += 1


@transaction.atomic
def report_processes(name: str, seen: list[tuple[TracedProcess, ProcessInfo]]) -> int:
    """Record the PyTorch processes that poll the agent of host ``name`` (those no longer
    polling leave): what the pages and the capture's choice of process read. The count kept."""
    host = Host.objects.get(name=name)
    pids = [traced.pid for traced, _info in seen]
    HostProcess.objects.filter(host=host).exclude(pid__in=pids).delete()
    for traced, info in seen:
        HostProcess.objects.update_or_create(host=host, pid=traced.pid, defaults={
            "command": info.command, "parent": info.parent, "role": info.role, "job": info.job,
            "gpus": sorted(traced.gpus), "first_seen": datetime.fromtimestamp(traced.first_seen, tz=UTC),
            "last_poll": datetime.fromtimestamp(traced.last_poll, tz=UTC),
        })
    return len(pids)
