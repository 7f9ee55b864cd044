"""The poll's samples as OTLP metrics with OpenTelemetry hw.* names, sent to a real OTLP/HTTP
receiver (tests/support/otlp_receiver.py, a process of its own that decodes the protobuf
requests) and read back: names, units, attributes, values; the Prometheus path unchanged."""

import json
import subprocess
import sys
import urllib.request

import pytest

from fleet.polling import otlp_export, poller, snapshots
from fleet.tsdb.series import DeviceKey
from tests.support.otlp_receiver import decode
from tests.support.processes import ROOT
from tests.support.tiers import starts_processes
from tests.support.tsdb import flush, samples_at

pytestmark = pytest.mark.django_db


@pytest.fixture
@starts_processes
def receiver():
    process = subprocess.Popen([sys.executable, "-m", "tests.support.otlp_receiver"], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def received(base: str) -> dict:
    with urllib.request.urlopen(f"{base}/points", timeout=5) as response:
        return json.load(response)


@pytest.fixture
def otlp_on(seeded_fleet, fleet_settings, receiver, monkeypatch):
    fleet_settings.OTLP_METRICS_ENDPOINT = f"{receiver}/v1/metrics"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "authorization=Bearer%20s3cret")
    otlp_export.sender.cache_clear()
    yield receiver
    otlp_export.sender.cache_clear()


def poll_all(cycle: float) -> list[poller.ShardPollResult]:
    return [poller.poll_shard(shard, cycle) for shard in poller.shards()]


def test_samples_reach_an_otlp_receiver_with_hw_gpu_names_units_and_attributes(otlp_on, seeded_fleet,
                                                                                fleet_settings):
    cycle = poller.current_cycle()
    poll_all(cycle - fleet_settings.POLL_INTERVAL)
    results = poll_all(cycle)
    sender = otlp_export.sender(fleet_settings.OTLP_METRICS_ENDPOINT)
    assert sender.flush(10) and sender.failed == 0 and sender.sent == 2 * len(results)

    got = received(otlp_on)
    assert all(h.get("authorization") == "Bearer s3cret" for h in got["headers"])
    latest = snapshots.read_snapshots()
    at = {(p["name"], p["attributes"]["hw.id"], p["attributes"].get("error.type"), p["time_unix_nano"]): p
          for p in got["points"]}  # (name, hw.id, error.type, time) -> the point
    units = {p["name"]: p["unit"] for p in got["points"]}
    assert units["hw.power"] == "W" and units["hw.gpu.memory.usage"] == "By"
    assert units["hw.temperature"] == "Cel" and units["hw.gpu.utilization"] == "1"
    for device in seeded_fleet:
        snap = latest[device.id]
        t = int(snap["sample_ts"] * 1e9)
        power = at[("hw.power", device.serial, None, t)]
        assert power["kind"] == "gauge" and power["value"] == pytest.approx(snap["power_w"])
        attrs = power["attributes"]
        assert attrs["hw.type"] == "gpu" and attrs["host.name"] == device.host.name
        assert attrs["hw.serial_number"] == device.serial and attrs["hw.model"] == device.model
        assert power["resource"]["service.name"] == "asicmon"
        util = at[("hw.gpu.utilization", device.serial, None, t)]
        assert util["value"] == pytest.approx(snap["device_utilization"])
        assert util["attributes"]["hw.gpu.task"] == "general"
        temp = at[("hw.temperature", f"{device.serial}/temperature", None, t)]
        assert temp["value"] == pytest.approx(snap["temperature_c"]) and temp["attributes"]["hw.parent"] == device.serial
        if snap.get("ecc_corrected_total") is not None:
            errors = at[("hw.errors", device.serial, "ecc_corrected", t)]
            assert errors["kind"] == "sum" and errors["monotonic"] and errors["temporality"] == 2
            assert errors["value"] == pytest.approx(snap["ecc_corrected_total"])
    assert any(p["name"] == "hw.errors" for p in got["points"])

    flush(newest=cycle)  # the Prometheus path is unchanged: every sample still in the store
    assert len(samples_at(cycle)) == sum(r.samples for r in results) > 0


def test_off_by_default(seeded_fleet, fleet_settings):
    otlp_export.sender.cache_clear()
    assert fleet_settings.OTLP_METRICS_ENDPOINT == ""
    poll_all(poller.current_cycle())
    assert otlp_export.sender.cache_info().currsize == 0


def test_a_receiver_that_refuses_holds_up_nothing(seeded_fleet, fleet_settings, receiver):
    fleet_settings.OTLP_METRICS_ENDPOINT = f"{receiver}/v1/elsewhere"  # answered 400
    otlp_export.sender.cache_clear()
    cycle = poller.current_cycle()
    results = poll_all(cycle)
    sender = otlp_export.sender(fleet_settings.OTLP_METRICS_ENDPOINT)
    assert sender.flush(10) and sender.failed == len(results) and sender.sent == 0
    assert all(not r.gap for r in results) and sum(r.devices for r in results) == len(seeded_fleet)
    assert received(receiver)["points"] == []
    otlp_export.sender.cache_clear()


def test_per_core_values_missing_values_and_changed_attributes():
    encoder = otlp_export.Encoder()
    key = DeviceKey("node-1", 7, "GPU-1", "gpu", "H100", 0)
    snap = {"sample_ts": 100.0, "core_utilization": [0.5, 0.25], "power_w": None, "temperature_c": 40,
            "driver_version": "550.54.15", "ecc_corrected_total": 3}
    request, count = encoder.request(100.0, [(key, snap)])
    points = decode(request.SerializeToString())
    assert count == len(points) == 4  # two cores, the temperature, the ECC count; no power: no point
    cores = [(p["attributes"]["hw.id"], p["value"]) for p in points if p["name"] == "hw.gpu.utilization"]
    assert cores == [("GPU-1/core0", 0.5), ("GPU-1/core1", 0.25)]
    assert all(p["time_unix_nano"] == 100 * 10**9 for p in points)
    (ecc,) = (p for p in points if p["name"] == "hw.errors")
    assert (ecc["kind"], ecc["monotonic"], ecc["unit"], ecc["attributes"]["error.type"]) == (
        "sum", True, "{count}", "ecc_corrected")
    assert ecc["attributes"]["hw.driver_version"] == "550.54.15"
    request, _ = encoder.request(105.0, [(key, {**snap, "sample_ts": 105.0, "driver_version": "560.1"})])
    (ecc,) = (p for p in decode(request.SerializeToString()) if p["name"] == "hw.errors")
    assert ecc["attributes"]["hw.driver_version"] == "560.1"  # a new driver: new attributes


def test_the_hand_written_wire_format_is_what_the_protobuf_library_reads():
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    keyed = [(DeviceKey(f"node-{d // 2}", d, f"GPU-{d}", "gpu", "H100", d % 2),
              {"sample_ts": 100.0 + d, "core_utilization": [0.5, 0.75], "temperature_c": 40 + d,
               "ecc_corrected_total": 2**40 + d, "power_w": 1e-3})
             for d in range(3)]
    request, count = otlp_export.Encoder().request(100.0, keyed)
    message = ExportMetricsServiceRequest.FromString(request.SerializeToString())
    (resource,) = message.resource_metrics
    assert [(a.key, a.value.string_value) for a in resource.resource.attributes] == [("service.name", "asicmon")]
    (scope,) = resource.scope_metrics
    assert (scope.scope.name, scope.scope.version) == otlp_export.SCOPE
    by_name = {m.name: m for m in scope.metrics}
    points = {name: list(getattr(m, m.WhichOneof("data")).data_points) for name, m in by_name.items()}
    assert count == sum(len(p) for p in points.values()) == 3 * 5
    assert [p.as_double for p in points["hw.errors"]] == [2**40, 2**40 + 1, 2**40 + 2]
    assert [p.time_unix_nano for p in points["hw.temperature"]] == [100 * 10**9, 101 * 10**9, 102 * 10**9]
    assert by_name["hw.errors"].sum.is_monotonic and by_name["hw.errors"].unit == "{count}"
    assert by_name["hw.temperature"].HasField("gauge") and by_name["hw.temperature"].unit == "Cel"
    assert [p.as_double for p in points["hw.power"]] == [1e-3] * 3
