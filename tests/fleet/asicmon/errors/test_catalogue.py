"""The error catalogues as data: NVIDIA's whole Xid catalogue and the NVSwitch SXids, amdgpu's
RAS blocks, each with its published immediate action; unknown codes given to a person; Xid 154
read as the recovery action it announces."""

import json

import pytest

from fleet.asicmon.errors import ErrorEvent, KernelLogReader, catalogue, classify
from fleet.asicmon.errors.catalogue import ACTIONS, CATALOGUE_DIR, UNKNOWN, Catalogue
from fleet.asicmon.errors.events import EventChannel
from fleet.asicmon.errors.sources import ErrorRouter

# NVIDIA's Xid catalogue for Ampere and newer: codes 1-172, of which these are raised by current
# drivers on A100, H100, B100 or GB200 (the others are listed as unused).
XID_IN_USE = [
    8, 11, 13, 14, 25, 31, 32, 37, 38, 39, 40, 41, 43, 44, 45, 46, 48, 54, 60, 62, 63, 64, 66, 67, 68, 69, 70, 71, 72,
    74, 75, 76, 77, 78, 79, 80, 82, 83, 84, 85, 86, 88, 89, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104,
    105, 106, 107, 108, 109, 110, 119, 120, 121, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 139, 140,
    141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165,
    166, 167, 168, 169, 170, 171, 172,
]
# The NVSwitch SXids of the Fabric Manager guide (non-fatal, potentially fatal, always fatal, other).
SXIDS = [
    10001, 10002, 10003, 10004, 10005, 11001, 11004, 11009, 11012, 11013, 11018, 11019, 11020, 11021, 11022, 11023,
    12001, 12002, 12020, 12021, 12022, 12023, 12024, 12025, 12026, 12027, 12028, 12030, 12031, 12032, 14017, 15001,
    15006, 15008, 15009, 15010, 15011, 15012, 15013, 19047, 19048, 19049, 19054, 19055, 19056, 19057, 19058, 19059,
    19060, 19061, 19062, 19063, 19064, 19065, 19066, 19067, 19068, 19069, 19070, 19071, 19084, 20001, 20012, 20034,
    22003, 22011, 22012, 22013, 23001, 23002, 23003, 23004, 23005, 23006, 23007, 23008, 23009, 23010, 23011, 23012,
    23013, 23014, 23015, 23016, 23017, 24001, 24002, 24003, 24004, 24005, 24006, 24007,
]
AMD_BLOCKS = ["umc", "sdma", "gfx", "mmhub", "athub", "pcie_bif", "hdp", "xgmi_wafl", "df", "smn", "sem", "mp0", "mp1",
              "fuse", "mca", "vcn", "jpeg", "ih", "mpio"]
# NVIDIA's immediate-action buckets as the catalogue publishes them, and the action we take for each.
PUBLISHED = {
    "RESTART_APP": "restart_application", "RESET_GPU": "reset_device", "RESTART_BM": "reboot_host",
    "RESTART_VM": "reboot_host", "IGNORE": "ignore", "CONTACT_SUPPORT": "inspect", "WORKFLOW_XID_48": "reset_device",
    "WORKFLOW_NVLINK_ERR": "reset_device", "WORKFLOW_NVLINK5_ERR": "reset_device", "WORKFLOW_XID_45": "ignore",
    "CHECK_MECHANICALS": "inspect_hardware", "UPDATE_SWFW": "inspect", "CHECK_UVM": "inspect",
}


def test_the_nvidia_catalogue_holds_every_xid_and_sxid_with_its_published_action():
    xid = catalogue("nvidia_xid")
    assert xid.version == "2026.11.2"
    assert {str(c) for c in range(1, 173)} <= set(xid.entries), "every Xid of NVIDIA's catalogue"
    assert {f"S{c}" for c in SXIDS} <= set(xid.entries), "every SXid of the Fabric Manager guide"
    assert sorted(int(c) for c, e in xid.entries.items() if not c.startswith("S") and e.in_use) == XID_IN_USE
    for code, entry in xid.entries.items():
        assert entry.action in ACTIONS and entry.name and len(entry.meaning) > 20, code
        if entry.published in PUBLISHED:
            assert entry.action == PUBLISHED[entry.published], f"{code}: {entry.published} taken as {entry.action}"
    # a few by hand, as NVIDIA publishes them
    assert (xid.lookup("79").published, xid.lookup("79").action) == ("RESTART_BM", "reboot_host")
    assert (xid.lookup("48").published, xid.lookup("48").action) == ("WORKFLOW_XID_48", "reset_device")
    assert (xid.lookup("63").published, xid.lookup("63").action) == ("IGNORE", "ignore")
    assert (xid.lookup("109").published, xid.lookup("109").action) == ("RESET_GPU", "reset_device")
    assert (xid.lookup("54").published, xid.lookup("54").action) == ("CHECK_MECHANICALS", "inspect_hardware")
    assert not xid.lookup("3").in_use and xid.lookup("3").action == "inspect"  # unused: contact support
    assert xid.lookup("S23001").action == "reboot_host" and xid.lookup("S11012").action == "ignore"
    assert xid.lookup("S11004").name == "NVSwitch: Ingress invalid ACL" and xid.lookup("S11004").action == "inspect"


def test_the_amd_catalogue_holds_every_ras_block_in_each_error_class():
    amd = catalogue("amd_ras")
    for block in AMD_BLOCKS:
        assert amd.lookup(f"{block}.ue").action in ("reset_device", "reboot_host", "inspect_hardware"), block
        assert amd.lookup(f"{block}.ce").action == "ignore", block
        assert amd.lookup(f"{block}.de").action == "restart_application", block
    assert amd.lookup("pcie_bif.ue").action == "reboot_host"
    assert amd.lookup("vpe.ue").name == "Uncorrectable RAS error"  # a block not named: by the wildcard
    assert amd.lookup("bad_page_threshold").action == "inspect_hardware"


def test_catalogue_files_are_versioned_and_checked(tmp_path):
    for path in CATALOGUE_DIR.glob("*.json"):
        data = json.loads(path.read_text())
        assert data["version"] and data["sources"] and data["vendor"], path
    with pytest.raises(ValueError, match="code 1 has an unknown action"):
        Catalogue("bad", {"vendor": "x", "version": "1", "codes": {"1": {
            "name": "n", "meaning": "m", "severity": "info", "action": "explode", "cause": "c"}}})


def test_an_unknown_code_is_surfaced_for_a_person_with_its_raw_line():
    raw = "NVRM: Xid (PCI:0000:3b:00): 999, Something new"
    unknown = classify(ErrorEvent("nvidia", "999", "Something new", 1.0, raw=raw))
    assert not unknown.known and unknown.action == "inspect" and unknown.action != "ignore"
    assert unknown.name == f"{UNKNOWN}: nvidia 999" and unknown.raw == raw
    assert "raw line" in unknown.meaning
    sxid = classify(ErrorEvent("nvidia", "S99999", "?", 1.0))
    assert not sxid.known and sxid.action == "inspect"
    other = classify(ErrorEvent("intel", "42", "?", 1.0))  # a vendor with no catalogue
    assert not other.known and other.action == "inspect" and other.name == f"{UNKNOWN}: intel 42"


@pytest.mark.parametrize(("line", "action", "name"), [
    ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "reset_device", "GPU Reset Required"),
    ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot Required)", "reboot_host",
     "Node Reboot Required"),
    ("GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", "restart_application", "Drain P2P"),
    ("GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", "reset_device", "Drain and Reset"),
    ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", "ignore", "None"),
])
def test_xid_154_is_read_as_the_recovery_action_it_announces(line, action, name):
    reader = KernelLogReader(clock=lambda: 10.0)
    reader.feed([f"NVRM: Xid (PCI:0000:3b:00): 154, {line}"])
    router, channel = ErrorRouter(), EventChannel()
    router.add("0000:3b:00", channel, "GPU-1", "nvidia_xid")
    router.route(reader.take())
    (event,) = channel.drain()
    assert event.code == "154" and event.known
    assert event.action == action and event.name == f"GPU recovery action changed: {name}"


def test_xid_154_that_cannot_be_read_goes_to_a_person():
    odd = classify(ErrorEvent("nvidia", "154", "GPU recovery action changed from 0x0 (None) to 0x9 (Something)", 1.0))
    assert odd.action == "inspect" and odd.name.startswith(UNKNOWN) and "0x9 (Something)" in odd.meaning
    bare = classify(ErrorEvent("nvidia", "154", "NVML critical XID event", 1.0, source="nvml"))
    assert bare.action == "inspect"


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
