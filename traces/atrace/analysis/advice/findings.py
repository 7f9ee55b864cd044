"""What the advisor answers: findings, each with its evidence and estimated saving, and a
verdict in one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...model.stats import us
from .limits import AdviceLimits

#: The rules, in the order of the issue that asked for them.
RULES = (
    "launch_bound",
    "host_sync",
    "exposed_communication",
    "input_stall",
    "copies",
    "kernel_hotspot",
    "straggler",
    "graph_replays",
    "cpu_hotspot",
    "replay_gaps",
    "prefill_stall",
    "kv_cache",
)
#: What can bound a trace, as the verdict says it.
BOUNDS = ("host", "device", "communication", "input")
VERDICTS = ("host-bound", "device-bound", "communication-bound", "input-bound", "mixed", "unclear", "cpu-only",
            "no work")


@dataclass
class Evidence:
    """Where a finding shows: events to highlight, the steps and time windows where it
    happens, the operators involved, and the window to open the timeline at."""

    events: list[int] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    windows_ns: list[tuple[int, int]] = field(default_factory=list)
    operators: list[dict[str, Any]] = field(default_factory=list)
    focus_ns: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "steps": self.steps,
            "windows_us": [[us(a), us(b)] for a, b in self.windows_ns],
            "operators": self.operators,
            "focus_us": [us(self.focus_ns[0]), us(self.focus_ns[1])] if self.focus_ns else None,
        }


@dataclass
class Finding:
    rule: str
    severity: str  # "high" | "medium" | "low"
    title: str  # one sentence, in the user's terms
    saving_ns: int  # estimated saving over the whole trace (an upper bound)
    saving_share: float  # of the critical path of the windows analysed
    saving_per_step_ns: int | None  # per step, where the trace has steps
    measured: dict[str, Any]
    evidence: Evidence
    action: str
    rank: int | None = None  # the rank, in a job's findings

    def to_dict(self) -> dict[str, Any]:
        out = {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "saving_us": us(self.saving_ns),
            "saving_share": round(self.saving_share, 4),
            "saving_per_step_us": us(self.saving_per_step_ns) if self.saving_per_step_ns is not None else None,
            "measured": self.measured,
            "evidence": self.evidence.to_dict(),
            "action": self.action,
        }
        if self.rank is not None:
            out["rank"] = self.rank
        return out


@dataclass
class Findings:
    verdict: str
    summary: str  # the verdict in one line
    shares: dict[str, float]  # BOUNDS -> share of the path's busy time
    findings: list[Finding]  # largest saving first
    scope: dict[str, Any]  # what was analysed
    account: dict[str, Any] = field(default_factory=dict)  # where the time goes (see .account)
    reason: str = ""  # why the verdict: its finding, or the account, or why it is unclear

    def rule(self, name: str) -> Finding | None:
        """The finding of rule ``name`` (the largest, in a job), or None."""
        return next((f for f in self.findings if f.rule == name), None)

    @property
    def rules(self) -> list[str]:
        return [f.rule for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "summary": self.summary,
            "shares": {k: round(v, 4) for k, v in self.shares.items()},
            "findings": [f.to_dict() for f in self.findings],
            "scope": self.scope,
            "reason": self.reason,
            "account": self.account,
        }


def severity(share: float, limits: AdviceLimits) -> str:
    if share >= limits.high_share:
        return "high"
    return "medium" if share >= limits.medium_share else "low"


def verdict(shares: dict[str, float], limits: AdviceLimits) -> str:
    """The bound holding at least ``verdict_share`` of the busy time, else "mixed"."""
    if not shares or sum(shares.values()) <= 0:
        return "no work"
    top = max(BOUNDS, key=lambda k: shares.get(k, 0.0))
    return f"{top}-bound" if shares[top] >= limits.verdict_share else "mixed"


def summary_line(word: str, shares: dict[str, float], findings: list[Finding], device_busy: float | None,
                 reason: str = "") -> str:
    """The verdict in one line: the bound, the shares behind it, then the top finding (or,
    when none crosses its threshold, the reason: where the time goes)."""
    if word == "no work":
        return "No work to analyse: the trace holds no operators, runtime calls or device work."
    parts = ", ".join(f"{k} {v:.0%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]) if v >= 0.005)
    busy = f"; the device is busy {device_busy:.0%} of the time" if device_busy is not None else ""
    head = {"mixed": "Mixed: no single bound holds half the time", "unclear": "Unclear",
            "cpu-only": "CPU only: the trace records no device work"}.get(word, word.capitalize())
    shown = f" ({parts}){busy}" if word != "cpu-only" else ""
    if findings:
        tail = f". Top finding: {findings[0].title}"
        if word in ("mixed", "unclear") and reason:
            tail = f". {reason}{tail}"
    else:
        tail = f". No finding crosses its threshold. {reason}" if reason else ". No finding crosses its threshold"
    return f"{head}{shown}{tail}".rstrip()


def compare_findings(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Which findings appeared in B, which went away, which both have (with their savings),
    from two stored ``Findings.to_dict()``. A finding is its rule (and its rank, in a job)."""

    def keyed(doc):
        return {(f["rule"], f.get("rank")): f for f in doc.get("findings", [])}

    fa, fb = keyed(a), keyed(b)

    def brief(f):
        return {"rule": f["rule"], "rank": f.get("rank"), "title": f["title"], "severity": f["severity"],
                "saving_us": f["saving_us"], "saving_share": f["saving_share"]}

    both = [{"rule": k[0], "rank": k[1], "title": fb[k]["title"], "saving_a_us": fa[k]["saving_us"],
             "saving_b_us": fb[k]["saving_us"], "delta_us": round(fb[k]["saving_us"] - fa[k]["saving_us"], 3)}
            for k in fb if k in fa]
    return {
        "verdict_a": a.get("verdict"),
        "verdict_b": b.get("verdict"),
        "appeared": sorted((brief(fb[k]) for k in fb if k not in fa), key=lambda f: -f["saving_us"]),
        "went_away": sorted((brief(fa[k]) for k in fa if k not in fb), key=lambda f: -f["saving_us"]),
        "in_both": sorted(both, key=lambda f: -abs(f["delta_us"])),
    }
