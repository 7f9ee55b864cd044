"""The latest snapshot of every device in Redis: written per cycle, never rolled back by an
older cycle's late write, read back by id, and forgotten."""

from fleet.polling.snapshots import forget_snapshots, read_snapshot, read_snapshots, write_snapshots

T0 = 1_700_000_000.0


def test_snapshots_are_read_back_with_the_cycle_they_came_from(clean_redis):
    assert write_snapshots(T0, {1: {"temperature_c": 50.0}, 2: {"temperature_c": 60.0}}) == 2
    assert read_snapshots([1, 2, 3]) == {
        1: {"temperature_c": 50.0, "cycle": T0},
        2: {"temperature_c": 60.0, "cycle": T0},
    }
    assert read_snapshot(3) is None
    assert set(read_snapshots()) == {1, 2}
    assert read_snapshots([]) == {} and write_snapshots(T0, {}) == 0


def test_a_late_write_of_an_older_cycle_does_not_roll_a_device_back(clean_redis):
    write_snapshots(T0 + 10, {1: {"temperature_c": 70.0}})
    assert write_snapshots(T0, {1: {"temperature_c": 50.0}, 2: {"temperature_c": 55.0}}) == 1
    assert read_snapshot(1)["temperature_c"] == 70.0
    assert read_snapshot(2)["temperature_c"] == 55.0
    assert write_snapshots(T0 + 10, {1: {"temperature_c": 71.0}}) == 1  # the same cycle again
    assert read_snapshot(1)["temperature_c"] == 71.0


def test_a_forgotten_device_starts_again_from_any_cycle(clean_redis):
    write_snapshots(T0 + 10, {1: {"temperature_c": 70.0}})
    forget_snapshots([1])
    forget_snapshots([])
    assert read_snapshot(1) is None
    assert write_snapshots(T0, {1: {"temperature_c": 50.0}}) == 1
