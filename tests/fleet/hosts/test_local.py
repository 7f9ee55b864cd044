"""Real devices of this machine: stable, fleet-unique serials; polling them together."""

import pytest

from fleet.hosts.local import FileRoot, discover, hwmon_devices, nvml_devices
from tests.support.hwmon import PCI_GPU, write_hwmon_tree


def test_hwmon_serials_name_the_device_behind_the_sensor_never_hwmonN(tmp_path):
    root = write_hwmon_tree(tmp_path)
    serials = {d.monitor.refresh()["device_model"]: d.serial for d in hwmon_devices("node-a", root)}
    assert serials == {
        "amdgpu": f"hwmon:node-a:{PCI_GPU}:amdgpu",
        "coretemp": "hwmon:node-a:coretemp.0:coretemp",
        "acpitz": "hwmon:node-a:acpitz",
    }
    assert not any("hwmon" in s.split(":", 1)[1] for s in serials.values())


def test_hwmon_serials_survive_the_kernel_renumbering_hwmonN(tmp_path):
    before = write_hwmon_tree(tmp_path / "boot1", {"amdgpu": 3, "coretemp": 1, "acpitz": 0})
    after = write_hwmon_tree(tmp_path / "boot2", {"amdgpu": 0, "coretemp": 2, "acpitz": 5})
    assert {d.serial for d in hwmon_devices("node-a", before)} == {
        d.serial for d in hwmon_devices("node-a", after)
    }


def test_the_same_hardware_on_two_hosts_gets_two_serials(tmp_path):
    root = write_hwmon_tree(tmp_path)
    a = {d.serial for d in hwmon_devices("node-a", root)}
    b = {d.serial for d in hwmon_devices("node-b", root)}
    assert len(a) == len(b) == 3
    assert not a & b


def test_two_identical_chips_with_no_device_are_told_apart(tmp_path):
    root = write_hwmon_tree(tmp_path)
    twin = root / "hwmon9"
    twin.mkdir()
    (twin / "name").write_text("acpitz\n")
    (twin / "temp1_input").write_text("30000\n")
    serials = sorted(d.serial for d in hwmon_devices("node-a", root))
    assert "hwmon:node-a:acpitz" in serials and "hwmon:node-a:acpitz#2" in serials


def test_hwmon_folders_without_a_temperature_are_not_devices(tmp_path):
    root = write_hwmon_tree(tmp_path)
    bare = root / "hwmon7"
    bare.mkdir()
    (bare / "name").write_text("nvme\n")
    assert len(hwmon_devices("node-a", root)) == 3


class FakeNvml:
    """Stands in for the NVML library, which needs an NVIDIA driver this machine lacks."""

    def __init__(self, uuids):
        self.uuids = uuids

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return self.uuids[handle].encode()


def test_nvml_serial_is_the_gpu_uuid():
    uuids = ["GPU-8a3e3c1e-0b7f-2d55-9a6c-1f0e3a5b7c9d", "GPU-11111111-2222-3333-4444-555555555555"]
    devices = nvml_devices(FakeNvml(uuids))
    assert [d.serial for d in devices] == uuids
    assert [d.slot for d in devices] == [0, 1]
    assert {d.device_type for d in devices} == {"nvml"}


def test_no_nvml_driver_means_no_gpus():
    class Broken:
        def nvmlInit(self):
            raise OSError("NVML Shared Library Not Found")

    assert nvml_devices(Broken()) == []


def test_a_host_polls_its_devices_and_marks_absent_counters_none(tmp_path):
    found = discover("node-a", hwmon_root=write_hwmon_tree(tmp_path), nvml_lib=FakeNvml([]))
    assert found.errors == []
    snaps = found.host.poll()
    assert len(snaps) == 3
    gpu = snaps[f"hwmon:node-a:{PCI_GPU}:amdgpu"]
    assert gpu["driver_status"] == "ok"
    assert gpu["temperature_c"] == pytest.approx(54.0)
    assert gpu["device_utilization"] == pytest.approx(0.37)
    cpu = snaps["hwmon:node-a:coretemp.0:coretemp"]
    assert cpu["temperature_c"] == pytest.approx(48.0)
    # A sensor chip has no memory, power or ECC: not reported, never zero.
    for counter in ("memory_used_bytes", "power_w", "ecc_corrected_total"):
        assert cpu[counter] is None


def test_a_sensor_that_vanishes_is_an_error_not_a_zero(tmp_path):
    root = write_hwmon_tree(tmp_path)
    found = discover("node-a", hwmon_root=root, nvml_lib=FakeNvml([]))
    found.host.poll()
    (root / "hwmon1" / "temp1_input").unlink()
    snap = found.host.poll()["hwmon:node-a:coretemp.0:coretemp"]
    assert snap["driver_status"] == "error"
    assert snap["temperature_c"] is None


@pytest.mark.skipif(
    not __import__("shutil").which("nvidia-smi"),
    reason="no NVIDIA GPU or driver on this machine (nvidia-smi not found): the real NVML read is not tested here",
)
def test_nvml_spec_reads_this_machines_gpus():
    devices = nvml_devices()
    assert devices, "nvidia-smi is here but NVML found no GPU"
    for device in devices:
        snap = device.monitor.refresh()
        print(device.serial, {k: v for k, v in snap.items() if v is not None})
        assert device.serial.startswith("GPU-")
        assert snap["driver_status"] == "ok"
        assert snap["temperature_c"] is not None
        assert snap["memory_total_bytes"] > 0


def test_a_device_folder_reads_and_writes_only_inside_itself(tmp_path):
    """A spec's path template filled from what a driver returned cannot leave the folder."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "reset").write_text("0\n")
    (tmp_path / "secret").write_text("key\n")
    root = FileRoot(tmp_path / "dev")
    assert root.read_text("reset") == "0\n"
    for path in ("../secret", "/etc/hostname", "a/../../secret"):
        with pytest.raises(PermissionError, match="outside the device's folder"):
            root.read_text(path)
        with pytest.raises(PermissionError):
            root.write_text(path, "1")
    assert (tmp_path / "secret").read_text() == "key\n"
