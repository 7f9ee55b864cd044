"""Fault classes: driver errors take their rung, cause and hardware flag from the real catalogue."""

import json

import pytest

from emulator.replay.classes import load_classes, signal_for
from fleet.asicmon.errors.catalogue import catalogue


def test_xid_classes_follow_the_catalogue():
    classes = load_classes()
    dbe = classes["GPU/GPU DBE(Double Bit ECC) > Threshold"]
    entry = catalogue("nvidia_xid").lookup("48")
    assert (dbe.kind, dbe.detail, dbe.start, dbe.cause, dbe.hardware) == ("xid", "48", entry.action, entry.cause, True)
    assert classes["GPU/GPU Lost"].start == "reboot_host" and classes["GPU/GPU Lost"].cured_by == "reboot_host"


def test_what_no_device_shows_is_invisible_never_guessed():
    classes = load_classes()
    for kind in ("NIC/NIC Lost", "Parameter Plane Cable/Link Down", "Unknown Error/Unknown Error", "made/up"):
        sig = signal_for(classes, kind)
        assert sig.kind == "invisible" and not sig.visible and sig.node_wide
    assert signal_for(classes, "Stress Test Failure/Unknown Error").kind == "diagnostic"
    assert signal_for(classes, "GPU/GPU PCI link width low").detail == "pcie_link_width"
    assert signal_for(classes, "GPU/nvidia-smi Timeout").kind == "hung"


@pytest.mark.parametrize("row, message", [
    ({"signal": "xid:48", "cured_by": "inspect_hardware"}, "no repair rung"),
    ({"signal": "smoke", "cured_by": None}, "unknown signal"),
])
def test_bad_rows_are_refused(tmp_path, row, message):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"classes": {"default": {"signal": "invisible"}, "x": row}}))
    with pytest.raises(ValueError, match=message):
        load_classes(path)


def test_what_each_visible_class_shows_fires_the_real_health_rules():
    from fleet.health.detection import snapshot_findings

    polled = {k: v for k, v in load_classes().items() if v.kind in ("metric", "hung")}
    assert len(polled) >= 4
    for kind, sig in polled.items():
        rules = {f.rule for f in snapshot_findings(sig.shows)}
        expected = {"hung": "driver", "pcie_link_width": "pcie", "temperature": "temperature"}[sig.detail or sig.kind]
        assert expected in rules, kind


def test_xid_classes_show_a_line_the_kernel_log_reader_reads():
    from fleet.asicmon.errors.kernel_log import parse_message

    for kind, sig in load_classes().items():
        if sig.kind == "xid":
            assert parse_message(sig.shows)[:2] == ("nvidia", sig.detail), kind


def test_a_polled_signal_must_say_what_it_shows(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"classes": {"default": {"signal": "invisible"}, "x": {"signal": "hung"}}}))
    with pytest.raises(ValueError, match="says what a poll shows"):
        load_classes(path)
