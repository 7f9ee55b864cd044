"""One emulated host: its state file (exact round trips, what travels with it, a save cut
short, state of another fleet), its devices' drivers, resets and reboots."""

import json

import pytest

from emulator import EmulatedHost, FleetConfig
from emulator.host import items_per_second

CFG = FleetConfig(seed=5, hosts=2, devices_per_host=3)
T0 = 1_700_000_000.0


def polled_host(state_dir, name: str = "host-01") -> EmulatedHost:
    host = EmulatedHost(CFG, name, state_dir)
    with host.locked():
        host.sync(T0)
        host.advance(T0 + 30)
        host.save()
    return host


def _serial(host, dtype):
    return next(d.serial for d in host.spec.devices if d.type == dtype)


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
    assert {s: st.to_json() for s, st in other.states.items()} == {
        s: st.to_json() for s, st in host.states.items()
    }
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


def test_state_of_another_fleet_or_no_state_at_all_is_refused_naming_the_file(tmp_path):
    path = polled_host(tmp_path).state_path
    other_seed = EmulatedHost(FleetConfig(seed=6, hosts=2, devices_per_host=3), "host-01", tmp_path)
    with pytest.raises(
        ValueError, match="holds state of another fleet or format; move it away"
    ) as refused:
        other_seed.sync(T0)
    assert str(path) in str(refused.value)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="holds no readable state"):
        EmulatedHost(CFG, "host-01", tmp_path).sync(T0)


def test_a_device_added_to_the_layout_since_the_save_starts_fresh_next_to_the_saved_ones(tmp_path):
    polled_host(
        tmp_path, "host-00"
    )  # the first host's first devices keep their serials in a larger layout
    bigger = EmulatedHost(FleetConfig(seed=5, hosts=2, devices_per_host=4), "host-00", tmp_path)
    with bigger.locked():
        assert bigger.sync(T0 + 500) is True
    added = bigger.spec.devices[3].serial
    assert len(bigger.states) == 4
    assert bigger.state(added).t == T0 + 30  # created at the saved state's time
    assert all(bigger.state(d.serial).t == T0 + 30 for d in bigger.spec.devices[:3])


def test_a_host_without_a_store_keeps_its_state_in_memory():
    host = EmulatedHost(CFG, "host-00")
    assert host.sync(T0) is False and len(host.states) == 3
    with host.locked():
        host.advance(T0 + 10)
        host.save()  # nowhere to write: nothing happens
    assert host.now == T0 + 10 and host.state_path is None and host.state_dir is None
    with pytest.raises(KeyError, match="no device 'NOPE' on host-00"):
        host.state("NOPE")
    with pytest.raises(KeyError, match="no device 'NOPE' on host-00"):
        host.binding("NOPE")


def test_hang_blocks_then_times_out_and_reboot_takes_the_device_away():
    host = EmulatedHost(
        FleetConfig(seed=2, hosts=1, devices_per_host=3, hang_block_s=0.05), "host-00"
    )
    host.sync(T0)
    host.advance(T0 + 60)
    video = _serial(host, "video")
    files = host.binding(video).files
    host.inject_fault(video, "hang")
    with pytest.raises(TimeoutError):
        files.read_text("power")
    host.reboot(video)
    with pytest.raises(OSError, match="no such device"):
        files.read_text("power")
    host.advance(T0 + 60 + host.cfg.reboot_s + 1)
    assert files.read_text("power").endswith(" mW\n")


def test_a_host_reboot_takes_every_device_away_and_keeps_only_persistent_faults():
    host = EmulatedHost(CFG, "host-00")
    host.sync(T0)
    host.advance(T0 + 30)
    gpu, video = _serial(host, "gpu"), _serial(host, "video")
    host.inject_fault(gpu, "overheat", persistent=True)
    host.inject_fault(video, "memory_leak")
    host.reboot_host()
    assert all(state.rebooting for state in host.states.values())
    assert set(host.state(gpu).faults) == {"overheat"} and not host.state(video).faults
    host.clear_fault(gpu, "overheat")
    assert not host.state(gpu).faults


def test_only_file_based_devices_are_written_out_as_folders(tmp_path):
    host = EmulatedHost(CFG, "host-00")
    host.sync(T0)
    (folder,) = host.materialise(tmp_path)  # the video device; the others are libraries
    assert folder.parent == tmp_path / "host-00"
    assert (folder / "serial").read_text() == f"{_serial(host, 'video')}\n"


def test_every_type_serves_a_positive_rate_that_depends_on_its_software():
    rates = {
        (t, sw): items_per_second(t, sw)
        for t in ("video", "inference", "gpu")
        for sw in ("1.5", "2.1")
    }
    assert all(rate > 0 for rate in rates.values())
    assert any(rates[(t, "1.5")] != rates[(t, "2.1")] for t in ("video", "inference", "gpu"))
