"""A tiny history whose every number is worked out by hand here, under each policy; the
ladder's budget and breaker on the virtual clock; no wall clock read during a replay."""

import time

import pytest

from emulator.replay.engine import Settings, replay
from emulator.replay.history import DAY, Fault

LOST = "GPU/GPU Lost"  # Xid 79: the catalogue starts at a host reboot, which cures it
DBE = "GPU/GPU DBE(Double Bit ECC) > Threshold"  # Xid 48: starts at a reset, no rung cures it


def tiny(**kw):
    base = dict(nodes=1, devices_per_node=2, jobs=(1,), checkpoint_s=1000.0, restart_s=100.0,
                person_delay_s=3600.0, horizon_s=10000.0)
    base.update(kw)
    return Settings(**base)


ONE = [Fault("n1", 2500.0, 2500.0 + DAY, LOST)]


def test_asicmon_detects_reboots_cures_and_the_job_loses_what_the_hand_says():
    r = replay(ONE, tiny(), ["asicmon"])["asicmon"]
    o = r.outcomes[0]
    assert o.detect_s - 2500 == 2  # the kernel-log follower reads the Xid line
    assert o.isolate_s == 2502  # under repair at once
    assert o.rungs == [("reboot_host", "cured")]  # Xid 79's first rung cures it
    assert o.back_s == 2502 + 600 + 120  # reboot, then the gate's check
    # The faulty device out 2500..3222 (722 s), its neighbour for the host reboot 2502..3102 (600 s).
    assert sorted(r.device_out_s.values()) == [600.0, 722.0]
    job = r.jobs[0]
    # Ran 2500 s, 2 checkpoints saved (2000 s), 500 s lost; stalled 2 s until detection;
    # no spare: waits 720 s for its server; restarts 100 s; runs 3322..10000.
    assert dict(job.lost_s) == {"checkpoint": 500.0, "detection": 2.0, "capacity": 720.0, "restart": 100.0}
    assert job.productive_s == 2000 + (10000 - 3322)
    assert job.ettr(10000) == pytest.approx(0.8678)
    assert job.interruptions == 1


def test_no_automation_waits_for_a_person_and_the_history():
    r = replay(ONE, tiny(), ["none"])["none"]
    o = r.outcomes[0]
    assert (o.detect_s, o.isolate_s, o.back_s, o.person) == (6100.0, 6100.0, 2500.0 + DAY, True)
    assert o.rungs == []
    assert r.device_out_s == {("n1", o.device): 7500.0}  # to the horizon
    job = r.jobs[0]
    assert dict(job.lost_s) == {"checkpoint": 500.0, "detection": 3600.0, "capacity": 3900.0}
    assert job.ettr(10000) == pytest.approx(0.2)


def test_reboot_on_any_error_reboots_without_a_check():
    r = replay(ONE, tiny(), ["reboot"])["reboot"]
    o = r.outcomes[0]
    assert o.rungs == [("reboot_host", "cured")] and o.back_s == 2502 + 600
    job = r.jobs[0]
    assert dict(job.lost_s) == {"checkpoint": 500.0, "detection": 2.0, "capacity": 600.0, "restart": 100.0}
    assert job.ettr(10000) == pytest.approx(0.8798)


def test_reboot_on_any_error_loops_on_what_a_reboot_cannot_cure():
    o = replay([Fault("n1", 2500.0, 20000.0, DBE)], tiny(), ["reboot"])["reboot"].outcomes[0]
    # A reboot every 602 s for the hour until a person: 3598 // 602 + 1 = 6 reboots.
    assert o.rungs == [("reboot_host", "not cured")] * 6
    assert o.person and o.back_s == 20000.0


def test_asicmon_climbs_past_rungs_that_do_not_cure_and_pulls():
    o = replay([Fault("n1", 2500.0, 20000.0, DBE)], tiny(), ["asicmon"])["asicmon"].outcomes[0]
    assert o.rungs == [("reset_device", "check failed"), ("reboot_host", "check failed"),
                       ("inspect_hardware", "climbed")]
    assert o.person and o.back_s == 20000.0  # a person repairs it when the history says


def test_a_cause_that_comes_back_climbs_and_the_budget_pulls_the_fourth_within_a_day():
    xid = "GPU/GPU xid Error"  # Xid 13: starts at restarting the application, which cures it
    faults = [Fault("n1", t, t + 60, xid) for t in (1000.0, 5000.0, 9000.0, 13000.0)]
    outs = replay(faults, tiny(horizon_s=20000.0), ["asicmon"])["asicmon"].outcomes
    assert [o.rungs for o in outs] == [[("restart_application", "cured")], [("reset_device", "cured")],
                                       [("reboot_host", "cured")], [("inspect_hardware", "budget spent")]]
    # A day later the window has forgotten them: the first rung again.
    later = replay(faults[:1] + [Fault("n1", 1000.0 + DAY + 1, 1000.0 + DAY + 60, xid)],
                   tiny(horizon_s=2 * DAY), ["asicmon"])["asicmon"].outcomes
    assert later[1].rungs == [("restart_application", "cured")]


def test_gpu_lost_again_after_its_host_reboot_is_pulled():
    faults = [Fault("n1", t, t + 60, LOST) for t in (1000.0, 5000.0)]
    outs = replay(faults, tiny(), ["asicmon"])["asicmon"].outcomes
    assert outs[1].rungs == [("inspect_hardware", "came back")] and outs[1].person


def test_the_breaker_holds_the_third_device_within_its_window():
    faults = [Fault(n, 1000.0, 2000.0, LOST) for n in ("a", "b", "c")]
    r = replay(faults, tiny(nodes=3, jobs=()), ["asicmon"])["asicmon"]
    assert [o.rungs[-1] for o in r.outcomes] == [("reboot_host", "cured")] * 2 + [("reboot_host", "held: breaker")]
    assert r.breaker_trips == 1 and r.outcomes[2].person


def test_a_fault_no_device_shows_is_reported_invisible_and_left_to_a_person():
    o = replay([Fault("n1", 100.0, 200.0, "NIC/NIC Lost")], tiny(), ["asicmon"])["asicmon"].outcomes[0]
    assert not o.seen_by_monitor and o.device == -1 and o.detect_s == 3700.0 and o.rungs == []


def test_a_replay_reads_no_wall_clock(monkeypatch):
    def wall(*a, **k):
        raise AssertionError("the replay read the wall clock")

    from django.utils import timezone

    for name in ("time", "monotonic", "perf_counter", "sleep"):
        monkeypatch.setattr(time, name, wall)
    monkeypatch.setattr(timezone, "now", wall)
    faults = [Fault("n1", 2500.0, 20000.0, DBE), Fault("n1", 30000.0, 30100.0, LOST)]
    assert replay(faults, tiny(horizon_s=40000.0))["asicmon"].outcomes[1].rungs == [("reboot_host", "cured")]


def test_a_history_bigger_than_the_fleet_is_refused():
    with pytest.raises(ValueError, match="names 2 servers"):
        replay([Fault("a", 0, 1, LOST), Fault("b", 0, 1, LOST)], tiny())


def test_the_replays_ladder_defaults_are_the_fleets_settings():
    from django.conf import settings

    s = Settings()
    assert (s.max_attempts, s.window_s, s.breaker_share, s.breaker_min_devices, s.breaker_window_s,
            s.offender_incidents, s.offender_window_s, s.check_timeout_s, s.max_per_workload) == (
        settings.LADDER_MAX_ATTEMPTS, settings.LADDER_WINDOW_S, settings.LADDER_BREAKER_SHARE,
        settings.LADDER_BREAKER_MIN_DEVICES, settings.LADDER_BREAKER_WINDOW_S,
        settings.OFFENDER_HARDWARE_INCIDENTS, settings.OFFENDER_WINDOW_S, settings.LADDER_CHECK_TIMEOUT_S,
        settings.LADDER_MAX_PER_WORKLOAD)


def test_a_waiting_job_does_not_restart_on_a_server_that_failed_while_it_waited():
    # Two servers, one 2-server job, no spares. "a" fails at 1000 (back at 5000); "b" fails
    # at 2000 while the job waits and is back at 9000: the job restarts only at 9000.
    faults = [Fault("a", 1000.0, 5000.0, "NIC/NIC Lost"), Fault("b", 2000.0, 9000.0, "NIC/NIC Lost")]
    job = replay(faults, tiny(nodes=2, jobs=(2,), person_delay_s=100.0), ["none"])["none"].jobs[0]
    # Ran 1000 s (1 checkpoint), stalled 100 s, waits 1100..9000, restarts until 9100.
    assert dict(job.lost_s) == {"checkpoint": 0.0, "detection": 100.0, "capacity": 7900.0, "restart": 100.0}
    assert job.productive_s == 1000 + (10000 - 9100)


def test_a_fault_the_breaker_holds_stays_in_service_until_a_person():
    faults = [Fault(n, 1000.0, 2000.0, LOST) for n in ("a", "b", "c")]
    held = replay(faults, tiny(nodes=3, jobs=()), ["asicmon"])["asicmon"].outcomes[2]
    assert held.isolate_s == 1000.0 + 3600 and held.back_s == 1000.0 + 3600


def test_a_jobs_own_watchdog_restarts_it_on_a_spare_before_a_person_comes():
    import zlib

    # The job takes the first server in crc32 order; put the fault on that one.
    node = next(n for n in ("n1", "n2", "n3", "n4") if zlib.crc32(n.encode()) < zlib.crc32(b"spare-0000"))
    faults = [Fault(node, 2500.0, 2500.0 + DAY, "NIC/NIC Lost")]
    job = replay(faults, tiny(nodes=2, job_watchdog_s=300.0), ["none"])["none"].jobs[0]
    # 500 s since the checkpoint lost; the watchdog fires at 2800; the spare restarts it by 2900.
    assert dict(job.lost_s) == {"checkpoint": 500.0, "detection": 300.0, "restart": 100.0}
    assert job.productive_s == 2000 + (10000 - 2900)
