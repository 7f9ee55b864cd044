"""The host's one state file: exact round trips, what travels with it, and a save cut short."""

import json

from emulator import EmulatedHost, FleetConfig

CFG = FleetConfig(seed=5, hosts=2, devices_per_host=3)
T0 = 1_700_000_000.0


def polled_host(state_dir) -> EmulatedHost:
    host = EmulatedHost(CFG, "host-01", state_dir)
    with host.locked():
        host.sync(T0)
        host.advance(T0 + 30)
        host.save()
    return host


def test_another_process_reads_back_exactly_what_was_saved_even_past_64_bits(tmp_path):
    host = polled_host(tmp_path)
    with host.locked():
        serial = next(iter(host.states))
        host.states[serial].core_total_cycles[0] = 2**70 + 3  # beyond what a fast encoder takes
        host.extra = {"monitors": {"x": [[1, 2.5, T0]]}}
        host.save()
    other = EmulatedHost(CFG, "host-01", tmp_path)
    with other.locked():
        assert other.sync(T0) is True
    assert {s: st.to_json() for s, st in other.states.items()} == {s: st.to_json() for s, st in host.states.items()}
    assert other.states[serial].core_total_cycles[0] == 2**70 + 3
    assert other.extra == {"monitors": {"x": [[1, 2.5, T0]]}}
    with other.locked():
        assert other.sync(T0) is False  # nothing new: not read again


def test_a_later_save_by_another_process_is_picked_up_and_ours_is_not_reread(tmp_path):
    first, second = polled_host(tmp_path), EmulatedHost(CFG, "host-01", tmp_path)
    with second.locked():
        assert second.sync(T0) is True
        second.advance(T0 + 60)
        second.save()
    with first.locked():
        assert first.sync(T0) is True
        assert first.now == T0 + 60
        first.advance(T0 + 65)
        first.save()
        assert first.sync(T0) is False


def test_a_save_cut_short_after_removing_the_old_file_is_finished_by_the_next_reader(tmp_path):
    host = polled_host(tmp_path)
    path = host.state_path
    side = path.with_name(f".{path.name}.new")
    path.rename(side)  # the state of a save killed between its unlink and its rename
    other = EmulatedHost(CFG, "host-01", tmp_path)
    with other.locked():
        assert other.sync(T0 + 999) is True
    assert other.now == T0 + 30  # the saved devices, not fresh ones
    assert path.exists() and not side.exists()
    assert json.loads(path.read_text())["host"] == "host-01"
