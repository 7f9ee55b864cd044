"""Error events, the Django-free part: kernel-log lines of real drivers parsed, merged and
classified; malformed lines counted; unknown codes kept; the sources and the Asimov
``events`` / ``diagnose`` statements."""

import ctypes
from types import SimpleNamespace

import pytest

from fleet.asicmon.errors import (
    ErrorEvent,
    EventChannel,
    KernelLogReader,
    catalogue,
    classify,
    parse_message,
)
from fleet.asicmon.errors.sources import ErrorRouter, KernelLog, NvmlXidEvents, RasCounters
from fleet.asimov.compiler import check_spec, compile_spec

# Lines in the forms drivers write them (kmsg record, dmesg, journal short-iso).
REAL_LINES = [
    "4,1201,5512034567,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
    "[ 1936.510073] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
    "2026-11-27T02:00:00.000000+00:00 gpu-07 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
    "[ 269.517039] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff",
    "Nov 27 02:00:00 gpu-07 kernel: nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 12028, Non-fatal, Link 14 egress non-posted PRIV error (First)",
    "NVRM: Xid (PCI:0000:3b:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No",
    "amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block",
    "amdgpu 0000:c1:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=12, emitted seq=14",
]


def test_real_format_lines_parse_into_vendor_code_address_and_detail():
    parsed = [parse_message(KernelLogReader()._split(line, 0.0)[0]) for line in REAL_LINES]
    assert parsed[0][:5] == ("nvidia", "79", "0000:3b:00", "GPU has fallen off the bus.", 1234)
    assert parsed[0][5] == "python3"
    assert parsed[1][:4] == ("nvidia", "63", "0000:10:1c", "Row Remapper: New row marked for remapping, reset gpu to activate.")
    assert parsed[2][1:3] == ("79", "0000:2b:00")
    assert parsed[3][1:3] == ("3", "0000:01:00")
    assert parsed[4][1:3] == ("S12028", "0000:c1:00")
    assert parsed[5][1] == "95" and parsed[5][3].startswith("Uncontained") and parsed[5][4] is None
    assert parsed[6][:3] == ("amd", "umc.ue", "0000:c1:00")
    assert parsed[7][1] == "ring_timeout"
    assert parse_message("usb 1-1: new high-speed USB device number 2 using xhci_hcd") is None


def test_kmsg_records_are_dated_from_boot_and_journal_lines_by_their_stamp():
    reader = KernelLogReader(boot_time=1_000_000.0, clock=lambda: 5.0)
    reader.feed([REAL_LINES[0], REAL_LINES[2], REAL_LINES[1]])
    events = {e.code + e.address: e for e in reader.take()}
    assert events["790000:3b:00"].time == pytest.approx(1_000_000.0 + 5512.034567)
    assert events["790000:2b:00"].time == pytest.approx(1795744800.0)
    assert events["630000:10:1c"].time == 5.0  # dmesg's since-boot stamp: dated when read


def test_malformed_lines_are_counted_logged_and_never_raise(caplog):
    reader = KernelLogReader()
    bad = ["NVRM: Xid (PCI:0000:3b:00): seventy-nine", "NVRM: Xid (garbage", "\x00\xff NVRM: Xid (", ""]
    reader.feed(bad + [REAL_LINES[0]])
    assert reader.malformed == 3 and reader.matched == 1 and reader.lines == 5
    assert "malformed driver error line" in caplog.text
    assert [e.code for e in reader.take()] == ["79"]


def test_a_flood_becomes_one_event_per_bucket_with_its_count_and_times():
    now = [960.0]  # buckets of 60 s: [960, 1020), [1020, 1080)
    reader = KernelLogReader(clock=lambda: now[0], bucket_s=60)
    line = "NVRM: Xid (PCI:0000:3b:00): 95, pid={}, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No"
    reader.feed(line.format(pid) for pid in range(50_000))  # pids differ: still identical events
    now[0] = 990.0
    reader.feed(line.format(7) for _ in range(10))
    now[0] = 1070.0  # the next bucket
    reader.feed([line.format(8)])
    events = reader.take()
    assert [(e.count, e.first_seen, e.last_seen) for e in events] == [(50_010, 960.0, 990.0), (1, 1070.0, 1070.0)]
    assert reader.take() == []


def test_catalogue_lookups_and_unknown_codes_kept_with_their_raw_line():
    xid = catalogue("nvidia_xid")
    assert xid.lookup("79").action == "reboot_host" and xid.lookup("79").hardware
    assert xid.lookup("13").action == "restart_application"
    assert xid.lookup("43").action == "ignore"
    assert xid.lookup("94").action == "restart_application" and xid.lookup("95").action == "reset_device"
    unknown = classify(ErrorEvent("nvidia", "999", "Something new", 1.0, raw="NVRM: Xid (PCI:0000:3b:00): 999, Something new"))
    assert not unknown.known and unknown.name == "unknown: inspect: nvidia 999" and unknown.raw.endswith("Something new")
    assert unknown.action == "inspect"
    amd = catalogue("amd_ras")
    assert amd.lookup("umc.ue").action == "reset_device"
    assert amd.lookup("vpe.ue").name == "Uncorrectable RAS error"  # a block by the wildcard
    with pytest.raises(LookupError, match="no error catalogue 'intel'"):
        catalogue("intel")


def test_channel_merges_identical_events_and_keeps_distinct_ones():
    channel = EventChannel(bucket_s=60)
    for i in range(5):
        channel.put(ErrorEvent("nvidia", "74", f"NVLink: fatal error detected on link {i}", 100.0 + i, address="0000:3b:00"))
    channel.put(ErrorEvent("nvidia", "48", "DBE", 101.0, address="0000:3b:00"))
    events = channel.drain()
    assert [(e.code, e.count, e.last_seen) for e in events] == [("74", 5, 104.0), ("48", 1, 101.0)]
    assert channel.drain() == []


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


def test_specs_declare_events_and_a_diagnostic():
    code = compile_spec('device x\nstats.core_count = 1\nevents nvidia_xid from kmsg, nvml\ndiagnose "dcgmi diag -r 1"\n').code
    assert "EVENTS = {'catalogue': 'nvidia_xid', 'sources': ('kmsg', 'nvml')}" in code
    assert "DIAGNOSTIC = ('dcgmi', 'diag', '-r', '1')" in code  # arguments, run without a shell


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("device x\nevents intel_xid from kmsg\n", "unknown error catalogue 'intel_xid'", 2, 8),
        ("device x\nevents nvidia_xid from kmsg, syslog\n", "unknown event source 'syslog'", 2, 30),
        ("device x\nevents nvidia_xid from kmsg, kmsg\n", "event source kmsg is named twice", 2, 30),
        ("device x\nevents nvidia_xid from kmsg\nevents amd_ras from kmsg\n", "events are declared twice", 3, 1),
        ('device x\ndiagnose "  "\n', "a diagnose command cannot be empty", 2, 10),
    ],
)
def test_bad_events_statements_are_reported_with_line_and_column(text, message, line, column):
    errors = check_spec(text + "stats.core_count = 1\n")
    assert errors and message in errors[0].message, [e.message for e in errors]
    assert (errors[0].line, errors[0].column) == (line, column)
    assert "suggest" not in errors[0].expected


def test_a_misspelt_catalogue_gets_a_suggestion():
    (error,) = check_spec("device x\nevents nvidia_xd from kmsg\nstats.core_count = 1\n")
    assert "did you mean 'nvidia_xid'" in error.expected


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
