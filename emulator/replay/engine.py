"""The replay: a fault history played onto an emulated fleet under a repair policy, on a
virtual clock (seconds from the history's start; nothing sleeps, nothing reads the wall clock).

Phase 1, the policy: each fault, in the order it starts, is seen (or not) by the device
monitor, and the policy decides what happens to the device: `asicmon` asks the ladder's own
rules (`fleet.asicmon.ladder_rules`: the rung, the attempt budget, the breaker, the offender
threshold), `none` waits for a person, `reboot` reboots the host on any error. The result is,
per fault, when it was detected, isolated and when the server was back, and each device's
time out of service.

Phase 2, the jobs: gang-scheduled training jobs on whole servers, interrupted when a server
they run on fails, stalled until the policy takes the server out, restarted from their last
checkpoint on healthy servers (their own and spares), waiting when there are not enough.
"""

from __future__ import annotations

import heapq
import zlib
from collections import Counter, defaultdict

from emulator.replay.classes import Signal, load_classes, signal_for
from emulator.replay.history import Fault
from emulator.replay.model import JobResult, Outcome, PolicyResult, Settings, VirtualClock
from emulator.replay.policy import AsicmonPolicy, wait_for_person

__all__ = ["POLICIES", "JobResult", "Outcome", "PolicyResult", "Settings", "VirtualClock", "replay"]

POLICIES = ("asicmon", "none", "reboot")


def _device(fault: Fault, sig: Signal, per_node: int) -> int:
    if sig.node_wide:
        return -1
    return zlib.crc32(f"{fault.node}/{fault.kind}".encode()) % per_node


def _detect_after(sig: Signal, s: Settings) -> float | None:
    return {"xid": s.xid_detect_s, "metric": s.poll_s, "hung": s.hung_detect_s}.get(sig.kind)


def _policy(name: str, faults: list[Fault], s: Settings, classes: dict[str, Signal],
            workload_of: dict[str, str]) -> PolicyResult:
    clock = VirtualClock()
    brain = AsicmonPolicy(s, s.nodes * s.devices_per_node, workload_of)
    outcomes = []
    for f in faults:
        clock.advance(f.start_s)
        sig = signal_for(classes, f.kind)
        dev = _device(f, sig, s.devices_per_node)
        after = _detect_after(sig, s)
        o = Outcome(f, sig, dev, f.start_s, f.start_s, f.end_s, seen_by_monitor=after is not None)
        if name == "none" or after is None:
            o.detect_s = f.start_s + s.person_delay_s
            wait_for_person(o, s)
        elif name == "reboot":
            o.detect_s = o.isolate_s = f.start_s + after
            period = s.rung_s["reboot_host"] + after
            if sig.cured_by is not None:
                o.rungs.append(("reboot_host", "cured"))
                o.back_s = o.detect_s + s.rung_s["reboot_host"]
                o.reboots.append(o.detect_s)
            else:
                loops = max(1, int(max(0.0, s.person_delay_s - after) // period) + 1)
                o.rungs.extend([("reboot_host", "not cured")] * loops)
                o.reboots.extend(o.detect_s + k * period for k in range(loops))
                wait_for_person(o, s, isolated=True)
        else:
            o.detect_s = f.start_s + after
            brain.handle(o, (f.node, dev))
        outcomes.append(o)
    pulls = brain.pulls if name == "asicmon" else []
    spans = _device_time(outcomes + pulls, s, _horizon(outcomes, s))
    out = {k: sum(b - a for a, b in v) for k, v in spans.items()}
    return PolicyResult(name, outcomes, out, spans, brain.flagged if name == "asicmon" else {}, brain.trips, [],
                        Counter(), pulls)


def _device_time(outcomes: list[Outcome], s: Settings, horizon: float) -> dict[tuple[str, int], list]:
    """Each device's spans out of service, merged and cut at the horizon."""
    spans: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for o in outcomes:
        devices = range(s.devices_per_node) if o.device < 0 else [o.device]
        for d in devices:
            spans[(o.fault.node, d)].append((o.fault.start_s, o.back_s))
        if o.device < 0:
            continue
        for t in o.reboots:  # a host reboot takes the server's other devices too
            for d in range(s.devices_per_node):
                if d != o.device:
                    spans[(o.fault.node, d)].append((t, t + s.rung_s["reboot_host"]))
    return {k: _merge(v, horizon) for k, v in spans.items()}


def _merge(spans: list[tuple[float, float]], horizon: float) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        b = min(b, horizon)
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _horizon(outcomes, s: Settings) -> float:
    if s.horizon_s is not None:
        return s.horizon_s
    return max((o.fault.end_s for o in outcomes), default=0.0)


def first_placement(order: list[str], jobs: tuple[int, ...]) -> dict[str, str]:
    """Each server's job as the jobs are first placed (servers taken in ``order``): the
    workload of its devices, which the blast radius counts."""
    it = iter(order)
    return {next(it): f"job-{j}" for j, size in enumerate(jobs) for _ in range(size)}


class _Jobs:
    """Phase 2: the jobs on the policy's server outages."""

    def __init__(self, result: PolicyResult, s: Settings, nodes: list[str], horizon: float) -> None:
        if sum(s.jobs) > len(nodes):
            raise ValueError(f"jobs need {sum(s.jobs)} servers, the fleet has {len(nodes)}")
        self.r, self.s, self.nodes, self.horizon = result, s, nodes, horizon
        self.events: list = []
        self.seq = 0
        self.down: Counter = Counter()
        self.jobs = [JobResult(size) for size in s.jobs]
        self.owner: dict[str, int] = {}
        self.members: list[set[str]] = []
        it = iter(nodes)
        for j, size in enumerate(s.jobs):
            self.members.append({next(it) for _ in range(size)})
            for n in self.members[-1]:
                self.owner[n] = j
        count = len(self.jobs)
        self.state = ["running"] * count
        self.since = [0.0] * count  # running: the run's start; others: since when in that state
        self.why: list[str | None] = [None] * count  # the fault class that stopped it
        self.token = [0] * count

    def push(self, t: float, kind: int, data) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, data))

    def lose(self, j: int, reason: str, seconds: float, kind: str) -> None:
        self.jobs[j].lost_s[reason] += seconds
        self.r.lost_by_class[kind] += seconds * self.jobs[j].size * self.s.devices_per_node

    def stop(self, j: int, t: float, kind: str) -> None:
        if self.state[j] == "running":
            ran = t - self.since[j]
            saved = (ran // self.s.checkpoint_s) * self.s.checkpoint_s
            self.jobs[j].productive_s += saved
            self.lose(j, "checkpoint", ran - saved, kind)
            self.jobs[j].interruptions += 1
        elif self.state[j] == "restarting":
            self.lose(j, "restart", t - self.since[j], self.why[j] or kind)
            self.token[j] += 1
        else:
            return  # stalled or waiting already: the clock of that loss keeps running
        self.state[j], self.since[j], self.why[j] = "stalled", t, kind
        self.token[j] += 1
        if self.s.job_watchdog_s is not None:
            self.push(t + self.s.job_watchdog_s, 4, (j, self.token[j]))

    def fill(self, j: int, t: float) -> bool:
        """Restarts job ``j`` on its healthy servers and spares; False when too few."""
        for m in [m for m in self.members[j] if self.down[m]]:
            self.members[j].discard(m)
            self.owner.pop(m)
        need = self.s.jobs[j] - len(self.members[j])
        if need > 0:
            free = [n for n in self.nodes if n not in self.owner and self.down[n] == 0]
            if len(free) < need:
                return False
            for n in free[:need]:
                self.owner[n] = j
                self.members[j].add(n)
        self.state[j], self.since[j] = "restarting", t
        self.token[j] += 1
        self.push(t + self.s.restart_s, 3, (j, self.token[j]))
        return True

    def taken_out(self, t: float, node: str | None, job: int | None = None) -> None:
        j = self.owner.get(node) if job is None else job
        if j is None or self.state[j] != "stalled":
            return
        self.lose(j, "detection", t - self.since[j], self.why[j])
        if not self.fill(j, t):
            self.state[j], self.since[j] = "waiting", t

    def back(self, t: float, node: str) -> None:
        self.down[node] -= 1
        for j in sorted(range(len(self.jobs)), key=lambda j: -self.s.jobs[j]):
            if self.state[j] == "waiting":
                waited = t - self.since[j]
                if self.fill(j, t):
                    self.lose(j, "capacity", waited, self.why[j])

    def _event(self, t: float, kind: int, data) -> None:
        if kind == 0:  # a server fails
            self.down[data.fault.node] += 1
            if data.fault.node in self.owner:
                self.stop(self.owner[data.fault.node], t, data.fault.kind)
        elif kind == 1:  # the policy took it out
            self.taken_out(t, data.fault.node)
        elif kind == 2:  # back
            self.back(t, data.fault.node)
        elif data[1] != self.token[data[0]]:
            return  # the job moved on since
        elif kind == 4:  # the job's own watchdog
            self.taken_out(t, None, data[0])
        else:  # restarted
            j = data[0]
            self.lose(j, "restart", t - self.since[j], self.why[j])
            self.state[j], self.since[j] = "running", t

    def run(self) -> list[JobResult]:
        for o in self.r.outcomes + self.r.pulls:
            self.push(o.fault.start_s, 0, o)  # down
            self.push(max(o.detect_s, o.isolate_s), 1, o)  # the policy took it out (the job learns)
            self.push(o.back_s, 2, o)  # up
        while self.events:
            t, _, kind, data = heapq.heappop(self.events)
            if t > self.horizon:
                break
            self._event(t, kind, data)
        for j in range(len(self.jobs)):
            if self.state[j] == "running":
                self.jobs[j].productive_s += self.horizon - self.since[j]
            else:
                reason = {"stalled": "detection", "waiting": "capacity", "restarting": "restart"}[self.state[j]]
                self.lose(j, reason, self.horizon - self.since[j], self.why[j] or "unknown")
        return self.jobs


def replay(faults: list[Fault], settings: Settings | None = None, policies=POLICIES,
           classes: dict[str, Signal] | None = None) -> dict[str, PolicyResult]:
    s = settings or Settings()
    classes = classes or load_classes()
    nodes_seen = list(dict.fromkeys(f.node for f in faults))
    if len(nodes_seen) > s.nodes:
        raise ValueError(f"the history names {len(nodes_seen)} servers, the fleet has {s.nodes}")
    # Servers that never failed keep names of their own; the jobs take servers in this order.
    nodes = nodes_seen + [f"spare-{i:04d}" for i in range(s.nodes - len(nodes_seen))]
    order = sorted(nodes, key=lambda n: zlib.crc32(n.encode()))
    if sum(s.jobs) > len(nodes):
        raise ValueError(f"jobs need {sum(s.jobs)} servers, the fleet has {len(nodes)}")
    out = {}
    for name in policies:
        if name not in POLICIES:
            raise ValueError(f"no policy {name!r} (known: {', '.join(POLICIES)})")
        result = _policy(name, faults, s, classes, first_placement(order, s.jobs))
        horizon = _horizon(result.outcomes, s)
        result.jobs = _Jobs(result, s, order, horizon).run()
        out[name] = result
    return out
