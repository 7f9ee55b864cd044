"""The replay's figures, per policy, as a dict (``--json``) and as text (docs/replay.md
says what each one means)."""

from __future__ import annotations

from collections import Counter, defaultdict

from emulator.replay.engine import PolicyResult, Settings
from emulator.replay.history import DAY, Fault
from emulator.replay.policy import PULL_KIND

__all__ = ["in_service_by_day", "percentile", "summarise", "text"]


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def _offenders(result: PolicyResult, faults: list[Fault], threshold: int) -> dict:
    by_node: dict[str, list[float]] = defaultdict(list)
    for f in faults:
        by_node[f.node].append(f.start_s)
    truth = {n for n, starts in by_node.items() if len(starts) >= threshold}
    first: dict[str, float] = {}
    for (node, _), when in result.flagged.items():
        first[node] = min(when, first.get(node, when))
    after = {n: sum(1 for t in by_node[n] if t > when) for n, when in first.items()}
    lead = sorted((max(by_node[n]) - when) / DAY for n, when in first.items())
    return {
        "history_repeat_offenders": len(truth),
        "flagged": len(first),
        "flagged_that_are_history_repeat_offenders": len(set(first) & truth),
        "faults_after_flag": sum(after.values()),
        "days_flag_to_last_fault_p50": percentile(lead, 50),
        "first_flagged_day": min(first.values()) / DAY if first else None,
    }


def in_service_by_day(result: PolicyResult, devices: int, horizon: float) -> list[float]:
    """The share of the fleet's devices in service, day by day."""
    days = max(1, int(-(-horizon // DAY)))
    out = [0.0] * days
    for spans in result.device_spans.values():
        for a, b in spans:
            d = int(a // DAY)
            while d < days and d * DAY < b:
                out[d] += min(b, (d + 1) * DAY) - max(a, d * DAY)
                d += 1
    widths = [min(DAY, horizon - d * DAY) or DAY for d in range(days)]
    return [1 - lost / (devices * w) for lost, w in zip(out, widths, strict=True)]


def summarise(results: dict[str, PolicyResult], faults: list[Fault], s: Settings) -> dict:
    horizon = s.horizon_s if s.horizon_s is not None else max((f.end_s for f in faults), default=0.0)
    devices = s.nodes * s.devices_per_node
    failed = {f.node for f in faults}
    out: dict = {"settings": {"nodes": s.nodes, "devices_per_node": s.devices_per_node, "days": horizon / DAY,
                              "faults": len(faults), "servers_with_faults": len(failed),
                              "person_delay_s": s.person_delay_s, "jobs": list(s.jobs),
                              "checkpoint_s": s.checkpoint_s, "restart_s": s.restart_s},
                 "policies": {}}
    for name, r in results.items():
        out_h = sum(r.device_out_s.values()) / 3600
        total_h = devices * horizon / 3600
        gpu_s = sum(j.size * s.devices_per_node * horizon for j in r.jobs)
        productive = sum(j.size * s.devices_per_node * j.productive_s for j in r.jobs)
        seen = [o for o in r.outcomes if o.seen_by_monitor]
        detect = [o.detect_s - o.fault.start_s for o in r.outcomes]
        isolate = [o.isolate_s - o.fault.start_s for o in r.outcomes]
        repairs = Counter(f"{rung}: {result}" for o in r.outcomes for rung, result in o.rungs)
        pulled = {(o.fault.node, o.device) for o in r.outcomes
                  if o.rungs and o.rungs[-1][0] in ("inspect_hardware", "needs_person")}
        false_pulls = sorted({n for n, _ in pulled | set(r.flagged)} - failed)
        lost: dict[str, Counter] = defaultdict(Counter)
        for j in r.jobs:
            for reason, sec in j.lost_s.items():
                lost[reason]["gpu_hours"] += sec * j.size * s.devices_per_node / 3600
        classes: dict[str, dict] = {}
        for o in r.outcomes:
            row = classes.setdefault(o.fault.kind, {"faults": 0, "signal": o.signal.kind, "device_hours_out": 0.0,
                                                    "job_gpu_hours_lost": 0.0, "detect_s": []})
            row["faults"] += 1
            row["detect_s"].append(o.detect_s - o.fault.start_s)
            span = o.back_s - o.fault.start_s
            row["device_hours_out"] += span * (s.devices_per_node if o.device < 0 else 1) / 3600
        for kind, gpu_s_lost in r.lost_by_class.items():
            if kind in classes:
                classes[kind]["job_gpu_hours_lost"] = gpu_s_lost / 3600
        for row in classes.values():
            ds = row.pop("detect_s")
            row["detect_p95_s"] = percentile(ds, 95)
        largest = max(r.jobs, key=lambda j: j.size) if r.jobs else None
        out["policies"][name] = {
            "device_hours_in_service": total_h - out_h,
            "device_hours_out": out_h,
            "in_service_share": (total_h - out_h) / total_h if total_h else 1.0,
            "ettr": productive / gpu_s if gpu_s else 1.0,
            "ettr_largest_job": largest.ettr(horizon) if largest else None,
            "job_interruptions": sum(j.interruptions for j in r.jobs),
            "job_gpu_hours_lost": {k: v["gpu_hours"] for k, v in sorted(lost.items())},
            "detect_s_p50": percentile(detect, 50), "detect_s_p95": percentile(detect, 95),
            "detect_s_p95_seen_by_monitor": percentile([o.detect_s - o.fault.start_s for o in seen], 95),
            "faults_seen_by_monitor": len(seen), "faults_invisible_to_monitor": len(r.outcomes) - len(seen),
            "isolate_s_p50": percentile(isolate, 50), "isolate_s_p95": percentile(isolate, 95),
            "isolate_s_p95_seen_by_monitor": percentile([o.isolate_s - o.fault.start_s for o in seen], 95),
            "repairs": dict(sorted(repairs.items())),
            "escalations_to_person": sum(1 for o in r.outcomes if o.person),
            "waited_for_a_person": sum(1 for o in r.outcomes if o.isolate_s >= o.fault.start_s + s.person_delay_s),
            "pulled_devices": len(pulled),
            "false_pulls": len(false_pulls), "false_pull_servers": false_pulls[:20],
            "breaker_trips": r.breaker_trips,
            "offenders": _offenders(r, faults, s.offender_incidents) if name == "asicmon" else None,
            "offender_pulls": len(r.pulls),
            "offender_pull_device_hours": sum(min(p.back_s, horizon) - p.fault.start_s for p in r.pulls) / 3600,
            "offender_pull_job_gpu_hours_lost": r.lost_by_class.get(PULL_KIND, 0.0) / 3600,
            "in_service_by_day": in_service_by_day(r, devices, horizon),
            "by_class": dict(sorted(classes.items(), key=lambda kv: -kv[1]["faults"])),
        }
    base = out["policies"].get("none")
    if base:
        for row in out["policies"].values():
            gain = row["device_hours_in_service"] - base["device_hours_in_service"]
            row["gain_over_none_device_hours"] = gain
            row["gain_over_none_percent"] = 100 * gain / base["device_hours_in_service"]
            row["gain_over_none_ettr_points"] = 100 * (row["ettr"] - base["ettr"])
    return out


def _n(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def text(summary: dict) -> str:
    st = summary["settings"]
    lines = [f"Replay: {st['faults']} faults on {st['servers_with_faults']} of {st['nodes']} servers "
             f"x {st['devices_per_node']} devices, {st['days']:.1f} days; jobs {len(st['jobs'])} "
             f"({sum(st['jobs'])} servers), checkpoint every {st['checkpoint_s']:g} s", ""]
    names = list(summary["policies"])
    rows = [
        ("device-hours in service", lambda p: f"{p['device_hours_in_service']:,.0f} ({100 * p['in_service_share']:.3f} %)"),
        ("gain over no automation", lambda p: f"{p.get('gain_over_none_device_hours', 0):+,.0f} h "
                                              f"({p.get('gain_over_none_percent', 0):+.3f} %)"),
        ("jobs' ETTR", lambda p: f"{100 * p['ettr']:.3f} %"),
        ("largest job's ETTR", lambda p: _n(p["ettr_largest_job"] and 100 * p["ettr_largest_job"], "{:.3f} %")),
        ("job interruptions", lambda p: str(p["job_interruptions"])),
        ("detect p50 / p95 (s)", lambda p: f"{_n(p['detect_s_p50'], '{:.0f}')} / {_n(p['detect_s_p95'], '{:.0f}')}"),
        ("detect p95, monitor-seen (s)", lambda p: _n(p["detect_s_p95_seen_by_monitor"], "{:.0f}")),
        ("isolate p50 / p95 (s)", lambda p: f"{_n(p['isolate_s_p50'], '{:.0f}')} / {_n(p['isolate_s_p95'], '{:.0f}')}"),
        ("isolate p95, monitor-seen (s)", lambda p: _n(p["isolate_s_p95_seen_by_monitor"], "{:.0f}")),
        ("seen / invisible to monitor", lambda p: f"{p['faults_seen_by_monitor']} / {p['faults_invisible_to_monitor']}"),
        ("escalations to a person", lambda p: str(p["escalations_to_person"])),
        ("waited for a person", lambda p: str(p["waited_for_a_person"])),
        ("devices pulled / false pulls", lambda p: f"{p['pulled_devices']} / {p['false_pulls']}"),
        ("breaker trips", lambda p: str(p["breaker_trips"])),
    ]
    width = max(len(r[0]) for r in rows) + 2
    lines.append(" " * width + "".join(f"{n:>28}" for n in names))
    for label, get in rows:
        lines.append(f"{label:<{width}}" + "".join(f"{get(summary['policies'][n]):>28}" for n in names))
    for n in names:
        p = summary["policies"][n]
        lines += ["", f"[{n}] repairs: " + (", ".join(f"{k} x{v}" for k, v in p["repairs"].items()) or "none"),
                  f"[{n}] job GPU-hours lost: " + ", ".join(f"{k} {v:,.0f}" for k, v in p["job_gpu_hours_lost"].items())]
        if p["offenders"]:
            o = p["offenders"]
            lines.append(f"[{n}] repeat offenders: {o['flagged']} servers flagged "
                         f"({o['flagged_that_are_history_repeat_offenders']} of the history's {o['history_repeat_offenders']} "
                         f"with 3+ faults), {o['faults_after_flag']} faults came after a flag; "
                         f"{p['offender_pulls']} devices pulled for inspection "
                         f"({p['offender_pull_device_hours']:,.0f} device-hours, "
                         f"{p['offender_pull_job_gpu_hours_lost']:,.0f} job GPU-hours lost to the pulls)")
    lines += ["", "Per fault class (asicmon): faults, signal, device-hours out, job GPU-hours lost, detect p95 s"]
    first = summary["policies"][names[0]]
    for kind, row in first["by_class"].items():
        lines.append(f"  {kind[:52]:<52} {row['faults']:>4} {row['signal']:<10} {row['device_hours_out']:>10,.0f} "
                     f"{row['job_gpu_hours_lost']:>12,.0f} {_n(row['detect_p95_s'], '{:.0f}'):>8}")
    return "\n".join(lines)
