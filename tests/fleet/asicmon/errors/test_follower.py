"""The kernel-log follower and its pump: a follower out of the poll's way, one that dies is
started again where it left off (nothing lost, nothing twice), a file read a chunk at a time,
kmsg records resumed by sequence number, malformed lines counted, a bucket that spans
batches merged and one past its boundary kept apart."""

import logging
import math
import os
import signal
import time
from pathlib import Path

import pytest

from fleet.asicmon.errors import EventChannel
from fleet.asicmon.errors.pump import KernelLogPump
from fleet.asicmon.errors.sources import ErrorRouter, KernelLog, boot_time

XID = "NVRM: Xid (PCI:0000:3b:00): 95, pid={}, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No\n"


def _router() -> tuple[ErrorRouter, EventChannel]:
    router, channel = ErrorRouter(), EventChannel(bucket_s=300)
    router.add("0000:3b:00", channel, "GPU-1", "nvidia_xid")
    return router, channel


def _wait(condition, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition()


@pytest.mark.integration  # a child process follows the log
def test_the_follower_runs_in_a_scheduling_group_of_its_own_at_idle_priority(tmp_path):
    (tmp_path / "kern.log").write_text("")
    pump = KernelLogPump(str(tmp_path / "kern.log"), _router()[0], flush_s=0.1)
    pump.start()
    try:
        pid = pump.child.pid
        _wait(lambda: os.sched_getscheduler(pid) == os.SCHED_IDLE, 20)
        assert os.getsid(pid) != os.getsid(0)  # its own session, so its own autogroup
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():  # kernels built with autogroups
            assert autogroup.read_text().split()[-1] == "19"
    finally:
        pump.stop()


@pytest.mark.integration  # the follower is a child process, killed mid-flood
def test_a_follower_that_dies_is_restarted_where_it_left_off(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "fleet.asicmon.errors.pump")
    log_file = tmp_path / "kern.log"
    log_file.write_text("")
    router, channel = _router()
    pump = KernelLogPump(str(log_file), router, flush_s=0.1, from_start=True, duty=0.25, restart_pause_s=(0.2, 1.0))
    pump.start()
    try:
        with log_file.open("a") as f:
            f.writelines(XID.format(i) for i in range(40_000))  # 4 MiB: 4 chunks
        _wait(lambda: pump.stats.lines > 0)
        first, sent = pump.child, pump.stats.lines
        os.kill(first.pid, signal.SIGKILL)  # mid-flood (it sends after its first chunk, at a quarter of a core), with lines not yet sent
        _wait(lambda: pump.stats.restarts == 1 and pump.child is not first)
        with log_file.open("a") as f:
            f.writelines(XID.format(i) for i in range(1000))
            f.write("NVRM: Xid (PCI:0000:3b:00): ninety-five\n")
        _wait(lambda: pump.stats.lines == 41_001, 60)
        time.sleep(0.3)
    finally:
        pump.stop()
    assert 0 < sent < 40_000
    assert "kernel-log follower" in caplog.text and "exit code -9" in caplog.text
    events = channel.drain()  # one, or two where the wall clock crossed a bucket's boundary meanwhile
    assert {e.code for e in events} == {"95"} and len(events) <= 2
    assert sum(e.count for e in events) == 41_000  # every line once: none lost, none twice
    assert (pump.stats.matched, pump.stats.malformed) == (41_000, 1)


def test_a_follower_on_a_thread_reads_and_counts_malformed_lines(tmp_path):
    log_file = tmp_path / "kern.log"
    log_file.write_text("old line\n")
    router, channel = _router()
    pump = KernelLogPump(str(log_file), router, flush_s=0.05, in_process=True)
    pump.start()
    try:
        _wait(lambda: pump.stats.position is not None)  # it stands at the end of the file
        with log_file.open("a") as f:
            f.write(XID.format(1) + "NVRM: Xid (PCI:0000:3b:00): seventy-nine, garbage\nusb 1-1: hello\n")
        _wait(lambda: pump.stats.lines == 3)
    finally:
        pump.stop()
    assert (pump.stats.matched, pump.stats.malformed) == (1, 1)
    assert [e.count for e in channel.drain()] == [1]


def test_a_bucket_spanning_batches_is_one_event_and_the_next_bucket_another(tmp_path):
    booted = boot_time()
    if booted is None:
        pytest.skip("no /proc/stat boot time on this machine")
    boundary = math.ceil((booted + 10_000) / 300) * 300  # a bucket boundary after boot
    log_file = tmp_path / "kmsg.log"  # kmsg records, dated from boot
    log_file.write_text("")
    router, channel = _router()
    pump = KernelLogPump(str(log_file), router, bucket_s=300, flush_s=0.05, from_start=True, in_process=True)
    pump.start()
    try:
        for seq, at in enumerate((-2.0, -1.0, -0.001, 0.0, 1.0), start=1):  # three lines before the boundary, two after
            usec = round((boundary + at - booted) * 1e6)
            with log_file.open("a") as f:
                f.write(f"3,{seq},{usec},-;{XID.format(seq)}")
            _wait(lambda s=seq: pump.stats.lines == s)  # each line in a batch of its own
    finally:
        pump.stop()
    events = channel.drain()
    assert [e.count for e in events] == [3, 2]
    assert events[0].last_seen < boundary <= events[1].first_seen


def test_a_file_is_read_a_chunk_at_a_time_and_lines_cut_by_a_chunk_are_whole(tmp_path):
    path = tmp_path / "kern.log"
    lines = [f"{i} Ünïcode line {'x' * (i % 50)}" for i in range(2000)]
    path.write_bytes(("\n".join(lines) + "\n").encode())
    source = KernelLog(str(path), from_start=True)
    source.CHUNK_BYTES = 1001  # cuts lines, and now and then a two-byte character
    read, chunks = [], 0
    while chunk := source.read():
        read += chunk
        chunks += 1
    assert read == lines and chunks > 50
    assert source.position == path.stat().st_size
    again = KernelLog(str(path), resume=len(("\n".join(lines[:1500]) + "\n").encode()))
    assert again.read() == lines[1500:]  # resumed where a follower left off


def test_kmsg_records_read_before_a_restart_are_skipped(monkeypatch):
    records = [f"4,{seq},{seq * 1000},-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n".encode()
               for seq in (7, 8, 9, 10)]
    monkeypatch.setattr("os.open", lambda path, flags: 99)
    monkeypatch.setattr("os.lseek", lambda fd, pos, how: pytest.fail("a resumed reader reads the ring buffer from its start"))

    def read(fd, size):
        if records:
            return records.pop(0)
        raise BlockingIOError

    monkeypatch.setattr("os.read", read)
    source = KernelLog("/dev/kmsg", resume=8)
    assert [line.split(",")[1] for line in source.read()] == ["9", "10"]
    assert source.position == 10
