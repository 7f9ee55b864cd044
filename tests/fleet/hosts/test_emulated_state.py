"""EMULATOR_STATE: where the emulated fleet's monitors and trace captures keep and read
their hosts' state (fleet.hosts.emulated_fleet.state_store)."""

import subprocess
import sys

import pytest

from emulator.state_store import FileStateStore, RedisStateStore
from fleet.hosts import emulated_fleet
from tests.support.processes import ROOT, child_env
from traces import writers

pytestmark = pytest.mark.usefixtures("clean_redis")


def test_the_default_keeps_files_under_the_state_folder(fleet_settings):
    store = emulated_fleet.state_store()
    assert isinstance(store, FileStateStore) and store.directory == fleet_settings.EMULATOR_STATE_DIR
    emulated_fleet.host_monitor("host-00").poll()
    assert (fleet_settings.EMULATOR_STATE_DIR / "host-00.json").exists()


def test_with_redis_machines_with_folders_of_their_own_see_one_anothers_faults(fleet_settings, tmp_path, clean_redis):
    """Two "machines": each its own state folder, the same Redis. A fault injected through
    one is polled by the other, and read by a trace capture's view of the host."""
    fleet_settings.EMULATOR_STATE = "redis"
    fleet_settings.EMULATOR_STATE_DIR = tmp_path / "one"
    one = emulated_fleet.host_monitor("host-00")
    serial = one.devices[0].serial
    one.poll()
    one.inject_fault(serial, "overheat")
    emulated_fleet.host_monitor.cache_clear()
    fleet_settings.EMULATOR_STATE_DIR = tmp_path / "two"
    two = emulated_fleet.host_monitor("host-00")
    assert two is not one and isinstance(two.host.store, RedisStateStore)
    two.poll()
    assert "overheat" in two.faults(serial)
    captured = writers.emulated_host("host-00")
    captured.sync()
    assert "overheat" in captured.state(serial).faults
    assert clean_redis.exists(f"{fleet_settings.REDIS_KEY_PREFIX}:emulator:host-00")
    assert not (tmp_path / "one").exists() and not (tmp_path / "two").exists()  # nothing on either disk


def test_an_unknown_store_stops_the_start():
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=child_env(EMULATOR_STATE="nfs", DJANGO_SETTINGS_MODULE="dashboard.settings"))
    assert done.returncode != 0
    assert "EMULATOR_STATE='nfs' is neither file nor redis" in done.stderr
