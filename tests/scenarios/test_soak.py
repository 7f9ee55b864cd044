"""Soak: websockets held open through polling and a pause in polling miss nothing.

Reproduces issue 12's third defect: with redis-py 8, a 5 s read timeout fired inside
channels_redis's blocking receive, closed sockets with 1011 and lost polls. The short soak
(3 minutes: polls every second, a 20 s pause in the middle) runs in `make test`; the long
one (10 minutes at the default interval) with `make soak` (ASICMON_SOAK=long).
"""

import json
import os
import re
import threading
import time
from collections import defaultdict

import pytest
import websocket
from django.conf import settings

from tests.support.processes import child_env, start_beat, start_web, start_worker

pytestmark = [pytest.mark.integration, pytest.mark.soak, pytest.mark.django_db(transaction=True)]

CLIENTS = 12
LOGGED_POLL = re.compile(r"shard (\d+) cycle (\d+): (\d+) devices")


class Client(threading.Thread):
    """One browser-like websocket on /ws/fleet/, recording which devices it got per cycle."""

    def __init__(self, url: str, cookie: str, origin: str):
        super().__init__(daemon=True)
        self.socket = websocket.create_connection(url, timeout=5, cookie=cookie, origin=origin)
        self.received: dict[int, set[int]] = defaultdict(set)
        self.closes: list[str] = []
        self.stopping = threading.Event()

    def run(self):
        self.socket.settimeout(1)
        while not self.stopping.is_set():
            try:
                frame = self.socket.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except (websocket.WebSocketException, OSError) as exc:
                if not self.stopping.is_set():
                    self.closes.append(f"{type(exc).__name__}: {exc}")
                return
            if not frame:
                self.closes.append(f"closed by the server: {self.socket.status}")
                return
            message = json.loads(frame)
            self.received[round(message["cycle"])].update(line["id"] for line in message["devices"])

    def stop(self):
        self.stopping.set()
        self.join(timeout=5)
        self.socket.close()


def published_polls(worker_output: str) -> list[tuple[int, int]]:
    return [(int(s), int(c)) for s, c, n in LOGGED_POLL.findall(worker_output) if int(n) > 0]


def soak(client, viewer, seeded_fleet, tmp_path, *, interval: float, first: float, pause: float, second: float):
    client.force_login(viewer)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    env = child_env(POLL_INTERVAL=interval)
    web, base = start_web(env)
    worker = start_worker(env)
    beat = None
    clients = []
    try:
        ws_url = base.replace("http://", "ws://") + "/ws/fleet/"
        clients = [Client(ws_url, cookie, base) for _ in range(CLIENTS)]
        for c in clients:
            c.start()
        beat = start_beat(env, tmp_path / "beat-1")
        time.sleep(first)
        beat.stop()
        time.sleep(pause)  # nothing is published: sockets must stay open
        beat = start_beat(env, tmp_path / "beat-2")
        time.sleep(second)
        beat.stop()
        time.sleep(max(3.0, 2 * interval))  # the last cycles reach the clients
    finally:
        for c in clients:
            c.stop()
        if beat:
            beat.stop()
        worker.stop()
        web.stop()
    shard_of = {d.id: d.host_id % settings.POLL_SHARDS for d in seeded_fleet}
    expected = published_polls(worker.output())
    assert len({cycle for _, cycle in expected}) >= (first + second) / interval * 0.5, worker.output()
    for number, c in enumerate(clients):
        assert c.closes == [], f"client {number} was closed: {c.closes}"
        missed = [
            (shard, cycle) for shard, cycle in expected
            if {d for d, s in shard_of.items() if s == shard} - c.received.get(cycle, set())
        ]
        assert missed == [], f"client {number} missed {len(missed)} of {len(expected)} shard polls: {missed[:10]}"


@pytest.mark.timeout(480)
def test_sockets_receive_every_poll_through_three_minutes_and_a_pause(client, viewer, seeded_fleet, tmp_path):
    soak(client, viewer, seeded_fleet, tmp_path, interval=1, first=80, pause=20, second=80)


@pytest.mark.timeout(1200)
def test_long_soak_ten_minutes_at_the_default_interval(client, viewer, seeded_fleet, tmp_path):
    if os.environ.get("ASICMON_SOAK") != "long":
        pytest.skip("the 10-minute soak runs with `make soak` (ASICMON_SOAK=long)")
    soak(client, viewer, seeded_fleet, tmp_path, interval=5, first=290, pause=20, second=290)
