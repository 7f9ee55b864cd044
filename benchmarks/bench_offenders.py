"""The repeat-offenders page and API with a large driver-error history.

    python benchmarks/bench_offenders.py [--rows 1000000] [--days 180] [--hosts 1250]
    DATABASE_URL=postgres://… python benchmarks/bench_offenders.py

Stores --rows driver errors (default 1,000,000) spread over --days (default 180, the
retention) on a fleet of --hosts x 8 devices, then times the offenders page
(/offenders/) and API (/api/driver-errors/offenders/) as a signed-in viewer:
median and worst of --repeat requests, the rows the ranking read (the OFFENDER_WINDOW_S
window, 30 days by default) and its SQL queries. The target is 300 ms.

The mix is a busy fleet's: ~55 % ignore-class events (Xid 43, 45, 63, 92, corrected SXids
and RAS counts), ~35 % application-level (13, 31, 94, 8), ~10 % hardware (48, 79, 74, 95, 119,
64), on one device in four, a few devices far more often than the rest. Runs on a throwaway
database it creates and drops. Figures depend on the machine and its load: say which.
"""

import argparse
import hashlib
import os
import random
import tempfile
import time
from datetime import UTC, datetime

from harness import django_env, load_average, median, throwaway_database

MIX = [  # (code, share)
    ("43", 0.20), ("45", 0.15), ("63", 0.08), ("92", 0.07), ("S11012", 0.03), ("13", 0.15), ("31", 0.12),
    ("94", 0.06), ("8", 0.04), ("48", 0.03), ("95", 0.03), ("79", 0.01), ("74", 0.015), ("119", 0.01), ("64", 0.005),
]


def setup() -> None:
    os.environ.update(FLEET_HOSTS="0", REDIS_KEY_PREFIX="asicmon-bench-offenders", LOG_LEVEL="WARNING",
                      ASICMON_VAR_DIR=os.environ.get("ASICMON_VAR_DIR") or tempfile.mkdtemp(prefix="asicmon-bench-offenders-"))
    django_env()
    from django.test.utils import setup_test_environment

    setup_test_environment()


def build(rows: int, days: float, hosts: int, seed: int = 11) -> None:
    from django.db import connection, transaction

    from fleet.asicmon.errors import catalogue
    from fleet.models import Device, DriverError, Host

    xid = catalogue("nvidia_xid")
    made = Host.objects.bulk_create([Host(name=f"host-{i:05d}") for i in range(hosts)])
    devices = Device.objects.bulk_create([
        Device(host=h, index=i, serial=f"GPU-{h.id:05d}-{i}", device_type="gpu", model="H100") for h in made for i in range(8)
    ], batch_size=5000)
    names = {h.id: h.name for h in made}
    rnd = random.Random(seed)
    codes = [c for c, _ in MIX]
    weights = [w for _, w in MIX]
    erring = rnd.sample(devices, len(devices) // 4)  # one device in four has errors
    heavy = erring[: len(erring) // 20]  # and one in twenty of those most of them
    now = time.time()
    span = days * 86400
    adapt = connection.ops.adapt_datetimefield_value
    columns = ("device_id", "serial", "host", "vendor", "code", "name", "meaning", "severity", "action", "cause",
               "hardware", "known", "detail", "raw", "source", "address", "count", "first_seen", "last_seen", "bucket",
               "fingerprint", "outcome")
    sql = (f"INSERT INTO {DriverError._meta.db_table} ({', '.join(columns)}) "
           f"VALUES ({', '.join(['%s'] * len(columns))})")
    batch: list = []
    started = time.perf_counter()
    for n in range(rows):
        device = rnd.choice(heavy) if rnd.random() < 0.15 else rnd.choice(erring)
        code = rnd.choices(codes, weights)[0]
        at = now - rnd.random() * span
        entry = xid.lookup(code)
        batch.append((
            device.id, device.serial, names[device.host_id], "nvidia", code, entry.name, entry.meaning[:500], entry.severity,
            entry.action, entry.cause, entry.hardware, True, f"xid {code}", f"NVRM: Xid (PCI:0000:3b:00): {code}, xid {code}",
            "kmsg", "0000:3b:00", 1, adapt(datetime.fromtimestamp(at, tz=UTC)),
            adapt(datetime.fromtimestamp(at + rnd.random() * 60, tz=UTC)), n,  # a bucket of its own: every row distinct
            hashlib.sha1(str(n).encode()).hexdigest(), "",  # noqa: S324 - an identity, not a secret
        ))
        if len(batch) == 20_000:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(sql, batch)
            batch = []
    if batch:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, batch)
    print(f"stored {rows:,} driver errors over {days:g} days on {len(devices):,} devices in {time.perf_counter() - started:.0f} s")


def viewer_client():
    from django.contrib.auth.models import Permission, User
    from django.test import Client

    user = User.objects.create_user("bench-viewer", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_device"))
    client = Client()
    client.force_login(user)
    return client


def measure(client, url: str, repeat: int) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return times, len(captured.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=180.0)
    parser.add_argument("--hosts", type=int, default=1250)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    setup()
    from django.conf import settings
    from django.db import connection

    with throwaway_database():
        build(args.rows, args.days, args.hosts)
        with connection.cursor() as cursor:  # statistics and (PostgreSQL) the visibility map, as autovacuum keeps them
            cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
        from datetime import timedelta

        from django.utils import timezone

        from fleet.models import DriverError

        window = DriverError.objects.filter(first_seen__gte=timezone.now() - timedelta(seconds=settings.OFFENDER_WINDOW_S))
        in_window = window.exclude(action="ignore").exclude(serial="").count()
        client = viewer_client()
        print(f"Offenders benchmark — {connection.vendor}, {args.rows:,} errors over {args.days:g} days, window "
              f"{settings.OFFENDER_WINDOW_S / 86400:g} days ({in_window:,} incident rows read), load average {load_average()}")
        for name, url in (("page", "/offenders/"), ("API ", "/api/driver-errors/offenders/")):
            times, queries = measure(client, url, args.repeat)
            verdict = "ok" if median(times) <= 300 else "OVER 300 ms"
            print(f"  {name} {url:32} median {median(times):6.0f} ms, worst {max(times):6.0f} ms, "
                  f"{queries} queries  [{verdict}]")


if __name__ == "__main__":
    main()
