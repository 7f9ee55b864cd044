"""Poll-cycle figures: how long one cycle of the whole fleet takes, and its parts.

    python benchmarks/bench_poll.py [--hosts 4] [--devices-per-host 8] [--cycles 20]

Runs against the database, Redis and time-series store that the environment names
(DATABASE_URL, REDIS_URL, TSDB_URL), on a throwaway database it creates and drops, and
prints medians (its samples go to the store under the label asicmon_bench=poll).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--devices-per-host", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()

    state = tempfile.mkdtemp(prefix="asicmon-bench-")
    os.environ.update(
        FLEET_HOSTS=str(args.hosts),
        FLEET_DEVICES_PER_HOST=str(args.devices_per_host),
        EMULATOR_STATE_DIR=state,
        REDIS_KEY_PREFIX="asicmon-bench",
        POLL_SHARDS="1",
        LOG_LEVEL="WARNING",
        TSDB_LABELS="asicmon_bench=poll",
        TSDB_BUFFER_DIR=f"{state}/tsdb-buffer",
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.test.utils import setup_databases, teardown_databases

    from fleet import emulated_fleet, polling, queries, snapshots
    from fleet.models import Device, Host
    from fleet.tsdb.series import DeviceKey

    old = setup_databases(verbosity=0, interactive=False)
    try:
        emulated_fleet.seed_fleet()
        devices = args.hosts * args.devices_per_host
        cycle = polling.current_cycle()
        polling.poll_shard(0, cycle)  # warm: opens monitors, mirrors the catalogue

        totals, probes, writes, caches = [], [], [], []
        for i in range(1, args.cycles + 1):
            c = cycle + i * settings.POLL_INTERVAL
            t0 = time.perf_counter()
            polling.poll_shard(0, c)
            totals.append(time.perf_counter() - t0)

            # The parts, timed alone on the next cycle's data.
            t0 = time.perf_counter()
            polled = {}
            for name in Host.objects.values_list("name", flat=True):
                polled.update(emulated_fleet.host_monitor(name).poll())
            probes.append(time.perf_counter() - t0)
            ids = dict(Device.objects.values_list("serial", "id"))
            rows = polling._devices_of(list(Host.objects.values_list("id", "name")))
            host_of = dict(Device.objects.values_list("serial", "host__name"))
            keyed = [(DeviceKey(host_of[serial], device_id, serial, device_type, model, index), polled[serial])
                     for serial, device_id, device_type, _, model, index in rows if serial in polled]
            t0 = time.perf_counter()
            polling.write_samples(c + 0.5, "bench", keyed)
            writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            snapshots.write_snapshots(c + 0.5, {ids[s]: v for s, v in polled.items()})
            caches.append(time.perf_counter() - t0)

        from fleet import health_index

        t0 = time.perf_counter()
        for _ in range(20):
            healths = health_index.read()
            queries.fleet_summary(healths)
            queries.table_page(queries.TableQuery(), healths)
        overview_ms = (time.perf_counter() - t0) / 20 * 1000

        ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
        vendor = django.db.connection.vendor
        print(f"Asicmon poll cycle — {devices} devices ({args.hosts} hosts), {vendor}, {args.cycles} cycles")
        print(f"  full shard cycle (probe + samples + snapshots + publish): median {ms(totals):7.2f} ms, max {max(totals) * 1000:.2f} ms")
        print(f"  probe all devices through Asicmon:                         median {ms(probes):7.2f} ms ({ms(probes) * 1000 / devices:.0f} µs/device)")
        print(f"  write {devices} devices' samples to the store (remote write):     median {ms(writes):7.2f} ms")
        print(f"  store {devices} snapshots in Redis:                              median {ms(caches):7.2f} ms")
        print(f"  fleet page data (summary + first table page):             mean   {overview_ms:7.2f} ms")
    finally:
        snapshots.forget_snapshots(list(Device.objects.values_list("id", flat=True)))
        teardown_databases(old, verbosity=0)


if __name__ == "__main__":
    main()
