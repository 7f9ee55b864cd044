"""The advisor on every shared real trace, checked against the raw events.

The reference reads the raw JSON with ``exact.py`` (decimal times, a plain stack per
thread) and recomputes by hand what each finding states: how busy the device is in the
steps, how many kernels the host launches per step and their median, the synchronisation
waits, the kernels' shares. The verdicts must follow from those facts (a device busy most
of the time is never called launch-bound), and docs/atrace.md's table must be what the
engine says.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.traces import each_real_trace
from tests.traces.atrace import exact
from traces.atrace import advise, read_trace
from traces.atrace.analysis.advice import VERDICTS

FILES = exact.chrome_trace_files()
DOCS = Path(__file__).resolve().parents[4] / "docs" / "atrace.md"
_SYNC = re.compile(r"synchroni[sz]e", re.IGNORECASE)
_STEP = re.compile(r"^(ProfilerStep#|step#)\d+$")
#: Operators, runtime calls and device work (not frames, ranges or recorded waits).
WORK_CATS = {"cpu_op", "cuda_runtime", "cuda_driver", "mtia_runtime"} | exact.DEVICE_WORK_CATS


class Reference:
    """What the raw events say about a trace's steps, computed without the engine."""

    def __init__(self, path: Path):
        self.slices = exact.slices(exact.load_raw(path))
        by_name: dict[str, exact.Slice] = {}
        for s in self.slices:
            step = _STEP.match(s.name) and s.cat not in exact.DEVICE_WORK_CATS
            if step and (s.name not in by_name or s.dur > by_name[s.name].dur):
                by_name[s.name] = s
        steps = sorted(by_name.values(), key=lambda s: s.ts)
        self.device = [s for s in self.slices if s.cat in exact.DEVICE_WORK_CATS]
        launches = {s.args.get("correlation"): s for s in self.slices if s.cat in exact.LAUNCH_CATS}
        launches.pop(None, None)
        self.launch_of = {id(d): launches.get(d.args.get("correlation")) for d in self.device}
        self.windows = []
        for st in steps:
            mine = [d for d in self.device if self._in_step(d, st)]
            if mine:
                self.windows.append((st, mine))
        if not self.windows:  # the whole trace
            work = [s for s in self.slices if s.cat in WORK_CATS]
            start, end = min(s.ts for s in work), max(s.end for s in work)
            self.windows = [(exact.Slice("trace", "", 0, 0, start, end - start, {}), self.device)]
        self.has_steps = self.windows[0][0].name != "trace"

    def _in_step(self, d, st) -> bool:
        launch = self.launch_of[id(d)]
        at = launch.ts if launch is not None else d.ts
        return st.ts <= at < st.end

    def device_busy(self) -> float:
        """The device's busy time over the steps' time, each step from its start (or from
        when the device finished earlier work) to the end of its device work."""
        busy = elapsed = 0
        for st, mine in self.windows:
            if not mine:
                continue
            first = min(d.ts for d in mine)
            tail = max((d.end for d in self.device if d.ts < st.ts), default=st.ts)
            start = max(st.ts, min(tail, first))
            end = max(st.end, max(d.end for d in mine))
            busy += _union(mine)
            elapsed += end - start
        return busy / elapsed if elapsed else 0.0

    def launched_kernels(self) -> list[exact.Slice]:
        return [d for _, mine in self.windows for d in mine if self.launch_of[id(d)] is not None]

    def syncs(self, min_ns: int) -> list[exact.Slice]:
        out = []
        for st, _ in self.windows:
            lo, hi = (st.ts, st.end) if self.has_steps else (-(1 << 62), 1 << 62)
            out += [s for s in self.slices if s.cat in exact.LAUNCH_CATS and _SYNC.search(s.name)
                    and lo <= s.ts < hi and s.dur >= min_ns]
        return out

    def kernel_totals(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for _, mine in self.windows:
            for d in mine:
                if _computation(d):
                    out[d.name] += d.dur
        return out

    def idle_bound(self) -> int:
        """Per step, its time (to the end of its work) less the busy time of its busiest
        stream, summed: no what-if can save more, since that stream's work stays."""
        total = 0
        for st, mine in self.windows:
            streams = defaultdict(list)
            for d in mine:
                streams[(d.pid, d.tid)].append(d)
            end = max(st.end, max(d.end for d in mine))
            total += max(end - st.ts - max(_union(v) for v in streams.values()), 0)
        return total


def _computation(d) -> bool:
    """A computation kernel: not communication, not a copy or fill."""
    return d.cat == "kernel" and not re.search("nccl|rccl", d.name, re.I) and not d.name.startswith(("Memcpy", "Memset"))


def _union(slices) -> int:
    total, end = 0, None
    for s in sorted(slices, key=lambda s: s.ts):
        if end is None or s.ts > end:
            total += s.dur
            end = s.end
        elif s.end > end:
            total += s.end - end
            end = s.end
    return total


@pytest.fixture(scope="module", params=each_real_trace(FILES))
def case(request):
    return request.param.name.split(".")[0], advise(read_trace(request.param)), Reference(request.param)


def test_verdicts_follow_from_how_busy_the_device_is(case):
    name, found, ref = case
    assert found.verdict in VERDICTS
    busy = ref.device_busy()
    if ref.device:
        assert found.scope["device_busy_share"] == pytest.approx(busy, abs=0.005), name
    if ref.device and busy >= 0.5:
        assert found.rule("launch_bound") is None, f"{name}: busy {busy:.0%} yet launch-bound"
    if busy >= 0.8:
        assert found.verdict == "device-bound", name
    if ref.launched_kernels() and busy < 0.1:
        assert found.verdict == "host-bound" and found.findings[0].rule == "launch_bound", name


def test_the_launch_numbers_are_the_raw_events(case):
    name, found, ref = case
    f = found.rule("launch_bound")
    if f is None:
        return
    launched = ref.launched_kernels()
    steps = len(ref.windows)
    assert f.measured["kernels_per_step"] == pytest.approx(len(launched) / steps, abs=0.05), name
    kernels = [d.dur for d in launched if _computation(d)]
    assert f.measured["median_kernel_us"] == pytest.approx(float(Decimal(statistics.median(kernels)) / 1000), abs=0.001)
    assert f.measured["device_busy_share"] == pytest.approx(ref.device_busy(), abs=0.005)
    # An upper bound: never more than the steps' time their busiest stream is not busy.
    assert 0 < f.saving_ns <= ref.idle_bound() * found.scope["scale"], name


def test_the_sync_waits_are_the_raw_events(case):
    name, found, ref = case
    f = found.rule("host_sync")
    if f is None:
        return
    syncs = ref.syncs(int(found.scope["limits"]["sync_min_wait_us"] * 1000))
    assert f.measured["wait_total_us"] == pytest.approx(sum(s.dur for s in syncs) / 1000, abs=0.002), name
    assert f.saving_ns <= sum(s.dur for s in syncs), "never more than the waits"
    assert set(f.measured["calls"]) == {s.name for s in syncs}


def test_the_hotspot_shares_are_the_raw_kernels(case):
    name, found, ref = case
    f = found.rule("kernel_hotspot")
    if f is None:
        return
    totals = ref.kernel_totals()
    total = sum(totals.values())
    top = sorted(totals.items(), key=lambda kv: -kv[1])[: len(f.measured["kernels"])]
    assert [k["op"] for k in f.measured["kernels"]] == [n for n, _ in top], name
    for row, (_, ns) in zip(f.measured["kernels"], top):
        assert row["share_of_device_time"] == pytest.approx(ns / total, abs=1e-4)
    assert f.measured["share_of_device_time"] >= found.scope["limits"]["hotspot_kernel_share"]


def test_every_finding_is_bounded_and_points_at_real_events(case):
    name, found, ref = case
    n = len(read_trace(next(p for p in FILES if p.name.startswith(name))))
    for f in found.findings:
        assert 0 < f.saving_share <= 1.0, (name, f.rule)
        assert all(0 <= e < n for e in f.evidence.events)
        assert f.title and f.action


def _docs_table() -> dict[str, list[str]]:
    rows = {}
    text = DOCS.read_text()
    block = text[text.index("<!-- advise-real-traces -->"):]
    for line in block.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] and not cells[0].startswith("-"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_the_docs_table_is_what_the_engine_says(case):
    name, found, _ = case
    rows = _docs_table()
    assert name in rows, f"{name} missing from the table in docs/atrace.md"
    _, verdict, top, saving = rows[name][:4]
    assert verdict == found.verdict
    if found.findings:
        f = found.findings[0]
        assert top.startswith(f.rule)
        assert float(saving.replace(",", "").split()[0]) == pytest.approx(f.saving_ns / 1000, rel=0.01, abs=1)
    else:
        assert top == "none" and saving == "-"
