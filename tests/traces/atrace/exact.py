"""An independent exact reference for the real-trace checks.

It reads the raw JSON with Python's ``json`` module, numbers as :class:`~decimal.Decimal`
(never floats), converts microseconds to integer nanoseconds by decimal arithmetic and
nests slices with a plain stack per thread. It shares no code with the engine.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from tests.support.traces import REAL_TRACES


def chrome_trace_files() -> list[Path]:
    """Every Chrome / Kineto JSON trace in the shared folder (others are other formats)."""
    out = []
    for path in sorted(REAL_TRACES.glob("*.json*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            head = f.read(1 << 16)
        if b'"traceEvents"' in head or head.lstrip()[:1] == b"[":
            out.append(path)
    return out


@contextlib.contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector (a context or a decorator): a JSON document
    and the slices made from it hold no cycles, and collecting again and again while half a
    million objects appear takes twice as long as building them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@collector_paused()
def load_raw(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def ns(us: Decimal | int) -> int:
    return int((Decimal(us) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


@dataclass
class Slice:
    name: str
    cat: str
    pid: object
    tid: object
    ts: int
    dur: int
    args: dict
    parent: int = -1
    children_ns: int = 0

    @property
    def end(self) -> int:
        return self.ts + self.dur

    @property
    def self_ns(self) -> int:
        return max(self.dur - self.children_ns, 0)


@collector_paused()
def slices(doc: dict) -> list[Slice]:
    """The complete ('X') events, in exact ns, with parent and self time from a stack."""
    out = [
        Slice(str(e.get("name", "")), str(e.get("cat", "")), e.get("pid", 0), e.get("tid", 0),
              ns(e["ts"]), ns(e.get("dur", 0)), e.get("args") or {})
        for e in doc["traceEvents"]
        if e.get("ph") == "X"
    ]
    by_thread = defaultdict(list)
    for i, s in enumerate(out):
        by_thread[(s.pid, s.tid)].append(i)
    for members in by_thread.values():
        members.sort(key=lambda i: (out[i].ts, -out[i].dur, i))
        stack: list[int] = []
        for i in members:
            s = out[i]
            while stack and out[stack[-1]].end <= s.ts:
                stack.pop()
            if stack:
                p = out[stack[-1]]
                s.parent = stack[-1]
                p.children_ns += max(min(s.end, p.end) - max(s.ts, p.ts), 0)
            stack.append(i)
    return out


def totals_by(events: list[Slice], key) -> dict:
    """{key: (count, total ns, self ns)} over the events ``key`` maps to a non-None key."""
    out: dict = defaultdict(lambda: [0, 0, 0])
    for s in events:
        k = key(s)
        if k is None:
            continue
        row = out[k]
        row[0] += 1
        row[1] += s.dur
        row[2] += s.self_ns
    return {k: tuple(v) for k, v in out.items()}


DEVICE_WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "mtia_runtime"}


def unlaunched_device_work(events: list[Slice]) -> int:
    """How many device work events no runtime call launched: none carries their correlation
    id, and they are no CUDA/HIP graph's replay (a graph launch with their external id that
    began before them, or, for work whose args name a graph, any graph launch before them)."""
    launched = {s.args.get("correlation") for s in events if s.cat in LAUNCH_CATS} - {None}
    graphs = [s for s in events if s.cat in LAUNCH_CATS and "graphlaunch" in s.name.lower().replace("_", "")]

    def replayed(s: Slice) -> bool:
        ext = s.args.get("External id")
        if any(g.args.get("External id") == ext and g.ts <= s.ts for g in graphs if ext is not None):
            return True
        marked = any(k.lower().replace("_", " ") in ("graph id", "graph node id", "graphid", "graphnodeid") for k in s.args)
        return marked and any(g.ts <= s.ts for g in graphs)

    return sum(1 for s in events if s.cat in DEVICE_WORK_CATS and s.args.get("correlation") not in launched
               and not replayed(s))
