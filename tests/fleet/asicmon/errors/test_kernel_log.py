"""Reading kernel-log lines of real drivers: NVIDIA Xids and SXids and amdgpu RAS lines parsed
into vendor, code, address and detail; records dated; malformed lines counted; floods merged."""

import pytest

from fleet.asicmon.errors import KernelLogReader, parse_message

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


@pytest.mark.parametrize("forged", [
    "2026-11-27T02:00:00.000000+00:00 gpu-07 alice: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
    "Nov 27 02:00:00 gpu-07 alice[4242]: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
    "Nov 27 02:00:00 gpu-07 logger: kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
    "12,1202,5512034999,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",  # kmsg, facility user
])
def test_a_line_another_program_wrote_is_not_taken_for_the_kernels(forged):
    """Any local user can log `alice: NVRM: Xid …: 79` to syslog, or write to /dev/kmsg as a
    user-space facility: such a line would have taken a healthy GPU through the repair ladder."""
    reader = KernelLogReader()
    reader.feed([forged, REAL_LINES[2]])
    assert [(e.code, e.address) for e in reader.take()] == [("79", "0000:2b:00")]  # the kernel's own only
    assert (reader.not_kernel, reader.matched, reader.malformed) == (1, 1, 0)
