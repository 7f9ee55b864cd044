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
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"median {statistics.median(values) * 1000:8.2f} ms   p95 {p95 * 1000:8.2f} ms"


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


def bench_local(specs: Path, hwmon: Path, cycles: int) -> None:
    from fleet.hosts.local import discover

    found = discover("bench-node", hwmon_root=hwmon, spec_dirs=[specs])
    assert not found.errors, found.errors
    discoveries = []
    for _ in range(10):
        t0 = time.perf_counter()
        discover("bench-node", hwmon_root=hwmon, spec_dirs=[specs])
        discoveries.append(time.perf_counter() - t0)
    local = found.host
    local.poll()
    polls = []
    for _ in range(cycles):
        t0 = time.perf_counter()
        local.poll()
        polls.append(time.perf_counter() - t0)
    n = len(local.devices)
    print(f"devices found                     {n}")
    print(f"discovery (specs compiled, cached) {ms(discoveries)}")
    print(f"LocalHost.poll, all {n} devices      {ms(polls)}")
    print(f"  per device                      {statistics.median(polls) / n * 1e6:8.1f} µs")


def bench_cycle(specs: Path, hwmon: Path, cycles: int) -> None:
    os.environ.update(
        AGENT_HOST="bench-node", HWMON_ROOT=str(hwmon), ASIMOV_SPEC_DIRS=str(specs), FLEET_HOSTS="0",
        REDIS_KEY_PREFIX="asicmon-bench-agent", LOG_LEVEL="WARNING",
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.test.utils import setup_databases, teardown_databases

    from fleet.agent import queues
    from fleet.agent.discovery import agent_host
    from fleet.agent.registration import register_host
    from fleet.models import Host
    from fleet.polling import poller

    old = setup_databases(verbosity=0, interactive=False)
    try:
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
        print(f"agent poll cycle (poll service)    {ms(totals)}   {samples} samples a cycle")
        print(f"  database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}")
    finally:
        teardown_databases(old, verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="asicmon-bench-agent-") as tmp:
        specs, hwmon = make_machine(Path(tmp), args.devices)
        bench_local(specs, hwmon, args.cycles)
        bench_cycle(specs, hwmon, args.cycles)


if __name__ == "__main__":
    main()
