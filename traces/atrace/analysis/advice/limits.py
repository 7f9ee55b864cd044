"""Every threshold of the advisor's rules, in one table (`AdviceLimits`), so that a test or
a caller can read or change them."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["DEFAULT_ADVICE_LIMITS", "ADVICE_LIMIT_NAMES", "AdviceLimits"]


@dataclass(frozen=True)
class AdviceLimits:
    """Thresholds of the rules (shares are 0..1 of the analysed critical path unless said)."""

    # Every rule: a finding is reported when its estimated saving is at least this share of
    # the critical path of the windows analysed.
    min_saving_share: float = 0.03
    # Severity by the saving's share of the path: high from `high_share`, medium from
    # `medium_share`, else low.
    high_share: float = 0.25
    medium_share: float = 0.10
    # Verdict: the bound (host, device, communication, input) that holds at least this
    # share of the path's busy time; below it for every bound the verdict is "mixed".
    verdict_share: float = 0.5
    # 1 launch-bound / 8 graph replays: the device is busy less than this share of a step.
    launch_bound_device_busy_below: float = 0.5
    # ... and it is launch-bound (per-launch overhead) while the host spends at most this
    # long (µs) per kernel it launches; above, host-bound (the host code itself is slow).
    launch_bound_host_per_launch_us: float = 200.0
    # 2 synchronisation: a sync call that waits at least this long (µs) counts.
    sync_min_wait_us: float = 2.0
    # 4 input stall: the device idles at the start of a step at least this long (µs) while
    # the host is in the data loader or an input copy.
    input_stall_min_us: float = 10.0
    # 5 copies: a copy below `copy_small_bytes` is small; small copies count when a step has
    # at least `copy_small_min_count` of them.
    copy_small_bytes: int = 64 * 1024
    copy_small_min_count: int = 8
    # 6 hotspots: when the device bounds at least `hotspot_device_share` of the path, the
    # fewest kernels (at most `hotspot_max_kernels`) that hold `hotspot_kernel_share` of
    # the computation time.
    hotspot_device_share: float = 0.5
    hotspot_kernel_share: float = 0.5
    hotspot_max_kernels: int = 3
    # 7 stragglers: a rank that arrives last at `straggler_last_share` of the collectives
    # or more and costs the job at least `straggler_min_cost_share` of its time (the others'
    # waiting for it that nothing overlaps), however late it is next to the other ranks.
    straggler_last_share: float = 0.5
    straggler_min_cost_share: float = 0.01
    # What is analysed: at most `max_windows` steps holding at most `max_window_events`
    # work events together (evenly spaced; savings are scaled to every step).
    max_windows: int = 8
    max_window_events: int = 150_000
    # Evidence: at most this many event ids per finding.
    evidence_events: int = 50


DEFAULT_ADVICE_LIMITS = AdviceLimits()
ADVICE_LIMIT_NAMES = tuple(f.name for f in fields(AdviceLimits))
