"""Asicmon's policy in a replay: each fault the device monitor sees is decided by the ladder's
own rules (`fleet.asicmon.ladder_rules`), asked with what the virtual fleet holds at that
virtual time: the rung and the attempt budget (`next_rung`), the breaker (`breaker_trips`),
the blast radius (`blast_radius_holds`: a repair waits while another device of the same job
is under repair), the validation gate after each rung (`gate_step`, `check_on_health`) and
the repeat-offender threshold (`recommends_pull`), a flagged device then pulled for
inspection. Nothing here restates a rule; it only says what the rules are asked."""

from __future__ import annotations

from collections import Counter, defaultdict

from emulator.replay.classes import Signal
from emulator.replay.history import Fault
from emulator.replay.model import Outcome, Settings
from fleet.asicmon import ladder_rules as lr

__all__ = ["PULL_KIND", "AsicmonPolicy", "wait_for_person"]

PULL_KIND = "Repeat offender pulled for inspection"
_PULL = Signal("pull", "", lr.INSPECT_HARDWARE, "repeat offender", True, None, False)

Device = tuple[str, int]  # (server, device index; -1 the whole server)


def wait_for_person(o: Outcome, s: Settings, *, isolated: bool = False) -> None:
    """The fault waits for a person, who notices after the setting's delay and repairs it at
    the history's own time."""
    noticed = o.fault.start_s + s.person_delay_s
    if not isolated:
        o.isolate_s = max(noticed, o.detect_s)
    o.person = True
    o.back_s = max(o.fault.end_s, noticed)


class AsicmonPolicy:
    """The ladder's rules on the replay's clock. ``workload_of``: each server's job (its
    devices' workload), as the jobs are first placed."""

    def __init__(self, s: Settings, fleet_devices: int, workload_of: dict[str, str] | None = None) -> None:
        self.s, self.fleet = s, fleet_devices
        self.workload_of = workload_of or {}
        self.tried: dict[tuple, list[tuple[float, str]]] = defaultdict(list)  # (device, cause) -> (t, rung)
        self.taken: list[tuple[float, Device]] = []  # repairs the breaker counts
        # (from, to, device): the devices the ladder has under repair (a pulled one is not)
        self.under_repair: list[tuple[float, float, Device]] = []
        self.paused_until = -1.0
        self.trips = 0
        self.hardware: dict[Device, list[float]] = defaultdict(list)
        self.flagged: dict[Device, float] = {}
        self.pulls: list[Outcome] = []
        self._pulled_until: dict[Device, float] = {}

    # -- what the rules are asked with -------------------------------------------------------
    def _unavailable(self, rung: str) -> str | None:
        return "not available on these hosts (setting)" if rung in self.s.unavailable_rungs else None

    def _breaker_holds(self, t: float, dev: Device) -> bool:
        if t < self.paused_until:
            return True
        recent = {d for when, d in self.taken if t - self.s.breaker_window_s <= when <= t} | {dev}
        if lr.breaker_trips(len(recent), self.fleet, self.s.breaker_min_devices, self.s.breaker_share):
            self.trips += 1
            self.paused_until = t + self.s.person_delay_s  # until an operator resumes it
            return True
        return False

    def _taken(self, dev: Device, rung: str) -> list[Device]:
        if rung == lr.REBOOT_HOST:
            return [(dev[0], d) for d in range(self.s.devices_per_node)]
        return [dev]

    def _may_go_at(self, t: float, dev: Device, rung: str) -> float:
        """When the blast radius lets the rung go: ``t``, or when the repairs of the same job
        that hold it back have ended."""
        taken = self._taken(dev, rung)
        workloads = [self.workload_of.get(node, "") for node, _ in taken]
        while True:
            others = [(b, d) for a, b, d in self.under_repair if a <= t < b and d not in taken]
            busy = Counter(self.workload_of.get(d[0], "") for _, d in others)
            held = lr.blast_radius_holds(workloads, busy, self.s.max_per_workload)
            if held is None:
                return t
            t = min(b for b, d in others if self.workload_of.get(d[0], "") == held[0])

    def _gate(self, t: float, rung: str, sig: Signal) -> tuple[str, float, str]:
        """The gate after ``rung`` started at ``t``: (its step, when, what the rung's outcome is called)."""
        s = self.s
        done = t + s.rung_s[rung]
        cured = sig.cured_by is not None and lr.rung_index(rung) >= lr.rung_index(sig.cured_by)
        if not (cured or sig.answers_uncured):  # not back: climbs at the first poll past the timeout
            waited = s.check_timeout_s + s.poll_s
            return lr.gate_step(False, waited, s.check_timeout_s, None), done + waited, "not answering"
        if s.diagnostic:
            verdict, at = (cured, "diagnostic"), done + s.check_s
        else:  # on its health at the next poll: a fault the monitor sees keeps it critical
            verdict, at = lr.check_on_health("healthy" if cured else "critical", "no diagnostic"), done + s.poll_s
        step = lr.gate_step(True, at - t, s.check_timeout_s, verdict)
        said = "cured" if verdict[0] else "cured, not validated" if step == lr.GATE_RETURN else "check failed"
        return step, at, said

    # -- one fault ------------------------------------------------------------------------
    def handle(self, o: Outcome, dev: Device) -> None:
        s, sig, t = self.s, o.signal, o.detect_s
        if t < self._pulled_until.get(dev, -1.0):  # out for inspection already: a person has it
            o.isolate_s = t
            o.rungs.append((lr.INSPECT_HARDWARE, "pulled already"))
            o.person = True
            o.back_s = max(o.fault.end_s, t)
            return
        if sig.hardware:
            self._count_hardware(dev, t)
        if sig.start == "ignore":
            o.rungs.append(("ignore", "the catalogue asks for no action"))
            wait_for_person(o, s)
            return
        o.isolate_s = t
        start, climbing = sig.start, False
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
                break  # out of the ladder's hands: pulled, no longer under repair
            if self._breaker_holds(t, dev):
                o.rungs.append((rung, "held: breaker"))  # it stays in service, its errors pending
                wait_for_person(o, s)
                return
            go = self._may_go_at(t, dev, rung)
            if go > t:
                o.rungs.append((rung, "held: blast radius"))
                if not climbing:  # its errors wait, pending: the device stays in service until then
                    o.isolate_s = go
                t = go
            self.tried[(dev, sig.cause)].append((t, rung))
            self.taken.append((t, dev))
            if rung == lr.REBOOT_HOST:
                o.reboots.append(t)
            step, t, said = self._gate(t, rung, sig)
            o.rungs.append((rung, said))
            if step == lr.GATE_RETURN:
                o.back_s = t
                break
            start, climbing = lr.LADDER[min(lr.rung_index(rung) + 1, len(lr.LADDER) - 1)], True
        self.under_repair.append((o.isolate_s, t, dev))  # under repair while its rungs run

    def _count_hardware(self, dev: Device, t: float) -> None:
        s = self.s
        seen = [w for w in self.hardware[dev] if w >= t - s.offender_window_s] + [t]
        self.hardware[dev].append(t)
        if dev in self.flagged or not lr.recommends_pull(len(seen), s.offender_incidents):
            return
        self.flagged[dev] = t
        if s.pull_offenders:  # a person acts on the flag: the device goes out for inspection
            pull = Outcome(Fault(dev[0], t, t + s.inspection_s, PULL_KIND), _PULL, dev[1], t, t, t + s.inspection_s,
                           rungs=[(lr.INSPECT_HARDWARE, "repeat offender")], person=True)
            self.pulls.append(pull)
            self._pulled_until[dev] = t + s.inspection_s
