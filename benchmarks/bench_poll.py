"""Poll-cycle figures: how long one cycle of the whole fleet takes, and its parts.

    python benchmarks/bench_poll.py [--hosts 4] [--devices-per-host 8] [--cycles 20] [--emulator-state redis] [--otlp]

Runs against the database and Redis that the environment names (DATABASE_URL,
REDIS_URL), on a throwaway database it creates and drops, and the time-series store at
TSDB_URL (a throwaway VictoriaMetrics when none answers there), under a label of its own;
prints medians. With ``--otlp`` the samples are also sent as OTLP metrics
(OTLP_METRICS_ENDPOINT) to a receiver process (tests/support/otlp_receiver.py), and the
sender's data points a second are printed: compare the cycle with a run without it.
"""

import argparse
import contextlib
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from harness import ROOT, Report, django_env, median, throwaway_database, wipe_redis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--devices-per-host", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--emulator-state", choices=("file", "redis"), default="file",
                        help="where the emulated hosts keep their state (EMULATOR_STATE)")
    parser.add_argument("--otlp", action="store_true", help="also send the samples as OTLP metrics")
    args = parser.parse_args()

    from dashboard.backing_services import resolve_tsdb, stop

    receiver = None
    if args.otlp:
        import subprocess

        receiver = subprocess.Popen([sys.executable, "-m", "tests.support.otlp_receiver"], cwd=ROOT,
                                    stdout=subprocess.PIPE, text=True)
        os.environ["OTLP_METRICS_ENDPOINT"] = f"http://127.0.0.1:{int(receiver.stdout.readline())}/v1/metrics"

    state = tempfile.mkdtemp(prefix="asicmon-bench-")
    os.environ.update(
        FLEET_HOSTS=str(args.hosts),
        FLEET_DEVICES_PER_HOST=str(args.devices_per_host),
        EMULATOR_STATE_DIR=state,
        EMULATOR_STATE=args.emulator_state,
        REDIS_KEY_PREFIX="asicmon-bench",
        POLL_SHARDS="1",
        LOG_LEVEL="WARNING",
        TSDB_LABELS=f"asicmon_bench=poll{os.getpid()}",
        TSDB_BUFFER_DIR=str(Path(state) / "spool"),
    )
    env = dict(os.environ)
    helpers = resolve_tsdb(env, Path(state) / "tsdb")
    django = django_env(**{k: env[k] for k in ("TSDB_URL", "TSDB_WRITE_URL") if k in env})
    from django.conf import settings

    from fleet import tsdb
    from fleet.hosts import emulated_fleet
    from fleet.models import Device, Host
    from fleet.polling import poller, snapshots
    from fleet.reading import queries
    from fleet.tsdb.series import DeviceKey, selector

    try:
        with throwaway_database():
            try:
                emulated_fleet.seed_fleet()
                devices = args.hosts * args.devices_per_host
                cycle = poller.current_cycle()
                poller.poll_shard(0, cycle)  # warm: opens monitors, mirrors the catalogue

                totals, probes, writes, caches = [], [], [], []
                for i in range(1, args.cycles + 1):
                    c = cycle + i * settings.POLL_INTERVAL
                    t0 = time.perf_counter()
                    poller.poll_shard(0, c)
                    totals.append(time.perf_counter() - t0)

                    # The parts, timed alone on the next cycle's data.
                    t0 = time.perf_counter()
                    polled = {}
                    for name in Host.objects.values_list("name", flat=True):
                        polled.update(emulated_fleet.host_monitor(name).poll())
                    probes.append(time.perf_counter() - t0)
                    ids = dict(Device.objects.values_list("serial", "id"))
                    keys = {d.serial: DeviceKey(d.host.name, d.id, d.serial, d.device_type, d.model, d.index)
                            for d in Device.objects.select_related("host")}
                    keyed = [(keys[serial], snap) for serial, snap in polled.items()]
                    t0 = time.perf_counter()
                    written = poller.write_samples(c + 0.5, "bench", keyed)  # encoded and sent as a poll does
                    writes.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    snapshots.write_snapshots(c + 0.5, {ids[s]: v for s, v in polled.items()})
                    caches.append(time.perf_counter() - t0)

                from fleet.health import index as health_index

                t0 = time.perf_counter()
                for _ in range(20):
                    healths = health_index.read()
                    queries.fleet_summary(healths)
                    queries.table_page(queries.TableQuery(), healths)
                overview_ms = (time.perf_counter() - t0) / 20 * 1000

                ms = lambda xs: median(xs) * 1000  # noqa: E731
                vendor = django.db.connection.vendor
                report = Report(f"Asicmon poll cycle — {devices} devices ({args.hosts} hosts), {vendor}, {args.cycles} cycles,"
                                f" emulator state in {args.emulator_state}")
                report.line(f"  full shard cycle (probe + samples + snapshots + publish): median {ms(totals):7.2f} ms, max {max(totals) * 1000:.2f} ms")
                report.line(f"  probe all devices through Asicmon:                         median {ms(probes):7.2f} ms ({ms(probes) * 1000 / devices:.0f} µs/device)")
                n = written.written + written.buffered
                report.line(f"  write {n} samples to the time-series store in one batch:     median {ms(writes):7.2f} ms ({n / median(writes):,.0f} samples/s)")
                report.line(f"  store {devices} snapshots in Redis:                              median {ms(caches):7.2f} ms")
                report.line(f"  fleet page data (summary + first table page):             mean   {overview_ms:7.2f} ms")
                if args.otlp:
                    from fleet.polling import otlp_export

                    sender = otlp_export.sender(settings.OTLP_METRICS_ENDPOINT)
                    sender.flush(60)
                    report.line(f"  OTLP metrics: {sender.sent} cycles, {sender.points:,} data points sent in {sender.busy_s:.2f} s"
                                f" of the sender's time ({sender.points / max(sender.busy_s, 1e-9):,.0f} points/s),"
                                f" {sender.failed} failed, {sender.dropped} dropped; building the requests alone:"
                                f" {sender.points / max(sender.encode_s, 1e-9):,.0f} points/s")
                with contextlib.suppress(OSError):  # VictoriaMetrics: what was just written, readable now
                    urllib.request.urlopen(f"{settings.TSDB_URL}/internal/force_flush", timeout=30).close()
                time.sleep(1.1)
                last = cycle + (args.cycles + 1) * settings.POLL_INTERVAL  # the cycles ran ahead of the clock
                stored = tsdb.client().query(f"sum(count_over_time({selector('asicmon_temperature_c')}[1h]))", at=last)
                report.line(f"  temperature samples in the store ({settings.TSDB_URL}): {int(stored[0].points[0][1]) if stored else 0:,}"
                            f" ({devices} devices x {args.cycles * 2 + 1} cycles written)")
            finally:
                snapshots.forget_snapshots(list(Device.objects.values_list("id", flat=True)))
                from fleet.redis import key

                wipe_redis(key("emulator", "*"))
    finally:
        stop(helpers)
        if receiver is not None:
            receiver.terminate()


if __name__ == "__main__":
    main()
