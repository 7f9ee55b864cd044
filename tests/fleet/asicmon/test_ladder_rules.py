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
