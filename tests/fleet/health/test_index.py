"""The fleet's compact health index in Redis: a letter and a time per device, read back as
health levels, unknown once a device's polls stop."""

from fleet.health import index

T0 = 1_700_000_000.0


def test_health_is_read_back_as_recorded_while_it_is_fresh(clean_redis, settings):
    settings.POLL_INTERVAL = 10
    index.record(
        {
            1: {"health": "healthy", "sample_ts": T0},
            2: {"health": "critical", "sample_ts": T0 + 1.7},
            3: {"sample_ts": T0},  # not assessed
        },
        T0,
    )
    assert index.read(now=T0 + 5) == {1: "healthy", 2: "critical", 3: "unknown"}


def test_a_device_whose_polls_stopped_becomes_unknown_and_a_forgotten_one_is_absent(
    clean_redis, settings
):
    settings.POLL_INTERVAL = 10
    index.record({1: {"health": "warning", "sample_ts": T0}, 2: {"health": "healthy"}}, T0 + 20)
    assert index.read(now=T0 + 30) == {1: "warning", 2: "healthy"}  # 2 dated by the cycle
    assert index.read(now=T0 + 31) == {1: "unknown", 2: "healthy"}  # 3 intervals without a poll
    index.forget([2])
    index.forget([])
    assert index.read(now=T0 + 31) == {1: "unknown"}


def test_the_worst_health_sorts_first():
    assert sorted(index.SEVERITY, key=index.SEVERITY.get) == [
        "critical",
        "warning",
        "unknown",
        "healthy",
    ]
