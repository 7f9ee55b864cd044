"""Where error events come from: a kernel log followed across rotations (and /dev/kmsg's
records), amdgpu's RAS counters, NVML's Xid events, and the router that hands each event to
its device."""

import ctypes
from types import SimpleNamespace

import pytest

from fleet.asicmon.errors import ErrorEvent, EventChannel, KernelLogReader
from fleet.asicmon.errors.sources import ErrorRouter, KernelLog, NvmlXidEvents, RasCounters

# Kernel-log lines in the forms drivers write them (kmsg record, dmesg, journal short-iso).
REAL_LINES = [
    "4,1201,5512034567,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
    "[ 1936.510073] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
    "2026-11-27T02:00:00.000000+00:00 gpu-07 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
]


def test_kernel_log_file_is_followed_from_its_end_and_read_again_when_rotated(tmp_path):
    path = tmp_path / "kern.log"
    path.write_text(REAL_LINES[0] + "\n")
    source = KernelLog(str(path))
    assert source.read() == []  # what was there before is history
    with path.open("a") as f:
        f.write(REAL_LINES[1] + "\n" + "NVRM: Xid (PCI:0000:3b:00): 4")  # the last line still being written
    assert source.read() == [REAL_LINES[1]]
    with path.open("a") as f:
        f.write("8, pid=1, name=x, DBE\n")
    assert source.read() == ["NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE"]
    path.write_text(REAL_LINES[2] + "\n")  # rotated: a new, shorter file
    assert source.read() == [REAL_LINES[2]]


def test_kmsg_records_keep_their_message_line_only(tmp_path, monkeypatch):
    # /dev/kmsg itself cannot be written here without writing into this machine's kernel
    # log: its reads are stood in for, with a record as the kernel gives it.
    records = [b"4,1201,5512034567,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
               b" SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"]
    source = KernelLog("/dev/kmsg")
    monkeypatch.setattr("os.open", lambda path, flags: 99)
    monkeypatch.setattr("os.lseek", lambda fd, pos, how: 0)

    def read(fd, size):
        if records:
            return records.pop(0)
        raise BlockingIOError

    monkeypatch.setattr("os.read", read)
    (line,) = source.read()
    reader = KernelLogReader(boot_time=0.0)
    reader.feed([line])
    assert reader.malformed == 0 and [e.code for e in reader.take()] == ["79"]


def test_ras_counters_turn_increases_into_events():
    files = {"ras/umc_err_count": "ue: 0\nce: 4\n", "ras/gfx_err_count": "ue: 0\nce: 0\n"}
    source = RasCounters(SimpleNamespace(read_text=lambda p: files[p]), "0000:c1:00.0")
    assert source.read(10.0) == []  # the first reading is where counting starts
    files["ras/umc_err_count"] = "ue: 2\nce: 4\n"
    (event,) = source.read(20.0)
    assert (event.code, event.count, event.address, event.source) == ("umc.ue", 2, "0000:c1:00", "ras_sysfs")


class RecordedNvml:
    """NVML's event API replaying answers in nvidia-ml-py's own structures."""

    NVML_ERROR_TIMEOUT = 10
    XID_CRITICAL = 8
    bus_ids: dict = {}

    class NVMLError(Exception):
        def __init__(self, value):
            self.value = value

    def __init__(self, answers):
        self.answers, self.registered = list(answers), []

    def nvmlEventSetCreate(self):
        return "set"

    def nvmlDeviceRegisterEvents(self, handle, types, event_set):
        self.registered.append((handle, types))

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        assert timeout_ms == 0  # never blocks the poll
        if not self.answers:
            raise self.NVMLError(self.NVML_ERROR_TIMEOUT)
        return self.answers.pop(0)

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=self.bus_ids[ctypes.cast(handle, ctypes.c_void_p).value])


def _nvml_handle(address: int):
    """A device handle as nvidia-ml-py returns it: a ctypes pointer to NVML's opaque device."""
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlDevice_t)


def _nvml_event(handle, code: int, stamp_us: int):
    """What nvmlEventSetWait_v2 returns: a c_nvmlEventData_t the library filled through a
    pointer (``data.device`` is a new pointer object on each access)."""
    import pynvml

    data = pynvml.c_nvmlEventData_t()
    filled = ctypes.pointer(data).contents
    filled.device = ctypes.cast(ctypes.c_void_p(ctypes.cast(handle, ctypes.c_void_p).value), pynvml.c_nvmlDevice_t)
    filled.eventType, filled.eventData = RecordedNvml.XID_CRITICAL, code
    data.timeStamp = stamp_us  # nvidia-ml-py's structure has no timeStamp field: set as an attribute
    return data


def test_nvml_xid_events_reach_their_device_through_nvidia_ml_py_structures():
    gpu0, gpu1 = _nvml_handle(0x7F00_1000_0000), _nvml_handle(0x7F00_2000_0000)
    lib = RecordedNvml([_nvml_event(gpu1, 79, 1_764_208_800_000_000), _nvml_event(gpu0, 48, 1_764_208_801_000_000)])
    source = NvmlXidEvents(lib, {"00000000:18:00.0": gpu0, "0000:2a:00": gpu1})
    assert lib.registered == [(gpu0, 8), (gpu1, 8)]
    events = source.read()
    assert [(e.code, e.address, e.time) for e in events] == [("79", "0000:2a:00", 1_764_208_800.0), ("48", "0000:18:00", 1_764_208_801.0)]
    assert source.read() == []


def test_nvml_xid_events_matched_by_bus_id_where_the_handle_differs():
    gpu0 = _nvml_handle(0x7F00_1000_0000)
    other = _nvml_handle(0x7F00_3000_0000)  # a handle NVML hands out anew for the same device
    lib = RecordedNvml([_nvml_event(other, 95, 1_764_208_800_000_000), _nvml_event(_nvml_handle(0x10), 95, 1)])
    lib.bus_ids = {0x7F00_3000_0000: b"00000000:18:00.0", 0x10: b"00000000:99:00.0"}
    (ours, stranger) = NvmlXidEvents(lib, {"0000:18:00": gpu0}).read()
    assert ours.address == "0000:18:00"
    assert stranger.address == "" and stranger.raw == "nvml xid 95 on an unknown device"


def test_nvml_xid_events_on_a_real_gpu():
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception as exc:  # no driver or no GPU here
        pytest.skip(f"no NVIDIA GPU on this machine: {exc}")
    source = NvmlXidEvents(pynvml, {"0000:00:00": handle})
    assert isinstance(source.read(), list)  # a healthy GPU: usually none, never blocks


def test_router_sends_events_to_their_device_and_keeps_the_others():
    router, channel = ErrorRouter(), EventChannel()
    router.add("00000000:3B:00.0", channel, "GPU-1", "nvidia_xid")
    router.route([ErrorEvent("nvidia", "79", "off the bus", 1.0, address="0000:3b:00"),
                  ErrorEvent("nvidia", "48", "DBE", 1.0, address="0000:99:00")])
    (mine,) = channel.drain()
    assert mine.serial == "GPU-1" and mine.action == "reboot_host"
    (other,) = router.unrouted.drain()
    assert other.code == "48" and other.name == "Double-bit ECC error"
