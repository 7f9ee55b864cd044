"""The ladder's decisions as plain functions: the same answers production and the replay get."""

from fleet.asicmon import ladder_rules as lr


def can_run(rung):
    return None


def test_first_rung_is_the_catalogues():
    assert lr.next_rung("reset_device", 0, None, 3, can_run) == ("reset_device", False, ())


def test_a_cause_that_came_back_climbs_above_the_last_repair():
    assert lr.next_rung("restart_application", 1, "reset_device", 3, can_run)[0] == "reboot_host"
    assert lr.next_rung("reboot_host", 1, "restart_application", 3, can_run)[0] == "reboot_host"


def test_spent_budget_pulls_for_inspection():
    assert lr.next_rung("restart_application", 3, "reset_device", 3, can_run) == ("inspect_hardware", True, ())


def test_skipped_rungs_and_needs_person():
    def no_reset(rung):
        return "no reset declared" if rung == "reset_device" else None

    assert lr.next_rung("reset_device", 0, None, 3, no_reset) == (
        "reboot_host", False, (("reset_device", "no reset declared"),))
    rung, spent, skipped = lr.next_rung("reset_device", 0, None, 3, lambda r: "none here")
    assert (rung, spent, len(skipped)) == ("needs_person", False, 2)


def test_breaker_needs_both_the_minimum_and_the_share():
    assert not lr.breaker_trips(2, 10, 3, 0.1)
    assert lr.breaker_trips(3, 10, 3, 0.1)
    assert not lr.breaker_trips(3, 3200, 3, 0.1)
    assert lr.breaker_trips(321, 3200, 3, 0.1)


def test_recommends_pull_at_the_threshold():
    assert lr.recommends_pull(3, 3) and not lr.recommends_pull(2, 3)


def test_the_blast_radius_holds_a_repair_on_top_of_another_of_the_same_workload():
    assert lr.blast_radius_holds(["job-a"], {}, 1) is None  # nothing else under repair
    assert lr.blast_radius_holds(["job-a"], {"job-b": 3}, 1) is None  # other workloads do not count
    assert lr.blast_radius_holds(["job-a"], {"job-a": 1}, 1) == ("job-a", 1, 1)
    assert lr.blast_radius_holds(["job-a"], {"job-a": 1}, 2) is None
    # a host reboot taking eight devices of one job goes alone, never on top of another repair of it
    assert lr.blast_radius_holds(["job-a"] * 8, {}, 1) is None
    assert lr.blast_radius_holds(["job-a"] * 8 + ["", "job-b"], {"job-b": 1, "job-a": 1}, 1) == ("job-a", 1, 8)
    assert lr.blast_radius_holds(["", ""], {"": 5}, 1) is None  # no workload, no radius


def test_the_gate_waits_climbs_or_returns():
    assert lr.gate_step(False, 10.0, 300.0, None) == lr.GATE_WAIT  # not back yet
    assert lr.gate_step(False, 301.0, 300.0, None) == lr.GATE_CLIMB  # not back in time
    assert lr.gate_step(True, 20.0, 300.0, None) == lr.GATE_WAIT  # its check still runs
    assert lr.gate_step(True, 20.0, 300.0, (False, "dcgmi diag failed")) == lr.GATE_CLIMB
    assert lr.gate_step(True, 999.0, 300.0, (True, "passed")) == lr.GATE_RETURN
    assert lr.gate_step(True, 20.0, 300.0, (None, "not validated")) == lr.GATE_RETURN


def test_without_a_diagnostic_a_device_returns_unvalidated_on_its_health_alone():
    from fleet.choices import Health

    passed, detail = lr.check_on_health(Health.WARNING, "no diagnostic for gpu")
    assert passed is None and detail == "not validated: no diagnostic for gpu; back on health warning"
    assert lr.check_on_health(Health.HEALTHY, "x")[0] is None
    assert lr.check_on_health(Health.CRITICAL, "x")[0] is False
    assert lr.check_on_health(None, "x") == (False, "x; health None")
