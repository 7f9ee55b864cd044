"""Host-agent figures: finding a machine's devices, and polling them each cycle.

    python benchmarks/bench_agent.py [--devices 8] [--cycles 50]

A machine is made of files: ``--devices`` video accelerators written to disk by the
emulator's ``materialise`` (read by a user spec with a ``discover`` line) and a generated
hwmon tree of three sensors. Prints the time of a discovery (specs compiled, folders
globbed), of one `LocalHost.poll` (every device refreshed from its files), and of a whole
agent poll cycle through the poll service (samples, snapshots, health, websocket message),
on a throwaway database on the server DATABASE_URL names and the Redis REDIS_URL names.
"""

import argparse
import tempfile
import time
from pathlib import Path

from harness import Report, django_env, summary, throwaway_database, timed


def ms(seconds: list[float]) -> str:
    return summary(seconds, (95,), spec="8.2f")


def make_machine(root: Path, devices: int) -> tuple[Path, Path]:
    from emulator import EmulatedHost, FleetConfig
    from fleet.asimov.loader import SPECS_DIR
    from tests.support.hwmon import write_hwmon_tree

    host = EmulatedHost(FleetConfig(seed=99, hosts=1, devices_per_host=devices, types=("video",)), "host-00", None)
    now = time.time()
    host.sync(now)
    host.advance(now)
    host.materialise(root / "sysfs")
    specs = root / "specs"
    specs.mkdir()
    (specs / "vt100.asimov").write_text(
        (SPECS_DIR / "video.asimov").read_text().replace(
            "device video\n",
            f'device vt100\ndiscover folders("{root}/sysfs/host-00/vt*", requires=["serial"], serial=file("serial"))\n',
        )
    )
    return specs, write_hwmon_tree(root / "sys")


def bench_local(report: Report, specs: Path, hwmon: Path, cycles: int) -> None:
    from fleet.hosts.local import discover

    found = discover("bench-node", hwmon_root=hwmon, spec_dirs=[specs])
    assert not found.errors, found.errors
    discoveries = timed(lambda: discover("bench-node", hwmon_root=hwmon, spec_dirs=[specs]), 10)
    local = found.host
    polls = timed(local.poll, cycles, warmup=1)
    n = len(local.devices)
    report.line(f"devices found                     {n}")
    report.line(f"discovery (specs compiled, cached) {ms(discoveries.wall)}")
    report.line(f"LocalHost.poll, all {n} devices      {ms(polls.wall)}")
    report.line(f"  per device                      {polls.median / n * 1e6:8.1f} µs")


def bench_cycle(report: Report, specs: Path, hwmon: Path, cycles: int) -> None:
    django_env(AGENT_HOST="bench-node", HWMON_ROOT=hwmon, ASIMOV_SPEC_DIRS=specs, FLEET_HOSTS="0",
               REDIS_KEY_PREFIX="asicmon-bench-agent", LOG_LEVEL="WARNING")
    from django.conf import settings

    from fleet.agent import queues
    from fleet.agent.discovery import agent_host
    from fleet.agent.registration import register_host
    from fleet.models import Host
    from fleet.polling import poller

    with throwaway_database():
        register_host("bench-node", queues.agent_queue_name("bench-node"), agent_host().devices)
        host_id = Host.objects.get(name="bench-node").id
        cycle = poller.current_cycle()
        poller.poll_agent_host(host_id, cycle)
        totals, samples = [], 0
        for i in range(1, cycles + 1):
            t0 = time.perf_counter()
            result = poller.poll_agent_host(host_id, cycle + i * settings.POLL_INTERVAL)
            totals.append(time.perf_counter() - t0)
            samples = result.samples
        report.line(f"agent poll cycle (poll service)    {ms(totals)}   {samples} samples a cycle")
        report.line(f"  database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="asicmon-bench-agent-") as tmp:
        specs, hwmon = make_machine(Path(tmp), args.devices)
        report = Report("Host-agent figures")
        bench_local(report, specs, hwmon, args.cycles)
        bench_cycle(report, specs, hwmon, args.cycles)


if __name__ == "__main__":
    main()
