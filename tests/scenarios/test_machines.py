"""Roles on machines of their own that share no folder: two web processes behind a
round-robin proxy, a trace worker, a poll worker and beat, each with its own var/, temporary
folder and emulator state, meeting only through PostgreSQL, Redis, the time-series store and
the object store (issue 30, point 3; the agent and a job capture across two poll workers are
not in it yet)."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time

import pytest
import requests
import websocket
from django.conf import settings
from rest_framework.authtoken.models import Token

from tests.support.processes import child_env, start_beat, start_web, start_worker
from tests.support.tiers import starts_processes
from traces.atrace import chrome_trace_bytes
from traces.choices import TraceStatus
from traces.models import Trace
from traces.tasks import trace_queue

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class RoundRobinProxy:
    """A TCP proxy in a thread: each new connection goes to the next backend in turn (so
    websockets pass as they are); it counts the connections each backend got."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends, self.counts, self.turn = backends, [0] * len(backends), 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer) -> None:
        index, self.turn = self.turn, (self.turn + 1) % len(self.backends)
        self.counts[index] += 1
        up_reader, up_writer = await asyncio.open_connection(*self.backends[index])
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    @staticmethod
    async def _pipe(reader, writer) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)


def machine_env(root, name: str, store) -> dict:
    """The environment of one machine: its own var/, temporary folder and emulator state;
    the one SECRET_KEY of the site (without it each machine makes its own in its var/, and a
    session signed on one web process is refused by the other)."""
    home = root / name
    (home / "tmp").mkdir(parents=True)
    (home / "var").mkdir()
    return child_env(ASICMON_VAR_DIR=home / "var", TRACE_STORAGE_DIR=home / "var" / "traces",
                     EMULATOR_STATE_DIR=home / "var" / "emulator", TMPDIR=home / "tmp",
                     TSDB_BUFFER_DIR=home / "var" / "tsdb-buffer", POLL_INTERVAL=1, SECRET_KEY=settings.SECRET_KEY,
                     **store.environment(store.prefix))


@pytest.fixture
@starts_processes
def machines(object_store, seeded_fleet, tmp_path):
    started = []
    try:
        web1, url1 = start_web(machine_env(tmp_path, "web1", object_store))
        started.append(web1)
        web2, url2 = start_web(machine_env(tmp_path, "web2", object_store))
        started.append(web2)
        worker = start_worker(machine_env(tmp_path, "traces", object_store), concurrency=1, queue=trace_queue())
        started.append(worker)
        started.append(start_worker(machine_env(tmp_path, "poll", object_store), concurrency=1))
        beat_env = machine_env(tmp_path, "beat", object_store)
        started.append(start_beat(beat_env, tmp_path / "beat" / "var" / "beat-schedule"))
        ports = [("127.0.0.1", int(u.rsplit(":", 1)[1])) for u in (url1, url2)]
        proxy = RoundRobinProxy(ports)
        yield {"proxy": proxy, "web1": url1, "web2": url2, "worker": worker, "root": tmp_path, "services": started}
        proxy.stop()
    finally:
        for service in reversed(started):
            service.stop()


def wait_ready(trace_id: int, worker, timeout: float = 120) -> Trace:
    deadline = time.time() + timeout
    while time.time() < deadline:
        trace = Trace.objects.get(pk=trace_id)
        if trace.status in (TraceStatus.READY, TraceStatus.FAILED):
            assert trace.status == TraceStatus.READY, f"{trace.error}\n{worker.output()}"
            return trace
        time.sleep(0.2)
    raise TimeoutError(f"trace {trace_id} still {Trace.objects.get(pk=trace_id).status}:\n{worker.output()}")


def test_a_capture_on_web_1_runs_on_the_trace_worker_and_is_viewed_on_web_2(machines, operator, viewer, seeded_fleet, object_store):
    proxy = machines["proxy"]
    operate = {"Authorization": f"Token {Token.objects.create(user=operator).key}"}
    view = {"Authorization": f"Token {Token.objects.create(user=viewer).key}"}
    device = seeded_fleet[1]
    before = list(proxy.counts)
    captured = requests.post(f"{proxy.url}/api/devices/{device.id}/capture/", json={"duration_s": 1}, headers=operate, timeout=30)
    assert captured.status_code == 202, captured.text
    assert proxy.counts[0] == before[0] + 1  # the first connection went to web 1
    uploaded = requests.post(f"{proxy.url}/api/traces/", headers=operate, timeout=60,
                             files={"file": ("emulated.json", chrome_trace_bytes_of_a_capture())})
    assert uploaded.status_code == 201, uploaded.text
    assert proxy.counts[1] == before[1] + 1  # the next one to web 2
    for trace_id in (captured.json()["id"], uploaded.json()["id"]):
        trace = wait_ready(trace_id, machines["worker"])
        assert trace.events > 0
        flame = requests.get(f"{machines['web2']}/api/traces/{trace_id}/flame/", headers=view, timeout=30)
        assert flame.status_code == 200, flame.text[:300]
        chrome = requests.get(f"{proxy.url}/api/traces/{trace_id}/download/?format=chrome", headers=view, timeout=30)
        assert chrome.status_code == 200 and b'"traceEvents"' in gzip.decompress(chrome.content)
    for name in ("web1", "web2", "traces"):  # nothing stored on any machine's disk
        assert not (machines["root"] / name / "var" / "traces").exists(), name
    assert list((machines["root"] / "web2" / "var" / "cache" / "trace-views").iterdir())


def test_the_fleet_page_is_live_through_either_web_process(machines, client, viewer, seeded_fleet):
    """Two websockets through the proxy, one on each web process: each receives the polls
    of every device that the poll worker publishes."""
    proxy = machines["proxy"]
    client.force_login(viewer)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    before = list(proxy.counts)
    sockets = [websocket.create_connection(proxy.url.replace("http://", "ws://") + "/ws/fleet/", timeout=5,
                                           cookie=cookie, origin=proxy.url) for _ in range(2)]
    assert [a - b for a, b in zip(proxy.counts, before, strict=True)] == [1, 1]  # one on each web
    expected = {d.id for d in seeded_fleet}
    for ws in sockets:
        seen, deadline = set(), time.time() + 30
        while seen != expected and time.time() < deadline:
            frame = ws.recv()
            assert frame, "closed: " + "\n".join(service.output()[-3000:] for service in machines["services"])
            message = json.loads(frame)
            seen.update(line["id"] for line in message.get("devices", []))
        ws.close()
        assert seen == expected, f"got {sorted(seen)} of {sorted(expected)}"


def chrome_trace_bytes_of_a_capture() -> bytes:
    from emulator.workloads.tracing import capture

    return chrome_trace_bytes(capture("gpu", 0.05, sw_version="2.0", seed=7))
