"""Health of a device: rules over its latest snapshot and a short window of recent polls.

Pure functions, no I/O. Every rule that fires gives a `Finding`: the rule's name, a level,
a reason a person can read and the values that fired it. A device's health is the worst
level found.

Two entry points:

- `observe(window, snapshot, limits)` runs at each poll: it appends the snapshot to the
  device's window (a small JSON-able dict the poller keeps beside the snapshot in Redis),
  runs every rule and returns the findings with the new window.
- `assess_with_reasons(snapshot, now=…)` runs when a page or the API reads a snapshot:
  the findings stored at poll time, or "unknown" when the snapshot is stale.

Every threshold and window is a field of `Limits` (fleet/asicmon/limits.py), in one place; a
device type's Asimov spec may change some of them with ``health NAME = value`` statements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from fleet.asicmon.limits import DEFAULT_LIMITS, Limits
from fleet.choices import Health
from fleet.durations import human_duration

_ORDER = [Health.HEALTHY, Health.UNKNOWN, Health.WARNING, Health.CRITICAL]





def check_limit_overrides(overrides: dict) -> None:
    """Raises ImproperlyConfigured naming what is wrong with a HEALTH_LIMITS setting."""
    from django.core.exceptions import ImproperlyConfigured

    known = {f.name: f for f in fields(Limits)}
    for name, value in overrides.items():
        if name not in known:
            raise ImproperlyConfigured(f"HEALTH_LIMITS: unknown limit {name!r}; known: {', '.join(known)}")
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ImproperlyConfigured(f"HEALTH_LIMITS: {name} must be a number, not {value!r}")
        if isinstance(getattr(DEFAULT_LIMITS, name), int) and not isinstance(value, int):
            raise ImproperlyConfigured(f"HEALTH_LIMITS: {name} counts polls, so it must be a whole number, not {value!r}")


def limits_for(spec_health: dict | None = None, overrides: dict | None = None) -> Limits:
    """The limits of a device type: the defaults, then what its Asimov spec's ``health``
    statements say, then ``overrides`` (the HEALTH_LIMITS setting)."""
    changes = {**(spec_health or {}), **(overrides or {})}
    return replace(DEFAULT_LIMITS, **changes) if changes else DEFAULT_LIMITS


@dataclass
class Finding:
    rule: str
    level: Health
    reason: str
    values: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"rule": self.rule, "level": self.level.value, "reason": self.reason, "values": self.values}

    @classmethod
    def from_json(cls, data: dict) -> Finding:
        return cls(data["rule"], Health(data["level"]), data["reason"], data.get("values", {}))


@dataclass
class Assessment:
    health: Health
    reasons: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def summarise(findings: list[Finding]) -> Assessment:
    if not findings:
        return Assessment(Health.HEALTHY)
    worst = max((f.level for f in findings), key=_ORDER.index)
    return Assessment(worst, [f.reason for f in findings], findings)


# --- Reading: what pages and the API show -------------------------------------------------


def assess_with_reasons(
    snapshot: dict | None, *, now: float, poll_interval: float, limits: Limits = DEFAULT_LIMITS
) -> Assessment:
    """Health as of ``now``: the findings stored when the snapshot was polled (or, for a
    snapshot without them, the rules that need no window); unknown when it is stale."""
    if not snapshot:
        return Assessment(Health.UNKNOWN, ["never polled"])
    sampled = snapshot.get("sample_ts") or snapshot.get("cycle") or 0.0
    if now - sampled > limits.stale_after_intervals * poll_interval:
        age = now - sampled
        return Assessment(
            Health.UNKNOWN,
            [f"no data for {human_duration(age)}"],
            [Finding("stale", Health.UNKNOWN, f"no data for {human_duration(age)}", {"age_s": round(age, 1)})],
        )
    stored = snapshot.get("health_findings")
    if stored is not None:
        return summarise([Finding.from_json(f) for f in stored])
    return summarise(snapshot_findings(snapshot, limits))


# --- Polling: rules over the snapshot and the window --------------------------------------

# Fields of one window point, in order (a point is a plain list, to stay small in Redis).
POINT = (
    "sample_ts",
    "temperature_c",
    "power_w",
    "memory_used_bytes",
    "ecc_corrected_total",
    "ecc_uncorrected_total",
    "device_utilization",
    "power_limit_w",
    "clock_share",
)
_TS, _TEMP, _POWER, _USED, _ECC_C, _ECC_U, _UTIL, _POWER_LIMIT, _CLOCK = range(len(POINT))


def observe(window: dict | None, snapshot: dict, limits: Limits = DEFAULT_LIMITS) -> tuple[Assessment, dict]:
    """Adds a freshly polled snapshot to the device's window and runs every rule. The window
    rules run when the window gains a point (at most once per `window_step_s`); between,
    their findings are held, so that polling more often does not test the same trend more
    often and raise more false alarms."""
    window, stepped = _extend(window or {}, snapshot, limits)
    findings = snapshot_findings(snapshot, limits)
    if snapshot.get("driver_status") == "ok":
        if stepped or "held" not in window:
            held = [found for rule in WINDOW_RULES if (found := rule(window, snapshot, limits)) is not None]
            window["held"] = [f.to_json() for f in held]
        else:
            held = [Finding.from_json(f) for f in window["held"]]
        findings.extend(held)
    return summarise(findings), window


def _point(snapshot: dict) -> list:
    clock, clock_max = snapshot.get("clock_mhz"), snapshot.get("clock_max_mhz")
    clock_share = clock / clock_max if clock is not None and clock_max else None
    return [snapshot.get(name) for name in POINT[:-1]] + [clock_share]


def _extend(window: dict, snapshot: dict, limits: Limits) -> tuple[dict, bool]:
    """The window with this snapshot's point at its end. It replaces a point of the same
    time (two workers polling the same cycle leave one point), and the newest point while
    this one is less than `window_step_s` after the one before that (polled more often, the
    window still spans the same time). Also says whether the window gained a point."""
    points = list(window.get("points", []))
    cores = list(window.get("cores", []))
    point = _point(snapshot)
    ok = snapshot.get("driver_status") == "ok"
    stepped = ok
    if not ok:
        points, cores = [], []  # an outage or a reboot starts the window again
    else:
        if points and _replaces_newest(points, point[_TS], limits.window_step_s):
            stepped = False
            points.pop()
            if cores:
                cores.pop()
        points.append(point)
        cores.append(snapshot.get("core_utilization"))
    gen = snapshot.get("pcie_link_gen")
    best_gen = max(filter(None, [window.get("pcie_gen_max"), gen]), default=None)
    extended = {
        "points": points[-limits.window_polls :],
        "cores": cores[-limits.core_stuck_polls :],
        "pcie_gen_max": best_gen,
        "memory_total": snapshot.get("memory_total_bytes") or window.get("memory_total"),
    }
    for name in ("work_base", "work_seen", "work_recent", "held"):
        if name in window:
            extended[name] = window[name]
    if ok:
        _learn_work(extended, snapshot, limits)
    return extended, stepped


def _replaces_newest(points: list[list], ts: float | None, step_s: float) -> bool:
    newest = points[-1][_TS]
    if ts is None or newest is None:
        return False
    if newest >= ts:
        return True
    before = points[-2][_TS] if len(points) >= 2 else None
    return before is not None and ts - before < step_s


def snapshot_findings(snapshot: dict, limits: Limits = DEFAULT_LIMITS) -> list[Finding]:
    """The rules that need only the latest snapshot."""
    found: list[Finding] = []
    status = snapshot.get("driver_status")
    if status in {"hung", "error"}:
        error = snapshot.get("driver_error")
        found.append(Finding("driver", Health.CRITICAL, f"driver {status}", {"driver_status": status, "driver_error": error}))
    elif status == "rebooting":
        found.append(Finding("driver", Health.WARNING, "rebooting", {"driver_status": status}))

    temperature = snapshot.get("temperature_c")
    if temperature is not None:
        values = {"temperature_c": temperature}
        if temperature >= limits.temperature_critical_c:
            found.append(Finding("temperature", Health.CRITICAL, f"temperature {temperature:.0f} °C", values))
        elif temperature >= limits.temperature_warning_c:
            found.append(Finding("temperature", Health.WARNING, f"temperature {temperature:.0f} °C", values))
    if "thermal" in (snapshot.get("throttle_reasons") or ""):
        found.append(Finding("throttle", Health.WARNING, "thermal throttling", {"throttle_reasons": snapshot["throttle_reasons"]}))
    if snapshot.get("pcie_link_status") == "degraded":
        values = {"pcie_link_gen": snapshot.get("pcie_link_gen"), "pcie_link_width": snapshot.get("pcie_link_width")}
        found.append(Finding("pcie", Health.WARNING, "PCIe link degraded", values))
    return found


def _column(points: list[list], index: int) -> list[tuple[float, float]]:
    return [(p[_TS], p[index]) for p in points if p[index] is not None and p[_TS] is not None]


def _growth(series: list[tuple[float, float]]) -> float:
    """How much a monotonic counter grew over a series (a drop is a reset: not counted)."""
    return sum(max(0.0, b - a) for (_, a), (_, b) in zip(series, series[1:], strict=False))


def ecc_rule(window: dict, snapshot: dict, limits: Limits) -> Finding | None:
    points = window["points"]
    newest = points[-1][_TS]
    recent = [p for p in points if p[_TS] is not None and newest - p[_TS] <= limits.ecc_window_s]
    uncorrected = _growth(_column(recent, _ECC_U))
    if uncorrected > 0:
        return Finding(
            "ecc", Health.CRITICAL, f"{uncorrected:.0f} uncorrectable ECC errors",
            {"ecc_uncorrected": uncorrected, "window_s": limits.ecc_window_s},
        )
    corrected = _column(recent, _ECC_C)
    if len(corrected) < 2:
        return None
    span = corrected[-1][0] - corrected[0][0]
    rate = _growth(corrected) / span if span > 0 else 0.0
    if rate >= limits.ecc_corrected_warning_per_s:
        return Finding(
            "ecc", Health.WARNING, f"{rate:.0f} corrected ECC errors/s",
            {"ecc_corrected_per_s": round(rate, 2), "window_s": round(span, 1)},
        )
    return None


def pcie_speed_rule(window: dict, snapshot: dict, limits: Limits) -> Finding | None:
    """A link trained slower than this device has run (the spec already compares widths)."""
    gen, best = snapshot.get("pcie_link_gen"), window.get("pcie_gen_max")
    if gen is None or best is None or gen >= best or snapshot.get("pcie_link_status") == "degraded":
        return None
    return Finding("pcie", Health.WARNING, f"PCIe link at gen {gen:g}, was gen {best:g}", {"pcie_link_gen": gen, "pcie_gen_max": best})


def cooling_rule(window: dict, snapshot: dict, limits: Limits) -> Finding | None:
    """Hot for its power: a cooling fault shows before the temperature thresholds do."""
    if limits.cooling_c_per_w is None:
        return None
    temperature = snapshot.get("temperature_c")
    powers = [p for _, p in _column(window["points"][-limits.cooling_power_polls :], _POWER)]
    if temperature is None or len(powers) < 2:
        return None
    power = sum(powers) / len(powers)
    expected_rise = power * limits.cooling_c_per_w
    rise = temperature - limits.cooling_ambient_c
    if rise < expected_rise * limits.cooling_ratio or rise - expected_rise < limits.cooling_margin_c:
        return None
    expected = limits.cooling_ambient_c + expected_rise
    return Finding(
        "cooling", Health.WARNING, f"hot for its power: {temperature:.0f} °C at {power:.0f} W (expected {expected:.0f} °C)",
        {"temperature_c": temperature, "power_w": round(power, 1), "expected_c": round(expected, 1)},
    )


def leak_rule(window: dict, snapshot: dict, limits: Limits) -> Finding | None:
    """Used memory climbing steadily while the load (power) does not explain it."""
    total = window.get("memory_total")
    rows = [(p[_TS], p[_POWER] or 0.0, p[_USED]) for p in window["points"] if p[_USED] is not None]
    if not total or len(rows) < limits.leak_min_polls:
        return None
    fits = [_trend(rows[-n:]) for n in _spans(len(rows), limits.leak_min_polls)]
    slope, error = max(fits, key=lambda fit: fit[0] / fit[1] if fit[1] > 0 else math.inf)
    if not _leaking(slope, error, total, limits):
        return None
    free = max(0.0, total - rows[-1][2])
    seconds = free / slope
    # Critical (a reboot) only for a leak the whole window shows, over a long enough time: a
    # load that climbs for a while can look like a fast leak on the latest points.
    whole_slope, whole_error = fits[0]
    imminent = (
        rows[-1][0] - rows[0][0] >= limits.leak_critical_span_s
        and _leaking(whole_slope, whole_error, total, limits)
        and free / whole_slope <= limits.leak_critical_s
    )
    level = Health.CRITICAL if imminent else Health.WARNING
    return Finding(
        "memory_leak", level,
        f"memory leak: {_mib(slope)} MiB/s, out of memory in {human_duration(seconds)}",
        {"leak_bytes_per_s": round(slope), "seconds_to_exhaustion": round(seconds), "memory_free_bytes": round(free)},
    )


def _leaking(slope: float, error: float, total: float, limits: Limits) -> bool:
    return slope >= limits.leak_min_share_per_s * total and slope >= limits.leak_sigmas * error


def _spans(available: int, shortest: int) -> list[int]:
    """The most recent spans of the window to fit a trend on: a leak that began a few polls
    ago shows best on the latest points, a slow one on the whole window."""
    spans, n = [], available
    while n >= shortest:
        spans.append(n)
        n //= 2
    return spans


def _trend(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares of used memory on time and power: the time slope (bytes/s) and its
    standard error. Power stands for the load, so the slope is what the load does not
    explain. One pass over the rows; time from the first row and memory in MiB keep the sums
    of squares small."""
    n = len(rows)
    t0 = rows[0][0]
    st = sp = sy = stt = spp = syy = stp = sty = spy = 0.0
    for t, p, y in rows:
        t -= t0
        y *= _PER_MIB
        st += t
        sp += p
        sy += y
        stt += t * t
        spp += p * p
        syy += y * y
        stp += t * p
        sty += t * y
        spy += p * y
    stt -= st * st / n
    spp -= sp * sp / n
    syy -= sy * sy / n
    stp -= st * sp / n
    sty -= st * sy / n
    spy -= sp * sy / n
    if stt <= 0:
        return 0.0, math.inf
    det = stt * spp - stp * stp
    if spp <= 1e-12 or det <= 1e-9 * stt * spp:
        slope, power_slope, dof, factor = sty / stt, 0.0, n - 2, 1.0 / stt
    else:
        slope = (spp * sty - stp * spy) / det
        power_slope = (stt * spy - stp * sty) / det
        dof, factor = n - 3, spp / det
    residual = max(0.0, syy - slope * sty - power_slope * spy)
    error = math.sqrt(residual / max(1, dof) * factor)
    return slope * _MIB, error * _MIB


_MIB = float(1 << 20)
_PER_MIB = 1.0 / _MIB


def core_stuck_rule(window: dict, snapshot: dict, limits: Limits) -> Finding | None:
    """A core busy whatever the load: against its siblings where the device reports
    per-core activity, else utilization pinned at the top while power says the device is
    far from fully loaded (and its clock is not throttled)."""
    cores = [c for c in window.get("cores", []) if c]
    if len(cores) >= limits.core_stuck_polls and len(cores[-1]) > 1:
        return _stuck_against_siblings(cores[-limits.core_stuck_polls :], limits)
    points = window["points"][-limits.core_stuck_polls :]
    if len(points) < limits.core_stuck_polls:
        return None
    if not all(p[_UTIL] is not None and p[_UTIL] >= limits.core_stuck_busy for p in points):
        return None
    if not all(p[_POWER] is not None and p[_POWER_LIMIT] and (p[_CLOCK] or 0) >= 0.9 for p in points):
        return None
    share = sum(p[_POWER] / p[_POWER_LIMIT] for p in points) / len(points)
    if share >= limits.pinned_power_share_below:
        return None
    return Finding(
        "core_stuck", Health.WARNING, f"utilization pinned at 100 % at {share:.0%} of its power limit",
        {"device_utilization": points[-1][_UTIL], "power_share": round(share, 3)},
    )


def _stuck_against_siblings(cores: list[list[float]], limits: Limits) -> Finding | None:
    width = min(len(c) for c in cores)
    for index in range(width):
        if all(c[index] is not None and c[index] >= limits.core_stuck_busy for c in cores):
            siblings = [c[j] for c in cores for j in range(width) if j != index and c[j] is not None]
            mean = sum(siblings) / len(siblings) if siblings else 1.0
            if mean < limits.core_stuck_siblings_below:
                return Finding(
                    "core_stuck", Health.WARNING, f"core {index} stuck busy (siblings {mean:.0%})",
                    {"core": index, "core_utilization": cores[-1][index], "siblings_mean": round(mean, 3)},
                )
    return None


def slow_work_rule(window: dict, snapshot: dict, limits: Limits) -> Finding | None:
    """A device doing much less work than its utilization says it should, against its own
    baseline of work per unit of utilization (learnt while it was not slow)."""
    base, seen = window.get("work_base"), window.get("work_seen", 0)
    ratios = window.get("work_recent", [])
    if base is None or seen < limits.slow_work_min_polls or len(ratios) < limits.slow_work_polls:
        return None
    now = sum(ratios[-limits.slow_work_polls :]) / limits.slow_work_polls
    if now >= limits.slow_work_ratio * base:
        return None
    rate, expected = snapshot.get("work_items_per_s"), base * (snapshot.get("device_utilization") or 0.0)
    return Finding(
        "slow_work", Health.WARNING, f"work rate {now / base:.0%} of what its utilization gives",
        {"work_items_per_s": rate, "expected_per_s": round(expected, 1), "share": round(now / base, 3)},
    )


def _learn_work(window: dict, snapshot: dict, limits: Limits) -> None:
    """Keeps the recent work per utilization and a slow average of it as the baseline; the
    baseline does not learn while the device is slow."""
    rate, utilization = snapshot.get("work_items_per_s"), snapshot.get("device_utilization")
    if rate is None or not utilization or utilization < limits.slow_work_min_utilization:
        return
    ratio = rate / utilization
    recent = [*window.get("work_recent", []), ratio][-limits.slow_work_polls :]
    window["work_recent"] = recent
    base = window.get("work_base")
    if base is None:
        window["work_base"], window["work_seen"] = ratio, 1
    elif ratio >= limits.slow_work_ratio * base:
        window["work_base"] = base + (ratio - base) * 0.1
        window["work_seen"] = window.get("work_seen", 0) + 1


WINDOW_RULES = (ecc_rule, pcie_speed_rule, cooling_rule, leak_rule, core_stuck_rule, slow_work_rule)


def _mib(value: float) -> str:
    return f"{value / (1 << 20):.1f}"
