"""Figure 2: an emulated fleet running an hour of driver errors, time-compressed, through
the real poll service and the repair ladder.

    python benchmarks/scenario_repair_ladder.py [--hosts 8] [--per-host 4] [--speed 30]

32 devices (GPU-like, logging NVIDIA Xids; inference accelerators, logging amdgpu RAS lines),
two hosts per workload. An hour of scenario time passes ``--speed`` times faster (one poll
a second of real time is ``--speed`` seconds of scenario). 26 faults of mixed kinds are
injected on a schedule; one device gets three hardware faults of different causes. Checks,
printed at the end:

- every fault got the right first rung (its catalogue's immediate action);
- no device went back to service without passing its check;
- never more devices of one workload under repair than LADDER_MAX_PER_WORKLOAD;
- the repeat offender flagged for pulling after its third hardware incident, not before;
- no action on ignore-class events.

Runs on a throwaway database on the server DATABASE_URL names, with its own Redis keys.
"""

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from harness import django_env, throwaway_database

FIRST_RUNG = {  # the catalogue's immediate action of each fault's worst error
    "xid_79": "reboot_host", "xid_48": "reset_device", "xid_94": "restart_application", "xid_95": "reset_device",
    "xid_119": "reset_device", "xid_120": "reset_device", "xid_74": "reset_device", "xid_13": "restart_application",
    "xid_31": "restart_application", "xid_43": None, "amd_umc_ue": "reset_device", "amd_xgmi_ue": "reset_device",
    "amd_ring_timeout": "restart_application", "amd_umc_ce": None,
}
GPU_FAULTS = ["xid_79", "xid_94", "xid_95", "xid_119", "xid_13", "xid_31", "xid_43", "xid_120", "xid_43", "xid_13",
              "xid_95", "xid_94", "xid_43", "xid_31", "xid_74"]  # one a device: a repeat would climb
AMD_FAULTS = ["amd_umc_ue", "amd_ring_timeout", "amd_umc_ce", "amd_xgmi_ue", "amd_ring_timeout", "amd_umc_ce", "amd_umc_ue"]
OFFENDER_FAULTS = ["xid_74", "xid_48", "xid_79"]  # three hardware incidents, three causes


def setup(args, tmp: str) -> None:
    os.environ.update(
        FLEET_HOSTS=str(args.hosts), FLEET_DEVICES_PER_HOST=str(args.per_host), FLEET_TYPES="gpu,inference",
        FLEET_SEED="11", POLL_SHARDS="1", POLL_INTERVAL="1", EMULATOR_REBOOT_S="2", ASICMON_VAR_DIR=tmp,
        EMULATOR_STATE_DIR=str(Path(tmp) / "emulator"), REDIS_KEY_PREFIX=f"asicmon-scenario-{os.getpid()}",
        LADDER_MAX_PER_WORKLOAD="2", LADDER_BREAKER_SHARE="0.5", LADDER_CHECK_TIMEOUT_S="60",
        OFFENDER_HARDWARE_INCIDENTS="3", REMEDIATION_PAUSE_CRITICAL="100", LOG_LEVEL="ERROR",
        # Windows shrink with the scenario's clock: 120 s of scenario between incidents.
        OFFENDER_INCIDENT_GAP_S=str(120.0 / args.speed), LADDER_BREAKER_WINDOW_S=str(600.0 / args.speed),
        LADDER_WINDOW_S=str(86400.0 / args.speed),
        TSDB_URL="http://127.0.0.1:9", TSDB_FLUSH_BUDGET_S="0.1", TSDB_WRITE_TIMEOUT_S="0.2",
    )
    django_env()


def schedule(devices, minutes: float = 60.0):
    """(scenario second, device, fault): faults spread over the hour, one device the offender."""
    gpus = [d for d in devices if d.device_type == "gpu"]
    npus = [d for d in devices if d.device_type == "inference"]
    offender, gpus = gpus[0], gpus[1:]
    plan = [(60.0 + i * 1200.0, offender, fault) for i, fault in enumerate(OFFENDER_FAULTS)]
    plan += [(90.0 + i * (minutes * 60 - 300) / len(GPU_FAULTS), gpus[i % len(gpus)], f) for i, f in enumerate(GPU_FAULTS)]
    plan += [(150.0 + i * (minutes * 60 - 400) / len(AMD_FAULTS), npus[i % len(npus)], f) for i, f in enumerate(AMD_FAULTS)]
    return sorted(plan, key=lambda p: p[0]), offender


def run(args) -> int:  # noqa: C901 - a scenario told step by step
    from django.conf import settings

    from fleet.choices import ActionStatus, DeviceState
    from fleet.driver_errors.offenders import device_record
    from fleet.hosts import emulated_fleet
    from fleet.models import Action, Automation, Device, DriverError
    from fleet.polling import poller

    with throwaway_database():
        emulated_fleet.seed_fleet()
        devices = list(Device.objects.for_dashboard())
        plan, offender = schedule(devices)
        print(f"{len(devices)} devices on {args.hosts} hosts, {len(plan)} faults over an hour of scenario time "
              f"at {args.speed:g}x ({3600 / args.speed:.0f} s real)")
        poller.poll_shard(0, poller.current_cycle())
        started, injected, worst_share, flagged_at = time.time(), [], Counter(), None
        hardware_seen = 0
        while True:
            scenario_s = (time.time() - started) * args.speed
            while plan and plan[0][0] <= scenario_s:
                _, device, fault = plan.pop(0)
                emulated_fleet.host_monitor(device.host.name).inject_fault(device.serial, fault)
                injected.append((time.time(), device, fault))
                if device.id == offender.id:
                    hardware_seen += 1
            poller.poll_shard(0, poller.current_cycle())
            busy = Counter(Device.objects.filter(state=DeviceState.UNDER_REPAIR).values_list("workload", flat=True))
            for workload, n in busy.items():
                worst_share[workload] = max(worst_share[workload], n)
            record = device_record(offender.serial)
            if record and record.pull and flagged_at is None:
                flagged_at = hardware_seen
            settled = not Device.objects.filter(state=DeviceState.UNDER_REPAIR).exists() and not (
                DriverError.objects.filter(handled_by__isnull=True, outcome="").exclude(action="ignore").exists())
            if not plan and settled and scenario_s > 3600:
                break
            if time.time() - started > 3600 / args.speed + 240:
                print("did not settle in time")
                break
            time.sleep(max(0.0, 1.0 - (time.time() - started) % 1.0))
        took = time.time() - started

        # 1. the right first rung
        wrong, rungs = [], Counter()
        for at, device, fault in injected:
            expected = FIRST_RUNG[fault]
            first = (Action.objects.filter(device=device, rule="driver_error", created_at__gte=_when(at - 1))
                     .order_by("created_at", "id").first())
            if expected is None:
                continue
            rungs[(first.rung if first else None)] += 1
            if first is None or first.rung != expected:
                wrong.append((fault, device.serial, first.rung if first else None, expected))
        # 2. back only through a passing check
        ladder = Action.objects.filter(rule="driver_error")
        unchecked = ladder.filter(status=ActionStatus.SUCCEEDED).exclude(rung="inspect_hardware").exclude(check_passed=True).count()
        back_without = [d.serial for d in Device.objects.filter(state=DeviceState.IN_SERVICE)
                        if (last := ladder.filter(device=d).order_by("-created_at", "-id").first()) and not last.check_passed]
        # 5. nothing done on ignore-class events
        ignored = DriverError.objects.filter(action="ignore")
        acted_on_ignored = ignored.exclude(handled_by__isnull=True).count()

        print(f"ran {took:.0f} s; {ladder.count()} ladder actions: {dict(Counter(ladder.values_list('rung', flat=True)))}")
        print(f"faults injected: {len(injected)} ({dict(Counter(f for _, _, f in injected))})")
        print(f"right first rung: {sum(rungs.values()) - len(wrong)} of {sum(rungs.values())} actionable faults"
              + (f"; wrong: {wrong}" if wrong else ""))
        print(f"devices back in service without a passing check: {len(back_without) + unchecked}")
        print(f"most devices of one workload under repair at once: {max(worst_share.values(), default=0)} "
              f"(limit {settings.LADDER_MAX_PER_WORKLOAD})")
        print(f"repeat offender {offender.serial} flagged after hardware incident #{flagged_at} "
              f"(limit {settings.OFFENDER_HARDWARE_INCIDENTS})")
        print(f"ignore-class events: {ignored.count()} stored, {acted_on_ignored} acted on")
        paused = Automation.read()
        print(f"breaker: {'tripped: ' + paused.reason if paused.paused else 'not tripped'}")
        print(f"driver-error rows stored: {DriverError.objects.count()}, occurrences {sum(DriverError.objects.values_list('count', flat=True))}")
        for _, serial, _, _ in wrong + [(None, offender.serial, None, None)]:
            for row in DriverError.objects.filter(serial=serial).order_by("first_seen"):
                print(f"  {serial} {row.code:>6} x{row.count} at {row.first_seen:%H:%M:%S} hw={row.hardware} -> {row.outcome} "
                      f"({row.handled_by.rung + ' ' + row.handled_by.status if row.handled_by else '-'})")
        ok = (not wrong and not back_without and not unchecked and acted_on_ignored == 0
              and max(worst_share.values(), default=0) <= settings.LADDER_MAX_PER_WORKLOAD and flagged_at == 3
              and not paused.paused)
        print("ALL CHECKS PASS" if ok else "SOME CHECKS FAIL")
        return 0 if ok else 1


def _when(epoch: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, tz=UTC)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--per-host", type=int, default=4)
    parser.add_argument("--speed", type=float, default=30.0, help="scenario seconds per real second")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup(args, tmp)
        return run(args)


if __name__ == "__main__":
    sys.exit(main())
