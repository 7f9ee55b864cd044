"""Roles on machines of their own that share no folder: two web processes behind a
round-robin proxy, a trace worker, a poll worker and beat, each with its own var/, temporary
folder and emulator state, meeting only through PostgreSQL, Redis, the time-series store and
the object store (issue 30, point 3): two poll workers, and an agent host for the reboot.
The emulated hosts' state is in Redis (EMULATOR_STATE=redis), as no machine shares a disk."""

from __future__ import annotations

import asyncio
import collections
import gzip
import json
import re
import subprocess
import sys
import threading
import time

import pytest
import requests
import websocket
from django.conf import settings
from rest_framework.authtoken.models import Token

from fleet.agent import queues
from fleet.polling import snapshots
from fleet.redis import get_redis
from tests.support.hwmon import write_hwmon_tree
from tests.support.processes import ROOT, Service, child_env, start_beat, start_web, start_worker
from tests.support.sysfs import materialise, user_spec
from tests.support.tiers import starts_processes
from traces.atrace import chrome_trace_bytes
from traces.choices import TraceStatus
from traces.models import Trace
from traces.tasks import trace_queue

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


class RoundRobinProxy:
    """A TCP proxy in a thread: each new connection goes to the next backend in turn (so
    websockets pass as they are); it counts the connections each backend got. stop() closes
    every connection it holds and ends their tasks before its loop ends."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends, self.counts, self.turn = backends, [0] * len(backends), 0
        self.writers: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10), "the proxy did not start"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer) -> None:
        index, self.turn = self.turn, (self.turn + 1) % len(self.backends)
        self.counts[index] += 1
        self.writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.backends[index])
        except OSError:
            self.writers.discard(writer)
            writer.close()
            return
        self.writers.add(up_writer)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader, writer) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.writers.discard(writer)
            writer.close()

    async def _shutdown(self) -> None:
        """Close the listening socket and every connection: each pipe then reads the end of
        its stream and its task ends (no task is left pending when the loop stops)."""
        self.server.close()
        for writer in list(self.writers):
            writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        await self.server.wait_closed()
        await asyncio.sleep(0)  # the transports' closing callbacks run before the loop stops

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def machine_env(root, name: str, store, **more) -> dict:
    """The environment of one machine: its own var/, temporary folder and emulator state
    folder (unused: the emulator's state is in Redis, as on machines that share no disk);
    the one SECRET_KEY of the site (without it each machine makes its own in its var/, and a
    session signed on one web process is refused by the other)."""
    home = root / name
    (home / "tmp").mkdir(parents=True)
    (home / "var").mkdir()
    return child_env(ASICMON_VAR_DIR=home / "var", TRACE_STORAGE_DIR=home / "var" / "traces",
                     EMULATOR_STATE_DIR=home / "var" / "emulator", TMPDIR=home / "tmp",
                     TSDB_BUFFER_DIR=home / "var" / "tsdb-buffer", POLL_INTERVAL=1, SECRET_KEY=settings.SECRET_KEY,
                     EMULATOR_STATE="redis",
                     **store.environment(store.prefix), **more)


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
        polls = [start_worker(machine_env(tmp_path, f"poll{n}", object_store), concurrency=1, node=f"-poll{n}")
                 for n in (1, 2)]
        started.extend(polls)
        beat_env = machine_env(tmp_path, "beat", object_store)
        started.append(start_beat(beat_env, tmp_path / "beat" / "var" / "beat-schedule"))
        ports = [("127.0.0.1", int(u.rsplit(":", 1)[1])) for u in (url1, url2)]
        proxy = RoundRobinProxy(ports)
        try:
            yield {"proxy": proxy, "web1": url1, "web2": url2, "worker": worker, "polls": polls,
                   "root": tmp_path, "services": started, "store": object_store}
        finally:
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


def wait_until(condition, what: str, timeout: float, services=()):
    """The condition's first true value, asked every 0.3 s for up to ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := condition():
            return value
        time.sleep(0.3)
    raise TimeoutError(f"{what} never happened:\n" + "\n".join(f"--- {s.name}\n{s.output()[-3000:]}" for s in services))


def shards_polled(worker) -> set[int]:
    """The shards a poll worker has polled, from its log ("fleet.polling: shard 0 cycle …")."""
    return {int(m.group(1)) for line in list(worker.lines) if (m := SHARD_POLLED.search(line))}


SHARD_POLLED = re.compile(r"fleet\.polling(?:\.poller)?: shard (\d+) cycle ")


def test_a_job_across_devices_of_two_poll_workers_is_captured_and_viewed(machines, operator, viewer, seeded_fleet):
    """A job on a device of each emulated host, whose shards the two poll-worker machines
    poll, captured by the trace worker and viewed on web 2."""
    from fleet.polling.sharding import shard_of_host
    from traces.choices import JobStatus, RankStatus
    from traces.models import Job

    hosts_of = collections.defaultdict(dict)  # type -> {host id: device}
    for device in seeded_fleet:
        hosts_of[device.device_type].setdefault(device.host_id, device)
    devices = next(list(found.values()) for found in hosts_of.values() if len(found) == 2)
    shards = {shard_of_host(d.host_id) for d in devices}
    assert len(shards) == 2  # the job's devices are in two shards
    one, two = machines["polls"]
    wait_until(lambda: any(a != b for a in shards_polled(one) for b in shards_polled(two)),
               "each poll worker polling a shard of its own", 90, machines["polls"])
    operate = {"Authorization": f"Token {Token.objects.create(user=operator).key}"}
    response = requests.post(f"{machines['proxy'].url}/api/jobs/capture/", headers=operate, timeout=30,
                             json={"devices": [d.id for d in devices], "duration_s": 1})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    job = wait_until(lambda: (j := Job.objects.get(pk=job_id)).status in (JobStatus.READY, JobStatus.FAILED) and j,
                     f"job {job_id} done", 240, [machines["worker"]])
    assert job.status == JobStatus.READY, job.error
    ranks = list(job.ranks.select_related("trace").order_by("rank"))
    assert [r.device_id for r in ranks] == [d.id for d in devices]
    assert all(r.status == RankStatus.READY and r.events > 0 and r.trace.raw_file for r in ranks), [(r.status, r.error) for r in ranks]
    view = {"Authorization": f"Token {Token.objects.create(user=viewer).key}"}
    shown = requests.get(f"{machines['web2']}/api/jobs/{job_id}/", headers=view, timeout=30)
    assert shown.status_code == 200 and len(shown.json()["ranks"]) == 2, shown.text[:300]
    assert machines["store"].keys(f"{machines['store'].prefix}/")  # its traces are in the object store
    for name in ("poll1", "poll2", "traces"):
        assert not (machines["root"] / name / "var" / "traces").exists(), name


@pytest.fixture
def agent_machine(machines, object_store, settings, tmp_path):
    """An agent host: ``python -m fleet.agent`` in a working directory of its own (not the
    repository's), with its own var/, a sysfs of three VT-100 cards and a user spec that
    declares their reboot."""
    home = tmp_path / "node-a"
    sysfs = materialise(home / "sys" / "class")
    spec = user_spec(home / "specs", sysfs)
    env = machine_env(tmp_path, "node-a", object_store, AGENT_HOST="node-a", HWMON_ROOT=write_hwmon_tree(home / "hwmon"),
                      ASIMOV_SPEC_DIRS=spec.parent, PYTHONPATH=ROOT)
    agent = Service("agent", [sys.executable, "-m", "fleet.agent"], env, cwd=home)
    try:
        agent.wait_for_line("ready.", timeout=120)
        yield {"agent": agent, "sysfs": sysfs, "home": home}
    finally:
        agent.stop()
        get_redis().delete(queues.agent_queue_name("node-a"))


def test_an_operators_reboot_reaches_the_agent_host_and_the_device_comes_back(machines, agent_machine, operator):
    """An operator signs in on one web process and asks for a reboot on the other; the agent
    machine writes the reset, and its polls (sent by beat on another machine) see it back."""
    from fleet.choices import ActionKind, ActionStatus, DeviceState
    from fleet.models import Action, Device

    sysfs, services = agent_machine["sysfs"], [agent_machine["agent"], *machines["services"]]
    serial = (sysfs / "vt0" / "serial").read_text().strip()
    device = wait_until(lambda: Device.objects.filter(serial=serial, host__name="node-a").first(),
                        "the agent's registration", 120, services)
    session, proxy = requests.Session(), machines["proxy"].url
    session.get(f"{proxy}/accounts/login/", timeout=30)
    signed_in = session.post(f"{proxy}/accounts/login/", timeout=30, allow_redirects=False, data={
        "username": operator.username, "password": f"{operator.username}-password-123",
        "csrfmiddlewaretoken": session.cookies["csrftoken"]})
    assert signed_in.status_code == 302, signed_in.text[:500]
    asked = session.post(f"{proxy}/api/devices/{device.id}/actions/", json={"action": "reboot"}, timeout=30,
                         headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": proxy + "/"})
    assert asked.status_code in (200, 201, 202), asked.text[:500]
    wait_until(lambda: (sysfs / "vt0" / "reset").read_text() == "1", "the agent's reset write", 120, services)
    assert (sysfs / "vt1" / "reset").read_text() == "0\n"  # only the device asked for
    action = Action.objects.get(device=device, kind=ActionKind.REBOOT)
    wait_until(lambda: Action.objects.get(pk=action.pk).status == ActionStatus.SUCCEEDED, "the reboot's success", 180, services)
    assert Device.objects.get(pk=device.pk).state == DeviceState.IN_SERVICE
    assert not (machines["root"] / "node-a" / "var" / "traces").exists()


def test_a_fault_injected_on_another_machine_is_seen_by_the_poll_workers(machines, viewer, seeded_fleet, object_store):
    """The emulator's command line on a machine of its own (its own working directory and
    var/) hangs a device: the poll-worker machines, which share no folder with it, poll the
    hang from the host's state in Redis, and the API on a web machine shows the device
    critical; the polls carry the host's state on in Redis; the command line clears the
    hang (unless a worker's remediation cured it first) and the device is healthy again."""
    tmp = machines["root"]
    device = seeded_fleet[2]
    env = machine_env(tmp, "console", object_store, PYTHONPATH=ROOT)
    view = {"Authorization": f"Token {Token.objects.create(user=viewer).key}"}

    def emulator(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "emulator", *args], env=env, cwd=tmp / "console",
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def health() -> str:
        shown = requests.get(f"{machines['web2']}/api/devices/{device.id}/", headers=view, timeout=30)
        assert shown.status_code == 200, shown.text[:300]
        return shown.json()["health"]

    def emulated_now() -> float:  # the time of the host's state in Redis: its last poll
        body = get_redis().hget(f"{settings.REDIS_KEY_PREFIX}:emulator:{device.host.name}", "body")
        return json.loads(body)["t"]

    services = machines["services"]
    wait_until(lambda: health() == "healthy", "the device's first healthy polls", 90, services)
    injected_at = time.time()
    assert emulator("inject", device.serial, "hang") == f"{device.serial}: injected hang\n"
    wait_until(lambda: health() == "critical", "the hang in a poll", 60, services)
    finding = {f["rule"] for f in snapshots.read_snapshots([device.id])[device.id]["health_findings"] or []}
    assert "driver" in finding, finding
    wait_until(lambda: emulated_now() > injected_at + 2, "polls after the injection in the host's state", 30, services)
    emulator("clear", device.serial, "hang")
    assert "faults: none" in emulator("show", device.serial)
    wait_until(lambda: health() == "healthy", "the device healthy again", 90, services)
    assert not (tmp / "console" / "var" / "emulator").exists()  # nothing kept on its disk
    assert not any((tmp / name / "var" / "emulator").exists() for name in ("poll1", "poll2", "web1", "web2"))


def chrome_trace_bytes_of_a_capture() -> bytes:
    from emulator.workloads.tracing import capture

    return chrome_trace_bytes(capture("gpu", 0.05, sw_version="2.0", seed=7))
