"""A sysfs tree written to disk by the emulator, and a user's spec that discovers it."""

import time
from pathlib import Path

from emulator import EmulatedHost, FleetConfig
from fleet.asimov.loader import SPECS_DIR

# A spec with a typo on line 4, column 7: the agent reports it and polls the rest.
BROKEN_SPEC = 'device broken\ndiscover folders("/nowhere/*")\nt = file("temp", int)\nstats.temprature_c = t\n'


def materialise(root: Path, seed: int = 1234, devices: int = 3) -> Path:
    """The sysfs trees of an emulated host's video accelerators, written as real files."""
    cfg = FleetConfig(seed=seed, hosts=1, devices_per_host=devices, types=("video",))
    host = EmulatedHost(cfg, "host-00", None)
    now = time.time()
    host.sync(now)
    host.advance(now)
    host.materialise(root)
    # The driver's write-only reset attribute: materialise writes what can be read, so the
    # file a spec's `action reboot = write("reset", "1")` writes to is added here.
    for folder in (root / "host-00").glob("vt*"):
        (folder / "reset").write_text("0\n")
    return root / "host-00"


def without_reboot(spec: Path) -> Path:
    """The same spec with its ``action reboot`` removed: its devices go to repair."""
    lines = spec.read_text().splitlines(keepends=True)
    spec.write_text("".join(line for line in lines if not line.startswith("action reboot")))
    return spec


def user_spec(folder: Path, sysfs: Path, name: str = "vt100") -> Path:
    """The built-in video spec, onboarded as a user's own device type with a discover rule."""
    text = (SPECS_DIR / "video.asimov").read_text().replace(
        "device video\n",
        f'device {name}\ndiscover folders("{sysfs}/vt*", requires=["name", "serial"], serial=file("serial"))\n',
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.asimov"
    path.write_text(text)
    return path
