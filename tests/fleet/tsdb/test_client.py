"""The store's client and the series' names and labels, against the suite's store
(VictoriaMetrics started by `dashboard.stack test`, or what answers at TSDB_URL)."""

import time

import pytest

from fleet import tsdb
from fleet.tsdb.client import Client, TsdbError, TsdbUnavailable, write_endpoint
from fleet.tsdb.series import DeviceKey, escape, parse_labels, selector, series_counters
from fleet.tsdb.writes import Encoder, compress
from tests.support.tsdb import flush, free_port

KEY = DeviceKey("host-a", 7, "SER-1", "gpu", "H100", 3)


def write(cycles: dict[float, dict], key: DeviceKey = KEY) -> None:
    encoder = Encoder()
    from django.conf import settings

    for cycle, snapshot in cycles.items():
        raw, _ = encoder.encode(cycle, [(key, snapshot)], settings.TSDB_LABELS)
        tsdb.client().write(compress(raw))
    flush(max(cycles))


def test_points_written_read_back_exactly_by_range_and_instant_queries():
    now = time.time() // 5 * 5
    write({now - 10: {"temperature_c": 40.25}, now - 5: {"temperature_c": 41.5}, now: {"temperature_c": 1e-7}})
    client = tsdb.client()
    series = client.query_range(selector("asicmon_temperature_c", device="7"), now - 10, now, 5)
    assert [s.points for s in series] == [[(now - 10, 40.25), (now - 5, 41.5), (now, 1e-7)]]
    assert series[0].labels["serial"] == "SER-1" and series[0].labels["__name__"] == "asicmon_temperature_c"
    raw = client.query(selector("asicmon_temperature_c") + "[1m]", now)
    assert raw[0].points == [(now - 10, 40.25), (now - 5, 41.5), (now, 1e-7)]
    assert client.query(f"sum({selector('asicmon_temperature_c')})", now)[0].points == [(now, 1e-7)]
    assert client.query("2 * 3")[0].points[0][1] == 6.0  # a scalar


def test_a_bad_query_raises_the_stores_message():
    with pytest.raises(TsdbError, match="rate") as caught:
        tsdb.client().query("rate(")
    assert not isinstance(caught.value, TsdbUnavailable)


def test_no_store_at_the_address_is_unavailable_quickly():
    client = Client(f"http://127.0.0.1:{free_port()}", read_timeout_s=1, write_timeout_s=1)
    started = time.monotonic()
    with pytest.raises(TsdbUnavailable, match="refused"):
        client.query("1")
    with pytest.raises(TsdbUnavailable):
        client.write(compress(b""))
    assert time.monotonic() - started < 2


def test_a_store_that_never_answers_times_out(tmp_path):
    import socket

    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", read_timeout_s=0.3, write_timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(TsdbUnavailable, match="no answer within the timeout"):
            client.query("1")
        with pytest.raises(TsdbUnavailable, match="no answer within the timeout"):
            client.write(b"x")
        assert time.monotonic() - started < 1.5


def test_write_endpoints():
    assert write_endpoint("http://vm:8428") == "http://vm:8428/api/v1/write"
    assert write_endpoint("http://vminsert:8480/insert/0/prometheus/") == "http://vminsert:8480/insert/0/prometheus/api/v1/write"
    assert write_endpoint("http://mimir/api/v1/push") == "http://mimir/api/v1/push"


def test_the_client_of_the_settings(settings):
    settings.TSDB_URL = "http://read:1"
    settings.TSDB_WRITE_URL = "http://write:2/insert/0/prometheus"
    client = tsdb.client()
    assert (client.read_url, client.write_url) == ("http://read:1", "http://write:2/insert/0/prometheus/api/v1/write")


def test_selectors_escape_values_and_carry_the_installations_labels(settings):
    settings.TSDB_LABELS = "site=lab 1,team=ml"
    assert selector("asicmon_power_w", device="7", serial='a"b\\c') == (
        'asicmon_power_w{device="7",serial="a\\"b\\\\c",site="lab 1",team="ml"}'
    )
    assert selector("m", extra="") == "m{}"
    assert escape("x\ny") == "x\\ny"


@pytest.mark.parametrize("text, problem", [
    ("site", "not name=value"), ("site=", "not name=value"), ("1x=a", "not a label name"),
    ("__x=a", "not a label name"), ("serial=a", "writes itself"), ("a=1,a=2", "twice"),
])
def test_bad_extra_labels_are_refused_with_the_reason(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_labels(text)


def test_bad_extra_labels_stop_the_start_with_a_message():
    from django.core.exceptions import ImproperlyConfigured

    from fleet.apps import check_tsdb_labels

    with pytest.raises(ImproperlyConfigured, match="TSDB_LABELS='serial=x'"):
        check_tsdb_labels("serial=x")


def test_series_are_named_as_metrics_names_them_with_bounded_labels(settings):
    from fleet.reading.metrics import metric_name

    names = dict(series_counters())
    assert names["temperature_c"] == metric_name("temperature_c") == "asicmon_temperature_c"
    assert names["probe_duration_s"] == "asicmon_probe_duration_seconds"
    assert "core_utilization" not in names and "state" not in names  # per core, state: no series
    now = time.time() // 5 * 5
    write({now: {"temperature_c": 50.0, "memory_used_bytes": 3 * 2**20, "device_utilization": 0.5}})
    labels = tsdb.client().query(selector("asicmon_temperature_c"), now)[0].labels
    assert set(labels) == {"__name__", "host", "device", "serial", "type", "model", "asicmon_test"}
    dcgm = tsdb.client().query(selector("DCGM_FI_DEV_FB_USED"), now)[0]
    assert dcgm.points[0][1] == 3.0  # MiB, as dcgm-exporter says
    assert {k: v for k, v in dcgm.labels.items() if k != "asicmon_test"} == {
        "__name__": "DCGM_FI_DEV_FB_USED", "gpu": "3", "UUID": "SER-1", "device": "nvidia3", "modelName": "H100",
        "Hostname": "host-a"}
    assert tsdb.client().query(selector("DCGM_FI_DEV_GPU_UTIL"), now)[0].points[0][1] == 50.0


def test_no_dcgm_series_when_turned_off_or_not_a_gpu(settings):
    now = time.time() // 5 * 5
    raw, samples = Encoder(dcgm=False).encode(now, [(KEY, {"temperature_c": 50.0})])
    assert samples == 1
    raw, samples = Encoder().encode(now, [(DeviceKey("h", 1, "S", "video", "V1"), {"temperature_c": 50.0})])
    assert samples == 1
    raw, samples = Encoder().encode(now, [(KEY, {"temperature_c": 50.0})])
    assert samples == 2


def test_only_numbers_become_samples():
    now = time.time() // 5 * 5
    snapshot = {"temperature_c": 40, "power_w": True, "clock_mhz": "fast", "memory_used_bytes": None,
                "core_utilization": [0.5, 0.5], "state": "ok"}
    assert Encoder(dcgm=False).encode(now, [(KEY, snapshot)])[1] == 1


def test_the_settings_labels_isolate_each_test(settings, own_tsdb_labels):
    assert own_tsdb_labels == settings.TSDB_LABELS and own_tsdb_labels.startswith("asicmon_test=")


def test_a_large_cycle_goes_as_several_requests_below_the_limit_and_lands_whole(settings, tmp_path):
    from fleet.tsdb.buffer import Spool
    from fleet.tsdb.writes import Writer

    now = time.time() // 5 * 5
    keys = [DeviceKey("host-big", n, f"BIG-{n}", "video", "V1") for n in range(1, 301)]
    devices = [(key, {"temperature_c": float(key.device_id), "power_w": 2.0 * key.device_id}) for key in keys]
    raw_chunks = Encoder().encode_chunks(now, devices, settings.TSDB_LABELS, max_bytes=8192)
    assert len(raw_chunks) > 5 and all(len(raw) <= 8192 for raw, _ in raw_chunks)
    assert sum(n for _, n in raw_chunks) == 600
    batches = Encoder().batches(now, "shard:0/1", devices, settings.TSDB_LABELS, max_bytes=8192)
    result = Writer(tsdb.client(), Spool(tmp_path, 1 << 20)).write(batches)
    assert (result.written, result.kept, result.rejected) == (600, 600, 0)
    flush(newest=now)
    stored = tsdb.client().query(selector("asicmon_power_w"), now)
    assert sorted((int(s.labels["device"]), s.points[0][1]) for s in stored) == [(n, 2.0 * n) for n in range(1, 301)]
