"""The fleet page and its websocket with a large fleet (default 1,250 hosts x 8 = 10,000 devices).

    DATABASE_URL=postgres://… REDIS_URL=redis://…/N python benchmarks/bench_fleet_page.py [--hosts 1250]

Prints, for the fleet size asked for:
- page: server time (wall and CPU, median), SQL queries and HTML bytes of the fleet page and
  of the table partial, for a few filters, sorts and pages;
- socket: the bytes one fleet-page websocket receives per poll cycle (every shard polled
  once) for a page of 50 rows, a page of 200 rows and a health-filtered page, against the
  whole fleet's poll messages that every socket received before;
- the summary a process computes once per poll message, and the old whole-fleet read.

Runs on a throwaway database it creates and drops, and on Redis keys under its own prefix.
The snapshots are real ones (a few emulated hosts probed once), repeated over the fleet.
Figures depend on the machine and its load: say which when you quote them.
"""

import argparse
import asyncio
import json
import os
import tempfile
import time

from harness import django_env, load_average, median, throwaway_database

SHARDS = 4


def setup(args) -> None:
    os.environ.update(
        FLEET_HOSTS="4", FLEET_DEVICES_PER_HOST="8", EMULATOR_STATE_DIR=tempfile.mkdtemp(prefix="asicmon-benchpage-"),
        REDIS_KEY_PREFIX="asicmon-bench-page", POLL_SHARDS=str(SHARDS), LOG_LEVEL="WARNING",
    )
    django_env()
    from django.test.utils import setup_test_environment

    setup_test_environment()


def wipe_redis() -> None:
    from django.conf import settings

    from fleet.redis import get_redis

    client = get_redis()
    keys = list(client.scan_iter(f"{settings.REDIS_KEY_PREFIX}:*", count=1000))
    if keys:
        client.delete(*keys)


def real_snapshots() -> list[dict]:
    from emulator import fleet_layout
    from fleet.hosts import emulated_fleet

    monitors = [emulated_fleet.host_monitor(h.name) for h in fleet_layout(emulated_fleet.fleet_config())]
    now = time.time()
    for m in monitors:
        m.poll(now - 5)
    return [s for m in monitors for s in m.poll(now).values()]


def build_fleet(hosts: int, snaps: list[dict]) -> dict[int, list[dict]]:
    """Hosts and devices in the database, snapshots and the health index in Redis, as after a
    poll: one device in 50 warning, one in 400 critical. Returns each shard's poll lines."""
    from fleet import events
    from fleet.health import index as health_index
    from fleet.models import Device, Host
    from fleet.polling import snapshots

    types = ["gpu", "inference", "video"]
    made = Host.objects.bulk_create([Host(name=f"host-{i:05d}") for i in range(hosts)])
    devices = Device.objects.bulk_create(
        [Device(host=h, serial=f"SN-{h.id:05d}-{j}", device_type=types[j % 3], index=j) for h in made for j in range(8)]
    )
    now = time.time()
    lines: dict[int, list[dict]] = {shard: [] for shard in range(SHARDS)}
    polled = {}
    for n, device in enumerate(devices):
        health = "critical" if n % 400 == 7 else "warning" if n % 50 == 3 else "healthy"
        snapshot = {**snaps[n % len(snaps)], "sample_ts": now, "health": health, "health_reasons": []}
        snapshot["health_findings"] = [] if health == "healthy" else [
            {"rule": "cooling", "level": health, "reason": "hot for its power", "values": {}}
        ]
        polled[device.id] = snapshot
        lines[device.host_id % SHARDS].append(events.device_line(device.id, snapshot))
    snapshots.write_snapshots(now // 5 * 5, polled)
    health_index.record(polled, now)
    return lines


def viewer_client():
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from fleet.roles import ensure_roles

    ensure_roles()
    user = User.objects.create_user(username="bench-viewer", password="bench-viewer-password")
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client()
    client.force_login(user)
    return client


def time_page(client, url: str, params: dict, repeat: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        response = client.get(url, params)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert response.status_code == 200, response.content[:300]
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params)
    return {
        "wall_ms": median(walls) * 1000, "cpu_ms": median(cpus) * 1000,
        "queries": len(captured.captured_queries), "bytes": len(response.content),
    }


def page_figures(client, repeat: int) -> None:
    asks = [
        ("fleet page, default (50 rows)", "/", {}),
        ("fleet page, health=warning, sort=health", "/", {"health": "warning", "sort": "health"}),
        ("fleet page, search 'SN-0042'", "/", {"q": "SN-0042"}),
        ("table partial, page 100 of 50 rows", "/fleet/table/", {"page": 100}),
        ("table partial, type=gpu, sort=health, 200 rows", "/fleet/table/", {"type": "gpu", "sort": "health", "per_page": 200}),
    ]
    print(f"  page: server time, median of {repeat} (test client, session and middleware included)")
    for label, url, params in asks:
        f = time_page(client, url, params, repeat)
        print(f"    {label:48s} {f['wall_ms']:7.1f} ms wall {f['cpu_ms']:7.1f} ms CPU  "
              f"{f['queries']:2d} queries  {f['bytes'] / 1000:7.1f} kB")


async def socket_bytes(cookie: str, subscribe: list[int] | None, lines: dict[int, list[dict]], cycles: int) -> list[int]:
    """Bytes one fleet socket receives per cycle (every shard's poll message published once)."""
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator
    from django.db import connections

    from dashboard.asgi import application
    from fleet import events

    communicator = WebsocketCommunicator(application, "/ws/fleet/", headers=[(b"cookie", cookie.encode()), (b"origin", b"http://127.0.0.1")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    if subscribe is not None:
        await communicator.send_json_to({"type": "subscribe", "devices": subscribe})
        await communicator.receive_from(timeout=10)
    per_cycle = []
    base = time.time() // 5 * 5
    for c in range(cycles):
        for shard, shard_lines in lines.items():
            await sync_to_async(events.shard_polled)(shard, base + 5 * c, [x["id"] for x in shard_lines])
        received = 0
        while not await communicator.receive_nothing(timeout=2):
            received += len((await communicator.receive_from(timeout=5)).encode())
        per_cycle.append(received)
    await communicator.disconnect()
    await sync_to_async(connections.close_all)()  # the thread's connection: the database is dropped later
    return per_cycle


def socket_figures(client, lines: dict[int, list[dict]]) -> None:
    from django.conf import settings

    from fleet.health.index import read
    from fleet.reading import queries

    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    healths = read()
    whole = sum(len(json.dumps({"type": "fleet.polled", "cycle": 0.0, "devices": shard})) for shard in lines.values())
    print(f"  socket: bytes per client per cycle ({SHARDS} shard messages a cycle); before, every client got "
          f"the whole fleet: {whole / 1e6:.2f} MB")
    cases = [
        ("default page (first 50 rows, no subscribe)", None),
        ("subscribed to page 100 (50 rows)", [r.device.id for r in queries.table_page(queries.TableQuery(page=100), healths).rows]),
        ("subscribed to 200 rows", [r.device.id for r in queries.table_page(queries.TableQuery(per_page=200), healths).rows]),
        ("subscribed to the warning devices' first page", [r.device.id for r in queries.table_page(queries.TableQuery(health="warning"), healths).rows]),
    ]
    for label, ids in cases:
        per_cycle = asyncio.run(socket_bytes(cookie, ids, lines, cycles=3))
        print(f"    {label:48s} first cycle {per_cycle[0] / 1000:6.1f} kB (with the summary), "
              f"next cycles {median(per_cycle[1:]) / 1000:6.1f} kB")


def publish_figures(lines: dict[int, list[dict]], listeners: int = 10) -> None:
    """What publishing one cycle costs the worker with `listeners` members in the shard
    groups (the channel layer serialises and stores a group message once per member: one
    per web process with a fleet page open, fleet/fanout.py)."""
    import msgpack
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from fleet import events

    layer = get_channel_layer()
    names = [async_to_sync(layer.new_channel)() for _ in range(listeners)]
    for shard in lines:
        for name in names:
            async_to_sync(layer.group_add)(events.shard_group(shard), name)
    base = time.time() // 5 * 5
    wall, cpu = time.perf_counter(), time.process_time()
    for shard, shard_lines in lines.items():
        events.shard_polled(shard, base, [x["id"] for x in shard_lines])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"  publish one cycle with {listeners} web processes listening (worker side): {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU")
    now = sum(len(msgpack.packb({"type": "fleet.polled", "poll": "0" * 32, "shard": s, "cycle": base}))
              for s in lines)
    before = sum(len(msgpack.packb({"type": "fleet.polled", "shard": s, "cycle": base, "devices": ls})) for s, ls in lines.items())
    print(f"  channel layer, per web process per cycle (what its poll listener reads and decodes): "
          f"{now} bytes; the polled ids are read once per process (before: {before / 1e6:.2f} MB of lines)")
    for shard in lines:
        for name in names:
            async_to_sync(layer.group_discard)(events.shard_group(shard), name)
    async_to_sync(layer.flush)()


def summary_figures(repeat: int) -> None:
    from fleet.health.index import read
    from fleet.reading import queries

    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        queries.fleet_summary(read())
        walls.append(time.perf_counter() - t0)
    size = len(json.dumps(queries.fleet_summary(read()).to_json()))
    print(f"  summary (health index + 2 queries), computed once per poll message per web process: "
          f"{median(walls) * 1000:.1f} ms, {size / 1000:.1f} kB as JSON")


def profile() -> None:
    from fleet.health import index as health_index
    from fleet.models import Device
    from fleet.polling import snapshots
    from fleet.reading import queries

    def timed(label, step, repeat=5):
        walls = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = step()
            walls.append(time.perf_counter() - t0)
        print(f"    {label:40s} {median(walls) * 1000:7.1f} ms")
        return result

    healths = timed("health index read", health_index.read)
    timed("device ids and hosts (SQL)", lambda: list(Device.objects.order_by().values_list("id", "host_id")))
    timed("summary", lambda: queries.fleet_summary(healths))
    timed("table page", lambda: queries.table_page(queries.TableQuery(), healths))
    timed("table page, sort=health", lambda: queries.table_page(queries.TableQuery(sort="health"), healths))
    timed("matching ids", lambda: list(queries._matching(queries.TableQuery()).values_list("id", flat=True)))
    timed("snapshots of 50", lambda: snapshots.read_snapshots(list(range(1, 51))))
    timed("device types", queries.device_types)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=1250)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="time the parts of a page instead")
    args = parser.parse_args()
    setup(args)

    wipe_redis()
    with throwaway_database():
        try:
            lines = build_fleet(args.hosts, real_snapshots())
            if args.profile:
                return profile()
            print(f"Fleet page benchmark — {args.hosts * 8:,} devices ({args.hosts:,} hosts x 8), load average {load_average()}")
            client = viewer_client()
            page_figures(client, args.repeat)
            summary_figures(args.repeat)
            publish_figures(lines)
            socket_figures(client, lines)
        finally:
            wipe_redis()


if __name__ == "__main__":
    main()
