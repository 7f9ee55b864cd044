"""The repair ladder and its gate as an NVIDIA agent host meets them, through every NVIDIA
XID cascade the shipped specs play (`cascade` lines of fleet/asimov/specs/*.asimov).

    python benchmarks/bench_ladder.py [--hosts 2] [--per-host 8]

Agent hosts of `nvml` devices (the built-in nvml spec: no reset declared, `diagnose "dcgmi
diag -r 1"`), each cascade's lines stored on one device as one poll would, then the poll's
ladder and gate (`fleet.driver_errors.poll.after_poll`) every 0.2 s with the devices
answering again, until every incident is settled. Three runs:

A. a default host: no rung commands, no DCGM (no `dcgmi` on this machine). Checks: no device
   out of service without a rung tried (other than a catalogue's own inspect_hardware), every
   incident either repaired-not-validated or with a person, with the reason;
B. rung commands (a script) and a diagnostic (a fake `dcgmi`, a real program that passes,
   fails once, or hangs once, taking 0.3 s a run): the right first rung (the catalogue's, or
   the first above it that can run on the host), no device back without a passing check,
   never two diagnostics at once on a host, a hung diagnostic ended at its timeout;
C. 16 devices, two XIDs on one host, the default breaker: automation not paused.

Runs on a throwaway database (DATABASE_URL's server, or SQLite), with its own Redis keys.
"""

import argparse
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness import django_env, throwaway_database

FAKE_DCGMI = """#!{python}
import json, os, sys, time
log, state = sys.argv[1], sys.argv[2]
serial = os.environ["ASICMON_DEVICE_SERIAL"]
plan = json.load(open(state)).get(serial, "pass")
seen = state + "." + serial.replace(":", "_")
first = not os.path.exists(seen)
open(seen, "a").close()
def note(what):
    with open(log, "a") as f:
        f.write(json.dumps({{"what": what, "serial": serial, "host": os.environ["ASICMON_HOST"], "at": time.time(),
                            "pid": os.getpid()}}) + "\\n")
note("start")
print("Diagnostic | Result", flush=True)
if plan == "hang-once" and first:
    while True:  # until stopped; its last sign of life is when it was
        note("alive")
        time.sleep(0.05)
time.sleep(0.3)
note("end")
if plan == "fail-once" and first:
    print("Memory | Fail", flush=True)
    sys.exit(226)
print("Memory | Pass", flush=True)
"""
RUNG = """import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"rung": os.environ["ASICMON_RUNG"], "serial": os.environ["ASICMON_DEVICE_SERIAL"],
                        "env": sorted(os.environ), "at": time.time()}) + "\\n")
print("done")
"""


def setup(tmp: str) -> None:
    os.environ.update(
        ASICMON_VAR_DIR=tmp, REDIS_KEY_PREFIX=f"asicmon-bench-ladder-{os.getpid()}", LOG_LEVEL="ERROR",
        TSDB_URL="http://127.0.0.1:9", TSDB_FLUSH_BUDGET_S="0.1", TSDB_WRITE_TIMEOUT_S="0.2",
        AGENT_RESTART_APP_COMMAND="", AGENT_REBOOT_COMMAND="",
    )
    for name in [n for n in os.environ if n.startswith("LADDER_")]:
        del os.environ[name]  # the defaults
    django_env()


def cascades() -> list[tuple[str, list[str]]]:
    """(name, codes one poll stores) of every NVIDIA cascade the specs play; a remap cascade
    twice: with spare rows, and with none left (its `exhausted` step)."""
    from emulator.devices.driver_errors import CASCADES

    out = []
    for name, c in sorted(CASCADES.items()):
        if c.vendor != "nvidia":
            continue
        out.append((name, [s.code for s in c.steps]))
        if c.exhausted is not None:
            out.append((f"{name} (no spare rows)", [c.steps[0].code, c.exhausted.code]))
    return out


def seed(hosts: int, per_host: int):
    from fleet.models import Action, Automation, Device, DriverError, Host

    Action.objects.all().delete()
    DriverError.objects.all().delete()
    Host.objects.all().delete()
    Automation.objects.all().delete()
    devices = []
    for h in range(hosts):
        host = Host.objects.create(name=f"host-{h:02d}", agent_queue=f"agent.host-{h:02d}")
        for i in range(per_host):
            devices.append(Device.objects.create(host=host, serial=f"GPU-{h:02d}{i:02d}-nvml", device_type="nvml",
                                                 model="H100", index=i, control_actions=[]))
    return devices


def store(device, codes: list[str]) -> None:
    from fleet.asicmon.errors import ErrorEvent, classify
    from fleet.driver_errors.store import record_events

    now = time.time()
    events = [classify(ErrorEvent("nvidia", code, f"Xid {code}", now + i * 0.001, address="0000:3a:00"), "nvidia_xid")
              for i, code in enumerate(codes)]
    record_events(device.host.name, {device.serial: events}, {device.serial: device.id})


def settle(devices, within_s: float = 60.0) -> float:
    from fleet.choices import DeviceState
    from fleet.driver_errors import ladder
    from fleet.driver_errors.poll import after_poll
    from fleet.models import Device

    started = time.monotonic()
    ids = [d.id for d in devices]
    while time.monotonic() - started < within_s:
        snapshot = {"health": "healthy", "driver_status": "ok", "sample_ts": time.time()}
        after_poll(dict.fromkeys(ids, snapshot))
        busy = Device.objects.filter(state=DeviceState.UNDER_REPAIR).exists()
        if not busy and not ladder.pending(ids).exclude(action="ignore").filter(handled_by__isnull=True).exists():
            break
        time.sleep(0.2)
    return time.monotonic() - started


def expected_first(codes: list[str], device, catalogue_rung) -> str:
    from fleet.driver_errors.ladder import decide

    return decide(device, "probe", catalogue_rung(codes)).rung


def catalogue_rung(codes: list[str]) -> str:
    from fleet.asicmon.errors import ErrorEvent, classify
    from fleet.driver_errors.ladder import LADDER

    actions = [classify(ErrorEvent("nvidia", c, "", 0.0), "nvidia_xid").action for c in codes]
    acted = [a for a in actions if a != "ignore"]
    return max(acted, key=LADDER.index) if acted else "ignore"


def run_default(args) -> bool:
    from fleet.choices import ActionStatus, DeviceState
    from fleet.models import Action, Automation, Device, DriverError

    print("A. a default NVIDIA agent host: no rung commands, no DCGM "
          f"(dcgmi on this machine: {shutil.which('dcgmi') or 'none'})")
    devices = seed(args.hosts, args.per_host)
    plays = cascades()
    for device, (_name, codes) in zip(devices, plays, strict=False):
        store(device, codes)
    took = settle(devices)
    actions = Action.objects.filter(rule="driver_error")
    tried = {ActionStatus.ISSUED, ActionStatus.SUCCEEDED, ActionStatus.FAILED, ActionStatus.NOT_VALIDATED}
    out_without = []
    catalogue_pulls = []
    for d in Device.objects.filter(state=DeviceState.REPAIR):
        if not actions.filter(device=d, status__in=tried).exists():
            (catalogue_pulls if "first rung" in actions.filter(device=d).last().reason else out_without).append(d.serial)
    incidents = DriverError.objects.exclude(action="ignore")
    ends = Counter()
    for row in incidents.select_related("handled_by"):
        ends[row.handled_by.status if row.handled_by else "unhandled"] += 1
    reasons = Counter(a.reason.split(": ", 1)[-1] for a in actions.filter(status=ActionStatus.NEEDS_PERSON))
    print(f"  {len(plays)} cascades on {len(plays)} of {len(devices)} devices, settled in {took:.1f} s")
    print(f"  actions: {dict(Counter(actions.values_list('status', flat=True)))}")
    print(f"  incidents (stored actionable errors) by how they ended: {dict(ends)}")
    for reason, n in reasons.items():
        print(f"    needs a person ({n}): {reason}")
    print(f"  devices out of service (state repair) with no rung tried: {len(out_without)}"
          f" (+{len(catalogue_pulls)} the catalogue itself sends to inspection: {catalogue_pulls})")
    print(f"  devices drained for a person: {Device.objects.filter(state=DeviceState.DRAINED).count()}; "
          f"rungs skipped: {actions.filter(status=ActionStatus.SKIPPED).count()}; attempts made: "
          f"{actions.filter(status__in=tried).count()}; automation paused: {Automation.read().paused}")
    ok_ends = set(ends) <= {ActionStatus.NOT_VALIDATED, ActionStatus.NEEDS_PERSON, ActionStatus.PULLED}
    ok = not out_without and ok_ends and set(catalogue_pulls) <= {d.serial for d in devices}
    print(f"  {'PASS' if ok else 'FAIL'}")
    return ok


def run_configured(args, tmp: Path) -> bool:
    from django.conf import settings

    from fleet.choices import ActionStatus, DeviceState
    from fleet.driver_errors import gate
    from fleet.models import Action, Device

    print("B. rung commands and a diagnostic configured (a fake dcgmi: pass, fail once, hang once)")
    dcgmi = tmp / "dcgmi"
    dcgmi.write_text(FAKE_DCGMI.format(python=sys.executable))
    dcgmi.chmod(dcgmi.stat().st_mode | stat.S_IXUSR)
    rung = tmp / "rung.py"
    rung.write_text(RUNG)
    diag_log, rung_log, plan_file = tmp / "dcgmi.jsonl", tmp / "rungs.jsonl", tmp / "plan.json"
    settings.AGENT_RESTART_APP_COMMAND = f"{sys.executable} {rung} {rung_log} --token not-for-viewers"
    settings.AGENT_REBOOT_COMMAND = f"{sys.executable} {rung} {rung_log}"
    settings.LADDER_DIAGNOSTIC_TIMEOUT_S = 2.0
    settings.LADDER_BREAKER_SHARE = 1.0  # every cascade at once on a small fleet is no storm here
    devices = seed(args.hosts, args.per_host)
    plays = cascades()
    modes = {}
    for i, device in enumerate(devices[:len(plays)]):
        modes[device.serial] = "fail-once" if i % 4 == 0 else "hang-once" if i % 4 == 1 else "pass"
    plan_file.write_text(json.dumps(modes))
    gate.diagnostic_for = lambda device: ((str(dcgmi), str(diag_log), str(plan_file)), "")  # the spec's `diagnose`
    wanted = {}
    for device, (name, codes) in zip(devices, plays, strict=False):
        want = catalogue_rung(codes)
        wanted[device.serial] = (name, None if want == "ignore" else expected_first(codes, device, lambda c, w=want: w))
        store(device, codes)
    took = settle(devices, within_s=120.0)
    actions = Action.objects.filter(rule="driver_error").order_by("created_at", "id")
    wrong = []
    for serial, (name, want) in wanted.items():
        first = actions.filter(serial=serial).exclude(status=ActionStatus.SKIPPED).first()
        if (first.rung if first else None) != want:
            wrong.append((name, first.rung if first else None, want))
    back_without = []
    for d in Device.objects.filter(state=DeviceState.IN_SERVICE):
        last = actions.filter(device=d).exclude(status=ActionStatus.SKIPPED).last()
        if last is not None and not (last.status == ActionStatus.SUCCEEDED and last.check_passed is True):
            back_without.append(d.serial)
    runs = defaultdict(dict)  # (host, serial, pid) -> start, end (a hung one's: its last sign of life)
    for row in (json.loads(line) for line in diag_log.read_text().splitlines()):
        run = runs[(row["host"], row["serial"], row["pid"])]
        run.setdefault("start", row["at"])
        run["end"] = row["at"]
        run["hung"] = run.get("hung", False) or row["what"] == "alive"
    overlaps = 0
    by_host = defaultdict(list)
    for (host, _, _), r in runs.items():
        by_host[host].append((r["start"], r["end"]))
    for spans in by_host.values():
        spans.sort()
        overlaps += sum(1 for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1])
    stopped = [a for a in actions if "still running after" in a.check_detail]
    hung_ends = [r["end"] - r["start"] for r in runs.values() if r["hung"]]
    shown = {a.command for a in actions if a.command}
    told = [json.loads(line) for line in rung_log.read_text().splitlines()] if rung_log.exists() else []
    envs = {name for t in told for name in t["env"]}
    print(f"  {len(plays)} cascades, settled in {took:.1f} s; actions {dict(Counter(actions.values_list('status', flat=True)))}")
    print(f"  right first rung: {len(wanted) - len(wrong)} of {len(wanted)}" + (f"; wrong: {wrong}" if wrong else ""))
    print(f"  devices back in service without a passing check: {len(back_without)} {back_without or ''}")
    print(f"  diagnostics run: {len(runs)}; at once on one host: never" if not overlaps
          else f"  diagnostics overlapping on a host: {overlaps}")
    print(f"  hung diagnostics ended at their timeout ({settings.LADDER_DIAGNOSTIC_TIMEOUT_S:g} s): {len(stopped)}, "
          f"ran {', '.join(f'{s:.2f} s' for s in hung_ends)} (start to last sign of life)")
    print(f"  rung commands run: {len(told)}; their environment: {sorted(envs)}")
    for line in sorted(shown):
        print(f"  stored command line (operators only): {line.replace(str(tmp), '$TMP')}")
    for a in actions.filter(status=ActionStatus.PULLED):
        print(f"  pulled: {a.serial}: {a.reason}")
    ok = (not wrong and not back_without and not overlaps and stopped
          and all(s < settings.LADDER_DIAGNOSTIC_TIMEOUT_S + 2.0 for s in hung_ends)
          and envs <= {"PATH", "LANG", "ASICMON_RUNG", "ASICMON_DEVICE_SERIAL", "ASICMON_HOST", "ASICMON_WORKLOAD"}
          and not any("not-for-viewers" in c for c in shown))
    print(f"  {'PASS' if ok else 'FAIL'}")
    return ok


def run_breaker(tmp: Path) -> bool:
    from django.conf import settings

    from fleet.models import Action, Automation

    settings.LADDER_BREAKER_SHARE = 0.1
    print("C. 16 GPUs on two hosts, two XIDs on one host, the default breaker "
          f"(at least {settings.LADDER_BREAKER_MIN_DEVICES} devices and more than {settings.LADDER_BREAKER_SHARE:.0%})")
    (tmp / "plan.json").write_text("{}")
    devices = seed(2, 8)
    for device in devices[:2]:
        store(device, ["94"])
    settle(devices)
    paused = Automation.read().paused
    print(f"  actions: {list(Action.objects.filter(rule='driver_error').values_list('rung', 'status'))}; "
          f"automation paused: {paused}")
    print(f"  {'PASS' if not paused else 'FAIL'}")
    return not paused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--per-host", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        setup(tmp)

        from fleet.redis import get_redis, key

        try:
            with throwaway_database():
                results = [run_default(args), run_configured(args, Path(tmp)), run_breaker(Path(tmp))]
        finally:
            keys = list(get_redis().scan_iter(key("*")))
            if keys:
                get_redis().delete(*keys)
    print("ALL CHECKS PASS" if all(results) else "SOME CHECKS FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
