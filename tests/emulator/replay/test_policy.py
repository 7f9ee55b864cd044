"""Asicmon's policy in a replay asks the ladder's own rules: the blast radius holds a repair
while another device of the same job is under repair, the gate climbs past a device that
does not answer after the check timeout and returns one with no diagnostic on its health,
and a repeat offender is pulled for inspection. Every number is worked out by hand."""

from emulator.replay.engine import replay
from emulator.replay.history import DAY, Fault
from emulator.replay.policy import PULL_KIND
from tests.emulator.replay.test_engine import LOST, tiny

XID13 = "GPU/GPU xid Error"  # Xid 13: restart the application, which cures it
TIMEOUT = "GPU/nvidia-smi Timeout"  # hung: starts at a reset, which cannot reach it; a reboot cures it


def test_the_blast_radius_holds_a_second_repair_of_the_same_job_until_the_first_returns():
    faults = [Fault("n1", 1000.0, 1060.0, XID13), Fault("n2", 1010.0, 1070.0, XID13)]
    one_job = replay(faults, tiny(nodes=2, jobs=(2,)), ["asicmon"])["asicmon"].outcomes
    # n1: seen at 1002, restart 60 s + the gate's check 120 s: back at 1182.
    assert one_job[0].rungs == [("restart_application", "cured")] and one_job[0].back_s == 1182.0
    # n2 (same job) seen at 1012 waits, in service with its errors pending, for n1 to return;
    # then the same 180 s: 1362.
    assert one_job[1].rungs == [("restart_application", "held: blast radius"), ("restart_application", "cured")]
    assert one_job[1].isolate_s == 1182.0 and one_job[1].back_s == 1182.0 + 180
    # Two jobs of one server each: nothing holds n2.
    two_jobs = replay(faults, tiny(nodes=2, jobs=(1, 1)), ["asicmon"])["asicmon"].outcomes
    assert two_jobs[1].rungs == [("restart_application", "cured")] and two_jobs[1].back_s == 1012.0 + 180


def test_a_device_that_does_not_answer_is_climbed_past_after_the_check_timeout():
    o = replay([Fault("n1", 2500.0, 9000.0, TIMEOUT)], tiny(), ["asicmon"])["asicmon"].outcomes[0]
    # seen at 2530 (the read times out); a reset (120 s) ends at 2650; still hung: the gate
    # climbs at the first poll past its 300 s timeout, 2650 + 315 = 2965; a host reboot
    # (600 s) and its check (120 s): back at 3685.
    assert o.rungs == [("reset_device", "not answering"), ("reboot_host", "cured")]
    assert o.back_s == 3685.0 and o.reboots == [2965.0]


def test_without_a_diagnostic_a_device_returns_on_its_health_at_the_next_poll():
    o = replay([Fault("n1", 2500.0, 2500.0 + DAY, LOST)], tiny(diagnostic=False), ["asicmon"])["asicmon"].outcomes[0]
    assert o.rungs == [("reboot_host", "cured, not validated")]
    assert o.back_s == 2502.0 + 600 + 15  # the reboot, then one poll


def test_a_repeat_offender_is_pulled_for_inspection_and_its_next_fault_finds_it_out():
    starts = [DAY, 2 * DAY, 3 * DAY, 3.5 * DAY]  # Xid 79 is a hardware fault: three flag the device
    faults = [Fault("n1", t, t + 60, LOST) for t in starts]
    s = tiny(horizon_s=10 * DAY, inspection_s=DAY)
    r = replay(faults, s, ["asicmon"])["asicmon"]
    flagged_at = 3 * DAY + 2  # the third Xid read
    assert list(r.flagged.values()) == [flagged_at]
    (pull,) = r.pulls
    assert (pull.fault.kind, pull.fault.start_s, pull.back_s) == (PULL_KIND, flagged_at, flagged_at + DAY)
    assert r.outcomes[3].rungs == [("inspect_hardware", "pulled already")]
    device = (pull.fault.node, pull.device)
    # out from the third fault's start, through its repair, to the end of the inspection
    assert (3 * DAY, flagged_at + DAY) in r.device_spans[device]
    kept = replay(faults, tiny(horizon_s=10 * DAY, pull_offenders=False), ["asicmon"])["asicmon"]
    assert kept.pulls == [] and kept.flagged == r.flagged
    assert kept.outcomes[3].rungs != [("inspect_hardware", "pulled already")]
