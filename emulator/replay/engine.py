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
from dataclasses import dataclass, field

from emulator.replay.classes import Signal, load_classes, signal_for
from emulator.replay.history import Fault
from fleet.asicmon import ladder_rules as lr

__all__ = ["POLICIES", "JobResult", "Outcome", "PolicyResult", "Settings", "VirtualClock", "replay"]

POLICIES = ("asicmon", "none", "reboot")


@dataclass
class Settings:
    nodes: int = 400
    devices_per_node: int = 8  # an assumption for the shared history: it does not say
    horizon_s: float | None = None  # default: the history's last end
    # Detection (virtual seconds from the fault's start to the event that shows it).
    xid_detect_s: float = 2.0  # the kernel-log follower reads the Xid line
    poll_s: float = 15.0  # a health rule on a polled metric fires on the next poll
    hung_detect_s: float = 30.0  # a read that does not answer times out
    person_delay_s: float = 4 * 3600.0  # a person notices (no automation; invisible faults)
    # The ladder (defaults: dashboard/settings.py's).
    max_attempts: int = 3
    window_s: float = 86400.0
    breaker_share: float = 0.1
    breaker_min_devices: int = 3
    breaker_window_s: float = 600.0
    offender_incidents: int = 3
    offender_window_s: float = 30 * 86400.0
    unavailable_rungs: tuple[str, ...] = ()  # rungs no host can run (skipped)
    rung_s: dict = field(default_factory=lambda: {"restart_application": 60.0, "reset_device": 120.0,
                                                  "reboot_host": 600.0})
    check_s: float = 120.0  # the gate's check after a repair
    # Jobs: sizes in servers; the rest of the fleet is the spare pool.
    jobs: tuple[int, ...] = (128,) + (8,) * 30
    checkpoint_s: float = 1800.0
    restart_s: float = 600.0
    # A job's own watchdog (e.g. NCCL's timeout) that restarts it without the failed server
    # whatever the policy does; None: a job waits for the policy to take the server out.
    job_watchdog_s: float | None = None


class VirtualClock:
    """The replay's only clock: it moves when the replay says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, to: float) -> float:
        self.now = max(self.now, to)
        return self.now


@dataclass
class Outcome:
    fault: Fault
    signal: Signal
    device: int  # the device index on its server (-1: the whole server)
    detect_s: float  # absolute virtual time
    isolate_s: float
    back_s: float
    rungs: list[tuple[str, str]] = field(default_factory=list)  # (rung, outcome)
    person: bool = False
    seen_by_monitor: bool = False


@dataclass
class JobResult:
    size: int
    productive_s: float = 0.0
    interruptions: int = 0
    lost_s: Counter = field(default_factory=Counter)  # by reason: checkpoint, detection, restart, capacity

    def ettr(self, horizon: float) -> float:
        return self.productive_s / horizon if horizon else 1.0


@dataclass
class PolicyResult:
    policy: str
    outcomes: list[Outcome]
    device_out_s: dict[tuple[str, int], float]  # (server, device) -> seconds out of service
    device_spans: dict[tuple[str, int], list[tuple[float, float]]]  # when, merged
    flagged: dict[tuple[str, int], float]  # repeat offenders -> when flagged
    breaker_trips: int
    jobs: list[JobResult]
    lost_by_class: Counter  # GPU-seconds lost to jobs, by fault class


def _device(fault: Fault, sig: Signal, per_node: int) -> int:
    if sig.node_wide:
        return -1
    return zlib.crc32(f"{fault.node}/{fault.kind}".encode()) % per_node


def _detect_after(sig: Signal, s: Settings) -> float | None:
    return {"xid": s.xid_detect_s, "metric": s.poll_s, "hung": s.hung_detect_s}.get(sig.kind)


class _Asicmon:
    """The ladder's rules on the replay's clock."""

    def __init__(self, s: Settings, fleet_devices: int) -> None:
        self.s, self.fleet = s, fleet_devices
        self.tried: dict[tuple, list[tuple[float, str]]] = defaultdict(list)  # (device, cause) -> (t, rung)
        self.taken: list[tuple[float, tuple]] = []  # repairs the breaker counts
        self.paused_until = -1.0
        self.trips = 0
        self.hardware: dict[tuple, list[float]] = defaultdict(list)
        self.flagged: dict[tuple, float] = {}

    def _unavailable(self, rung: str) -> str | None:
        return "not available on these hosts (setting)" if rung in self.s.unavailable_rungs else None

    def _breaker_holds(self, t: float, dev: tuple) -> bool:
        if t < self.paused_until:
            return True
        recent = {d for when, d in self.taken if t - self.s.breaker_window_s <= when <= t} | {dev}
        if lr.breaker_trips(len(recent), self.fleet, self.s.breaker_min_devices, self.s.breaker_share):
            self.trips += 1
            self.paused_until = t + self.s.person_delay_s  # until an operator resumes it
            return True
        return False

    def handle(self, o: Outcome, dev: tuple) -> None:
        s, sig, t = self.s, o.signal, o.detect_s
        if sig.hardware:
            seen = [w for w in self.hardware[dev] if w >= t - s.offender_window_s] + [t]
            self.hardware[dev].append(t)
            if dev not in self.flagged and lr.recommends_pull(len(seen), s.offender_incidents):
                self.flagged[dev] = t
        if sig.start == "ignore":
            o.rungs.append(("ignore", "the catalogue asks for no action"))
            _person(o, s)
            return
        o.isolate_s = t
        start = sig.start
        climbing = False
        while True:
            # Repairs already started by now (an earlier fault's climb may still be ahead).
            done = [(w, r) for w, r in self.tried[(dev, sig.cause)] if t - s.window_s <= w <= t]
            rung, spent, skipped = lr.next_rung(start, len(done), done[-1][1] if done else None, s.max_attempts,
                                                self._unavailable)
            o.rungs.extend((r, "skipped") for r, _ in skipped)
            if rung not in lr.REPAIRS:
                why = "budget spent" if spent else "climbed" if climbing else "came back" if done else "first rung"
                o.rungs.append((rung, why))
                o.person = True
                o.back_s = max(o.fault.end_s, t)
                return
            if self._breaker_holds(t, dev):
                o.rungs.append((rung, "held: breaker"))  # it stays in service, its errors pending
                _person(o, s)
                return
            self.tried[(dev, sig.cause)].append((t, rung))
            self.taken.append((t, dev))
            t += s.rung_s[rung] + s.check_s
            if sig.cured_by is not None and lr.rung_index(rung) >= lr.rung_index(sig.cured_by):
                o.rungs.append((rung, "cured"))
                o.back_s = t
                return
            o.rungs.append((rung, "check failed"))
            start, climbing = lr.LADDER[min(lr.rung_index(rung) + 1, len(lr.LADDER) - 1)], True


def _person(o: Outcome, s: Settings, *, isolated: bool = False) -> None:
    noticed = o.fault.start_s + s.person_delay_s
    if not isolated:
        o.isolate_s = max(noticed, o.detect_s)
    o.person = True
    o.back_s = max(o.fault.end_s, noticed)


def _policy(name: str, faults: list[Fault], s: Settings, classes: dict[str, Signal], nodes: list[str]) -> PolicyResult:
    clock = VirtualClock()
    brain = _Asicmon(s, s.nodes * s.devices_per_node)
    outcomes = []
    for f in faults:
        clock.advance(f.start_s)
        sig = signal_for(classes, f.kind)
        dev = _device(f, sig, s.devices_per_node)
        after = _detect_after(sig, s)
        o = Outcome(f, sig, dev, f.start_s, f.start_s, f.end_s, seen_by_monitor=after is not None)
        if name == "none" or after is None:
            o.detect_s = f.start_s + s.person_delay_s
            _person(o, s)
        elif name == "reboot":
            o.detect_s = o.isolate_s = f.start_s + after
            cured = sig.cured_by is not None
            if cured:
                o.rungs.append(("reboot_host", "cured"))
                o.back_s = o.detect_s + s.rung_s["reboot_host"]
            else:
                loops = max(1, int(max(0.0, s.person_delay_s - after) // (s.rung_s["reboot_host"] + after)) + 1)
                o.rungs.extend([("reboot_host", "not cured")] * loops)
                _person(o, s, isolated=True)
        else:
            o.detect_s = f.start_s + after
            brain.handle(o, (f.node, dev))
        outcomes.append(o)
    spans = _device_time(outcomes, s, name)
    out = {k: sum(b - a for a, b in v) for k, v in spans.items()}
    return PolicyResult(name, outcomes, out, spans, brain.flagged if name == "asicmon" else {}, brain.trips, [], Counter())


def _device_time(outcomes: list[Outcome], s: Settings, policy: str) -> dict[tuple[str, int], list]:
    """Each device's spans out of service, merged and cut at the horizon."""
    spans: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for o in outcomes:
        devices = range(s.devices_per_node) if o.device < 0 else [o.device]
        for d in devices:
            spans[(o.fault.node, d)].append((o.fault.start_s, o.back_s))
        t = o.detect_s
        for rung, result in o.rungs:  # a host reboot takes the server's other devices too
            if rung == "reboot_host" and result in ("cured", "check failed", "not cured") and o.device >= 0:
                for d in range(s.devices_per_node):
                    if d != o.device:
                        spans[(o.fault.node, d)].append((t, t + s.rung_s["reboot_host"]))
            if rung in s.rung_s:
                t += s.rung_s[rung] + (s.check_s if policy == "asicmon" else 0)
    horizon = _horizon(outcomes, s)
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
        for o in self.r.outcomes:
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
    out = {}
    for name in policies:
        if name not in POLICIES:
            raise ValueError(f"no policy {name!r} (known: {', '.join(POLICIES)})")
        result = _policy(name, faults, s, classes, nodes)
        horizon = _horizon(result.outcomes, s)
        result.jobs = _Jobs(result, s, order, horizon).run()
        out[name] = result
    return out
