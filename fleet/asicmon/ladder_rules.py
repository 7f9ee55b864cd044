"""The repair ladder's decisions as plain functions, with no database and no clock.

`fleet.driver_errors.ladder` asks these with what it read from the database (the attempts
within the window, what can run on the host) and the replay (`emulator.replay`) asks them
with what its virtual fleet holds: the same rules decide in production and in a replay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

__all__ = ["GATE_CLIMB", "GATE_RETURN", "GATE_WAIT", "LADDER", "REPAIRS", "blast_radius_holds", "breaker_trips",
           "check_on_health", "gate_step", "next_rung", "recommends_pull", "rung_index"]

RESTART_APPLICATION, RESET_DEVICE, REBOOT_HOST = "restart_application", "reset_device", "reboot_host"
INSPECT_HARDWARE, NEEDS_PERSON = "inspect_hardware", "needs_person"
LADDER = (RESTART_APPLICATION, RESET_DEVICE, REBOOT_HOST, INSPECT_HARDWARE)
REPAIRS = LADDER[:3]


def rung_index(rung: str) -> int:
    return LADDER.index(rung) if rung in LADDER else 0


def next_rung(start: str, tried: int, last_rung: str | None, max_attempts: int,
              unavailable: Callable[[str], str | None]) -> tuple[str, bool, tuple[tuple[str, str], ...]]:
    """The rung for an incident whose catalogue starts at ``start`` after ``tried`` repairs
    of the same device and cause within the window (``last_rung`` the newest of them):
    (rung, whether the budget is spent, the rungs skipped below it with why). Above the
    last repair; the first that can run (``unavailable(rung)`` is None); inspection once the
    budget is spent; NEEDS_PERSON when rungs were skipped and none above can run."""
    if tried >= max_attempts:
        return INSPECT_HARDWARE, True, ()
    rung = start if start in LADDER else RESET_DEVICE
    if tried and last_rung is not None:
        rung = LADDER[max(rung_index(rung), rung_index(last_rung) + 1)]
    skipped: list[tuple[str, str]] = []
    while rung in REPAIRS:
        why_not = unavailable(rung)
        if why_not is None:
            return rung, False, tuple(skipped)
        skipped.append((rung, why_not))
        rung = LADDER[rung_index(rung) + 1]
    if skipped:
        return NEEDS_PERSON, False, tuple(skipped)
    return rung, False, ()


def breaker_trips(devices_taken: int, fleet_size: int, min_devices: int, share: float) -> bool:
    """Whether ``devices_taken`` devices under repair within the breaker's window (the new
    one counted) pause automation: at least ``min_devices`` and more than ``share`` of the fleet."""
    return devices_taken >= min_devices and devices_taken > share * max(fleet_size, 1)


def recommends_pull(hardware_incidents_in_window: int, threshold: int) -> bool:
    """A repeat offender: this many hardware incidents within the offender window."""
    return hardware_incidents_in_window >= threshold



def blast_radius_holds(taken: Iterable[str], under_repair: Mapping[str, int], limit: int) -> tuple[str, int, int] | None:
    """Whether a rung that takes devices running the workloads ``taken`` (one entry per
    device; "" for none) must wait: the first workload (by name) with ``under_repair[w]``
    other devices already under repair and more than ``limit`` with these, as (workload,
    already under repair, taken now); None when it may go. A host reboot alone may take more
    than the limit (there is no smaller way to do it), never on top of other repairs of the
    same workload."""
    counts = Counter(w for w in taken if w)
    for workload, n in sorted(counts.items()):
        busy = under_repair.get(workload, 0)
        if busy and busy + n > limit:
            return workload, busy, n
    return None


GATE_WAIT, GATE_CLIMB, GATE_RETURN = "wait", "climb", "return"
HEALTHY_ENOUGH = ("healthy", "warning")  # the health a device may return on, unvalidated


def gate_step(back: bool, waited_s: float, check_timeout_s: float, verdict: tuple[bool | None, str] | None) -> str:
    """What the validation gate does with a device under repair ``waited_s`` after its rung:
    GATE_RETURN to service once it answers again and its check passed, or it has no check
    (``verdict`` (None, ...): not validated); GATE_CLIMB when the check failed, or when it has
    not answered within ``check_timeout_s``; GATE_WAIT otherwise (not back yet, or its check,
    ``verdict`` None, still running)."""
    if back:
        if verdict is None:
            return GATE_WAIT
        return GATE_CLIMB if verdict[0] is False else GATE_RETURN
    return GATE_CLIMB if waited_s > check_timeout_s else GATE_WAIT


def check_on_health(health: str | None, what: str) -> tuple[bool | None, str]:
    """The verdict on a device with no diagnostic (``what`` says why none ran): returned,
    not validated, on a health that allows it; failed otherwise."""
    if health in HEALTHY_ENOUGH:
        return None, f"not validated: {what}; back on health {health}"
    return False, f"{what}; health {health}"
