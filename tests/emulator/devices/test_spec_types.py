"""Device types from their Asimov specs: which specs describe a double, a spec in an extra
folder replacing a shipped one, each spec compiled once per version of its file, and the
driver-error cascades the specs give. (A spec's lines compiled into a type, and a broken extra
spec left out, are tested in tests/fleet/asimov/test_state.py.)"""

import os

from emulator.devices import spec_types
from emulator.devices.spec_types import cascades_from_specs, compiled_specs, spec_paths
from fleet.asimov.loader import SPECS_DIR

VIDEO = (SPECS_DIR / "video.asimov").read_text()


def test_only_specs_with_a_double_are_device_types():
    names = {p.stem for p in spec_paths()}
    assert {"video", "inference", "gpu", "mtx"} <= names
    assert not names & {"nvml", "hwmon", "dcgm_exporter", "amd_exporter"}  # monitors only
    assert all(p.parent == SPECS_DIR for p in spec_paths())


def test_a_spec_in_an_extra_folder_replaces_the_shipped_one_of_its_name(tmp_path):
    (tmp_path / "video.asimov").write_text(VIDEO.replace("state cores = 4", "state cores = 6"))
    (tmp_path / "notes.asimov").write_text("# no state lines: not a double\n")
    paths = {p.stem: p for p in spec_paths((str(tmp_path),))}
    assert paths["video"] == tmp_path / "video.asimov" and "notes" not in paths
    compiled = {c.device: c for c in compiled_specs((str(tmp_path),))}
    assert compiled["video"].state["cores"] == 6


def test_a_spec_is_compiled_once_for_each_version_of_its_file(tmp_path):
    path = tmp_path / "video.asimov"
    path.write_text(VIDEO)
    first = {c.device: c for c in compiled_specs((str(tmp_path),))}["video"]
    again = {c.device: c for c in compiled_specs((str(tmp_path),))}["video"]
    assert again is first
    path.write_text(VIDEO.replace("state cores = 4", "state cores = 2"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a later version
    changed = {c.device: c for c in compiled_specs((str(tmp_path),))}["video"]
    assert changed is not first and changed.state["cores"] == 2
    assert (str(path), path.stat().st_mtime_ns) in spec_types._COMPILED


def test_the_cascades_of_every_spec_are_gathered_first_one_kept(tmp_path):
    cascades = cascades_from_specs()
    assert "xid_79" in cascades and "xid_48" in cascades
    gpu = (SPECS_DIR / "gpu.asimov").read_text()
    (tmp_path / "gpu2.asimov").write_text(
        gpu.replace("device gpu", "device gpu2")
        .replace('"EGX"', '"EGY"')
        .replace("GPU has fallen off the bus.", "gone")
    )
    assert (
        cascades_from_specs((str(tmp_path),))["xid_79"] == cascades["xid_79"]
    )  # the shipped one comes first
