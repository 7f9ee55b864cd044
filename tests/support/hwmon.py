"""A generated Linux hwmon tree, laid out as /sys lays it out.

``class/hwmon/hwmonN`` are links into ``devices/…``, and each hwmon folder's ``device``
link points at the device it belongs to: a PCI GPU (amdgpu), a platform device (coretemp)
or nothing at all (acpitz). The kernel numbers hwmonN in probe order, so ``numbers`` lets a
test renumber them as a reboot may.
"""

import os
from pathlib import Path

PCI_GPU = "0000:03:00.0"
CHIPS = {
    "amdgpu": {
        "device": f"devices/pci0000:00/0000:00:01.1/{PCI_GPU}",
        "files": {
            "temp1_input": "54000\n", "temp1_crit": "100000\n", "power1_average": "87000000\n",
            "power1_cap": "250000000\n", "freq1_input": "1800000000\n",
        },
        "device_files": {
            "gpu_busy_percent": "37\n", "mem_info_vram_total": "17163091968\n",
            "mem_info_vram_used": "1073741824\n", "current_link_width": "16\n", "max_link_width": "16\n",
        },
    },
    "coretemp": {"device": "devices/platform/coretemp.0", "files": {"temp1_input": "48000\n"}},
    "acpitz": {"device": None, "files": {"temp1_input": "27800\n"}},
}


def write_hwmon_tree(root: Path, numbers: dict[str, int] | None = None) -> Path:
    """Writes the tree under ``root`` and returns its ``class/hwmon`` folder (a HWMON_ROOT)."""
    numbers = numbers or {"amdgpu": 3, "coretemp": 1, "acpitz": 0}
    class_dir = root / "class" / "hwmon"
    class_dir.mkdir(parents=True, exist_ok=True)
    for chip, spec in CHIPS.items():
        hwmon = f"hwmon{numbers[chip]}"
        parent = root / (spec["device"] or "devices/virtual/thermal/thermal_zone0")
        folder = parent / "hwmon" / hwmon
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "name").write_text(f"{chip}\n")
        for name, text in spec["files"].items():
            (folder / name).write_text(text)
        for name, text in spec.get("device_files", {}).items():
            (parent / name).write_text(text)
        if spec["device"]:
            (folder / "device").symlink_to(os.path.relpath(parent, folder))
        (class_dir / hwmon).symlink_to(os.path.relpath(folder, class_dir))
    return class_dir
