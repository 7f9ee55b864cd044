"""The agent's Kineto daemon (fleet/agent/kineto.py) against issue 50's figures.

    python benchmarks/bench_kineto_agent.py [--polls 20000] [--steps 1000]

* **Daemon CPU with 16 polling processes**: the daemon serves in a child process; 16
  client sockets named as libkineto names its own send ``req`` polls as fast as they are
  answered (``--polls`` in all); the child's CPU per poll, times 16 processes polling every
  5 s (libkineto's interval), is the share of a core the agent spends (goal: <= 1 %).
* **A training step with and without the daemon**: a real PyTorch (CPU) training loop of
  ``--steps`` steps, its median step time without ``KINETO_USE_DAEMON`` and with it (the
  daemon serving, no capture), alternated twice; then during a 2 s capture (goal: within 1 %
  with no capture).
* **Request to trace**: a 2 s capture asked of the running process until its trace file is
  whole (the poll wait included: up to 5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from harness import ROOT, cpu_seconds, machine_line, median, peak_rss_mb

from fleet.agent import kineto
from fleet.agent.kineto import CaptureRequest, KinetoDaemon

SERVE = """
import sys, threading
sys.path.insert(0, {root!r})
from fleet.agent.kineto import KinetoDaemon
daemon = KinetoDaemon({traces!r}, socket_dir={sock!r})
print("ready", flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), daemon.close()), daemon=True).start()
daemon.serve(threading.Event())
"""

TRAIN = textwrap.dedent("""
    import json, os, sys, time, torch
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    times = []
    print("ready", os.getpid(), flush=True)
    for step in range(int(sys.argv[1])):
        at, began = time.time(), time.perf_counter()
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append((at, time.perf_counter() - began))
        time.sleep(0.01)
    print(json.dumps(times), flush=True)
""")


def daemon_cpu(polls: int, clients: int = 16) -> float:
    """CPU seconds the daemon's process spends per poll it answers."""
    folder = tempfile.mkdtemp(prefix="kbench-")
    child = subprocess.Popen([sys.executable, "-c", SERVE.format(root=str(ROOT), traces=f"{folder}/t", sock=folder)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()
        socks = []
        for i in range(clients):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(f"{folder}/dynoconfigclient{i:036d}")
            socks.append(s)
        body = kineto.REQUEST.pack(3, 3, 0) + (1000).to_bytes(4, "little") * 3
        message = kineto.HEADER.pack(len(body), b"req") + body
        address = kineto.socket_address(folder)
        before = cpu_seconds(child.pid)
        for k in range(polls):
            s = socks[k % clients]
            s.sendto(message, address)
            s.recv(1024)
        used = cpu_seconds(child.pid) - before
    finally:
        child.stdin.close()
        child.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    return used / polls


def training(steps: int, env: dict, capture: KinetoDaemon | None = None) -> tuple[list[float], float | None]:
    """Step times of a real training loop; with ``capture``, a 2 s capture asked at its
    start: the steps' times during it, and the seconds from the request to the whole file."""
    script = Path(tempfile.mkdtemp(prefix="ktrain-")) / "train.py"
    script.write_text(TRAIN)
    proc = subprocess.Popen([sys.executable, str(script), str(steps)], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    pid = int(proc.stdout.readline().split()[1])
    took = None
    if capture is not None:
        deadline = time.monotonic() + 20
        while pid not in capture.processes and time.monotonic() < deadline:
            time.sleep(0.05)
        asked = time.monotonic()
        capture.request_capture(pid, CaptureRequest(duration_ms=2000), f"bench-{pid}")
        capture.wait_for_trace(pid, deadline_s=60)
        took = time.monotonic() - asked
    stamped = json.loads(proc.stdout.readline())
    if capture is not None:
        began = capture.processes[pid].handed_at
        stamped = [(at, t) for at, t in stamped if began <= at <= began + 2.0]
    times = [t for _at, t in stamped]
    proc.wait(60)
    shutil.rmtree(script.parent, ignore_errors=True)
    return times, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--polls", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    print(machine_line())

    per_poll = daemon_cpu(args.polls)
    share = per_poll * 16 / 5.0
    print(f"daemon: {per_poll * 1e6:.1f} us of CPU per poll; 16 processes polling every 5 s: "
          f"{share * 100:.4f} % of one core (goal <= 1 %)")

    folder = tempfile.mkdtemp(prefix="kbench-")
    daemon = KinetoDaemon(Path(folder) / "traces", socket_dir=folder)
    stop = threading.Event()
    threading.Thread(target=daemon.serve, args=(stop,), daemon=True).start()
    with_daemon = {"KINETO_USE_DAEMON": "1", "KINETO_IPC_SOCKET_DIR": folder}
    medians = {"without": [], "with the daemon": []}
    for _ in range(2):
        medians["without"].append(median(training(args.steps, {})[0]))
        medians["with the daemon"].append(median(training(args.steps, with_daemon)[0]))
    base = statistics.mean(medians["without"])
    for label, values in medians.items():
        mean = statistics.mean(values)
        print(f"training step, {label:16s}: median {mean * 1e3:.3f} ms ({(mean / base - 1) * 100:+.2f} %; runs "
              f"{', '.join(f'{v * 1e3:.3f}' for v in values)})")
    traced, took = training(max(args.steps, 2000), with_daemon, capture=daemon)  # outlasts two polls + 2 s
    print(f"training step during a 2 s capture: median {median(traced) * 1e3:.3f} ms "
          f"({(median(traced) / base - 1) * 100:+.1f} %, {len(traced)} steps)")
    print(f"capture asked -> trace file whole: {took:.2f} s (2 s traced, the process polls every 5 s)")
    stop.set()
    daemon.close()
    shutil.rmtree(folder, ignore_errors=True)
    print(f"(benchmark's own peak memory {peak_rss_mb():.0f} MB)")


if __name__ == "__main__":
    main()
