"""Control actions declared in Asimov specs (``action reboot = …``), the drivers' reset calls
behind them, and the specs that declare none."""

import errno

import pytest

from emulator import FleetConfig
from fleet.asicmon.monitor import ControlNotDeclared
from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.loader import monitor_class
from fleet.hosts.emulated_monitors import HostMonitor


def test_an_action_compiles_to_a_method_that_the_refresh_never_calls():
    clib = compile_spec(
        "device x\nonce h = lib.nx_open(index, out)\nstats.core_count = 1\naction reboot = lib.nx_reset(h)\n"
    )
    assert "ACTIONS = ('reboot',)" in clib.code
    assert "def _action_reboot(self):" in clib.code and "return lib.nx_reset(self._o_h)" in clib.code
    probe = clib.code.split("def _probe")[1].split("def _action_reboot")[0]
    assert "nx_reset" not in probe
    sysfs = compile_spec('device y\nstats.core_count = 1\naction reboot = write("reset", "1")\n')
    assert "return self.files.write_text('reset', '1')" in sysfs.code


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ('device x\naction explode = write("reset", "1")\n', "unknown control action 'explode'", 2, 8),
        ('device x\naction reboot = write("reset", "1")\naction reboot = write("reset", "1")\n', "action reboot is declared twice", 3, 8),
        ("device x\naction reboot = 42\n", "an action is a driver call", 2, 17),
        ('device x\naction reboot = write("reset", 1)\n', "write() takes a path and a value, both strings", 2, 17),
        ("device x\nb = file(\"b\", int)\nstats.core_count = b\naction reboot = lib.reset(b)\n", "arguments are known before it is called", 4, 27),
        ("device x\naction reboot = file(\"reset\")\n", "an action calls write() or a function of lib", 2, 17),
    ],
)
def test_bad_actions_are_reported_with_line_and_column(text, message, line, column):
    errors = check_spec(text)
    assert errors and message in errors[0].message, [e.message for e in errors]
    assert (errors[0].line, errors[0].column) == (line, column)


def test_every_emulated_type_reboots_through_the_action_its_spec_declares():
    cfg = FleetConfig(seed=5, hosts=1, devices_per_host=3, types=("video", "inference", "gpu"), reboot_s=30.0)
    monitor = HostMonitor.open(cfg, "host-00", state_dir=None, probe_timeout=0.2)
    monitor.poll()
    for serial in monitor.serials:
        assert type(monitor.monitor(serial)).ACTIONS == ("reboot",)
        monitor.reboot(serial)
        assert monitor.host.state(serial).boots == 1
        assert monitor.host.state(serial).rebooting
    assert {s["driver_status"] for s in monitor.poll().values()} == {"rebooting"}


def test_a_hung_device_still_takes_its_reset():
    cfg = FleetConfig(seed=5, hosts=1, devices_per_host=3, hang_block_s=0.05, reboot_s=30.0)
    monitor = HostMonitor.open(cfg, "host-00", state_dir=None, probe_timeout=0.2)
    monitor.poll()
    for serial in monitor.serials:
        monitor.inject_fault(serial, "hang")
        monitor.reboot(serial)
        assert monitor.host.state(serial).faults == {}  # the reboot cleared the hang


def test_nvml_and_hwmon_declare_no_reboot():
    for spec in ("nvml", "hwmon"):
        assert monitor_class(spec).ACTIONS == ()
        with pytest.raises(ControlNotDeclared, match=f"the {spec} spec declares no 'reboot' action"):
            monitor_class(spec)(serial="real-0").control("reboot")


def test_the_drivers_reset_calls_refuse_what_they_should():
    cfg = FleetConfig(seed=5, hosts=1, devices_per_host=3)
    monitor = HostMonitor.open(cfg, "host-00", state_dir=None)
    monitor.poll()
    video, inference, gpu = monitor.serials
    files = monitor.monitor(video).files
    with pytest.raises(OSError) as denied:
        files.write_text("power", "1")
    assert denied.value.errno == errno.EACCES
    with pytest.raises(OSError) as invalid:
        files.write_text("reset", "0")
    assert invalid.value.errno == errno.EINVAL
    lib = monitor.monitor(inference).lib
    assert lib.nx_reset(12345) == lib.NX_ERR_INVALID_ARG
    assert monitor.host.state(inference).boots == 0
