"""Kineto's daemon protocol as the agent serves it: datagrams as libkineto sends them, and a
real PyTorch process (the CPU wheel, started with KINETO_USE_DAEMON=1) captured by duration
and by iterations with no change to its code."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from fleet.agent import kineto
from fleet.agent.kineto import CaptureRequest, KinetoDaemon, KinetoError, SocketTaken
from tests.support.disks import small_disk
from tests.support.needs import missing
from tests.support.pytorch_jobs import served_daemon, training_process


@pytest.fixture
def socket_dir():
    """A short folder: libkineto's own socket names in it must fit a Unix socket's path."""
    folder = tempfile.mkdtemp(prefix="kineto-")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB file system: a disk that fills."""
    with small_disk(tmp_path / "small-disk", "256k") as folder:
        yield folder


@pytest.fixture
def daemon(tmp_path):
    with served_daemon(tmp_path / "traces") as served:
        yield served


def _client(daemon) -> socket.socket:
    """A socket named as libkineto names its own (dynoconfigclient<uuid>)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    client.bind(str(Path(daemon.socket_dir) / "dynoconfigclient-test"))
    client.settimeout(2)
    return client


def _send(client, daemon, kind: bytes, payload: bytes) -> tuple[bytes, bytes]:
    client.sendto(kineto.HEADER.pack(len(payload), kind) + payload, kineto.socket_address(daemon.socket_dir))
    data = client.recv(65536)
    size, got = kineto.HEADER.unpack_from(data)
    return got.rstrip(b"\0"), data[kineto.HEADER.size : kineto.HEADER.size + size]


def _req(pids, job_id=0, kinds=3) -> bytes:
    return kineto.REQUEST.pack(kinds, len(pids), job_id) + struct.pack(f"={len(pids)}i", *pids)


def test_a_poll_registers_the_process_with_its_ancestors_and_job(daemon, tmp_path):
    client = _client(daemon)
    kind, config = _send(client, daemon, b"req", _req([4242, 4200, 1], job_id=77))
    assert (kind, config) == (b"req", b"")  # nothing asked of it yet
    process = daemon.processes[4242]
    assert process.ancestors == (4200, 1) and process.job_id == 77 and process.polls == 1


def test_a_gpu_context_is_counted_per_gpu(daemon, tmp_path):
    client = _client(daemon)
    assert _send(client, daemon, b"ctxt", kineto.CONTEXT.pack(3, 100, 0)) == (b"ctxt", struct.pack("=i", 1))
    assert _send(client, daemon, b"ctxt", kineto.CONTEXT.pack(3, 101, 0)) == (b"ctxt", struct.pack("=i", 2))
    assert daemon.processes[101].gpus == {3}


def test_a_capture_is_handed_over_at_the_next_poll_that_asks_for_activities(daemon, tmp_path):
    client = _client(daemon)
    _send(client, daemon, b"req", _req([4242, 1]))
    path = daemon.request_capture(4242, CaptureRequest(duration_ms=1500, record_shapes=True), "cap-1")
    assert path == tmp_path / "traces" / "cap-1_4242.json"
    assert _send(client, daemon, b"req", _req([4242, 1], kinds=1)) == (b"req", b"")  # events only: not yet
    _kind, config = _send(client, daemon, b"req", _req([4242, 1]))
    lines = config.decode().splitlines()
    assert f"ACTIVITIES_LOG_FILE={tmp_path / 'traces' / 'cap-1.json'}" in lines
    assert "ACTIVITIES_DURATION_MSECS=1500" in lines and "PROFILE_REPORT_INPUT_SHAPES=true" in lines
    assert _send(client, daemon, b"req", _req([4242, 1])) == (b"req", b"")  # handed once
    with pytest.raises(KinetoError, match="already being captured"):
        daemon.request_capture(4242, CaptureRequest(), "cap-2")


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"duration_ms": 0}, "duration_ms must be"), ({"duration_ms": 3_600_000}, "duration_ms must be"),
     ({"duration_ms": None, "iterations": 0}, "iterations must be"), ({"duration_ms": None}, "one of the two"),
     ({"duration_ms": 100, "iterations": 5}, "one of the two"), ({"duration_ms": "100\nX=1"}, "duration_ms must be")],
)
def test_a_capture_is_built_from_bounded_fields_only(fields, message):
    with pytest.raises(KinetoError, match=message):
        CaptureRequest(**fields)


@pytest.mark.parametrize("name", ["../x", "a/b", "", "x\nACTIVITIES_LOG_FILE=/etc/passwd", "a b"])
def test_nothing_from_outside_names_a_path(daemon, tmp_path, name):
    client = _client(daemon)
    _send(client, daemon, b"req", _req([5, 1]))
    with pytest.raises(KinetoError, match="letters, digits"):
        daemon.request_capture(5, CaptureRequest(), name)


def test_an_unknown_process_is_refused_in_words(daemon):
    with pytest.raises(KinetoError, match="no process 999 has polled this agent"):
        daemon.request_capture(999, CaptureRequest(), "c")


def test_malformed_datagrams_are_dropped_and_the_daemon_serves_on(daemon, tmp_path):
    client = _client(daemon)
    address = kineto.socket_address(daemon.socket_dir)
    for junk in [b"", b"x" * 10, kineto.HEADER.pack(999, b"req") + b"abc", kineto.HEADER.pack(16, b"req") + _req([1])[:16],
                 kineto.HEADER.pack(4, b"zzz") + b"abcd"]:
        client.sendto(junk or b"\0", address)
    assert _send(client, daemon, b"req", _req([7, 1])) == (b"req", b"")
    assert set(daemon.processes) == {7}


def test_a_socket_another_daemon_serves_is_not_taken_silently(daemon, tmp_path):
    with pytest.raises(SocketTaken, match="KINETO_IPC_SOCKET_DIR"):
        KinetoDaemon(tmp_path / "other", socket_dir=daemon.socket_dir)


def test_a_socket_file_left_by_a_daemon_that_is_gone_is_taken_over(tmp_path, socket_dir):
    first = KinetoDaemon(tmp_path / "t", socket_dir=socket_dir)
    first._sock.close()  # died without removing its socket file
    second = KinetoDaemon(tmp_path / "t", socket_dir=socket_dir)
    second.close()


def test_a_socket_folder_too_long_for_libkinetos_names_is_refused_in_words(tmp_path):
    """Found here: under pytest's tmp_path, processes never polled (their socket paths overflowed)."""
    long = tmp_path / ("x" * 60)
    with pytest.raises(KinetoError, match="longer than 54 bytes"):
        KinetoDaemon(tmp_path / "t", socket_dir=str(long))


@pytest.fixture
def training(tmp_path, daemon):
    """A real PyTorch training loop, started as a user would start it for capture."""
    with training_process(daemon, tmp_path) as proc:
        yield proc


def _events(path) -> list[dict]:
    return json.loads(path.read_bytes())["traceEvents"]


@pytest.mark.integration
def test_a_real_pytorch_process_is_captured_by_duration_then_by_iterations(daemon, training):
    process = daemon.processes[training.pid]
    assert process.ancestors and process.ancestors[0] == os.getpid()  # its parent: this test
    path = daemon.request_capture(training.pid, CaptureRequest(duration_ms=1000), "by-time")
    assert daemon.wait_for_trace(training.pid, deadline_s=30) == path
    ops = [e for e in _events(path) if e.get("cat") == "cpu_op"]
    assert any(e["name"] == "aten::addmm" for e in ops) and len(ops) > 50
    path = daemon.request_capture(training.pid, CaptureRequest(duration_ms=None, iterations=3), "by-steps")
    assert daemon.wait_for_trace(training.pid, deadline_s=30) == path
    steps = [e for e in _events(path) if e["name"] == "Optimizer.step#SGD.step"]
    assert len(steps) == 3  # an iteration is an optimizer step: three of them, whole


@pytest.mark.integration
def test_a_process_that_exits_during_the_capture_is_said_so(daemon, training, tmp_path):
    daemon.request_capture(training.pid, CaptureRequest(duration_ms=60_000), "long")
    time.sleep(6)  # its next poll (every 5 s) takes the capture
    training.kill()
    training.wait()
    with pytest.raises(KinetoError, match=f"process {training.pid} exited during the capture"):
        daemon.wait_for_trace(training.pid, deadline_s=2)


def test_a_jobs_capture_starts_at_one_wall_clock_time_or_on_a_common_iteration(tmp_path):
    by_time = CaptureRequest(duration_ms=2000).config(tmp_path / "t.json", start_time_ms=1_800_000_000_123)
    assert "PROFILE_START_TIME=1800000000123" in by_time.splitlines()
    by_steps = CaptureRequest(duration_ms=None, iterations=5, iteration_roundup=50).config(tmp_path / "t.json")
    assert {"PROFILE_START_ITERATION=0", "PROFILE_START_ITERATION_ROUNDUP=50", "ACTIVITIES_ITERATIONS=5"} <= set(by_steps.splitlines())
    with pytest.raises(KinetoError, match="iteration_roundup must be"):
        CaptureRequest(duration_ms=None, iterations=5, iteration_roundup=0)


def test_the_stages_of_a_capture_waiting_tracing_writing(daemon, tmp_path):
    client = _client(daemon)
    _send(client, daemon, b"req", _req([4242, 1]))
    assert daemon.stage(4242) == ""
    path = daemon.request_capture(4242, CaptureRequest(duration_ms=1000), "staged")
    assert daemon.stage(4242) == "waiting"
    _send(client, daemon, b"req", _req([4242, 1]))
    assert daemon.stage(4242) == "tracing"
    path.write_bytes(b'{"traceEvents": [')
    assert daemon.stage(4242) == "writing"


def test_a_process_is_captured_again_once_its_last_trace_was_taken(daemon, tmp_path):
    """Found here: the agent deletes a stored trace's file, and the daemon took the missing
    file for a capture still running: every later capture of that process was refused."""
    client = _client(daemon)
    _send(client, daemon, b"req", _req([4242, 1]))
    path = daemon.request_capture(4242, CaptureRequest(duration_ms=100), "first")
    _send(client, daemon, b"req", _req([4242, 1]))
    path.write_bytes(b'{"traceEvents": []}\n')
    assert daemon.wait_for_trace(4242, deadline_s=5, settle_s=0.05) == path
    path.unlink()
    assert daemon.request_capture(4242, CaptureRequest(duration_ms=100), "second").name == "second_4242.json"


def test_a_jobs_capture_taken_after_its_start_time_is_said_so(daemon, tmp_path):
    client, me = _client(daemon), os.getpid()  # a process that is alive
    _send(client, daemon, b"req", _req([me, 1]))
    daemon.request_capture(me, CaptureRequest(duration_ms=1000), "late", start_time_ms=int(time.time() * 1000) - 3000)
    _send(client, daemon, b"req", _req([me, 1]))  # it takes the configuration 3 s after the start
    with pytest.raises(KinetoError, match=rf"process {me} polled \d+\.\d s after the job's start time"):
        daemon.wait_for_trace(me, deadline_s=5)


def test_a_jobs_capture_not_polled_by_its_start_time_is_said_so(daemon, tmp_path):
    client, me = _client(daemon), os.getpid()  # a process that is alive
    _send(client, daemon, b"req", _req([me, 1]))
    daemon.request_capture(me, CaptureRequest(duration_ms=1000), "never", start_time_ms=int(time.time() * 1000) + 200)
    with pytest.raises(KinetoError, match=f"process {me} did not poll before the job's start time"):
        daemon.wait_for_trace(me, deadline_s=5)


def test_a_trace_folder_without_room_is_refused_before_asking(full_disk):
    with served_daemon(full_disk / "traces") as daemon:
        client = _client(daemon)
        _send(client, daemon, b"req", _req([4242, 1]))
        with pytest.raises(KinetoError, match=r"has 0\.\d MB free, under the 64 MB a capture needs"):
            daemon.request_capture(4242, CaptureRequest(duration_ms=1000), "full")
        assert 4242 not in daemon._pending


@pytest.mark.integration
def test_a_disk_that_fills_during_the_capture_is_said_so(full_disk, tmp_path):
    """A real process writes its ~400 KB trace onto a 256 KiB disk: cut short, and said so."""
    with served_daemon(full_disk / "traces", min_free_bytes=0) as daemon, training_process(daemon, tmp_path) as proc:
        daemon.request_capture(proc.pid, CaptureRequest(duration_ms=1500), "filled")
        with pytest.raises(KinetoError, match=r"the disk of the agent's trace folder .* is full \(the trace stopped at [\d,]+ bytes\)"):
            daemon.wait_for_trace(proc.pid, deadline_s=30)


ABSTRACT = textwrap.dedent("""
    import os, subprocess, sys, tempfile, threading, time
    from pathlib import Path
    from fleet.agent.kineto import KinetoDaemon
    from tests.support.pytorch_jobs import TRAINING
    daemon = KinetoDaemon(Path(tempfile.mkdtemp()) / "traces")  # no folder: the abstract socket
    threading.Thread(target=daemon.serve, args=(threading.Event(), 0.05), daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k != "KINETO_IPC_SOCKET_DIR"}
    script = Path(tempfile.mkdtemp()) / "train.py"
    script.write_text(TRAINING)
    proc = subprocess.Popen([sys.executable, str(script), "60", "/nonexistent"], env={**env, "KINETO_USE_DAEMON": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 40
    while proc.pid not in daemon.processes and time.monotonic() < deadline:
        time.sleep(0.1)
    print("polled" if proc.pid in daemon.processes else "never polled", flush=True)
    proc.kill()
""")


@pytest.mark.integration
def test_a_process_with_no_socket_folder_polls_the_agent_on_the_abstract_socket(tmp_path):
    """Found here: the agent bound "\\0dynolog" while libkineto sends to "\\0dynolog\\0" (the
    address's length counts the trailing NUL), so with AGENT_KINETO=abstract, the default,
    no process ever polled it. Run in a network namespace of its own: abstract sockets are
    per namespace, and a running agent on this machine must not answer instead."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        missing("the abstract-socket test runs in a network namespace of its own (unshare, as root)")
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", ABSTRACT], capture_output=True, text=True,
                          timeout=90, cwd=Path(__file__).resolve().parents[3],
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    assert done.stdout.strip() == "polled", done.stderr[-2000:]
