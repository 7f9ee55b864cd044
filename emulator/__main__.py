"""Poke at an emulated fleet: ``python -m emulator --help``.

    python -m emulator list
    python -m emulator show EVT-0000-00-1298
    python -m emulator inject EVT-0000-00-1298 overheat
    python -m emulator clear EVT-0000-00-1298 overheat
    python -m emulator reboot EVT-0000-00-1298
    python -m emulator materialise host-00 /tmp/sysfs
    python -m emulator job /tmp/job --type gpu --duration 2   # per-rank Kineto traces
    python -m emulator fit TRACE... --type gpu [--write]      # performance model from real traces
    python -m emulator whatif TRACE --on gpu                  # its kernels on a fitted type
    python -m emulator replay HISTORY [--json]                # a fault history vs repair policies

State lives under --state-dir (default var/emulator), shared with the workers that poll;
or, with --state redis (default $EMULATOR_STATE), in the Redis at $REDIS_URL under
$REDIS_KEY_PREFIX, as the workers keep it when they run on machines that share no disk.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from emulator.config import DEFAULT_TYPES, FleetConfig, fleet_layout
from emulator.devices.driver_errors import DRIVER_FAULTS
from emulator.devices.zoo import DEVICE_TYPES, FAULTS
from emulator.host import EmulatedHost
from emulator.perf.fitting import add_commands, fit_command, whatif_command
from emulator.replay.cli import add_replay_command, replay_command
from emulator.state_store import FileStateStore, RedisStateStore, StateStore
from emulator.workloads.training import PARALLELISMS


def _config(args: argparse.Namespace) -> FleetConfig:
    return FleetConfig(
        seed=args.seed,
        hosts=args.hosts,
        devices_per_host=args.devices_per_host,
        types=tuple(args.types.split(",")),
    )


def _host_of(cfg: FleetConfig, serial: str, store: StateStore) -> EmulatedHost:
    for host in fleet_layout(cfg):
        if any(d.serial == serial for d in host.devices):
            return EmulatedHost(cfg, host, store=store)
    raise SystemExit(f"no device {serial!r} in this fleet (see: python -m emulator list)")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not an integer") from None


def _default_state_dir() -> Path:
    if os.environ.get("EMULATOR_STATE_DIR"):
        return Path(os.environ["EMULATOR_STATE_DIR"])
    return Path(os.environ.get("ASICMON_VAR_DIR", "var")) / "emulator"


def _store(args: argparse.Namespace) -> StateStore:
    """The store the workers use with the same settings (fleet.hosts.emulated_fleet)."""
    if args.state == "redis":
        url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
        return RedisStateStore.from_url(url, f"{os.environ.get('REDIS_KEY_PREFIX') or 'asicmon'}:emulator")
    return FileStateStore(args.state_dir)


def _parser() -> argparse.ArgumentParser:
    # Defaults follow the fleet's settings (the same environment variables the workers
    # read), so that the command line pokes at the fleet that is being polled.
    parser = argparse.ArgumentParser(prog="python -m emulator", description="The accelerator zoo.")
    parser.add_argument("--seed", type=int, default=_env_int("FLEET_SEED", 42), help="default: $FLEET_SEED or 42")
    parser.add_argument("--hosts", type=int, default=_env_int("FLEET_HOSTS", 4), help="default: $FLEET_HOSTS or 4")
    parser.add_argument(
        "--devices-per-host", type=int, default=_env_int("FLEET_DEVICES_PER_HOST", 8),
        help="default: $FLEET_DEVICES_PER_HOST or 8",
    )
    parser.add_argument(
        "--types",
        default=os.environ.get("FLEET_TYPES", "").strip() or ",".join(DEFAULT_TYPES),
        help=f"comma-separated, from {', '.join(DEVICE_TYPES)}; default: $FLEET_TYPES",
    )
    parser.add_argument(
        "--state-dir", type=Path, default=_default_state_dir(), help="default: $EMULATOR_STATE_DIR or var/emulator"
    )
    parser.add_argument(
        "--state", choices=("file", "redis"), default=(os.environ.get("EMULATOR_STATE") or "file").strip().lower(),
        help="where the hosts' state is: files under --state-dir, or Redis; default: $EMULATOR_STATE or file",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="hosts and devices of the fleet")
    p = sub.add_parser("show", help="a device as its driver shows it, now")
    p.add_argument("serial")
    for name, helptext in (("inject", "inject a fault"), ("clear", "clear a fault")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("serial")
        p.add_argument("fault", choices=FAULTS + DRIVER_FAULTS)
        if name == "inject":
            p.add_argument(
                "--persistent", action="store_true", help="survives reboots (a hardware fault)"
            )
    p = sub.add_parser("reboot", help="reboot a device")
    p.add_argument("serial")
    p = sub.add_parser("materialise", help="write a host's sysfs-style trees as real files")
    p.add_argument("host")
    p.add_argument("directory", type=Path)
    p = sub.add_parser("job", help="run a distributed job on devices as they are now; write one trace per rank")
    p.add_argument("directory", type=Path)
    p.add_argument("--name", default="job")
    p.add_argument("--devices", help="comma-separated serials, in rank order")
    p.add_argument("--host", action="append", help="every device of this host (repeatable)")
    p.add_argument("--type", help="only devices of this type")
    p.add_argument("--parallelism", choices=PARALLELISMS, default="data")
    p.add_argument("--duration", type=float, default=2.0, help="seconds of the job to trace")
    add_commands(sub)
    add_replay_command(sub)
    return parser


def _list(cfg: FleetConfig) -> None:
    for host in fleet_layout(cfg):
        print(host.name)
        for d in host.devices:
            print(
                f"  {d.index:2d}  {d.serial:18s} {d.type:10s} {d.model:12s} sw {d.sw_version:4s} fw {d.firmware_version}"
            )


def _materialise(cfg: FleetConfig, args: argparse.Namespace) -> None:
    host = EmulatedHost(cfg, args.host, store=_store(args))
    with host.locked():
        host.sync(time.time())
        host.advance(time.time())
        for path in host.materialise(args.directory):
            print(path)


def _show(host: EmulatedHost, serial: str) -> None:
    state = host.state(serial)
    d = host.spec.device(serial)
    print(
        f"{d.serial} ({d.type}, {d.model}) on {d.host}; faults: {', '.join(state.faults) or 'none'}"
        + ("; rebooting" if state.rebooting else "")
    )
    if "hang" in state.faults:
        print("  the driver does not answer (hang)")
        return
    for key, value in host.describe(serial).items():
        value = str(value).replace("\n", " | ")
        print(f"  {key:40s} {value}")


def _act(cfg: FleetConfig, host: EmulatedHost, args: argparse.Namespace) -> None:
    """inject, clear or reboot: the change is saved with the host's state."""
    if args.command == "inject":
        host.inject_fault(args.serial, args.fault, args.persistent)
        print(f"{args.serial}: injected {args.fault}")
    elif args.command == "clear":
        host.clear_fault(args.serial, args.fault)
        print(f"{args.serial}: cleared {args.fault}")
    elif args.command == "reboot":
        host.reboot(args.serial)
        print(f"{args.serial}: rebooting for {cfg.reboot_s:g} s")
    host.save()


def _job(cfg: FleetConfig, args: argparse.Namespace) -> None:
    """Run a job from now on the devices as their saved states say; nothing is saved."""
    from emulator.workloads.jobs import emulated_conditions, make_job, run_job, select_devices
    from traces.atrace import write_chrome_trace

    try:
        serials = args.devices.split(",") if args.devices else None
        devices = select_devices(cfg, serials=serials, hosts=args.host, device_type=args.type)
        spec = make_job(args.name, devices, args.parallelism)
    except (KeyError, ValueError) as exc:
        raise SystemExit(str(exc)) from None
    now = time.time()
    hosts = {name: EmulatedHost(cfg, name, store=_store(args)) for name in spec.hosts}
    for host in hosts.values():
        host.sync(now)
        for r in spec.ranks:
            if r.host == host.name:
                host.occupy(r.serial, now + args.duration + 60)
    capture = run_job(spec, args.duration, emulated_conditions(hosts), start_s=now, seed=args.seed)
    args.directory.mkdir(parents=True, exist_ok=True)
    for r in spec.ranks:
        if r.rank in capture.traces:
            path = args.directory / f"{spec.name}_rank{r.rank}.json.gz"
            write_chrome_trace(capture.traces[r.rank], path)
            print(f"rank {r.rank:3d}  {r.serial:18s} {r.host}  {len(capture.traces[r.rank]):7d} events  {path}")
        else:
            print(f"rank {r.rank:3d}  {r.serial:18s} {r.host}  failed: {capture.failed[r.rank]}")
    print(f"{capture.steps_run} steps of {spec.parallelism}-parallel {spec.name!r} in {args.duration:g} s")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("fit", "whatif"):
        return fit_command(args) if args.command == "fit" else whatif_command(args)
    if args.command == "replay":
        return replay_command(args)
    cfg = _config(args)
    if args.command == "job":
        _job(cfg, args)
        return 0
    if args.command == "list":
        _list(cfg)
        return 0
    if args.command == "materialise":
        _materialise(cfg, args)
        return 0
    host = _host_of(cfg, args.serial, _store(args))
    with host.locked():
        host.sync(time.time())
        host.advance(time.time())
        host.state(args.serial)  # an unknown serial fails here, before anything changes
        if args.command == "show":
            _show(host, args.serial)
        else:
            _act(cfg, host, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
