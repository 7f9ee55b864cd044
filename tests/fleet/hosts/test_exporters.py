"""dcgm-exporter as a driver: its /metrics page, served over real HTTP in the exposition format
of its default counter list, read by the shipped dcgm_exporter spec; missing and renamed
series; XID errors as classified events; one GET per poll for every GPU behind it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fleet.hosts.exporters import exporter_host, parse_page

UUIDS = ["GPU-1c3f0a52-7d1e-4e0b-9a55-0c6c1d6f8a01", "GPU-9b2e44c0-3a61-4f7d-8e1b-5d2a7c9e0b02"]
# (series, type, help, value per GPU): dcgm-exporter's default counters (default-counters.csv)
SERIES = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (1980, 1755)),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", (2619, 2619)),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", (41, 44)),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", (38, 63)),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", (118.25, 652.5)),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
     (8_123_456_789, 9_000_000_000)),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", (0, 12)),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", (0, 97)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", (0, 41)),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", (0, 0)),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", (0, 0)),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", (0, 0)),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", (80_614, 20_480)),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", (0, 60_134)),
]


def payload(values: dict | None = None, drop: tuple[str, ...] = (), rename: dict | None = None) -> str:
    values, rename = values or {}, rename or {}
    lines = []
    for name, kind, text, per_gpu in SERIES:
        if name in drop:
            continue
        shown = rename.get(name, name)
        lines += [f"# HELP {shown} {text}", f"# TYPE {shown} {kind}"]
        for i, uuid in enumerate(UUIDS):
            value = values.get((name, i), per_gpu[i])
            labels = (f'gpu="{i}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + i:02X}:00.0",device="nvidia{i}",'
                      f'modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",DCGM_FI_DRIVER_VERSION="550.54.15"')
            lines.append(f"{shown}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


class Exporter:
    """A real HTTP server that serves whatever page the test sets."""

    def __init__(self) -> None:
        self.page, self.gets = payload(), 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                owner.gets += 1
                body = owner.page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        # Polling for shutdown every 50 ms: at the default 0.5 s, close() waited half a second.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def exporter():
    server = Exporter()
    yield server
    server.close()


def test_the_page_parses_per_gpu():
    gpus = parse_page(payload())
    assert list(gpus) == UUIDS
    assert gpus[UUIDS[1]].values["DCGM_FI_DEV_GPU_UTIL"] == 97
    assert gpus[UUIDS[0]].labels["modelName"] == "NVIDIA H100 80GB HBM3"


def test_an_endpoint_joins_by_url_with_one_device_per_gpu_in_catalogue_units(exporter):
    host = exporter_host(exporter.url, probe_timeout=2.0)
    assert host.serials == UUIDS
    snaps = host.poll(1_700_000_000.0)
    busy = snaps[UUIDS[1]]
    assert busy["driver_status"] == "ok", busy["driver_error"]
    assert busy["device_model"] == "NVIDIA H100 80GB HBM3" and busy["driver_version"] == "550.54.15"
    assert busy["device_utilization"] == pytest.approx(0.97)
    assert busy["temperature_c"] == 63 and busy["power_w"] == 652.5
    assert busy["energy_j_total"] == pytest.approx(9_000_000.0)
    assert busy["memory_used_bytes"] == 60_134 * 2**20
    assert busy["memory_total_bytes"] == (60_134 + 20_480) * 2**20
    assert busy["clock_mhz"] == 1755 and busy["pcie_errors_total"] == 12
    assert busy["ecc_corrected_total"] is None  # not in the default list: no value, no failure


def test_one_get_per_poll_for_every_gpu_behind_the_endpoint(exporter):
    host = exporter_host(exporter.url, probe_timeout=2.0)
    before = exporter.gets
    host.poll(1_700_000_000.0)
    assert exporter.gets - before <= 1


def test_missing_and_renamed_series(exporter):
    exporter.page = payload(drop=("DCGM_FI_DEV_SM_CLOCK",),
                            rename={"DCGM_FI_DEV_POWER_USAGE": "DCGM_FI_DEV_POWER_USAGE_INSTANT"})
    snap = exporter_host(exporter.url, probe_timeout=2.0).poll(1_700_000_000.0)[UUIDS[0]]
    assert snap["driver_status"] == "ok"
    assert snap["clock_mhz"] is None  # optional in the spec
    assert snap["power_w"] == 118.25  # read under its new name
    exporter.page = payload(drop=("DCGM_FI_DEV_GPU_TEMP",))
    snap = exporter_host(exporter.url, probe_timeout=2.0).poll(1_700_000_100.0)[UUIDS[0]]
    assert snap["driver_status"] == "error"  # a required series gone: the refresh fails, and says why
    assert "DCGM_FI_DEV_GPU_TEMP" in snap["driver_error"]


def test_an_xid_becomes_a_classified_error_event_on_its_gpu(exporter):
    host = exporter_host(exporter.url, probe_timeout=2.0)
    host.poll(1_700_000_000.0)
    assert host.drain_events() == {}
    exporter.page = payload(values={("DCGM_FI_DEV_XID_ERRORS", 1): 79})
    host.lib._at = -1e18  # the next poll reads a fresh page
    host.poll(1_700_000_030.0)
    events = host.drain_events()
    assert list(events) == [UUIDS[1]]
    (event,) = events[UUIDS[1]]
    assert (event.code, event.action, event.known, event.source) == ("79", "reboot_host", True, "dcgm_exporter")
    assert event.address == "00000000:19:00.0"


def test_an_endpoint_that_goes_away_marks_its_gpus(exporter):
    host = exporter_host(exporter.url, probe_timeout=2.0)
    exporter.close()
    host.lib._at = -1e18
    snaps = host.poll(1_700_000_000.0)
    assert {s["driver_status"] for s in snaps.values()} <= {"error", "hung"}
    assert all(s["driver_error"] for s in snaps.values())


def test_the_parser_keeps_names_unescapes_labels_and_skips_what_is_not_a_gpu_sample():
    text = ('# HELP x y\n# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n'
            'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",modelName="A \\"B\\" \\\\C"} 12 1700000000000\n'
            'process_cpu_seconds_total 3.5\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="0"} NaN\n'
            'garbage line\n')
    (gpu,) = parse_page(text).values()
    assert gpu.values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == 12  # no _total added, the timestamp left
    assert gpu.labels["modelName"] == 'A "B" \\C'
    assert set(gpu.values) == {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_TEMP"}


# AMD device-metrics-exporter: its field list (GPU_* published lower case, here with the "amd_"
# prefix of its example config), per GPU: (series, value on GPU 0, value on GPU 1)
AMD = [
    ("amd_gpu_package_power", 742.0, 301.0),
    ("amd_gpu_junction_temperature", 71.0, 45.0),
    ("amd_gpu_memory_temperature", 60.0, 40.0),
    ("amd_gpu_gfx_activity", 88.0, 3.0),
    ("amd_gpu_umc_activity", 40.0, 0.0),
    ("amd_gpu_energy_consumed", 2.5e12, 1.0e12),
    ("amd_pcie_replay_count", 0.0, 4.0),
    ("amd_gpu_clock", 2100.0, 2100.0),
    ("amd_gpu_total_vram", 196592.0, 196592.0),
    ("amd_gpu_used_vram", 150000.0, 1024.0),
    ("amd_gpu_free_vram", 46592.0, 195568.0),
    ("amd_gpu_ecc_correct_total", 3.0, 0.0),
    ("amd_gpu_ecc_uncorrect_total", 0.0, 0.0),
]


def amd_payload(drop: tuple[str, ...] = (), extra: tuple = ()) -> str:
    lines = []
    for name, *values in (*AMD, *extra):
        if name in drop:
            continue
        lines += [f"# HELP {name} {name}", f"# TYPE {name} gauge"]
        for i, value in enumerate(values):
            labels = (f'gpu_id="{i}",serial_number="692251001{i:03d}",card_series="AMD Instinct MI300X OAM",'
                      f'card_model="0x74a1",card_vendor="Advanced Micro Devices, Inc. [AMD/ATI]",'
                      f'driver_version="6.8.5",vbios_version="113-M3000100-102",hostname="node-7"')
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def test_an_amd_exporter_joins_by_url(exporter):
    exporter.page = amd_payload(drop=("amd_pcie_replay_count",))
    host = exporter_host(exporter.url, spec="amd_exporter", probe_timeout=2.0)
    assert host.serials == ["692251001000", "692251001001"]  # named by serial number, not gpu_id
    snap = host.poll(1_700_000_000.0)["692251001000"]
    assert snap["driver_status"] == "ok", snap["driver_error"]
    assert snap["device_utilization"] == pytest.approx(0.88)
    assert (snap["temperature_c"], snap["power_w"]) == (71.0, 742.0)
    assert snap["energy_j_total"] == pytest.approx(2.5e6)  # µJ
    assert snap["memory_total_bytes"] == 196592 * 2**20 and snap["memory_used_bytes"] == 150000 * 2**20
    assert snap["ecc_corrected_total"] == 3 and snap["driver_version"] == "6.8.5"
    assert snap["pcie_errors_total"] is None  # not published by this product: no value


def test_gpus_named_only_by_an_index_get_their_host_in_the_serial(exporter):
    exporter.page = payload().replace('UUID="', 'uuid_dropped="')
    host = exporter_host(exporter.url, name="node-1", probe_timeout=2.0)
    assert host.serials == ["node-1#gpu0", "node-1#gpu1"]
    assert host.poll(1_700_000_000.0)["node-1#gpu1"]["temperature_c"] == 63


def test_an_amd_gpu_s_per_block_ecc_counts_become_events_when_they_climb(exporter):
    blocks = (("amd_gpu_ecc_uncorrect_umc", 2.0, 0.0), ("amd_gpu_ecc_correct_gfx", 10.0, 0.0),
              ("gpu_ecc_deferred_sdma", 0.0, 0.0))
    exporter.page = amd_payload(extra=blocks)
    host = exporter_host(exporter.url, spec="amd_exporter", probe_timeout=2.0)
    host.poll(1_700_000_000.0)
    assert host.drain_events() == {}  # counts already there at joining are where counting starts

    climbed = (("amd_gpu_ecc_uncorrect_umc", 5.0, 0.0), ("amd_gpu_ecc_correct_gfx", 10.0, 1.0),
               ("gpu_ecc_deferred_sdma", 0.0, 0.0))
    exporter.page = amd_payload(extra=climbed)
    host.lib._at = -1e18  # the next refresh reads a fresh page
    host.poll(1_700_000_005.0)
    events = host.drain_events()
    (umc,) = events["692251001000"]
    assert (umc.vendor, umc.code, umc.count, umc.source) == ("amd", "umc.ue", 3, "amd_exporter")
    assert (umc.action, umc.severity, umc.known) == ("reset_device", "critical", True)
    assert umc.raw == "amd_gpu_ecc_uncorrect_umc=5"
    (gfx,) = events["692251001001"]
    assert (gfx.code, gfx.action) == ("gfx.ce", "ignore")
    host.lib._at = -1e18
    host.poll(1_700_000_010.0)
    assert host.drain_events() == {}  # no new errors, no new events
