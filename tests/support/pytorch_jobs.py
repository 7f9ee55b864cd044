"""Real PyTorch processes for the tests of Kineto captures (the CPU wheel): a training loop
and a torchrun job (gloo), started as a user starts them for capture (KINETO_USE_DAEMON=1),
and the agent's Kineto daemon serving them from a short socket folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from fleet.agent.kineto import KinetoDaemon
from tests.support.processes import free_port

#: A training loop: prints "ready <pid>", steps until argv[1] seconds pass or file argv[2] appears.
TRAINING = textwrap.dedent("""
    import os, sys, time, torch
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    print("ready", os.getpid(), flush=True)
    end = time.time() + float(sys.argv[1])
    while time.time() < end and not os.path.exists(sys.argv[2]):
        loss = model(torch.randn(32, 128)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.002)
""")

#: A data-parallel job's rank (gloo): steps until STOP_FILE appears (60 s at most). A rank
#: whose SLOW_RANK is its own rank sleeps SLOW_S more each step (a straggler).
DDP = textwrap.dedent("""
    import os, time
    if os.environ.get("SOCKET_DIR_OF_RANK"):  # one agent "host" per rank on this one machine (before torch)
        os.environ["KINETO_IPC_SOCKET_DIR"] = os.environ["SOCKET_DIR_OF_RANK"].split(",")[int(os.environ["RANK"])]
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    slow = float(os.environ.get("SLOW_S", "0")) if os.environ.get("SLOW_RANK") == os.environ["RANK"] else 0.0
    end = time.time() + 60
    while time.time() < end and not os.path.exists(os.environ["STOP_FILE"]):
        loss = model(torch.randn(8, 32)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.01 + slow)
    dist.destroy_process_group()
""")


@contextlib.contextmanager
def served_daemon(trace_dir: Path, **options) -> Iterator[KinetoDaemon]:
    """The agent's Kineto daemon, serving in a thread from a short socket folder (libkineto's
    own socket names in it must fit a Unix socket's path: not under pytest's tmp_path)."""
    socket_dir = tempfile.mkdtemp(prefix="kineto-")
    daemon = KinetoDaemon(trace_dir, socket_dir=socket_dir, **options)
    stop = threading.Event()
    thread = threading.Thread(target=daemon.serve, args=(stop, 0.05), daemon=True)
    thread.start()
    try:
        yield daemon
    finally:
        stop.set()
        thread.join(5)
        daemon.close()
        shutil.rmtree(socket_dir, ignore_errors=True)


def wait_until(condition, timeout_s: float, what: str, every_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout_s:.0f} s")
        time.sleep(every_s)


def _stop(proc: subprocess.Popen, stop_file: Path, wait_s: float = 20) -> None:
    stop_file.touch()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def training_process(daemon: KinetoDaemon | str, folder: Path, seconds: float = 90, env: dict[str, str] | None = None,
                     polled: Callable[[int], bool] | None = None) -> Iterator[subprocess.Popen]:
    """A real training loop started with KINETO_USE_DAEMON=1, polling ``daemon`` (or the agent
    serving the socket folder given); yielded once ``polled(pid)`` says the agent saw it
    (default: the daemon's own table). Stopped after."""
    socket_dir = daemon if isinstance(daemon, str) else daemon.socket_dir
    polled = polled or (lambda pid: pid in daemon.processes)
    script = folder / "train.py"
    script.write_text(TRAINING)
    stop_file = folder / "stop-training"
    environ = {**os.environ, "KINETO_USE_DAEMON": "1", "KINETO_IPC_SOCKET_DIR": socket_dir, **(env or {})}
    proc = subprocess.Popen([sys.executable, str(script), str(seconds), str(stop_file)], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().split()[:1] == ["ready"], "the training loop did not start"
        wait_until(lambda: polled(proc.pid), 30, "the process never polled the agent's socket")
        yield proc
    finally:
        _stop(proc, stop_file)


@contextlib.contextmanager
def torchrun_job(folder: Path, socket_dirs: list[str], run_id: str,
                 env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """``torchrun --nproc-per-node=len(socket_dirs)`` of the DDP rank on gloo; rank i polls
    the daemon of ``socket_dirs[i]`` (one agent host per rank). Stopped after. (A free port:
    with --master-port=0 the ranks never meet, block in their first collective, and every
    trace of them is empty.)"""
    script = folder / "ddp.py"
    script.write_text(DDP)
    stop_file = folder / "stop-job"
    environ = {**os.environ, "KINETO_USE_DAEMON": "1", "KINETO_IPC_SOCKET_DIR": socket_dirs[0],
               "SOCKET_DIR_OF_RANK": ",".join(socket_dirs), "STOP_FILE": str(stop_file), **(env or {})}
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={len(socket_dirs)}",
               f"--rdzv-id={run_id}", f"--master-port={free_port()}", str(script)]
    proc = subprocess.Popen(command, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        _stop(proc, stop_file, 30)
