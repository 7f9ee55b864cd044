"""The emulator's command line follows the fleet's settings (issue 12): with FLEET_HOSTS=6
it lists and pokes at the six hosts the workers poll, not the four of its old defaults."""

import os
import subprocess
import sys

import pytest

from emulator.config import FleetConfig, fleet_layout
from tests.support.processes import ROOT


def emulator(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "EMULATOR_"))}
    return subprocess.run(
        [sys.executable, "-m", "emulator", *args], cwd=ROOT, env={**clean, **env},
        capture_output=True, text=True, timeout=60,
    )


@pytest.mark.slow  # runs the emulator's command line several times: seconds of CPU (make test runs it, make test-fast does not)
def test_the_cli_follows_the_fleet_settings(tmp_path):
    env = dict(FLEET_SEED="7", FLEET_HOSTS="6", FLEET_DEVICES_PER_HOST="2", FLEET_TYPES="gpu,video",
               EMULATOR_STATE_DIR=str(tmp_path))
    listing = emulator("list", **env)
    assert listing.returncode == 0, listing.stderr
    layout = fleet_layout(FleetConfig(seed=7, hosts=6, devices_per_host=2, types=("gpu", "video")))
    assert [line for line in listing.stdout.splitlines() if not line.startswith(" ")] == [h.name for h in layout]
    last = layout[-1].devices[0].serial  # on a host the old defaults (4 hosts) did not have
    injected = emulator("inject", last, "overheat", **env)
    assert injected.returncode == 0, injected.stderr
    assert any(tmp_path.iterdir())  # the state the workers read (EMULATOR_STATE_DIR) changed


def test_a_bad_fleet_setting_is_a_clear_error():
    result = emulator("list", FLEET_HOSTS="many")
    assert result.returncode != 0
    assert "FLEET_HOSTS='many' is not an integer" in result.stderr
