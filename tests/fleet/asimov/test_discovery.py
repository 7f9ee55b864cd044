"""The discover statement: golden errors, and devices found on disk by a user's spec."""

from pathlib import Path

import pytest

from fleet.asimov.compiler import check_spec
from fleet.hosts.local import discover
from tests.support.hwmon import write_hwmon_tree
from tests.support.sysfs import BROKEN_SPEC, materialise, user_spec

GOLDEN = {
    'discover_unknown_rule': (
        'device x\ndiscover everything()\nt = file("t", int)\nstats.temperature_c = t\n',
        'discover_unknown_rule.asimov:2:10: error: discover takes a discovery rule\n    discover everything()\n             ^\n  expected nvml() or folders(pattern, requires=[...], serial=...)',
    ),
    'discover_twice': (
        'device x\ndiscover nvml()\ndiscover nvml()\n',
        'discover_twice.asimov:3:1: error: a spec has one discover statement (the first is on line 2)\n    discover nvml()\n    ^\n  expected one discover statement',
    ),
    'discover_relative': (
        'device x\ndiscover folders("sys/class/x*")\nt = file("t", int)\nstats.temperature_c = t\n',
        'discover_relative.asimov:2:18: error: the pattern must be an absolute path\n    discover folders("sys/class/x*")\n                     ^\n  expected a path starting with "/" or "${SETTING}"',
    ),
    'discover_bad_requires': (
        'device x\ndiscover folders("/sys/x*", requires="name")\nt = file("t", int)\nstats.temperature_c = t\n',
        'discover_bad_requires.asimov:2:38: error: requires= takes a list of file names\n    discover folders("/sys/x*", requires="name")\n                                         ^\n  expected ["name", "temp1_input"]',
    ),
    'discover_bad_serial': (
        'device x\ndiscover folders("/sys/x*", serial=uuid())\nt = file("t", int)\nstats.temperature_c = t\n',
        'discover_bad_serial.asimov:2:36: error: serial= takes file("…") or link("…")\n    discover folders("/sys/x*", serial=uuid())\n                                       ^\n  expected file(name): a file in the folder holding the device\'s serial; link(name): a link in the folder to the device it belongs to',
    ),
    'discover_unknown_kwarg': (
        'device x\ndiscover folders("/sys/x*", require=["name"])\nt = file("t", int)\nstats.temperature_c = t\n',
        'discover_unknown_kwarg.asimov:2:29: error: folders() has no argument require=\n    discover folders("/sys/x*", require=["name"])\n                                ^\n  expected requires= or serial=',
    ),
    'discover_escape': (
        'device x\ndiscover folders("/sys/x*", requires=["../etc"])\nt = file("t", int)\nstats.temperature_c = t\n',
        'discover_escape.asimov:2:39: error: \'../etc\' is not a path inside the folder\n    discover folders("/sys/x*", requires=["../etc"])\n                                          ^\n  expected a relative path such as "name"',
    ),
    'discover_nvml_args': (
        'device x\ndiscover nvml(0)\n',
        'discover_nvml_args.asimov:2:10: error: nvml() takes no arguments\n    discover nvml(0)\n             ^\n  expected discover nvml()',
    ),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_discover_error_message(name):
    spec, expected = GOLDEN[name]
    assert "\n".join(str(e) for e in check_spec(spec, f"{name}.asimov")) == expected


def test_built_in_specs_say_how_to_find_their_devices():
    from fleet.asimov.loader import monitor_class

    assert monitor_class("nvml").DISCOVERY == {"rule": "nvml", "line": 7}
    hwmon = monitor_class("hwmon").DISCOVERY
    assert hwmon["pattern"] == "${HWMON_ROOT}/*" and hwmon["serial"] == ["link", "device"]
    assert monitor_class("video").DISCOVERY is None  # emulated devices only


def test_a_user_spec_finds_its_devices_and_a_broken_one_is_reported_with_line_and_column(tmp_path):
    sysfs = materialise(tmp_path / "sysfs")
    specs = tmp_path / "specs"
    user_spec(specs, sysfs)
    (specs / "broken.asimov").write_text(BROKEN_SPEC)
    found = discover("node-a", hwmon_root=write_hwmon_tree(tmp_path / "sys"), spec_dirs=[specs])

    assert len(found.errors) == 1
    assert f"{specs / 'broken.asimov'}:4:7: error: unknown counter 'stats.temprature_c'" in found.errors[0]
    by_type = {}
    for device in found.host.devices:
        by_type.setdefault(device.device_type, []).append(device.serial)
    assert sorted(by_type) == ["hwmon", "vt100"]
    assert sorted(by_type["vt100"]) == sorted((f / "serial").read_text().strip() for f in sysfs.glob("vt*"))
    snaps = found.host.poll()
    for serial in by_type["vt100"]:
        assert snaps[serial]["driver_status"] == "ok"
        assert snaps[serial]["device_model"] == "Emu VT-100"
        assert snaps[serial]["temperature_c"] > 0


def test_a_pattern_setting_that_is_not_set_is_reported(tmp_path, monkeypatch):
    monkeypatch.delenv("MY_DEVICES", raising=False)
    specs = tmp_path / "specs"
    path = user_spec(specs, Path("${MY_DEVICES}"))
    found = discover("node-a", hwmon_root=tmp_path / "none", spec_dirs=[specs])
    assert found.errors == [f"{path}: ${{MY_DEVICES}} in the discover pattern '${{MY_DEVICES}}/vt*' is not set"]
    found = discover("node-a", hwmon_root=tmp_path / "none", spec_dirs=[specs],
                     variables={"MY_DEVICES": str(materialise(tmp_path / "sysfs", devices=2))})
    assert found.errors == [] and len(found.host.devices) == 2


def test_a_user_spec_overrides_a_built_in_one_of_the_same_name(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "hwmon.asimov").write_text(
        'device hwmon\ndiscover folders("${HWMON_ROOT}/*", requires=["name", "temp1_input"])\n'
        't: mC = file("temp1_input", int)\nstats.temperature_c = convert(t, "C")\n'
    )
    found = discover("node-a", hwmon_root=write_hwmon_tree(tmp_path / "sys"), spec_dirs=[specs])
    assert found.errors == []
    # No serial= rule: the folder's name, as this user's spec asked.
    assert sorted(d.serial for d in found.host.devices) == ["hwmon:node-a:hwmon0", "hwmon:node-a:hwmon1", "hwmon:node-a:hwmon3"]
