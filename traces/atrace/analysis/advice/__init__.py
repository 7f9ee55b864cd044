"""The advisor: what to fix in a trace, with the evidence and the time each fix could save.

``advise(trace)`` analyses the trace's steps (see :mod:`.context`), runs every rule and
returns :class:`Findings`: a verdict in one line (host-, device-, communication- or
input-bound, or mixed) and the findings by estimated saving. Each finding's saving is a
what-if on the critical path (:mod:`..whatif`): how much shorter the path of each step
gets with the offending time removed or overlapped — an upper bound of what fixing it
recovers, never the raw total of the offending time. ``advise_job(job)`` does the same
for every rank of a distributed job and adds the stragglers rule. Every threshold is a
field of :class:`AdviceLimits`. Deterministic: the same trace gives the same findings.
"""

from __future__ import annotations

from .findings import BOUNDS, RULES, VERDICTS, Evidence, Finding, Findings, compare_findings
from .job import advise_job
from .limits import ADVICE_LIMIT_NAMES, DEFAULT_ADVICE_LIMITS, AdviceLimits
from .run import advise, path_shares

__all__ = [
    "ADVICE_LIMIT_NAMES",
    "BOUNDS",
    "DEFAULT_ADVICE_LIMITS",
    "RULES",
    "VERDICTS",
    "AdviceLimits",
    "Evidence",
    "Finding",
    "Findings",
    "advise",
    "advise_job",
    "compare_findings",
    "path_shares",
]
