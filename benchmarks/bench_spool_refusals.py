"""The store refuses the poll's writes (401) for 10 minutes, then the credential is fixed: how
many samples are lost (issue 25's figure: 0), on a VictoriaMetrics of its own behind a real
HTTP proxy that answers 401 and then forwards (tests/support/tsdb.py's StoreProxy).

    python benchmarks/bench_spool_refusals.py [--devices 1000] [--minutes 10] [--after 1] [--status 401]

Time is compressed: the fleet's cycles (a 5 s interval, 2 shards, the values of emulated
devices as bench_tsdb.py makes them) are written one after the other as fast as they go, each
with the cycle's own timestamp, by the poll's writer (fleet.tsdb: encoder, spool, writer),
one writer per shard and cycle as the poll makes them, plus the beat's flush every 10 s of
cycles. After `--minutes` of refused cycles the proxy forwards; `--after` minutes of cycles
more, then flushes until the spool is empty. Prints the samples the writes kept (written or
spooled), the samples the store holds for those cycles, the difference (lost), the spool's
peak, the refused requests, the warnings logged, and how long the spool took to drain.
The warnings' pace is per minute of wall time, so compressed cycles log fewer of them.
"""

import argparse
import logging
import shutil
import tempfile
import time
from pathlib import Path

from harness import INTERVAL, Report, VictoriaMetrics, django_env, fleet_keys, source_snapshots

SHARDS = 2


class Counting(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def run(args) -> dict:
    from fleet.tsdb.buffer import Spool
    from fleet.tsdb.client import Client
    from fleet.tsdb.writes import Encoder, Writer
    from tests.support.tsdb import StoreProxy

    store = VictoriaMetrics()
    proxy = StoreProxy(store.url)
    folder = Path(tempfile.mkdtemp(prefix="asicmon-bench-spool-"))
    warnings = Counting()
    logging.getLogger("fleet.tsdb").addHandler(warnings)
    try:
        client = Client(store.url, proxy.url, write_timeout_s=2.0)
        encoder = Encoder()
        refused_cycles, after_cycles = int(args.minutes * 60 / INTERVAL), int(args.after * 60 / INTERVAL)
        cycles = refused_cycles + after_cycles
        start = time.time() // INTERVAL * INTERVAL - (cycles + 6) * INTERVAL
        proxy.status = args.status
        kept = written_at_fix = peak_batches = peak_bytes = 0
        keys = None
        t0 = fixed_at = time.perf_counter()
        for c, pool in enumerate(source_snapshots(args.source_hosts, cycles, start + cycles * INTERVAL)):
            if c == refused_cycles:
                proxy.status = None  # the credential fixed
                fixed_at, written_at_fix = time.perf_counter(), kept
            keys = keys or fleet_keys(args.devices, pool)
            keyed = [(key, pool[d % len(pool)]) for d, key in enumerate(keys)]
            per_shard = (len(keyed) + SHARDS - 1) // SHARDS
            for shard in range(SHARDS):
                batches = encoder.batches(start + c * INTERVAL, f"shard:{shard}/{SHARDS}",
                                          keyed[shard * per_shard:(shard + 1) * per_shard])
                writer = Writer(client, Spool(folder, args.spool_mb << 20), flush_budget_s=1.0)
                kept += writer.write(batches).kept
            spool = Spool(folder, args.spool_mb << 20)
            peak_batches, peak_bytes = max(peak_batches, spool.count()), max(peak_bytes, spool.size())
            if c % 2 == 1:  # the beat's flush-samples, every 10 s
                Writer(client, spool, flush_budget_s=1.0).flush()
        while (flushed := Writer(client, Spool(folder, args.spool_mb << 20)).flush(budget_s=30)).waiting:
            if not flushed.written:
                break
        drained_s = time.perf_counter() - fixed_at
        elapsed = time.perf_counter() - t0
        store.get("/internal/force_flush")
        end = start + (cycles - 1) * INTERVAL
        window = int((end - start) + INTERVAL)
        stored = client.query(f'sum(count_over_time({{__name__=~"asicmon_.+|DCGM_.+"}}[{window}s]))', end + 1)
        held = int(stored[0].points[0][1]) if stored else 0
        return {
            "devices": args.devices, "cycles": cycles, "refused cycles": refused_cycles,
            "refused requests": proxy.answered[args.status], "samples kept by the writes": kept,
            "samples spooled while refused": written_at_fix, "samples in the store": held, "lost": kept - held,
            "dropped.log lines": len(Spool(folder, 1).dropped()), "waiting at the end": flushed.waiting,
            "spool peak": f"{peak_batches} batches, {peak_bytes / (1 << 20):.1f} MiB",
            "warnings logged": len(warnings.messages), "refusal warnings": sum("refuses writes" in m for m in warnings.messages),
            "drain after the fix (s, cycles after it included)": round(drained_s, 1), "elapsed (s)": round(elapsed, 1),
        }
    finally:
        logging.getLogger("fleet.tsdb").removeHandler(warnings)
        proxy.close()
        store.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=10, help="minutes of cycles the store refuses")
    parser.add_argument("--after", type=float, default=1, help="minutes of cycles after the fix")
    parser.add_argument("--status", type=int, default=401)
    parser.add_argument("--spool-mb", type=int, default=512)
    parser.add_argument("--source-hosts", type=int, default=30, help="emulated hosts whose values the fleet takes")
    args = parser.parse_args()
    django_env(FLEET_HOSTS=args.source_hosts, FLEET_DEVICES_PER_HOST="8",
               EMULATOR_STATE_DIR=tempfile.mkdtemp(prefix="asicmon-bench-tsdb-"),
               REDIS_KEY_PREFIX="asicmon-bench-tsdb", LOG_LEVEL="WARNING")
    report = Report(f"Samples lost to {args.minutes:g} minutes of refused writes ({args.status})")
    for name, value in run(args).items():
        report.figure(name, value)


if __name__ == "__main__":
    main()
