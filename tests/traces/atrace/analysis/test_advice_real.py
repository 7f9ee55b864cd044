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
from traces.atrace.analysis.advice.words import duration

FILES = exact.chrome_trace_files()
DOCS = Path(__file__).resolve().parents[4] / "docs" / "atrace.md"
#: Host calls that wait for the device, by name: synchronize calls, event waits, the
#: synchronous copy APIs (not the *Async ones).
_WAIT = re.compile(r"synchroni[sz]e|WaitEvent|EventQuery|^(cuda|hip|cu|mtia)Memcpy(?!.*Async)", re.IGNORECASE)
_COLLECTIVE_WAIT = re.compile(r"^(c10d::|_c10d_functional::|c10d_functional::)?wait(_tensor)?$|ProcessGroup\w*::wait|"
                              r"Work::wait|::barrier$|^barrier$", re.IGNORECASE)
HOST_RULES = {"launch_bound", "graph_replays", "host_sync", "input_stall"}
DEVICE_RULES = {"kernel_hotspot", "exposed_communication", "copies"}
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

    def host_waits(self, min_ns: int) -> list[exact.Slice]:
        """Host calls that waited for the device, in the steps: by name (synchronize, event
        waits, synchronous copies, collective waits), and asynchronous copy calls that
        returned only after their copy ended."""
        copy_of = {d.args.get("correlation"): d for d in self.device if d.cat == "gpu_memcpy"}
        copy_of.pop(None, None)
        out = []
        for st, _ in self.windows:
            lo, hi = (st.ts, st.end) if self.has_steps else (-(1 << 62), 1 << 62)
            for s in self.slices:
                if not (lo <= s.ts < hi) or s.dur < min_ns:
                    continue
                copy = copy_of.get(s.args.get("correlation")) if s.cat in exact.LAUNCH_CATS else None
                if (s.cat in exact.LAUNCH_CATS and (_WAIT.search(s.name) or (
                        copy is not None and s.end >= copy.end and copy.ts > s.ts))) or (
                        s.cat == "cpu_op" and _COLLECTIVE_WAIT.search(s.name)):
                    out.append(s)
        return out

    def step_union(self) -> list[tuple[int, int]]:
        """The steps' times as disjoint intervals: each from its start (or from when the device
        finished earlier work) to the end of its device work."""
        spans = []
        for st, mine in self.windows:
            if not mine:
                spans.append((st.ts, st.end))
                continue
            first = min(d.ts for d in mine)
            tail = max((d.end for d in self.device if d.ts < st.ts), default=st.ts)
            spans.append((max(st.ts, min(tail, first)), max(st.end, max(d.end for d in mine))))
        return _merge(spans)

    def shares(self, min_wait_ns: int) -> tuple[float, float]:
        """Of the steps' time (counted once): the share the device is busy, and the share the
        host waits for it while it idles."""
        steps = self.step_union()
        total = _length(steps)
        busy = _merge([(d.ts, d.end) for _, mine in self.windows for d in mine])
        waits = _merge([(s.ts, s.end) for s in self.host_waits(min_wait_ns)])
        busy_in = _length(_intersect(busy, steps))
        wait_idle = _length(_intersect(_subtract(_intersect(waits, steps), busy), steps))
        return busy_in / total if total else 0.0, wait_idle / total if total else 0.0

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


def _merge(spans) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(spans) -> int:
    return sum(b - a for a, b in spans)


def _intersect(x, y) -> list[tuple[int, int]]:
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def _subtract(x, y) -> list[tuple[int, int]]:
    """x less y (both disjoint, sorted)."""
    out = []
    for a, b in x:
        for c, d in y:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


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


def _min_wait(found) -> int:
    return int(found.scope["limits"]["sync_min_wait_us"] * 1000)


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


def test_the_verdict_and_top_finding_follow_from_the_raw_shares(case):
    """From the raw events alone: a trace without device work is "cpu-only"; a device busy
    most of the steps' time (counted once) is device-bound and its top finding (if any) is
    about the device; a device idle most of it is not device-bound, and its top finding is
    the host's (or the verdict says it is unclear); a host that waits for an idle device a
    tenth of the time or more has the wait among the findings."""
    name, found, ref = case
    if not ref.device:
        assert found.verdict == "cpu-only", name
        return
    busy, waiting = ref.shares(_min_wait(found))
    device = sum(p["share"] for p in found.account["parts"] if p["part"] in ("kernels", "copies", "communication"))
    assert device == pytest.approx(busy, abs=0.01), name
    if busy >= 0.8:
        assert found.verdict == "device-bound", (name, busy)
        assert not found.findings or found.findings[0].rule in DEVICE_RULES, (name, found.rules)
    elif busy < 0.5:
        assert found.verdict != "device-bound", (name, busy)
        if found.verdict != "unclear" and found.findings:
            assert found.findings[0].rule in HOST_RULES, (name, found.rules)
    if waiting >= 0.1:
        assert found.rule("host_sync") is not None, (name, waiting)


def test_every_verdict_comes_with_its_reason(case):
    """The summary carries the top finding, or where the time goes; the account's parts
    add up to the steps' time within 1 %."""
    name, found, _ = case
    assert found.reason, name
    assert "Top finding:" in found.summary or "Where the time goes" in found.summary, found.summary
    parts = found.account["parts"]
    assert sum(p["share"] for p in parts) == pytest.approx(1.0, abs=0.01), name
    assert sum(p["time_us"] for p in parts) == pytest.approx(found.account["time_us"], rel=0.01), name
    if found.verdict in ("mixed", "unclear"):
        assert "because" in found.reason or "yet" in found.reason or "records nothing" in found.reason, found.reason


def test_the_launch_numbers_are_the_raw_events(case):
    name, found, ref = case
    f = found.rule("launch_bound")
    launched = ref.launched_kernels()
    if f is None:  # then the raw events say the device is busy enough, or nothing is launched eagerly,
        # or the device's idle time is the host waiting for it (a wait, not launches)
        busy, waiting = ref.shares(_min_wait(found))
        assert not launched or ref.device_busy() >= 0.5 or found.rule("graph_replays") or (
            busy + waiting >= 0.5 and found.rule("host_sync")), name
        return
    steps = len(ref.windows)
    assert f.measured["kernels_per_step"] == pytest.approx(len(launched) / steps, abs=0.05), name
    kernels = [d.dur for d in launched if _computation(d)]
    assert f.measured["median_kernel_us"] == pytest.approx(float(Decimal(statistics.median(kernels)) / 1000), abs=0.001)
    assert f.measured["device_busy_share"] == pytest.approx(ref.device_busy(), abs=0.005)
    # An upper bound: never more than the steps' time their busiest stream is not busy.
    assert 0 < f.saving_ns <= ref.idle_bound() * found.scope["scale"], name


def test_the_host_waits_are_the_raw_events(case):
    name, found, ref = case
    f = found.rule("host_sync")
    waits = ref.host_waits(_min_wait(found))
    if f is None:  # then the host waits (if at all) while the device works: nothing to save
        assert ref.shares(_min_wait(found))[1] < 0.1, name
        return
    assert f.measured["wait_total_us"] == pytest.approx(sum(s.dur for s in waits) / 1000, abs=0.002), name
    assert f.saving_ns <= sum(s.dur for s in waits) * found.scope["scale"] + 1, "never more than the waits"
    assert set(f.measured["calls"]) == {s.name for s in waits}


def test_the_hotspot_shares_are_the_raw_kernels(case):
    name, found, ref = case
    f = found.rule("kernel_hotspot")
    totals = ref.kernel_totals()
    total = sum(totals.values())
    if f is None:  # then the top kernels hold too little, or the device does not bound the path
        top3 = sum(sorted(totals.values(), reverse=True)[:3])
        assert not total or top3 < 0.5 * total or found.shares.get("device", 0) < 0.5, name
        return
    top = sorted(totals.items(), key=lambda kv: -kv[1])[: len(f.measured["kernels"])]
    assert [k["op"] for k in f.measured["kernels"]] == [n for n, _ in top], name
    for row, (_, ns) in zip(f.measured["kernels"], top):
        assert row["share_of_device_time"] == pytest.approx(ns / total, abs=1e-4)
    assert f.measured["share_of_device_time"] >= found.scope["limits"]["hotspot_kernel_share"]


def test_a_cpu_only_trace_says_where_the_cpu_time_goes(case):
    """Without device work the account names the host operator with the most self time,
    computed here from the raw slices of every thread."""
    name, found, ref = case
    if ref.device:
        assert found.verdict != "cpu-only", name
        return
    own: dict[str, int] = defaultdict(int)
    host = [s for s in ref.slices if s.cat in ("cpu_op", *exact.LAUNCH_CATS)
            or (s.cat == "user_annotation" and re.match(r"(gloo|nccl|rccl|c10d|mpi):", s.name))]
    for s in host:
        inside = [c for c in host if c is not s and (c.pid, c.tid) == (s.pid, s.tid) and s.ts <= c.ts and c.end <= s.end
                  and not any(m is not s and m is not c and (m.pid, m.tid) == (s.pid, s.tid)
                              and s.ts <= m.ts and m.end <= s.end and m.ts <= c.ts and c.end <= m.end
                              and m.dur > c.dur for m in host)]
        if s.cat not in ("cpu_op", "user_annotation"):
            continue
        own[s.name] += s.dur - sum(c.dur for c in inside)
    top = max(own, key=own.get)
    assert found.account["host_operators"][0]["op"] == top, name
    assert found.account["host_operators"][0]["self_us"] == pytest.approx(own[top] / 1000, rel=0.01)


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
        assert saving.startswith(duration(f.saving_ns)), (saving, duration(f.saving_ns))
    else:
        assert top.startswith("none") and saving == "-"
