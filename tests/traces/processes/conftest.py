"""Two machines with agents and the PyTorch processes polling them, as the agents report
them (rows, no processes): what the requests and the job captures choose from."""

from datetime import UTC, datetime

import pytest

from fleet.agent.registration import register_host
from fleet.models import Host, HostProcess


def _process(host: Host, pid: int, role: str = "process", parent: int | None = None, gpus=(), **job) -> HostProcess:
    now = datetime.now(tz=UTC)
    return HostProcess.objects.create(host=host, pid=pid, role=role, parent=parent, job=job, gpus=list(gpus),
                                      command=f"python train.py --pid {pid}", first_seen=now, last_poll=now)


@pytest.fixture
def machines(db):
    """Two machines without accelerators, their agents alive: a torchrun job of world size 3
    has its launcher and rank 0 on node-a, rank 1 on node-b, and rank 2 nowhere; node-a also
    runs a lone process."""
    a = register_host("node-a", "q.node-a", []).host
    b = register_host("node-b", "q.node-b", []).host
    run = {"TORCHELASTIC_RUN_ID": "run-7", "WORLD_SIZE": "3"}
    _process(a, 100, "launcher", **run)
    _process(a, 101, "rank", parent=100, RANK="0", **run)
    _process(b, 201, "rank", parent=200, RANK="1", **run)
    _process(a, 300)
    return a, b
