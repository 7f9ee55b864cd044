"""The poll's writes to the time-series store: the spool (order, bound, durability), the
writer when the store is away, refuses or hangs, and Prometheus as the store. The long
outage: tests/scenarios/test_tsdb_outage.py."""

import subprocess
import sys
from pathlib import Path

import pytest

from fleet import tsdb
from fleet.polling import poller
from fleet.tsdb.buffer import Batch, Spool
from fleet.tsdb.client import Client
from fleet.tsdb.series import DeviceKey, series_name
from fleet.tsdb.writes import Encoder, Writer
from tests.support.tsdb import flush, free_port, raw_samples, samples_at

ROOT = Path(__file__).resolve().parents[3]
KEY = DeviceKey("host-w", 11, "SER-W", "video", "V1")
TEMPERATURE = series_name("temperature_c")


def batch(cycle: float, value: float, scope: str = "shard:0/1") -> Batch:
    from django.conf import settings

    return Encoder().batch(cycle, scope, [(KEY, {"temperature_c": value})], settings.TSDB_LABELS)


def nowhere() -> Client:
    """A store that is not there (nothing listens on the port)."""
    return Client(f"http://127.0.0.1:{free_port()}", write_timeout_s=0.5)


def stored_temperatures(start: float, end: float) -> list[tuple[float, float]]:
    flush(newest=end)
    found = [s for s in raw_samples(start - 0.001, end, TEMPERATURE) if s.labels.get("device") == "11"]
    return found[0].points if found else []


# --- The spool ---------------------------------------------------------------------------

def test_the_spool_gives_batches_back_oldest_cycle_first_whatever_order_they_came_in(tmp_path):
    spool = Spool(tmp_path, 10 << 20)
    for cycle in (1_800_000_010, 1_800_000_000, 1_800_000_005):
        spool.append(batch(cycle, cycle % 100))
    got = [spool.read(entry) for entry in spool.entries()]
    assert [b.cycle_ms for b in got] == [1_800_000_000_000, 1_800_000_005_000, 1_800_000_010_000]
    assert all(b.samples == 1 and b.scope == "shard:0/1" for b in got)
    assert got[0].body == batch(1_800_000_000, 0).body  # byte for byte what is sent


def test_a_full_spool_drops_its_oldest_batches_and_says_which(tmp_path, caplog):
    one = len(batch(1_800_000_000, 1).body) + 60  # a batch and its header
    spool = Spool(tmp_path, 3 * one)
    with caplog.at_level("WARNING", logger="fleet.tsdb.buffer"):
        for n in range(5):
            spool.append(batch(1_800_000_000 + 5 * n, n))
    assert spool.size() <= 3 * one
    kept = [spool.read(e).cycle_ms // 1000 for e in spool.entries()]
    assert kept == [1_800_000_010, 1_800_000_015, 1_800_000_020]
    dropped = spool.dropped()
    assert len(dropped) == 2 and spool.dropped_samples() == 2
    assert "2027-01-15T08:00:00+00:00 of shard:0/1: 1 samples, the spool is full" in dropped[0]
    assert "2027-01-15T08:00:05+00:00" in dropped[1]
    assert caplog.text.count("dropped cycle") == 2


def test_a_batch_larger_than_the_spool_is_dropped_and_said(tmp_path):
    spool = Spool(tmp_path, 10)
    assert spool.append(batch(1_800_000_000, 1)) is None
    assert spool.count() == 0 and "larger than the whole spool" in spool.dropped()[0]


SPOOL_IN_ANOTHER_PROCESS = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
import django
django.setup()
from fleet.tsdb.buffer import Spool
from fleet.tsdb.client import Client
from fleet.tsdb.series import DeviceKey
from fleet.tsdb.writes import Encoder, Writer
spool = Spool(sys.argv[1], 1 << 20)
writer = Writer(Client(sys.argv[2], write_timeout_s=0.5), spool, flush_budget_s=0.5)
key = DeviceKey("host-w", 11, "SER-W", "video", "V1")
for n in range(3):
    result = writer.write(Encoder().batch(float(sys.argv[3]) + 5 * n, "shard:0/1", [(key, {"temperature_c": 20.0 + n})], sys.argv[4]))
    print(result.buffered, result.written)
"""


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_batches_waiting_in_the_spool_outlive_the_process_and_reach_the_store_in_order(tmp_path, settings):
    """A process spools while the store is away and ends; a later one sends what it left."""
    start = poller.current_cycle() - 60
    done = subprocess.run(
        [sys.executable, "-c", SPOOL_IN_ANOTHER_PROCESS, str(tmp_path), f"http://127.0.0.1:{free_port()}",
         repr(start), settings.TSDB_LABELS],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "0"] * 3  # each of the three waited
    (tmp_path / ".tmp-0000000000001-crashed-mid-write.batch").write_bytes(b"half a batch")
    spool = Spool(tmp_path, 1 << 20)
    assert spool.count() == 3

    result = Writer(tsdb.client(), spool, flush_budget_s=10).flush()

    assert (result.written, result.waiting) == (3, 0)
    assert stored_temperatures(start, start + 10) == [(start, 20.0), (start + 5, 21.0), (start + 10, 22.0)]


# --- The writer --------------------------------------------------------------------------

def test_while_the_store_is_away_batches_wait_then_go_oldest_first_with_the_next_write(tmp_path):
    spool = Spool(tmp_path, 1 << 20)
    start = poller.current_cycle() - 30
    away = Writer(nowhere(), spool)
    assert away.write(batch(start, 1.0)).buffered == 1
    assert away.write(batch(start + 5, 2.0)).buffered == 1
    assert spool.count() == 2 and stored_temperatures(start, start + 10) == []

    result = Writer(tsdb.client(), spool).write(batch(start + 10, 3.0))

    assert (result.written, result.buffered, result.waiting, result.kept) == (3, 0, 0, 1)
    assert stored_temperatures(start, start + 10) == [(start, 1.0), (start + 5, 2.0), (start + 10, 3.0)]


def test_a_batch_the_store_refuses_is_dropped_and_said_not_retried(tmp_path):
    spool = Spool(tmp_path, 1 << 20)
    broken = Batch(1_800_000_000_000, "shard:0/1", 7, b"not snappy at all")
    result = Writer(tsdb.client(), spool).write(broken)
    assert (result.rejected, result.kept, spool.count()) == (7, 0, 0)
    assert "7 samples, rejected by the store:" in spool.dropped()[0]


@pytest.mark.django_db
def test_the_flush_task_sends_what_waits(settings, seeded_fleet):
    from fleet.tasks import flush_samples

    cycle = poller.current_cycle()
    poller.poll_shard(0, cycle - 5)
    store = settings.TSDB_URL, settings.TSDB_WRITE_URL
    settings.TSDB_URL = settings.TSDB_WRITE_URL = f"http://127.0.0.1:{free_port()}"
    away = poller.poll_shard(0, cycle)
    assert away.samples > 0 and away.waiting == 1 and not away.gap
    settings.TSDB_URL, settings.TSDB_WRITE_URL = store
    assert flush_samples() == {"written": away.samples, "rejected": 0, "waiting": 0}
    flush(newest=cycle)
    assert len(samples_at(cycle)) == away.samples


@pytest.mark.django_db
def test_a_store_that_refuses_connections_costs_the_poll_nothing_noticeable(settings, seeded_fleet):
    cycle = poller.current_cycle()
    poller.poll_shard(1, cycle - 5)
    settings.TSDB_URL = settings.TSDB_WRITE_URL = f"http://127.0.0.1:{free_port()}"
    result = poller.poll_shard(1, cycle)
    assert result.seconds < 1.0 and result.waiting == 1 and result.samples > 0


# --- Stores of the test's own ------------------------------------------------------------------

# A clean-clone CI run met the hung-store test below writing to a store that answered: the
# port free_port() gave its store had been taken (another test's store, started at the same
# moment on the other xdist worker), so its store exited, the other answered at its URL, and
# pausing its own paused nothing.
def test_a_store_whose_port_is_taken_starts_on_another(victoria_metrics, tmp_path, monkeypatch):
    from tests.support import tsdb as stores

    ports = iter([victoria_metrics.port, free_port()])
    monkeypatch.setattr(stores, "free_port", lambda: next(ports))
    second = stores.Store("victoria-metrics", stores.victoria_metrics_argv, tmp_path / "second")
    try:
        assert second.port != victoria_metrics.port and second.service.proc.poll() is None
        second.pause()
        assert stores.answers(victoria_metrics.url) and not stores.answers(second.url)
    finally:
        second.stop()


@pytest.mark.django_db(transaction=True)
def test_a_hung_store_does_not_stall_the_poll_beyond_its_budget(victoria_metrics, seeded_fleet, settings):
    settings.TSDB_WRITE_TIMEOUT_S = 0.5
    settings.TSDB_FLUSH_BUDGET_S = 0.5
    cycle = poller.current_cycle() - 30
    poller.poll_shard(0, cycle - 5)
    victoria_metrics.pause()  # the process stops answering; connections wait
    try:
        hung = [poller.poll_shard(0, cycle + 5 * n) for n in range(3)]
    finally:
        victoria_metrics.resume()
    assert all(r.seconds < 1.5 and not r.gap for r in hung), [r.seconds for r in hung]
    assert [r.waiting for r in hung] == [1, 2, 3]
    back = poller.poll_shard(0, cycle + 15)
    assert back.waiting == 0
    flush(newest=cycle + 15)
    counts = [len(samples_at(cycle + 5 * n)) for n in range(4)]
    assert counts == [r.samples for r in [*hung, back]]


@pytest.mark.django_db(transaction=True)
def test_prometheus_takes_the_same_writes_and_they_read_back_exactly(prometheus_store, seeded_fleet):
    from fleet.polling import snapshots

    cycle = poller.current_cycle()
    for offset in (-10, -5, 0):
        results = [poller.poll_shard(shard, cycle + offset) for shard in poller.shards()]
        assert all(r.waiting == 0 for r in results)
    latest = snapshots.read_snapshots()
    stored = samples_at(cycle)
    assert len(stored) == sum(r.samples for r in results) > 0
    for device in seeded_fleet:
        assert stored[(TEMPERATURE, str(device.id))] == [pytest.approx(latest[device.id]["temperature_c"])]
        assert stored[(series_name("power_w"), str(device.id))] == [pytest.approx(latest[device.id]["power_w"])]
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    assert stored[("DCGM_FI_DEV_GPU_TEMP", gpu.serial)] == [pytest.approx(latest[gpu.id]["temperature_c"])]
    series = tsdb.client().query_range(f'{TEMPERATURE}{{device="{seeded_fleet[0].id}"}}', cycle - 10, cycle, 5)
    assert len(series) == 1 and [t for t, _ in series[0].points] == [cycle - 10, cycle - 5, cycle]


@pytest.mark.django_db(transaction=True)
def test_prometheus_gets_spooled_cycles_in_order_and_each_once(prometheus_store, seeded_fleet, settings, tmp_path):
    """Prometheus refuses a sample older than its series' latest: a spool sent out of order
    would lose cycles here. A repeated cycle with the same values is taken once."""
    spool = Spool(tmp_path / "spool", 1 << 20)
    start = poller.current_cycle() - 60
    away = Writer(nowhere(), spool)
    for n in (2, 0, 3, 1):  # spooled out of order (two writers, say)
        away.write(batch(start + 5 * n, 30.0 + n))
    result = Writer(tsdb.client(), spool, flush_budget_s=10).flush()
    assert (result.written, result.rejected, result.waiting) == (4, 0, 0)
    again = Writer(tsdb.client(), spool).write(batch(start + 15, 33.0))  # the last cycle once more
    assert again.rejected == 0
    points = stored_temperatures(start, start + 15)
    assert points == [(start + 5 * n, 30.0 + n) for n in range(4)]
