"""The error sources' state kept across an agent's restarts: the kernel log resumed after the
last record read (a /dev/kmsg-format file here), records overwritten meanwhile counted as lost,
RAS counters counted from their last readings; nothing resumed from another boot or file."""

import json
import time
from types import SimpleNamespace

from fleet.asicmon.errors import EventChannel
from fleet.asicmon.errors.pump import KernelLogPump
from fleet.asicmon.errors.sources import ErrorRouter, KernelLog, RasCounters
from fleet.asicmon.errors.state import SourceState

BOOT = "7f3c1c2e-0000-4000-8000-000000000001"


def _records(first: int, last: int) -> str:
    """kmsg records ``first``..``last`` as /dev/kmsg gives them (with a dictionary line)."""
    return "".join(
        f"3,{seq},{5_000_000 + seq * 1000},-;NVRM: Xid (PCI:0000:3b:00): 95, pid={seq}, name=python3, "
        f"Uncontained: FBHUB. RST: Yes, D-RST: No\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"
        for seq in range(first, last + 1))


def _run(path, state: SourceState, until_position: int, from_start: bool = False) -> tuple[KernelLogPump, int]:
    """An agent's kernel-log follower from start to stop: resumed where ``state`` says, stopped
    once it read up to ``until_position``; the state noted as the agent does. Returns the pump
    and the Xid occurrences it routed."""
    router, channel = ErrorRouter(), EventChannel(bucket_s=86400)
    router.add("0000:3b:00", channel, "GPU-1", "nvidia_xid")
    pump = KernelLogPump(str(path), router, flush_s=0.02, in_process=True, kmsg=True, from_start=from_start,
                         resume=state.log_position(str(path)))
    pump.start()
    deadline = time.monotonic() + 20
    while pump.stats.position != until_position and time.monotonic() < deadline:
        time.sleep(0.02)
    pump.stop()
    state.note_log(str(path), pump.stats.position, kmsg=True)
    state.save()
    return pump, sum(e.count for e in channel.drain())


def test_a_restarted_agent_reads_the_kmsg_records_logged_while_it_was_down(tmp_path):
    kmsg, saved = tmp_path / "kmsg", tmp_path / "state" / "error-sources.json"
    kmsg.write_text(_records(0, 9))
    first, routed = _run(kmsg, SourceState(saved, boot_id=BOOT), until_position=9, from_start=True)
    assert (routed, first.stats.position) == (10, 9)
    with kmsg.open("a") as f:  # logged while the agent was down
        f.write(_records(10, 24))
    again, routed = _run(kmsg, SourceState(saved, boot_id=BOOT), until_position=24)
    assert routed == 15 and again.stats.lost == 0  # every record after the last one read, none twice
    assert json.loads(saved.read_text())["logs"][str(kmsg)]["position"] == 24


def test_records_the_kernel_overwrote_meanwhile_are_counted_lost(tmp_path):
    kmsg, saved = tmp_path / "kmsg", tmp_path / "error-sources.json"
    kmsg.write_text(_records(0, 9))
    _run(kmsg, SourceState(saved, boot_id=BOOT), until_position=9, from_start=True)
    kmsg.write_text(_records(14, 30))  # the ring buffer moved on: 10-13 are gone
    again, routed = _run(kmsg, SourceState(saved, boot_id=BOOT), until_position=30)
    assert (routed, again.stats.lost) == (17, 4)


def test_nothing_is_resumed_from_another_boot_or_another_file(tmp_path):
    saved = tmp_path / "error-sources.json"
    log_file = tmp_path / "kern.log"
    log_file.write_text("x\n" * 10)
    state = SourceState(saved, boot_id=BOOT)
    state.note_log("/dev/kmsg", 1234, kmsg=True)
    state.note_log(str(log_file), 20, kmsg=False)
    state.ras_baseline("0000:c1:00.0")["umc.ue"] = 3
    state.save()
    same = SourceState(saved, boot_id=BOOT)
    assert same.log_position("/dev/kmsg") == 1234 and same.log_position(str(log_file)) == 20
    assert same.ras_baseline("0000:c1:00") == {"umc.ue": 3}
    rebooted = SourceState(saved, boot_id="another-boot")
    assert rebooted.log_position("/dev/kmsg") is None and rebooted.ras_baseline("0000:c1:00") == {}
    assert rebooted.log_position(str(log_file)) == 20  # a file's offset outlives a boot, not a rotation
    rotated = tmp_path / "kern.log.new"  # logrotate's way: a new file moved into place
    rotated.write_text("new file\n")
    rotated.replace(log_file)
    assert SourceState(saved, boot_id=BOOT).log_position(str(log_file)) is None
    saved.write_text("{not json")
    assert SourceState(saved, boot_id=BOOT).log_position("/dev/kmsg") is None  # unreadable: start afresh


def test_ras_errors_while_the_agent_was_down_are_counted_from_the_kept_readings(tmp_path):
    saved = tmp_path / "error-sources.json"
    files = {"ras/umc_err_count": "ue: 1\nce: 4\n"}
    reader = SimpleNamespace(read_text=lambda p: files[p])
    state = SourceState(saved, boot_id=BOOT)
    counters = RasCounters(reader, "0000:c1:00.0", blocks=("umc",), baseline=state.ras_baseline("0000:c1:00.0"))
    assert counters.read(10.0) == []  # the first reading of the first run: where counting starts
    state.save()
    files["ras/umc_err_count"] = "ue: 3\nce: 4\n"  # two uncorrectable errors while the agent was down
    restarted = SourceState(saved, boot_id=BOOT)
    counters = RasCounters(reader, "0000:c1:00.0", blocks=("umc",), baseline=restarted.ras_baseline("0000:c1:00.0"))
    (event,) = counters.read(20.0)
    assert (event.code, event.count) == ("umc.ue", 2)
    without = RasCounters(reader, "0000:c1:00.0", blocks=("umc",))  # as before: a fresh start counts nothing
    assert without.read(20.0) == []


def test_a_kmsg_copy_is_read_record_by_record_whatever_the_read_size(tmp_path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(_records(0, 399))  # far more than one 8 KiB read
    source = KernelLog(str(kmsg), from_start=True, kmsg=True)
    lines = source.read(max_lines=1000)
    assert [int(line.split(",")[1]) for line in lines] == list(range(400))
    assert source.position == 399 and source.lost == 0 and all("SUBSYSTEM" not in line for line in lines)


def test_after_a_reboot_the_kernel_log_is_read_from_its_start(tmp_path):
    """Found here: after a reboot the agent read /dev/kmsg from its end, so the Xids the
    driver logged while the machine booted (they say whether the reboot cured the device) were
    never read. A reboot the agent knows of (its state is of another boot) reads it from the
    start; a first start ever, or a restart in the same boot, does not."""
    kmsg, saved = tmp_path / "kmsg", tmp_path / "error-sources.json"
    kmsg.write_text(_records(0, 9))
    _run(kmsg, SourceState(saved, boot_id=BOOT), until_position=9, from_start=True)
    kmsg.write_text(_records(0, 3))  # the new boot's ring buffer: Xids logged while booting
    rebooted = SourceState(saved, boot_id="the-next-boot")
    assert rebooted.read_from_start(str(kmsg))
    _pump, routed = _run(kmsg, rebooted, until_position=3, from_start=rebooted.read_from_start(str(kmsg)))
    assert routed == 4
    assert not SourceState(saved, boot_id="the-next-boot").read_from_start(str(kmsg))  # same boot again
    assert not SourceState(tmp_path / "none.json", boot_id=BOOT).read_from_start(str(kmsg))  # first start
