"""Asicmon monitors: the contract the Django side uses, the cache, time budgets, threads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from emulator import FleetConfig, fleet_layout
from fleet.asicmon import ALWAYS_PRESENT, CATALOGUE, DeviceMonitor
from fleet.asimov.loader import monitor_class_from_text
from fleet.hosts.emulated_monitors import HostMonitor

ROOT = Path(__file__).resolve().parents[3]
T0 = 1_700_000_000.0


def test_poll_returns_a_snapshot_per_device_with_the_contract_keys(tmp_path):
    cfg = FleetConfig(seed=42, hosts=2, devices_per_host=8)
    hm = HostMonitor.open(cfg, "host-01", state_dir=tmp_path)
    snaps = hm.poll(T0)
    snaps = hm.poll(T0 + 10)
    assert list(snaps) == [d.serial for d in fleet_layout(cfg)[1].devices]
    for serial, snap in snaps.items():
        assert set(ALWAYS_PRESENT) <= set(snap)
        assert set(snap) == set(CATALOGUE)
        assert 0 <= snap["device_utilization"] <= 1
        assert snap["driver_status"] == "ok" and snap["sample_ts"] == T0 + 10
        assert snap["memory_used_bytes"] <= snap["memory_total_bytes"]
        json.dumps(snap)  # JSON values only
        assert hm.monitor(serial).get("temperature_c") == snap["temperature_c"]
    assert (tmp_path / "host-01.json").exists()


def test_catalogue_entries_have_unit_kind_and_description():
    for name, counter in CATALOGUE.items():
        assert counter.name == name
        assert counter.kind in {"gauge", "counter", "info", "state"}
        assert counter.unit and counter.description
        if counter.kind == "state":
            assert counter.values
    assert CATALOGUE["temperature_c"].unit == "C"
    assert CATALOGUE["driver_status"].values == ("ok", "hung", "rebooting", "error")


def test_queries_read_the_cache_and_never_the_driver(tmp_path):
    cfg = FleetConfig(seed=1, hosts=1, devices_per_host=3, hang_block_s=0.5)
    hm = HostMonitor.open(cfg, "host-00", state_dir=tmp_path)
    hm.poll(T0)
    serial = hm.serials[0]
    hm.inject_fault(serial, "hang")  # any driver call would now block
    start = time.perf_counter()
    for _ in range(1000):
        hm.monitor(serial).get("temperature_c")
        hm.monitor(serial).snapshot()
    assert time.perf_counter() - start < 0.2
    with pytest.raises(KeyError, match="unknown counter"):
        hm.monitor(serial).get("temprature_c")


def test_hung_device_does_not_delay_the_others(tmp_path):
    # Bounds leave room for a loaded CI machine while staying well apart: the probe budget is
    # 0.5 s and the driver blocks for 4 s.
    cfg = FleetConfig(seed=3, hosts=1, devices_per_host=6, hang_block_s=4.0)
    hm = HostMonitor.open(cfg, "host-00", state_dir=tmp_path, probe_timeout=0.5)
    hm.poll(T0)
    hung = hm.serials[2]
    hm.inject_fault(hung, "hang")
    start = time.perf_counter()
    snaps = hm.poll(T0 + 10)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5 + 1.0  # the budget, not the 4 s the driver blocks
    assert snaps[hung]["driver_status"] == "hung"
    for serial, snap in snaps.items():
        if serial != hung:
            assert snap["driver_status"] == "ok" and snap["sample_ts"] == T0 + 10
            assert snap["probe_duration_s"] < 0.4
    start = time.perf_counter()
    snaps = hm.poll(T0 + 20)  # the hung probe is still blocked: no new wait at all
    assert time.perf_counter() - start < 0.4
    assert snaps[hung]["driver_status"] == "hung"


def test_a_probe_queued_behind_busy_probe_threads_is_not_hung(tmp_path, monkeypatch):
    """On a loaded machine with many hosts polled at once, probes wait for a probe thread:
    the budget counts from when a probe starts, so a healthy device is not marked hung
    (and rebooted by remediation) for the queue it waited in; a hung one still is."""
    from concurrent.futures import ThreadPoolExecutor

    from fleet.asicmon import monitor as monitor_module

    cfg = FleetConfig(seed=3, hosts=1, devices_per_host=3, hang_block_s=4.0)
    hm = HostMonitor.open(cfg, "host-00", state_dir=tmp_path, probe_timeout=0.5)
    hm.poll(T0)
    hung = hm.serials[0]
    hm.inject_fault(hung, "hang")
    one_thread = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(monitor_module, "_EXECUTOR", one_thread)
    release = threading.Event()
    one_thread.submit(release.wait, 5)  # the only probe thread is busy for 0.8 s, past the budget
    threading.Timer(0.8, release.set).start()
    healthy = hm.serials[1]
    assert hm.monitor(healthy).refresh(T0 + 5, timeout=0.5)["driver_status"] == "ok"
    start = time.perf_counter()
    assert hm.monitor(hung).refresh(T0 + 10, timeout=0.5)["driver_status"] == "hung"
    assert time.perf_counter() - start < 3.0  # its budget, not the 4 s its driver blocks
    one_thread.shutdown(wait=False)


TORN_SPEC = """
device torn
lib.dev_begin()
a = lib.dev_value()
b = lib.dev_value()
c = lib.dev_value()
d = lib.dev_value()
stats.temperature_c = a
stats.power_w = b
stats.memory_used_bytes = c
stats.memory_total_bytes = d
stats.clock_mhz = a + b
"""


class _GenerationLib:
    """Every value read during one refresh is that refresh's generation number."""

    def __init__(self) -> None:
        self.gen = 0

    def dev_begin(self) -> None:
        self.gen += 1

    def dev_value(self) -> int:
        time.sleep(0)  # invite a thread switch in the middle of a refresh
        return self.gen


def test_cache_reads_during_a_refresh_never_see_a_half_updated_snapshot():
    monitor = monitor_class_from_text(TORN_SPEC, "torn.asimov")(lib=_GenerationLib())
    monitor.refresh(T0)
    stop = threading.Event()
    torn: list[dict] = []
    seen = []

    def reader() -> None:
        while not stop.is_set():
            snap = monitor.snapshot()
            values = {
                snap["temperature_c"],
                snap["power_w"],
                snap["memory_used_bytes"],
                snap["memory_total_bytes"],
            }
            if len(values) != 1 or snap["clock_mhz"] != 2 * snap["temperature_c"]:
                torn.append(snap)
            seen.append(snap["temperature_c"])

    threads = [threading.Thread(target=reader) for _ in range(2)]
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, mid-refresh included
    try:
        for t in threads:
            t.start()
        for i in range(500):
            monitor.refresh(T0 + i)
    finally:
        stop.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(old_interval)
    assert not torn
    assert len(set(seen)) > 10  # the readers really overlapped with many refreshes


def test_periodic_refresh_runs_in_the_background():
    monitor = monitor_class_from_text(TORN_SPEC, "torn.asimov")(lib=_GenerationLib())
    monitor.start(interval=0.01)
    time.sleep(0.2)
    monitor.stop()
    assert monitor.refreshes >= 5
    assert monitor.get("driver_status") == "ok"


def test_rate_handles_wrap_and_reset():
    m = DeviceMonitor()
    assert m._rate(1, 2**32 - 100, 0.0, 2**32) is None
    assert m._rate(1, 50, 10.0, 2**32) == pytest.approx(15.0)  # wrapped: 150 counts in 10 s
    assert m._rate(2, 1000, 0.0) is None
    assert m._rate(2, 10, 10.0) is None  # went back without a wrap: a reset, no rate
    assert m._delta(3, 5, 0.0, 16) is None and m._delta(3, 2, 1.0, 16) == 13


def test_state_survives_a_worker_restart_and_matches_an_uninterrupted_run(tmp_path):
    cfg = FleetConfig(seed=11, hosts=1, devices_per_host=3)
    straight = HostMonitor.open(cfg, "host-00", state_dir=tmp_path / "a")
    for i in range(7):
        straight.poll(T0 + 10 * i)
    straight.inject_fault(straight.serials[0], "memory_leak")
    for i in range(7, 13):
        straight.poll(T0 + 10 * i)
    restarted = HostMonitor.open(cfg, "host-00", state_dir=tmp_path / "b")
    for i in range(7):
        restarted.poll(T0 + 10 * i)
    restarted.inject_fault(restarted.serials[0], "memory_leak")
    restarted = HostMonitor.open(cfg, "host-00", state_dir=tmp_path / "b")  # a new worker
    for i in range(7, 13):
        restarted.poll(T0 + 10 * i)
    a = json.loads((tmp_path / "a" / "host-00.json").read_text())["devices"]
    b = json.loads((tmp_path / "b" / "host-00.json").read_text())["devices"]
    for serial in a:
        for key in ("temperature_c", "leaked_bytes", "core_busy_us", "ecc_corrected", "energy_mj"):
            assert a[serial][key] == b[serial][key], (serial, key)
        assert a[serial]["faults"].keys() == b[serial]["faults"].keys()


POLLER = """
import sys
from pathlib import Path
from emulator import FleetConfig
from fleet.hosts.emulated_monitors import HostMonitor
cfg = FleetConfig(seed=5, hosts=3, devices_per_host=4)
hm = HostMonitor.open(cfg, sys.argv[1], state_dir=Path(sys.argv[2]))
for i in range(30):
    snaps = hm.poll(1_700_000_000.0 + 10 * i)
print(sum(s["driver_status"] == "ok" for s in snaps.values()))
"""


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_several_worker_processes_poll_different_hosts_of_one_fleet(tmp_path):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", POLLER, host, str(tmp_path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for host in ("host-00", "host-01", "host-02", "host-00")
    ]
    try:
        outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    finally:  # none left running, whatever happened
        for p in procs:
            p.kill()
            p.wait()
    assert all(p.returncode == 0 for p in procs)
    assert outputs == ["4"] * 4
    for host in ("host-00", "host-01", "host-02"):
        data = json.loads((tmp_path / f"{host}.json").read_text())
        assert data["t"] == 1_700_000_000.0 + 290


def test_rates_carry_on_when_another_process_polls_the_host_next(tmp_path):
    cfg = FleetConfig(seed=3, hosts=1, devices_per_host=3, types=("video", "inference", "gpu"))
    first = HostMonitor.open(cfg, "host-00", state_dir=tmp_path)
    t0 = time.time()
    first.poll(now=t0)
    # A second worker process (or a restarted one) that never polled this host before.
    second = HostMonitor.open(cfg, "host-00", state_dir=tmp_path)
    snaps = second.poll(now=t0 + 5.0)
    for serial, snap in snaps.items():
        assert snap["device_utilization"] is not None, serial
        assert snap["ecc_corrected_per_s"] is not None and snap["ecc_corrected_per_s"] >= 0, serial
    # A monitor on its own, with no shared state, has no rate at its first refresh.
    alone = HostMonitor.open(cfg, "host-00", state_dir=None)
    assert all(s["ecc_corrected_per_s"] is None for s in alone.poll(now=t0 + 10.0).values())


def test_a_background_probe_is_published_with_the_time_it_probed(tmp_path):
    """A known-hung device is probed in the background, and a probe's answer is published at a
    later poll. It must carry the time it was taken: published with the later poll's time, a
    "hung" from before a reboot (done meanwhile by another worker process) read as a device hung
    after the reboot, and remediation rebooted it again (seen in CI: two reboots of one device)."""
    cfg = FleetConfig(seed=3, hosts=1, devices_per_host=2, hang_block_s=0.6)
    hm = HostMonitor.open(cfg, "host-00", state_dir=tmp_path, probe_timeout=0.2)
    hm.poll(T0)
    hung = hm.serials[0]
    hm.inject_fault(hung, "hang")
    first = hm.poll(T0 + 10)[hung]  # over its budget: left running in the background
    assert first["driver_status"] == "hung" and first["sample_ts"] == T0 + 10
    blocked = hm.poll(T0 + 20)[hung]  # still blocked in the driver, as seen now
    assert blocked["driver_status"] == "hung" and blocked["sample_ts"] == T0 + 20
    time.sleep(0.8)  # the probe of T0 + 10 gives up: "hung", as of T0 + 10
    hm.reboot(hung)
    late = hm.poll(T0 + 30)[hung]
    assert late["driver_status"] == "hung"
    assert late["sample_ts"] == T0 + 10, "a probe's answer is as old as the probe"
    time.sleep(0.3)  # the probe started at T0 + 30 answers: the device is back
    back = hm.poll(T0 + 40)[hung]
    assert back["driver_status"] in {"ok", "rebooting"} and back["sample_ts"] == T0 + 30
