"""Health rules: over the latest snapshot (pure functions), and over a window of polls with
every fault the emulator can inject, at every hour of the emulated day."""

import pytest

from emulator import FleetConfig
from emulator.devices.zoo import device_type
from fleet.choices import Health
from fleet.health.assessing import spec_health
from fleet.health.detection import Limits, assess_with_reasons, limits_for, observe
from fleet.hosts.emulated_monitors import HostMonitor
from tests.support.examples import spread
from tests.support.fleet import TEST_FLEET

NOW = 1_000_000.0
DAY = 86400.0 * 19675  # a fixed midnight (UTC), not the clock
POLL = 5.0


def snap(**counters):
    return {"sample_ts": NOW - 1, "driver_status": "ok", "temperature_c": 50.0, **counters}


@pytest.mark.parametrize(
    ("snapshot", "health", "reason"),
    [
        (snap(), Health.HEALTHY, None),
        (None, Health.UNKNOWN, "never polled"),
        (snap(sample_ts=NOW - 60), Health.UNKNOWN, "no data for 1 min"),
        (snap(driver_status="hung"), Health.CRITICAL, "driver hung"),
        (snap(driver_status="rebooting"), Health.WARNING, "rebooting"),
        (snap(temperature_c=88.0), Health.WARNING, "temperature 88 °C"),
        (snap(temperature_c=97.0), Health.CRITICAL, "temperature 97 °C"),
        (snap(throttle_reasons="thermal,power"), Health.WARNING, "thermal throttling"),
        (snap(throttle_reasons="power"), Health.HEALTHY, None),
        (snap(pcie_link_status="degraded"), Health.WARNING, "PCIe link degraded"),
    ],
)
def test_rules(snapshot, health, reason):
    result = assess_with_reasons(snapshot, now=NOW, poll_interval=5.0)
    assert result.health == health
    if reason:
        assert reason in result.reasons
    else:
        assert result.reasons == []


def test_the_worst_rule_wins_and_every_reason_is_kept():
    result = assess_with_reasons(
        snap(driver_status="hung", temperature_c=90.0, pcie_link_status="degraded"), now=NOW, poll_interval=5.0
    )
    assert result.health == Health.CRITICAL
    assert result.reasons == ["driver hung", "temperature 90 °C", "PCIe link degraded"]


def test_findings_stored_at_poll_time_are_what_readers_see_until_the_data_goes_stale():
    polled = snap(health_findings=[{"rule": "memory_leak", "level": "critical", "reason": "memory leak", "values": {}}])
    assert assess_with_reasons(polled, now=NOW, poll_interval=5.0).health == Health.CRITICAL
    stale = assess_with_reasons(polled, now=NOW + 60, poll_interval=5.0)
    assert stale.health == Health.UNKNOWN
    assert stale.findings[0].rule == "stale"


def test_a_device_type_brings_its_own_limits_in_its_spec():
    from fleet.health.assessing import spec_health

    assert spec_health("video") == {"cooling_c_per_w": 1.6}
    assert limits_for(spec_health("video")).cooling_c_per_w == 1.6
    assert spec_health("no-such-type") == {}
    assert limits_for({}).cooling_c_per_w is None
    assert limits_for(spec_health("gpu"), {"temperature_critical_c": 90.0}).temperature_critical_c == 90.0
    hot = snap(temperature_c=92.0)
    assert observe(None, hot, Limits(temperature_critical_c=90.0))[0].health == Health.CRITICAL
    assert observe(None, hot)[0].health == Health.WARNING


def test_a_spec_health_statement_is_checked_when_compiling():
    from fleet.asimov.compiler import check_spec, compile_spec

    spec = 'device x\nhealth leak_critical_s = 10 * 60\nhealth window_polls = 12\nconst A = 1\nstats.core_count = A\n'
    compiled = compile_spec(spec)
    assert "HEALTH = {'leak_critical_s': 600, 'window_polls': 12}" in compiled.code
    errors = {
        "device x\nhealth leak_critical = 600\n": ("unknown health limit 'leak_critical'", 2, 8),
        "device x\nhealth window_polls = 2.5\n": ("health window_polls needs a whole number", 2, 23),
        "device x\nb = file(\"b\", int)\nhealth cooling_ratio = b\nstats.core_count = b\n": ("health cooling_ratio needs a number", 3, 24),
        "device x\nhealth cooling_ratio = 2\nhealth cooling_ratio = 3\n": ("health cooling_ratio is set twice", 3, 8),
    }
    for text, (message, line, column) in errors.items():
        found = check_spec(text)
        assert found, text
        assert message in found[0].message, (found[0].message, text)
        assert (found[0].line, found[0].column) == (line, column), (found[0].line, found[0].column, text)


# --- the emulator's faults through the window rules ------------------------------------------

RULE_OF = {
    "hang": "driver",
    "ecc_storm": "ecc",
    "pcie_degraded": "pcie",
    "overheat": "cooling",
    "core_stuck": "core_stuck",
    "memory_leak": "memory_leak",
}
# The polls (of 5 s) within which each fault must be found.
WITHIN_POLLS = {"hang": 1, "ecc_storm": 2, "pcie_degraded": 1, "overheat": 6, "core_stuck": 5, "memory_leak": 12}
HOURS = [0, 3, 6, 9, 12, 15, 18, 21]


class Fleet:
    """Three devices, one of each type, polled every ``poll`` s (5) of emulated time."""

    def __init__(self, start: float, poll: float = POLL, seed: int = 5):
        self.interval = poll
        cfg = FleetConfig(seed=seed, hosts=1, devices_per_host=3, types=("video", "inference", "gpu"), hang_block_s=0.6)
        self.monitor = HostMonitor.open(cfg, "host-00", state_dir=None, probe_timeout=0.5)
        self.types = {d.serial: d.type for d in self.monitor.devices}
        self.windows: dict[str, dict] = {}
        self.t = start

    def poll(self):
        self.t += self.interval
        results = {}
        for serial, snapshot in self.monitor.poll(now=self.t).items():
            limits = limits_for(spec_health(self.types[serial]))
            results[serial], self.windows[serial] = observe(self.windows.get(serial), snapshot, limits)
        return results


def warmed_fleet(hour: int, poll: float = POLL) -> Fleet:
    fleet = Fleet(DAY + hour * 3600, poll)
    for _ in range(int(150 / poll)):
        for serial, result in fleet.poll().items():
            assert result.findings == [], (hour, fleet.types[serial], result.reasons)
    return fleet


def gpu_too_busy_to_tell(fleet: Fleet, serial: str) -> bool:
    """NVML reports no per-core activity: a stuck cluster shows only while the GPU is not
    near full load anyway (documented in docs/health.md)."""
    state = fleet.monitor.host.state(serial)
    return fleet.types[serial] == "gpu" and state.load > 0.75


def missed_after_injecting(fleet: Fleet, fault: str, seconds: float) -> list[str]:
    """Injects ``fault`` into every device and polls for ``seconds``: the types of the
    devices its rule did not find (a GPU too busy to tell a stuck core excused)."""
    for serial in fleet.monitor.serials:
        fleet.monitor.host.inject_fault(serial, fault)
    found = set()
    for _ in range(round(seconds / fleet.interval)):
        for serial, result in fleet.poll().items():
            if any(f.rule == RULE_OF[fault] for f in result.findings):
                found.add(serial)
    excused = {s for s in fleet.monitor.serials if fault == "core_stuck" and gpu_too_busy_to_tell(fleet, s)}
    return [fleet.types[s] for s in fleet.monitor.serials if s not in found | excused]


@pytest.mark.parametrize("hour", spread(HOURS, fast=3))  # every hour under make test
@pytest.mark.parametrize("fault", list(RULE_OF))
def test_every_fault_is_found_within_a_few_polls_at_any_hour(fault, hour):
    missed = missed_after_injecting(warmed_fleet(hour), fault, WITHIN_POLLS[fault] * POLL)
    assert missed == [], f"{fault} at {hour}:00 not found within {WITHIN_POLLS[fault]} polls on {missed}"


@pytest.mark.parametrize("hour", [0, 9, 18])
def test_a_leak_is_flagged_with_its_time_to_exhaustion_long_before_memory_runs_out(hour):
    fleet = warmed_fleet(hour)
    for serial in fleet.monitor.serials:
        fleet.monitor.host.inject_fault(serial, "memory_leak")
    first = {}
    latest = {}
    for _ in range(30):
        for serial, result in fleet.poll().items():
            leak = [f for f in result.findings if f.rule == "memory_leak"]
            if leak:
                first.setdefault(serial, leak[0])
                latest[serial] = leak[0]
    for serial, finding in first.items():
        memory = device_type(fleet.types[serial]).memory_bytes
        assert finding.values["seconds_to_exhaustion"] > 120, (fleet.types[serial], finding.reason)
        assert finding.values["memory_free_bytes"] > 0.1 * memory
    assert set(first) == set(fleet.monitor.serials)
    # After 30 polls the estimate is close to the truth: 0.1 % of the memory a second.
    for serial, finding in latest.items():
        true_rate = device_type(fleet.types[serial]).memory_bytes * 0.001
        assert finding.values["leak_bytes_per_s"] == pytest.approx(true_rate, rel=0.35), fleet.types[serial]
        assert "out of memory in" in finding.reason


# A window only seconds old (a device just installed or rebooted, a worker's first polls) has
# few points from before the leak began, and finds it later than a warmed one: polled every
# 2 s, over 6,600 injections (2,200 whole seconds of the day, three device types) the slowest
# took 40 polls (80 s), at these start times among others. tests/scenarios/test_health_worker.py holds its worker to this bound
# (it was 66 s, a warmed window's, and failed about once in a hundred runs).
FRESH_LEAK_WITHIN_S = 90


@pytest.mark.parametrize("start", [56334, 57914, 78027, 82094])
def test_a_leak_is_found_within_90_s_on_a_window_only_seconds_old(start):
    fleet = Fleet(DAY + start, poll=2.0)
    for _ in range(4):
        fleet.poll()
    missed = missed_after_injecting(fleet, "memory_leak", FRESH_LEAK_WITHIN_S)
    assert missed == [], f"a leak at {start} s into the day not found within {FRESH_LEAK_WITHIN_S} s on {missed}"


# The rules by which a fault counts as found. A busy device whose cooler failed reaches the
# critical temperature (automation reboots it, which clears the fault) a poll before it is hot
# enough *for its power* for the cooling rule, which is there for the quiet hours: the
# temperature rule has found it by then. tests/scenarios/test_health_worker.py asked for the
# cooling rule alone, and failed when run in the evening (UTC) on the suite's fleet.
FOUND_BY = {fault: {rule} for fault, rule in RULE_OF.items()} | {"overheat": {"cooling", "temperature"}}


@pytest.mark.parametrize("start", [63600, 66000, 69600])
def test_an_overheating_device_is_found_before_automation_would_reboot_it(start):
    """The suite's fleet (TEST_FLEET's seed), polled every 2 s on a window seconds old, as
    the health worker scenario polls it: every device is found overheating by the poll where
    it first goes critical (where automation reboots it, and the fault is gone)."""
    fleet = Fleet(DAY + start, poll=2.0, seed=TEST_FLEET["FLEET_SEED"])
    for _ in range(4):
        fleet.poll()
    for serial in fleet.monitor.serials:
        fleet.monitor.host.inject_fault(serial, "overheat")
    found, critical = {}, {}
    for k in range(1, 30):
        for serial, result in fleet.poll().items():
            if {f.rule for f in result.findings} & FOUND_BY["overheat"]:
                found.setdefault(serial, k)
            if result.health == Health.CRITICAL:
                critical.setdefault(serial, k)
    late = {fleet.types[s]: (found.get(s), critical[s]) for s in critical if found.get(s, 99) > critical[s]}
    assert critical and not late, f"(found, critical) at poll: {late}"


@pytest.mark.parametrize("hour", spread([h + 1 for h in HOURS], fast=3))
def test_healthy_devices_raise_nothing_over_ten_minutes_at_any_hour(hour):
    fleet = warmed_fleet(hour)
    for _ in range(120):
        for serial, result in fleet.poll().items():
            assert result.findings == [], (hour, fleet.types[serial], result.reasons)


# Polled faster than every 5 s (POLL_INTERVAL may be as short as 0.5 s), a window of polls
# spanned a few seconds: a job allocating memory for ten seconds looked like a critical leak,
# and automation rebooted healthy devices. (Warnings may still come: utilization averaged over
# a shorter poll is noisier; docs/health.md says so.)
@pytest.mark.parametrize("poll", spread([0.5, 1.0, 2.0], fast=2))
@pytest.mark.parametrize("hour", spread([0, 4, 8, 10, 12, 14, 16, 18], fast=3))
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_short_poll_intervals_find_nothing_critical_on_healthy_devices(hour, poll):
    fleet = Fleet(DAY + hour * 3600, poll)
    for _ in range(int(750 / poll)):
        for serial, result in fleet.poll().items():
            assert result.health != Health.CRITICAL, (hour, poll, fleet.types[serial], result.reasons)


@pytest.mark.parametrize("fault", list(RULE_OF))
def test_faults_are_found_as_soon_at_a_short_poll_interval(fault):
    missed = missed_after_injecting(warmed_fleet(9, poll=1.0), fault, WITHIN_POLLS[fault] * POLL)
    assert missed == [], f"{fault} not found within {WITHIN_POLLS[fault] * POLL:g} s on {missed}"
