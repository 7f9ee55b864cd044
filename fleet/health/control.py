"""Acting on a device's hardware. Every call that changes a device goes through here.

A reboot is the ``reboot`` control action of the device's Asicmon monitor: the call its
Asimov spec declares (``action reboot = …``). A spec that declares none (real NVML, hwmon)
leaves its devices to the repair path.

An emulated device reboots in any worker (the emulator's state is shared). A real device
reboots on its own machine: the call runs in its host's agent (the operator's reboot task is
sent to the agent's queue, fleet.agent.queues.host_queue; automation reboots in the agent's poll),
through the monitor the agent reads the device with.
"""

from fleet.hosts.emulated_fleet import host_monitor
from fleet.hosts.exporter_fleet import read_only_reason
from fleet.models import Device


class NotSupported(Exception):
    """The device's driver offers no such action (its devices go to repair instead)."""


class MisroutedAction(Exception):
    """A real device's action reached a process that is not its host's agent."""


def reboot_unavailable_reason(device: Device) -> str | None:
    """Why Asicmon cannot reboot the device, or None where it can.

    Its spec must declare a reboot. For a real device (on a host with an agent) that is what
    the agent recorded from the spec it reads the device with (`Device.control_actions`), as
    the spec may live only in that machine's ASIMOV_SPEC_DIRS; the built-in nvml and hwmon
    specs declare none. For an emulated device, the spec of its type here.
    """
    if reason := read_only_reason(device.host.name):
        return reason
    if device.host.has_agent:
        declared = tuple(device.control_actions or ())
    else:
        declared = _declared_actions(device.device_type)
    if "reboot" not in declared:
        return f"the {device.device_type} spec declares no reboot, so Asicmon cannot reboot {device.serial}"
    return None


def _declared_actions(device_type: str) -> tuple[str, ...]:
    from django.conf import settings

    from fleet.asimov.loader import monitor_class

    try:
        return tuple(monitor_class(device_type, tuple(settings.ASIMOV_SPEC_DIRS)).ACTIONS)
    except LookupError:
        return ()


def reboot_device(device: Device) -> None:
    unavailable = reboot_unavailable_reason(device)
    if unavailable:
        raise NotSupported(unavailable)
    if device.host.has_agent:
        _agent_monitor(device).control("reboot")
        return
    host_monitor(device.host.name).reboot(device.serial)


def _agent_monitor(device: Device):
    """The monitor this process (the host's agent) reads ``device`` with."""
    from fleet.agent.discovery import agent_host

    local = agent_host()
    if local.name != device.host.name:
        raise MisroutedAction(f"the agent of {local.name} was asked to act on {device.serial} of {device.host.name}")
    return local.monitor(device.serial)
