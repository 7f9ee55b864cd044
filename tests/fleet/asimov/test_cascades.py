"""Driver-error cascades in the specs (``cascade`` lines): checked with line and column,
played by the emulator's runtime from what the spec says."""

from __future__ import annotations

import pytest

from emulator import EmulatedHost, FleetConfig
from emulator.devices import driver_errors
from emulator.devices.driver_errors import CASCADES, DRIVER_FAULTS, Cascade
from fleet.asimov.compiler import check_spec, compile_spec
from fleet.asimov.loader import SPECS_DIR

GPU = (SPECS_DIR / "gpu.asimov").read_text()
T0 = 1_700_000_000.0


def test_the_shipped_specs_hold_every_cascade():
    nvidia = compile_spec(GPU, "gpu.asimov").cascades
    amd = compile_spec((SPECS_DIR / "inference.asimov").read_text(), "inference.asimov").cascades
    assert (*nvidia, *amd) == DRIVER_FAULTS
    assert {c["vendor"] for c in nvidia.values()} == {"nvidia"} and {c["vendor"] for c in amd.values()} == {"amd"}
    assert CASCADES["xid_95"].repeat == 200 and CASCADES["xid_119"].steps[1].effect == "hang"
    assert CASCADES["xid_48"].spare_rows == 2 and CASCADES["xid_48"].exhausted.code == "64"


def test_a_cascade_plays_what_its_line_says(monkeypatch):
    text = GPU.replace('step(0, "79", "GPU has fallen off the bus.", "hang")',
                       'step(0, "79", "GPU went for a walk."), step(3, "79", "Still gone.", "hang")')
    monkeypatch.setitem(CASCADES, "xid_79", Cascade.from_spec(compile_spec(text, "gpu.asimov").cascades["xid_79"]))
    host = EmulatedHost(FleetConfig(seed=2, hosts=1, devices_per_host=3, types=("gpu",), hang_block_s=0.0), "host-00")
    host.sync(T0)
    serial = next(iter(host.states))
    host.inject_fault(serial, "xid_79")
    lines = host.take_kernel_log()
    assert len(lines) == 1 and lines[0].endswith("GPU went for a walk.")
    assert "hang" not in host.state(serial).faults  # the hang is the second step's
    host.advance(T0 + 5)
    lines = host.take_kernel_log()
    assert lines and lines[-1].endswith("Still gone.") and "hang" in host.state(serial).faults
    assert driver_errors.diagnose(host.state(serial))[0] is False


@pytest.mark.parametrize(("line", "column", "message"), [
    ('cascade xid_1 = step(0, "1", "x")', 17, "a cascade is kmsg(...)"),
    ('cascade xid_1 = kmsg("intel", "ignore", step(0, "1", "x"))', 22, "'intel' is no vendor"),
    ('cascade xid_1 = kmsg("amd", "reboot", step(0, "1", "x"))', 29, "'reboot' is no rung"),
    ('cascade xid_1 = kmsg("amd", "ignore")', 17, "at least one step, got 2"),
    ('cascade xid_1 = kmsg("amd", "ignore", line(0, "1", "x"))', 39, "a cascade's steps are step(...)"),
    ('cascade xid_1 = kmsg("amd", "ignore", step(-1, "1", "x"))', 44, "a step's delay is a number of seconds"),
    ('cascade xid_1 = kmsg("amd", "ignore", step(0, 1, "x"))', 47, "a step's code and text are strings"),
    ('cascade xid_1 = kmsg("amd", "ignore", step(0, "1", "x", "wedge"))', 57, "'wedge' is no step effect"),
    ('cascade xid_1 = kmsg("amd", "ignore", step(0, "1", "x"), repeat=0)', 65, "repeat must be a whole number >= 1"),
    ('cascade xid_1 = kmsg("amd", "ignore", step(0, "1", "x"), repat=2)', 58, "unknown keyword 'repat'"),
    ('cascade xid_1 = kmsg("amd", "ignore", step(0, "1", "x"), spare_rows=2)', 17, "spare_rows and exhausted go together"),
    ('cascade xid_79 = kmsg("amd", "ignore", step(0, "1", "x"))', 9, "cascade xid_79 is given twice"),
])
def test_bad_cascades_are_refused_where_they_are(line, column, message):
    text = GPU + line + "\n"
    errors = check_spec(text, "gpu.asimov")
    assert errors, line
    assert message in errors[0].message
    assert (errors[0].line, errors[0].column) == (text.count("\n"), column)
