"""Health figures: rule evaluation per device per poll, and /metrics for a large fleet.

    python benchmarks/bench_health.py [--devices 10000] [--polls 30]

1. Rules: real snapshots of the three emulated types, each fed through `fleet.health.detection.observe`
   with a full window, including what a poll adds around it (the window's JSON decode and
   encode, as stored in Redis). Prints µs per device per poll and the cost for the fleet.
2. Window storage: `assessing.assess_polled` for the whole fleet against the real Redis
   (one HMGET and one pipelined HSET), per device.
3. /metrics: `fleet.reading.metrics.render()` with DEVICES devices in the database and their
   snapshots in Redis: server time and body size.

Runs against DATABASE_URL and REDIS_URL, on a throwaway database it creates and drops and a
Redis key prefix of its own. Medians of several runs; say whether the machine was busy.
"""

import argparse
import statistics
import time

import orjson
from harness import Report, django_env, median, throwaway_database, timed, wipe_redis

NEWLINE = b"\n"


def sample_snapshots(polls: int) -> list[tuple[str, list[dict]]]:
    """A run of snapshots per device type, polled every 5 s of emulated time."""
    from emulator import FleetConfig
    from fleet.hosts.emulated_monitors import HostMonitor

    cfg = FleetConfig(seed=3, hosts=1, devices_per_host=3, types=("video", "inference", "gpu"))
    monitor = HostMonitor.open(cfg, "host-00", state_dir=None)
    types = {d.serial: d.type for d in monitor.devices}
    runs: dict[str, list[dict]] = {s: [] for s in types}
    t = 86400.0 * 19675.75
    for i in range(polls):
        for serial, snapshot in monitor.poll(now=t + 5 * i).items():
            runs[serial].append(snapshot)
    return [(types[s], run) for s, run in runs.items()]


def bench_rules(report: Report, polls: int, devices: int) -> None:
    from fleet.health.assessing import spec_health
    from fleet.health.detection import limits_for, observe

    runs = sample_snapshots(polls + 24)
    per_device = []
    for device_type, run in runs:
        limits = limits_for(spec_health(device_type))
        window = None
        for snapshot in run[:24]:  # fill the window first
            _, window = observe(window, snapshot, limits)
        stored = orjson.dumps(window)
        t0 = time.process_time()
        for snapshot in run[24:]:
            window = orjson.loads(stored)
            _, window = observe(window, snapshot, limits)
            stored = orjson.dumps(window)
        per_device.append((time.process_time() - t0) / polls)
    mean = statistics.mean(per_device)
    report.line(f"rules, full window, JSON in and out: {mean * 1e6:.1f} µs CPU per device per poll "
                f"({', '.join(f'{t}: {c * 1e6:.1f}' for (t, _), c in zip(runs, per_device, strict=True))})")
    report.line(f"  for {devices} devices: {mean * devices * 1000:.0f} ms of CPU per poll cycle, spread over the shards")


def bench_storage_and_metrics(report: Report, devices: int) -> None:
    django_env(REDIS_KEY_PREFIX="asicmon-bench-health", LOG_LEVEL="WARNING", METRICS_TOKEN="bench")
    from fleet.health import assessing
    from fleet.models import Device, Host
    from fleet.polling import snapshots
    from fleet.reading import metrics
    from fleet.redis import key

    runs = sample_snapshots(30)
    with throwaway_database():
        try:
            per_host = 8
            hosts = Host.objects.bulk_create([Host(name=f"bench-{h:05d}") for h in range(devices // per_host)])
            rows = []
            for i in range(devices):
                device_type, _ = runs[i % 3]
                rows.append(Device(host=hosts[i // per_host], serial=f"BENCH-{i:06d}", device_type=device_type,
                                   model=device_type, index=i % per_host))
            Device.objects.bulk_create(rows, batch_size=2000)
            ids = list(Device.objects.order_by("id").values_list("id", "device_type"))
            kinds = {i: (t, "in_service") for i, t in ids}

            times = []
            for poll in range(10):
                polled = {i: dict(runs[n % 3][1][poll]) for n, (i, _) in enumerate(ids)}
                t0 = time.perf_counter()
                assessing.assess_polled(polled, kinds, time.time())
                times.append(time.perf_counter() - t0)
                snapshots.write_snapshots(float(poll), polled)
            assess = median(times[2:])
            report.line(f"assess_polled with Redis windows, {devices} devices: {assess * 1000:.0f} ms "
                        f"({assess / devices * 1e6:.1f} µs per device, health events included)")

            render = timed(metrics.render, 5)
            body = render.value
            report.line(f"/metrics for {devices} devices: {render.median * 1000:.0f} ms server time, "
                        f"{len(body) / 1e6:.1f} MB ({body.count(NEWLINE)} lines)")
        finally:
            wipe_redis(f"{key('')}*")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--polls", type=int, default=30)
    args = parser.parse_args()
    django_env()
    report = Report("Health figures")
    bench_rules(report, args.polls, args.devices)
    bench_storage_and_metrics(report, args.devices)


if __name__ == "__main__":
    main()
