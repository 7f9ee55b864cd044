"""The suite's tiers, and the guard that keeps them honest.

- unit: everything else: no long-running child process, no browser. `make test-fast` runs
  it in parallel (pytest-xdist); one-shot commands that a test waits for are allowed.
- integration: starts Celery workers, beat, Daphne, the agent, Prometheus or a Redis server.
- browser: drives a real Chromium (everything under tests/browser/).
- soak: holds the live stack under load for minutes.

A test gets its tier from the fixtures it uses (a fixture declared with `starts_processes`
or `drives_browser`, at any depth), from its folder (tests/browser/), or from an explicit
marker. Whatever the marks say, a test that starts a service from tests/support/processes.py
or leaves a child process running without one of these markers fails, so a test moved or
written into the wrong tier shows itself the first time it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROCESS_TIERS = ("integration", "browser", "soak")  # the unit tier is "none of these" (dashboard/stack.py)
BROWSER_FOLDER = Path(__file__).resolve().parents[1] / "browser"


# The process tiers' longest test files, with the seconds each took on 2 busy cores (four
# workers): xdist hands files out in this order (`--no-loadscope-reorder`), the soak first, so
# that it runs beside the others and no long file starts last while the other workers idle.
# Files not listed follow in their own order. A rough guide, not a contract: re-measure with
# `--junitxml` when a file's time changes a lot.
LONGEST_FILES = {
    "tests/scenarios/test_soak.py": 230,
    "tests/scenarios/test_machines.py": 230,
    "tests/scenarios/test_run_stop.py": 130,
    "tests/browser/test_jobs.py": 120,
    "tests/browser/test_device_ranges.py": 110,
    "tests/browser/test_traces.py": 105,
    "tests/traces/processes/test_capture.py": 105,
    "tests/scenarios/test_tsdb_outage.py": 100,
    "tests/scenarios/test_health_worker.py": 100,
    "tests/browser/test_agent_host.py": 80,
    "tests/fleet/agent/test_kineto.py": 70,
    "tests/browser/test_live_dashboard.py": 80,
    "tests/browser/test_health_actions.py": 80,
    "tests/browser/test_what_users_see.py": 80,
    "tests/browser/test_replay_page.py": 70,
    "tests/dashboard/gate/test_daphne_gate.py": 70,
    "tests/browser/test_requests_view.py": 67,
    "tests/traces/store/test_object_store.py": 66,
    "tests/browser/test_trace_views.py": 65,
    "tests/browser/test_trace_findings.py": 63,
    "tests/browser/test_real_capture.py": 60,
    "tests/browser/test_fleet_page.py": 50,
    "tests/scenarios/test_run_command.py": 41,
    "tests/fleet/agent/test_agent_reboots.py": 34,
}
ROOT = Path(__file__).resolve().parents[2]


def longest_first(items: list[pytest.Item]) -> None:
    """Sort the items so: the soak first, then the files of LONGEST_FILES, longest first; a
    file's tests stay together and in their order, the rest as they were."""
    def key(item: pytest.Item):
        path = Path(item.path)
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        return item.get_closest_marker("soak") is None, -LONGEST_FILES.get(name, 0)

    items.sort(key=key)


class TierError(Exception):
    """A test outside the process tiers tried to start (or left running) a child process."""


def starts_processes(fixture_function):
    """Declare a fixture that starts child processes: its tests are in the integration tier.

    Put it under `@pytest.fixture`: `@pytest.fixture(scope="module")` then `@starts_processes`.
    """
    fixture_function.tier = "integration"
    return fixture_function


def drives_browser(fixture_function):
    """Declare a fixture that opens a real browser: its tests are in the browser tier."""
    fixture_function.tier = "browser"
    return fixture_function


def tiers_of_fixtures(item: pytest.Item) -> set[str]:
    """The tiers declared by the fixtures a test uses, directly or through other fixtures."""
    found = set()
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        for definition in definitions:
            tier = getattr(definition.func, "tier", None)
            if tier:
                found.add(tier)
    return found


def in_browser_folder(path: Path) -> bool:
    return Path(path).resolve().is_relative_to(BROWSER_FOLDER)


def classify(item: pytest.Item) -> None:
    """Add the tier markers a test earns by its fixtures and its folder."""
    tiers = tiers_of_fixtures(item)
    if in_browser_folder(item.path):
        tiers.add("browser")
    for tier in sorted(tiers):
        if item.get_closest_marker(tier) is None:
            item.add_marker(tier)


def process_tier(item: pytest.Item | None) -> str | None:
    """The process tier a test is in, or None for a unit test."""
    if item is None:
        return None
    return next((tier for tier in PROCESS_TIERS if item.get_closest_marker(tier)), None)


# The test running in this process (set by tests/conftest.py around each test's setup, call
# and teardown); None outside a test, e.g. in a benchmark that uses the process helpers.
current_item: pytest.Item | None = None


def check_may_start(what: str) -> None:
    """Raise TierError if the running test may not start a child process (`what`)."""
    if current_item is not None and process_tier(current_item) is None:
        raise TierError(
            f"{current_item.nodeid} starts {what} but is in the unit tier: mark it "
            f"@pytest.mark.integration (or use a fixture declared with starts_processes), so "
            f"that `make test-fast` leaves it out"
        )


def children() -> dict[int, str]:
    """This process's running children, pid → command line (from /proc)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:  # a thread that ended meanwhile
            continue
    running = {}
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if status == "Z":  # ended, not yet waited for
                continue
            running[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
    return running


def check_left_no_children(before: dict[int, str]) -> None:
    """Raise TierError if a unit test has child processes running that it did not have before."""
    if current_item is None or process_tier(current_item) is not None:
        return
    started = {pid: cmd for pid, cmd in children().items() if pid not in before}
    if started:
        listed = "; ".join(f"{pid}: {cmd[:120]}" for pid, cmd in sorted(started.items()))
        raise TierError(
            f"{current_item.nodeid} is in the unit tier but has child processes running at its "
            f"end ({listed}): mark it @pytest.mark.integration, or wait for what it starts"
        )


def xdist_worker() -> str:
    """This process's pytest-xdist worker id ("gw0", ...), or "" when not run by xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")
