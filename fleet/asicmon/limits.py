"""Thresholds and windows of the health rules (`fleet.health.detection`), Django-free so that an
Asimov spec's ``health`` statements can be checked against them when it is compiled."""

from dataclasses import dataclass, fields

__all__ = ["DEFAULT_LIMITS", "LIMIT_NAMES", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Thresholds and windows of every health rule (defaults for any device type)."""

    # temperature: absolute thresholds, °C
    temperature_warning_c: float = 85.0
    temperature_critical_c: float = 95.0
    # cooling: hot for its power. Expected temperature = ambient + power x °C per W; the
    # rule fires when the rise over ambient is `cooling_ratio` times what the power explains
    # (and at least `cooling_margin_c` above it). Types without `cooling_c_per_w` skip it.
    cooling_ambient_c: float = 30.0
    cooling_c_per_w: float | None = None
    cooling_ratio: float = 1.5
    cooling_margin_c: float = 6.0
    cooling_power_polls: int = 6  # mean power over this many polls (the thermal lag)
    # memory errors: corrected errors per second over the window; any uncorrectable one
    ecc_corrected_warning_per_s: float = 1.0
    ecc_window_s: float = 60.0
    # memory leak: used memory rising over the window while power (the load) does not
    # explain it; the slope must be `leak_sigmas` standard errors above zero and above
    # `leak_min_share_per_s` of the device's memory. Critical when it runs out within
    # `leak_critical_s`, by the whole window's trend over at least `leak_critical_span_s`.
    leak_min_polls: int = 8
    leak_min_share_per_s: float = 0.0002
    leak_sigmas: float = 5.0
    leak_critical_s: float = 300.0
    leak_critical_span_s: float = 60.0
    # a core stuck busy: busy in each of the last `core_stuck_polls` polls while its
    # siblings average less; where the device reports no per-core activity, utilization
    # pinned at the top while power says the device is far from fully loaded.
    core_stuck_polls: int = 4
    core_stuck_busy: float = 0.99
    core_stuck_siblings_below: float = 0.96
    pinned_power_share_below: float = 0.85
    # slow work: the work rate per unit of utilization falls below `slow_work_ratio` of this
    # device's own baseline (learnt over `slow_work_min_polls` polls) for `slow_work_polls`
    slow_work_ratio: float = 0.6
    slow_work_min_polls: int = 12
    slow_work_polls: int = 3
    slow_work_min_utilization: float = 0.1
    # how many points a window keeps, at least `window_step_s` apart: polled more often, the
    # newest point stands in for the polls since the last kept one, so that the "polls" of
    # the rules above keep meaning seconds (a window of 8 polls of 0.5 s would span 3.5 s,
    # and a job allocating memory for 10 s would look like a leak); and when data counts as
    # stale (in poll intervals)
    window_polls: int = 24
    window_step_s: float = 4.5
    stale_after_intervals: int = 3


DEFAULT_LIMITS = Limits()
LIMIT_NAMES = tuple(f.name for f in fields(Limits))
