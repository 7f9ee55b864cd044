"""A whole worker that dies (SIGKILL of the worker and its pool) gives its shard back.

On RabbitMQ the unacknowledged task returns as soon as the worker's connection drops, and
the next worker to consume polls the cycle while it is still current. On Redis it returns
only after the visibility timeout (opt-in below: ASICMON_SLOW_BROKER_TESTS=1).
"""

import contextlib
import os
import signal
import socket
import subprocess
import time

import pytest
from django.conf import settings
from kombu import Connection

from fleet.hosts import emulated_fleet
from fleet.polling import poller, snapshots
from fleet.tasks import poll_fleet
from tests.support.needs import missing
from tests.support.processes import child_env, start_worker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

RABBITMQ_URL = os.environ.get("ASICMON_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


def rabbitmq_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=1):
            pass
        with Connection(RABBITMQ_URL, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except OSError:
        return False


def kill_whole_worker(worker) -> None:
    """SIGKILL the worker and every process of its pool, as if its machine had died."""
    pool = subprocess.run(["pgrep", "-P", str(worker.proc.pid)], capture_output=True, text=True).stdout.split()
    os.kill(worker.proc.pid, signal.SIGKILL)
    for pid in pool:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    worker.proc.wait(timeout=10)


def cycle_complete(cycle: float, devices: int):
    latest = snapshots.read_snapshots()
    return len(latest) == devices and all(s["cycle"] == cycle for s in latest.values())


def run_whole_worker_kill(seeded_fleet, broker_url: str, queue: str, wait: float, **env) -> float | None:
    """Seconds from the kill until a fresh worker has polled the killed worker's cycle
    (None if it has not within `wait` seconds of the fresh worker's start)."""
    hung = seeded_fleet[0]
    emulated_fleet.host_monitor(hung.host.name).inject_fault(hung.serial, "hang")  # its shard blocks for 2 s
    worker_env = child_env(CELERY_BROKER_URL=broker_url, CELERY_QUEUE=queue, POLL_INTERVAL=90, PROBE_TIMEOUT=5, **env)
    first = start_worker(worker_env)
    second = None
    try:
        cycle = poller.current_cycle()
        with Connection(broker_url) as conn:
            poll_fleet.apply_async((cycle,), connection=conn, queue=queue)
        first.wait_for_line("poll_shard", timeout=30)
        time.sleep(1.0)  # the hung shard is running
        kill_whole_worker(first)
        killed_at = time.time()
        assert not cycle_complete(cycle, len(seeded_fleet)), "the kill came too late: the cycle was done"
        second = start_worker(worker_env)
        deadline = time.time() + wait
        while not cycle_complete(cycle, len(seeded_fleet)):
            if time.time() > deadline:
                return None
            time.sleep(0.2)
        return time.time() - killed_at
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.stop()


@pytest.fixture
def rabbit_queue():
    if not rabbitmq_answers():
        missing(f"no RabbitMQ answers at {RABBITMQ_URL} (it runs on every developer and CI machine)")
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-rabbitmq"
    yield queue
    with Connection(RABBITMQ_URL) as conn:
        conn.default_channel.queue_delete(queue)


def test_rabbitmq_redelivers_the_shard_of_a_dead_worker_at_once(seeded_fleet, rabbit_queue):
    seconds = run_whole_worker_kill(seeded_fleet, RABBITMQ_URL, rabbit_queue, wait=30)
    # The message came back when the connection dropped: the wait is the new worker's
    # start-up and one poll, far below Redis's 300 s visibility timeout.
    assert seconds is not None, "the killed worker's shard never came back"
    assert seconds < 60


def test_redis_holds_the_shard_of_a_dead_worker_until_its_visibility_timeout(seeded_fleet):
    """Why RabbitMQ is the production broker: on Redis the same kill leaves the cycle unpolled
    while a fresh worker waits (the shard returns after the visibility timeout, expired)."""
    if os.environ.get("ASICMON_SLOW_BROKER_TESTS") != "1":
        pytest.skip("shows Redis holding a dead worker's task for a minute; set ASICMON_SLOW_BROKER_TESTS=1")
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-redis-kill"
    assert run_whole_worker_kill(seeded_fleet, settings.REDIS_URL, queue, wait=30) is None
