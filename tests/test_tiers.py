"""The suite's own machinery: tiers, the guard on child processes, per-worker isolation, and the
environment the process helpers give a child."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.support import tiers
from tests.support.processes import ROOT, Service, child_env, environment_settings
from tests.support.tiers import starts_processes


def test_a_unit_test_may_not_start_a_service(request):
    assert tiers.process_tier(request.node) is None
    with pytest.raises(tiers.TierError, match=r"test_tiers.py::test_a_unit_test_may_not_start_a_service starts sleeper"):
        Service("sleeper", ["sleep", "60"], child_env())


def test_a_unit_test_that_leaves_a_child_running_fails():
    before = tiers.children()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        # Between fork and exec a child's command line is empty: wait for it to be `sleep`.
        deadline = time.monotonic() + 10
        while not tiers.children().get(sleeper.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tiers.children()[sleeper.pid] == "sleep 60"
        with pytest.raises(tiers.TierError, match=rf"has child processes running at its end \({sleeper.pid}: sleep 60\)"):
            tiers.check_left_no_children(before)
    finally:
        sleeper.kill()
        sleeper.wait()
    tiers.check_left_no_children(before)  # a command the test waited for is allowed


def test_a_unit_test_may_run_a_command_and_wait_for_it():
    before = tiers.children()
    done = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True, check=True)
    assert done.stdout == "ok\n"
    tiers.check_left_no_children(before)


@pytest.fixture
@starts_processes
def pretend_stack():
    """Declared as starting processes (it starts none: the declaration is what is tested)."""
    return "stack"


@pytest.fixture
def page_on_the_stack(pretend_stack):
    return f"a page of the {pretend_stack}"


def test_a_fixture_that_starts_processes_puts_its_tests_in_the_integration_tier(pretend_stack, request):
    assert request.node.get_closest_marker("integration")
    assert tiers.process_tier(request.node) == "integration"


def test_so_does_a_fixture_that_uses_one(page_on_the_stack, request):
    assert tiers.tiers_of_fixtures(request.node) == {"integration"}
    assert request.node.get_closest_marker("integration")


def test_browser_tests_are_found_by_their_fixture_and_their_folder():
    from tests.support.browser import browser

    assert browser.tier == "browser"
    assert tiers.in_browser_folder(ROOT / "tests" / "browser" / "deeper" / "test_x.py")
    assert not tiers.in_browser_folder(ROOT / "tests" / "fleet" / "test_x.py")


def test_this_worker_has_its_own_keys_queue_and_folders():
    worker = tiers.xdist_worker()
    prefix = settings.REDIS_KEY_PREFIX
    configured = os.environ.get("REDIS_KEY_PREFIX", "")  # the runner's (ASICMON_TEST_PREFIX)
    base = configured if "test" in configured else "asicmon-test"
    assert prefix == (f"{base}-{worker}" if worker else base)
    assert prefix == settings.CELERY_TASK_DEFAULT_QUEUE
    assert settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] == f"{prefix}:ws"
    assert settings.CACHES["default"]["KEY_PREFIX"] == f"{prefix}:cache"
    var = ROOT / "var"
    for folder in (settings.EMULATOR_STATE_DIR, settings.TRACE_STORAGE_DIR, settings.MEDIA_ROOT):
        assert not Path(folder).is_relative_to(var), folder
        assert Path(folder).parent.name.startswith(prefix)
    assert settings.STORAGES["traces"]["OPTIONS"]["location"] == str(settings.TRACE_STORAGE_DIR)


READ_SETTINGS = """
import json, django
django.setup()
from django.conf import settings
from tests.support.processes import environment_settings
seen = {name: repr(getattr(settings, name)) for name, _ in environment_settings().values()}
print(json.dumps({**seen, "database": str(settings.DATABASES["default"]["NAME"])}))
"""


@pytest.mark.slow  # a child interpreter reads every setting: seconds of CPU (make test runs it, make test-fast does not)
@pytest.mark.django_db
def test_a_child_reads_every_setting_as_the_test_has_it(settings):
    """child_env passes on every setting that comes from a variable, changed ones included."""
    names = {name for name, _ in environment_settings().values()}
    assert {"POLL_INTERVAL", "FLEET_TYPES", "HEALTH_LIMITS", "CELERY_TASK_DEFAULT_QUEUE", "REMEDIATION_DRY_RUN",
            "ASIMOV_SPEC_DIRS", "EMULATOR_STATE_DIR", "TRACE_STORAGE_DIR", "REDIS_KEY_PREFIX"} <= names
    settings.POLL_INTERVAL = 1.5
    settings.FLEET_TYPES = ("gpu", "video")
    settings.HEALTH_LIMITS = {"leak_critical_s": 600}
    settings.REMEDIATION_DRY_RUN = True
    settings.ASIMOV_SPEC_DIRS = [Path("/tmp/specs-a"), Path("/tmp/specs-b")]
    env = child_env(PROBE_TIMEOUT=0.25)
    assert env["CELERY_QUEUE"] == settings.CELERY_TASK_DEFAULT_QUEUE
    # The test's database (test_asicmon_gw0 on PostgreSQL, var/test-db.sqlite3_gw0 on SQLite).
    test_database = str(connection.settings_dict["NAME"])
    assert "test" in Path(test_database).name and env["DATABASE_URL"].endswith(test_database)
    done = subprocess.run([sys.executable, "-c", READ_SETTINGS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    expected = {name: repr(getattr(settings, name)) for name in names - {"DATABASE_URL", "PROBE_TIMEOUT"}}
    assert {name: seen[name] for name in expected} == expected
    assert seen["PROBE_TIMEOUT"] == "0.25"
    assert seen["database"] == test_database


def test_a_real_trace_over_the_size_limit_runs_its_checks_in_the_slow_tier(tmp_path, monkeypatch):
    import gzip

    from tests.support import traces

    monkeypatch.setattr(traces, "REAL_TRACES", tmp_path)
    small, large = tmp_path / "small.json.gz", tmp_path / "large.json.gz"
    small.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    large.write_bytes(gzip.compress(b" " * (traces.LARGE_TRACE_BYTES + 1)))
    params = {p.id: [m.name for m in p.marks] for p in traces.each_real_trace([small, large])}
    assert params == {"small": [], "large": ["slow"]}


def test_make_test_runs_every_tier_and_make_test_fast_the_unit_tier_alone():
    from dashboard.stack import TIERS

    recipes = {}
    lines = (ROOT / "Makefile").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("test:", "test-fast:")) and "export" not in line:
            recipes[line.split(":")[0]] = lines[i + 1]
    ran = {target: recipe.split("--tiers=")[1].split()[0].replace("+", ",").split(",") for target, recipe in recipes.items()}
    assert sorted(ran["test"]) == sorted(TIERS) and ran["test-fast"] == ["unit"]
    # Each test is in exactly one tier: the marker expressions split the suite.
    unit, slow, stack = (TIERS[t][TIERS[t].index("-m") + 1] for t in ("unit", "slow", "stack"))
    for marks in ({"slow"}, {"integration"}, {"browser", "slow"}, set()):
        chosen = [t for t, expr in (("unit", unit), ("slow", slow), ("stack", stack))
                  if eval(expr, {}, {m: m in marks for m in ("integration", "browser", "soak", "slow")})]
        assert len(chosen) == 1, (marks, chosen)


def test_tiers_joined_by_a_plus_run_as_one_with_either_tiers_tests():
    from dashboard.stack import TIERS, tier_args

    assert tier_args("unit") == TIERS["unit"]
    joined = tier_args("unit+slow")
    unit, slow = (TIERS[t][TIERS[t].index("-m") + 1] for t in ("unit", "slow"))
    assert joined == [*TIERS["unit"][:1], f"({unit}) or ({slow})", *TIERS["unit"][2:]]


def test_a_missing_service_skips_a_test_here_and_fails_it_under_ci(monkeypatch):
    from tests.support.needs import missing

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no RabbitMQ answers"):
        missing("no RabbitMQ answers")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"no RabbitMQ answers \(CI=true: a test that needs it fails"):
        missing("no RabbitMQ answers")


def test_the_soak_and_the_longest_files_are_handed_out_first_each_file_kept_whole():
    for name in tiers.LONGEST_FILES:
        assert (tiers.ROOT / name).is_file(), f"LONGEST_FILES names {name}, which is gone"

    class Item:
        def __init__(self, path: str, soak: bool = False):
            self.path, self.soak = tiers.ROOT / path, soak

        def get_closest_marker(self, name):
            return object() if name == "soak" and self.soak else None

    short, other = "tests/fleet/tsdb/test_reads.py", "tests/scenarios/test_poll_faults.py"
    items = [Item(short), Item(other), Item("tests/scenarios/test_machines.py"), Item(other),
             Item("tests/browser/test_jobs.py"), Item("tests/scenarios/test_soak.py", soak=True)]
    first_other = items[1]
    tiers.longest_first(items)
    assert [str(i.path.relative_to(tiers.ROOT)) for i in items] == [
        "tests/scenarios/test_soak.py", "tests/scenarios/test_machines.py", "tests/browser/test_jobs.py",
        short, other, other]
    assert items[4] is first_other  # a file's tests keep their order
