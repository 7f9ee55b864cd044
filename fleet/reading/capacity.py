"""The load-balancing signal: which devices may serve, with what weight and headroom.

What a load balancer or autoscaler polls (`GET /api/capacity/`). Pure functions over the
device rows and their latest snapshots; `fleet_capacity` reads both in two queries and one
Redis call.

- may serve: in service, and healthy or warning (not critical, not unknown).
- headroom: the share of the device not busy now, 1 - utilization (0 when it may not serve).
- weight: 0..100, 100 x headroom, halved for a warning, at least 1 for a device that may
  serve; 0 in repair, rebooting, drained, maintenance, critical or unknown.
"""

import time
from dataclasses import asdict, dataclass

from fleet.choices import DeviceState, Health
from fleet.health.assessing import current_health
from fleet.models import Device
from fleet.polling import snapshots

HEALTH_FACTOR = {Health.HEALTHY: 1.0, Health.WARNING: 0.5}


@dataclass(frozen=True)
class DeviceCapacity:
    id: int
    serial: str
    host: str
    type: str
    state: str
    health: str
    may_serve: bool
    weight: int
    headroom: float
    utilization: float | None
    fleet: str = "fleet"  # one group for the fleet-wide total


def device_capacity(device: Device, snapshot: dict | None, now: float) -> DeviceCapacity:
    health = current_health(snapshot, now).health
    utilization = (snapshot or {}).get("device_utilization")
    may_serve = device.state == DeviceState.IN_SERVICE and health in HEALTH_FACTOR
    headroom = max(0.0, 1.0 - (utilization or 0.0)) if may_serve else 0.0
    weight = max(1, round(100 * HEALTH_FACTOR[health] * headroom)) if may_serve else 0
    return DeviceCapacity(
        id=device.id, serial=device.serial, host=device.host.name, type=device.device_type,
        state=device.state, health=health.value, may_serve=may_serve, weight=weight,
        headroom=round(headroom, 4), utilization=utilization,
    )


def totals(rows: list[DeviceCapacity], key: str) -> dict[str, dict]:
    """Devices, how many may serve, summed weight and headroom (in devices), per ``key``."""
    out: dict[str, dict] = {}
    for row in rows:
        group = out.setdefault(getattr(row, key), _empty())
        group["devices"] += 1
        group["serving"] += row.may_serve
        group["weight"] += row.weight
        group["headroom"] = round(group["headroom"] + row.headroom, 4)
    return out


def _empty() -> dict:
    return {"devices": 0, "serving": 0, "weight": 0, "headroom": 0.0}


def fleet_capacity() -> dict:
    devices = list(Device.objects.for_dashboard())
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    rows = [device_capacity(d, latest.get(d.id), now) for d in devices]
    return {
        "devices": [{k: v for k, v in asdict(row).items() if k != "fleet"} for row in rows],
        "by_type": totals(rows, "type"),
        "by_host": totals(rows, "host"),
        "total": totals(rows, "fleet").get("fleet", _empty()),
    }
