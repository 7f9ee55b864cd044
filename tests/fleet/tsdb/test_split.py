"""Splitting a remote-write request into two smaller ones of whole series, without a schema."""

import cramjam
import pytest

from fleet.tsdb.buffer import Batch
from fleet.tsdb.series import DeviceKey
from fleet.tsdb.split import halves, series
from fleet.tsdb.writes import Encoder

T0 = 1_700_000_000.0


def _batch(devices: int) -> Batch:
    snapshots = [
        (
            DeviceKey("host-00", i, f"SER-{i}", "video", "Emu V-1"),
            {"temperature_c": 50.0 + i, "power_w": 100.0},
        )
        for i in range(devices)
    ]
    return Encoder(dcgm=False).batch(T0, "shard-0", snapshots)


def _raw(batch: Batch) -> bytes:
    return bytes(cramjam.snappy.decompress_raw(batch.body))


def test_the_two_halves_hold_every_series_in_order_and_count_their_samples():
    batch = _batch(3)
    assert batch.samples == 6
    first, second = halves(batch)
    assert (first.cycle_ms, first.scope) == (batch.cycle_ms, batch.scope)
    assert first.samples + second.samples == batch.samples
    assert abs(first.samples - second.samples) <= 1
    assert _raw(first) + _raw(second) == _raw(batch)


def test_each_series_of_a_request_counts_one_sample():
    parts = series(_raw(_batch(2)))
    assert len(parts) == 4 and [n for _, n in parts] == [1, 1, 1, 1]


def test_a_request_of_one_series_or_not_protobuf_cannot_be_split():
    parts = halves(_batch(1))  # one device: two series, a half holds one
    assert len(parts) == 2
    for half in parts:
        assert half.samples == 1 and halves(half) == []
    assert halves(Batch(0, "s", 1, b"not snappy at all")) == []
    with pytest.raises(ValueError):
        series(b"\x0f\x01")  # wire type 7 does not exist
    with pytest.raises(ValueError):
        series(b"\x0a\x05ab")  # a field longer than the message
