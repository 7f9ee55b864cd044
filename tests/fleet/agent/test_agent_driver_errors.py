"""The agent follows the kernel log (a file named by AGENT_KERNEL_LOG) in a child process:
real-format lines, malformed ones and a flood reach the database as a handful of events,
routed to the device at their PCI address; amdgpu's RAS counters are read at each poll."""

import time

import pytest

from fleet.agent import queues
from fleet.agent.discovery import agent_host, forget
from fleet.agent.registration import register_host
from fleet.agent.run import save_error_state, start_kernel_log
from fleet.models import DriverError, Host
from fleet.polling import poller
from tests.support.hwmon import PCI_GPU

pytestmark = pytest.mark.django_db

AMD = "hwmon:node-a:0000:03:00.0:amdgpu"


@pytest.fixture
def agent_with_log(agent_settings, seeded_fleet, tmp_path):
    ras = agent_settings.HWMON_ROOT.parents[1] / "devices/pci0000:00/0000:00:01.1" / PCI_GPU / "ras"
    ras.mkdir()
    (ras / "umc_err_count").write_text("ue: 0\nce: 0\n")
    log_file = tmp_path / "kern.log"
    log_file.write_text("old line from before the agent started\n")
    agent_settings.AGENT_KERNEL_LOG = str(log_file)
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    pump = start_kernel_log(agent_host())
    yield Host.objects.get(name="node-a"), log_file, ras, pump
    pump.stop()


def _wait_for(pump, lines: int, within_s: float = 90.0) -> None:  # the follower takes spare CPU only
    deadline = time.monotonic() + within_s
    while pump.stats.lines < lines and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.6)  # the last flush's routing


@pytest.mark.integration  # a child process follows the log
def test_the_agent_reads_real_lines_malformed_ones_and_a_flood(agent_with_log):
    host, log_file, ras, pump = agent_with_log
    time.sleep(3.0)  # the child process starts and takes its place at the end of the file
    flood = "NVRM: Xid (PCI:0000:3b:00): 95, pid={}, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No\n"
    with log_file.open("a") as f:
        f.write(f"[ 5.1] amdgpu {PCI_GPU}: amdgpu: ring gfx_0.0.0 timeout, signaled seq=12, emitted seq=14\n")
        f.write("[ 5.2] NVRM: Xid (PCI:0000:3b:00): seventy-nine, garbage\n")
        f.write("[ 5.3] NVRM: Xid (PCI:0000:3b:00): 777, pid=1, name=x, A code nobody has seen\n")
        f.writelines(flood.format(i) for i in range(100_000))
    _wait_for(pump, 100_003)
    assert (pump.stats.lines, pump.stats.malformed) == (100_003, 1)
    (ras / "umc_err_count").write_text("ue: 0\nce: 0\n")
    poller.poll_agent_host(host.id, poller.current_cycle())  # the first RAS reading
    (ras / "umc_err_count").write_text("ue: 2\nce: 0\n")
    poller.poll_agent_host(host.id, poller.current_cycle())
    rows = {r.code: r for r in DriverError.objects.filter(host="node-a")}
    assert set(rows) == {"ring_timeout", "777", "95", "umc.ue"}
    assert rows["ring_timeout"].serial == AMD and rows["umc.ue"].serial == AMD and rows["umc.ue"].count == 2
    assert rows["95"].count == 100_000 and rows["95"].serial == ""  # no GPU of ours at 3b: kept, unrouted
    assert not rows["777"].known and rows["777"].raw.endswith("A code nobody has seen")
    assert DriverError.objects.filter(host="node-a").count() == 4


@pytest.mark.integration  # the follower is a child process (and multiprocessing's resource tracker outlives it)
def test_the_follower_takes_the_share_of_a_core_its_setting_allows(agent_settings, tmp_path):
    (tmp_path / "kern.log").write_text("")
    agent_settings.AGENT_KERNEL_LOG, agent_settings.AGENT_KERNEL_LOG_DUTY = str(tmp_path / "kern.log"), 0.25
    pump = start_kernel_log(agent_host())
    try:
        assert pump.duty == 0.25
    finally:
        pump.stop()


def test_an_empty_setting_follows_nothing(agent_settings):
    agent_settings.AGENT_KERNEL_LOG = ""
    assert start_kernel_log(agent_host()) is None


def test_the_agent_labels_its_devices_with_its_workload(agent_settings, seeded_fleet):
    from fleet.models import Device

    agent_settings.AGENT_WORKLOAD = "llama-train-7"
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    assert set(Device.objects.filter(host__name="node-a").values_list("workload", flat=True)) == {"llama-train-7"}


@pytest.mark.integration  # the agent's follower is a child process, stopped and started again
def test_a_restarted_agent_loses_no_line_and_no_ras_count_logged_while_it_was_down(agent_with_log):
    host, log_file, ras, pump = agent_with_log
    time.sleep(3.0)  # the child process starts and takes its place at the end of the file
    line = "NVRM: Xid (PCI:0000:3b:00): 48, pid={}, name=python3, An uncorrectable double bit error\n"
    with log_file.open("a") as f:
        f.writelines(line.format(i) for i in range(3))
    _wait_for(pump, 3)
    poller.poll_agent_host(host.id, poller.current_cycle())  # stores the 3; the RAS counters' first reading
    save_error_state(pump)  # as the running agent does every poll interval
    pump.stop()  # the agent stops...
    with log_file.open("a") as f:  # ...and while it is down the driver logs on
        f.writelines(line.format(i) for i in range(3, 7))
    (ras / "umc_err_count").write_text("ue: 2\nce: 0\n")
    forget()  # a new agent process: its discovery and state from nothing but the state file
    again = start_kernel_log(agent_host())
    try:
        _wait_for(again, 4)
        assert again.stats.lines == 4  # the lines after the last one read, none read twice
        poller.poll_agent_host(host.id, poller.current_cycle())
    finally:
        again.stop()
    rows = {r.code: r for r in DriverError.objects.filter(host="node-a")}
    assert rows["48"].count == 7 and rows["umc.ue"].count == 2  # nothing lost across the restart
