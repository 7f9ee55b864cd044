"""The fleet page's live path at scale: many fleet pages open on two web processes while a
large fleet is polled.

    DATABASE_URL=postgres://… python benchmarks/bench_live_path.py [--devices 1000,10000] [--pages 50,100,200] [--tabs 1]

For each fleet size and each number of open pages it:
- puts the fleet in the database (hosts of 8 devices) and real snapshots in Redis;
- runs 2 web processes (Daphne, as the tests start them) and opens that many websockets
  on /ws/fleet/ (websocket-client; each page its own signed-in viewer, or --tabs pages per
  viewer's session as a browser's tabs share one), spread over the two, each
  subscribed to its own page of the table (page numbers, type and health filters, sorts,
  page sizes) as the page's script does: the ids of the rows it shows;
- polls: every cycle, each shard's snapshots and health index are written and its message
  published with the code the poll worker calls (fleet.polling.snapshots, fleet.health.index,
  fleet.events.shard_polled);
- prints: the share of the expected updates (each page, each cycle, each shown device) that
  arrived; the delay from a shard's publish to a page receiving it (p50, p99, max); the web
  processes' CPU seconds per cycle (from /proc, each process); Redis commands per cycle
  (INFO commandstats delta) and bytes in and out of Redis per cycle, minus what the poll's
  own writes cost (measured in a cycle with no page open).

Runs on a throwaway database, and on a Redis server of its own (a redis-server on a free
port, so that other users of the shared Redis do not count). Figures depend on the machine
and its load: the load average is printed with them.
"""

import argparse
import os
import random
import tempfile
import time

from harness import (
    FleetSocket,
    Report,
    cpu_seconds,
    django_env,
    load_average,
    percentile,
    real_snapshots,
    signed_in_cookie,
    start_redis,
    start_web,
    throwaway_database,
)

HOSTS_DEVICES = 8


def setup(args, redis_url: str) -> None:
    os.environ.update(
        FLEET_HOSTS="4", FLEET_DEVICES_PER_HOST="8", EMULATOR_STATE_DIR=tempfile.mkdtemp(prefix="asicmon-benchlive-"),
        REDIS_URL=redis_url, CELERY_BROKER_URL=redis_url, REDIS_KEY_PREFIX="asicmon-bench-live",
        POLL_SHARDS=str(args.shards), POLL_INTERVAL=str(args.interval), LOG_LEVEL="WARNING",
    )
    django_env()
    from django.test.utils import setup_test_environment

    setup_test_environment()


class Fleet:
    """Hosts and devices in the database; a poll of a shard writes their snapshots."""

    def __init__(self, devices: int, snaps: list[dict], shards: int):
        from fleet.health import index as health_index
        from fleet.models import Device, Host
        from fleet.polling import snapshots

        snapshots.forget_snapshots(list(Device.objects.values_list("id", flat=True)))
        health_index.forget(list(Device.objects.values_list("id", flat=True)))
        Device.objects.all().delete()
        Host.objects.all().delete()
        types = ["gpu", "inference", "video"]
        hosts = Host.objects.bulk_create([Host(name=f"host-{i:05d}") for i in range(devices // HOSTS_DEVICES)])
        made = Device.objects.bulk_create([
            Device(host=h, serial=f"SN-{h.id:05d}-{j}", device_type=types[j % 3], index=j)
            for h in hosts for j in range(HOSTS_DEVICES)
        ])
        self.shard_of = {d.id: d.host_id % shards for d in made}
        self.by_shard = {s: [d for d, ds in self.shard_of.items() if ds == s] for s in range(shards)}
        self.snaps = snaps
        self.health = {
            d.id: "critical" if n % 400 == 7 else "warning" if n % 50 == 3 else "healthy" for n, d in enumerate(made)
        }

    def poll(self, shard: int, cycle: float) -> float:
        """One shard's poll, as the worker writes and publishes it; returns the publish time."""
        from fleet import events
        from fleet.health import index as health_index
        from fleet.polling import snapshots

        now = time.time()
        polled = {}
        for n, device_id in enumerate(self.by_shard[shard]):
            health = self.health[device_id]
            snapshot = {**self.snaps[n % len(self.snaps)], "sample_ts": now, "health": health, "health_reasons": []}
            snapshot["health_findings"] = [] if health == "healthy" else [
                {"rule": "cooling", "level": health, "reason": "hot for its power", "values": {}}
            ]
            polled[device_id] = snapshot
        snapshots.write_snapshots(cycle, polled)
        health_index.record(polled, cycle)
        published = time.time()
        events.shard_polled(shard, cycle, list(polled))
        return published


def page_queries(count: int, devices: int) -> list:
    """`count` different pages of the table, as people open them: page numbers over the
    whole fleet, type and health filters, health sort, larger pages now and then."""
    from fleet.reading.queries import TableQuery

    rng = random.Random(count * 7919 + devices)
    pages = max(1, devices // 50)
    asks = []
    for n in range(count):
        kind = n % 5
        if kind == 0:
            asks.append(TableQuery(page=1 + (n * 37) % pages))
        elif kind == 1:
            asks.append(TableQuery(device_type=["gpu", "inference", "video"][n % 3], page=1 + rng.randrange(max(1, pages // 3))))
        elif kind == 2:
            asks.append(TableQuery(sort="health", page=1 + rng.randrange(pages)))
        elif kind == 3:
            asks.append(TableQuery(health="warning", page=1 + rng.randrange(max(1, devices // 50 // 50))))
        else:
            asks.append(TableQuery(page=1 + rng.randrange(max(1, devices // 200)), per_page=200))
    return asks


def signed_in_cookies(count: int) -> list[str]:
    """Session cookies of `count` viewers, each signed in once (a browser's tabs share one)."""
    from django.contrib.auth.models import Group, User

    from fleet.roles import ensure_roles

    ensure_roles()
    viewers = Group.objects.get(name="viewers")
    cookies = []
    for n in range(count):
        user, _ = User.objects.get_or_create(username=f"bench-viewer-{n}")
        user.groups.add(viewers)
        cookies.append(signed_in_cookie(user))
    return cookies


def redis_counts(client) -> tuple[dict[str, int], int, int]:
    """Commands so far by name, and bytes in and out so far."""
    stats = client.info("commandstats")
    net = client.info("stats")
    calls = {name.removeprefix("cmdstat_"): value["calls"] for name, value in stats.items()}
    return calls, net["total_net_input_bytes"], net["total_net_output_bytes"]


def redis_delta(before, after) -> tuple[dict[str, int], int, int]:
    calls = {k: v - before[0].get(k, 0) for k, v in after[0].items() if v - before[0].get(k, 0)}
    return calls, after[1] - before[1], after[2] - before[2]


def run_cycles(fleet: Fleet, shards: int, cycles: int, interval: float, cycle_base: float) -> dict:
    """Polls `cycles` cycles (each shard once per cycle, one interval apart); returns when
    each shard's message was published."""
    published = {}
    for c in range(cycles):
        start = time.time()
        cycle = cycle_base + c * interval
        for shard in range(shards):
            published[(shard, round(cycle))] = fleet.poll(shard, cycle)
        time.sleep(max(0.0, start + interval - time.time()))
    return published


def measure(fleet: Fleet, webs: list, pages: list[FleetSocket], args, redis_client) -> dict:
    """Warm-up cycle, then `args.cycles` measured ones; the figures of the measured ones."""
    cycle_base = time.time() // args.interval * args.interval
    run_cycles(fleet, args.shards, 1, args.interval, cycle_base)
    cpu0 = [cpu_seconds(w.proc.pid, children=True) for w in webs]
    redis0 = redis_counts(redis_client)
    published = run_cycles(fleet, args.shards, args.cycles, args.interval, cycle_base + args.interval)
    time.sleep(1.0)  # lets the last cycle's deliveries end within the window
    cpu = [(cpu_seconds(w.proc.pid, children=True) - c) / args.cycles for w, c in zip(webs, cpu0, strict=True)]
    calls, bytes_in, bytes_out = redis_delta(redis0, redis_counts(redis_client))
    expected = received = 0
    delays = []
    for page in pages:
        for (shard, cycle), at in published.items():
            wanted = {d for d in page.rows if fleet.shard_of[d] == shard}
            if not wanted:
                continue
            expected += len(wanted)
            got = page.received.get((shard, cycle))
            if got is None:
                continue
            received += len(wanted & got[1])
            delays.append(got[0] - at)
    delays.sort()
    return {
        "expected": expected, "received": received, "delays": delays, "cpu": cpu,
        "calls": calls, "bytes_in": bytes_in / args.cycles, "bytes_out": bytes_out / args.cycles,
        "commands": sum(calls.values()) / args.cycles, "errors": [e for p in pages for e in p.errors],
    }


def open_pages(count: int, devices: int, bases: list[str], cookies: list[str], tabs: int) -> list[FleetSocket]:
    from fleet.health import index as health_index
    from fleet.reading import queries

    healths = health_index.read()
    pages = []
    for n, ask in enumerate(page_queries(count, devices)):
        rows = [r.device.id for r in queries.table_page(ask, healths).rows]
        base = bases[n % len(bases)]
        cookie = cookies[n // tabs]
        pages.append(FleetSocket(base.replace("http://", "ws://") + "/ws/fleet/", base, cookie, rows))
    for page in pages:
        page.start()
    return pages


def report(devices: int, count: int, shards: int, figures: dict, idle: dict) -> None:
    delays = figures["delays"]
    share = figures["received"] / figures["expected"] if figures["expected"] else float("nan")
    live_commands = figures["commands"] - idle["commands"]
    live_out = (figures["bytes_out"] - idle["bytes_out"]) / 1e6
    live_in = (figures["bytes_in"] - idle["bytes_in"]) / 1e6
    cpu = " + ".join(f"{c:.2f}" for c in figures["cpu"])
    print(f"  {devices:6,d} devices {count:4d} pages: received {share:7.2%} of {figures['expected']:,} "
          f"updates; delay p50 {percentile(delays, 50) * 1000:5.0f} ms p99 {percentile(delays, 99) * 1000:5.0f} ms "
          f"max {max(delays, default=float('nan')) * 1000:5.0f} ms; web CPU s/cycle {cpu}; "
          f"Redis per cycle: {live_commands:7.0f} commands ({live_commands / shards:6.0f} per shard poll), "
          f"{live_in:5.2f} MB in, {live_out:5.2f} MB out; load average {load_average()}")
    top = sorted(((v - idle["calls"].get(k, 0)) / CYCLES[0], k) for k, v in figures["calls"].items())[-5:]
    print("      live path's commands per cycle: " + ", ".join(f"{k} {v:.0f}" for v, k in reversed(top)))
    if figures["errors"]:
        print(f"      socket errors: {figures['errors'][:5]}")


CYCLES = [1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default="1000,10000", help="fleet sizes, comma-separated")
    parser.add_argument("--pages", default="50,100,200", help="numbers of open pages, comma-separated")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--tabs", type=int, default=1,
                        help="pages per signed-in session (1: every page its own viewer, the costliest)")
    args = parser.parse_args()
    CYCLES[0] = args.cycles
    redis_server, redis_url = start_redis()
    webs = []
    try:
        setup(args, redis_url)

        from fleet.redis import get_redis

        with throwaway_database():
            try:
                most = max(int(p) for p in args.pages.split(","))
                cookies = signed_in_cookies(-(-most // args.tabs))
                webs, bases = zip(*(start_web(LOG_LEVEL="WARNING") for _ in range(2)), strict=True)
                snaps = real_snapshots()
                Report(f"Live path benchmark: 2 web processes (Daphne), {args.shards} poll shards, a cycle every "
                       f"{args.interval:g} s, {args.cycles} cycles measured, {args.tabs} page(s) per signed-in viewer")
                for devices in (int(d) for d in args.devices.split(",")):
                    fleet = Fleet(devices, snaps, args.shards)
                    run_cycles(fleet, args.shards, 1, 0.0, time.time() // args.interval * args.interval)
                    idle = measure(fleet, list(webs), [], args, get_redis())
                    print(f"  {devices:6,d} devices, no page open: the poll's own writes {idle['commands']:.0f} Redis "
                          f"commands per cycle; web CPU s/cycle {' + '.join(f'{c:.2f}' for c in idle['cpu'])}")
                    for count in (int(p) for p in args.pages.split(",")):
                        pages = open_pages(count, devices, list(bases), cookies, args.tabs)
                        try:
                            report(devices, count, args.shards, measure(fleet, list(webs), pages, args, get_redis()), idle)
                        finally:
                            for page in pages:
                                page.stopping.set()
                            for page in pages:
                                page.stop()
                        time.sleep(1)
            finally:
                for web in webs:
                    web.stop()
                from django.db import connections

                connections.close_all()
    finally:
        redis_server.terminate()
        redis_server.wait(timeout=10)


if __name__ == "__main__":
    main()
