"""Health of a device from its latest snapshot: plain rules over counters, no I/O.

Each rule that fires gives a level and a reason a person can read; the device's health is
the worst level. The thresholds are deliberately few and fixed here.
"""

from dataclasses import dataclass, field

from fleet.choices import Health

TEMPERATURE_WARNING_C = 85.0
TEMPERATURE_CRITICAL_C = 95.0
# Corrected ECC errors per second above which memory is called noisy (an error storm).
ECC_STORM_PER_S = 1.0
# A snapshot older than this many poll intervals no longer says anything.
STALE_AFTER_INTERVALS = 3

_ORDER = [Health.HEALTHY, Health.UNKNOWN, Health.WARNING, Health.CRITICAL]


@dataclass
class Assessment:
    health: Health
    reasons: list[str] = field(default_factory=list)


def assess_with_reasons(snapshot: dict | None, *, now: float, poll_interval: float) -> Assessment:
    if not snapshot:
        return Assessment(Health.UNKNOWN, ["never polled"])
    sampled = snapshot.get("sample_ts") or snapshot.get("cycle") or 0.0
    if now - sampled > STALE_AFTER_INTERVALS * poll_interval:
        return Assessment(Health.UNKNOWN, [f"no data for {now - sampled:.0f} s"])

    found: list[tuple[Health, str]] = []
    driver_status = snapshot.get("driver_status")
    if driver_status in {"hung", "error"}:
        found.append((Health.CRITICAL, f"driver {driver_status}"))
    elif driver_status == "rebooting":
        found.append((Health.WARNING, "rebooting"))

    temperature = snapshot.get("temperature_c")
    if temperature is not None:
        if temperature >= TEMPERATURE_CRITICAL_C:
            found.append((Health.CRITICAL, f"temperature {temperature:.0f} °C"))
        elif temperature >= TEMPERATURE_WARNING_C:
            found.append((Health.WARNING, f"temperature {temperature:.0f} °C"))
    if "thermal" in (snapshot.get("throttle_reasons") or ""):
        found.append((Health.WARNING, "thermal throttling"))
    if snapshot.get("pcie_link_status") == "degraded":
        found.append((Health.WARNING, "PCIe link degraded"))
    ecc_rate = snapshot.get("ecc_corrected_per_s")
    if ecc_rate is not None and ecc_rate >= ECC_STORM_PER_S:
        found.append((Health.WARNING, f"{ecc_rate:.0f} corrected ECC errors/s"))

    if not found:
        return Assessment(Health.HEALTHY)
    worst = max((level for level, _ in found), key=_ORDER.index)
    return Assessment(worst, [reason for _, reason in found])
