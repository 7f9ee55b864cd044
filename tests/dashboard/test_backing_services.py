"""Settings fail loudly on bad values; the stack runner finds or starts its services."""

import os
import subprocess
import sys
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard import backing_services
from dashboard import settings as project_settings
from tests.support.needs import missing


@pytest.mark.parametrize(
    ("helper", "raw", "message"),
    [
        (project_settings.env_bool, "maybe", "is not a boolean"),
        (project_settings.env_int, "four", "is not an integer"),
        (project_settings.env_float, "fast", "is not a number"),
    ],
)
def test_bad_environment_values_fail_loudly(monkeypatch, helper, raw, message):
    monkeypatch.setenv("ASICMON_SOME_SETTING", raw)
    with pytest.raises(ImproperlyConfigured, match=message):
        helper("ASICMON_SOME_SETTING", 1)


def test_minimums_are_enforced(monkeypatch):
    monkeypatch.setenv("POLL_SHARDS", "0")
    with pytest.raises(ImproperlyConfigured, match="must be at least 1"):
        project_settings.env_int("POLL_SHARDS", 2, minimum=1)


def test_defaults_and_lists(monkeypatch):
    monkeypatch.delenv("ASICMON_LIST", raising=False)
    assert project_settings.env_list("ASICMON_LIST", ["a"]) == ["a"]
    monkeypatch.setenv("ASICMON_LIST", " gpu, video ,")
    assert project_settings.env_list("ASICMON_LIST", []) == ["gpu", "video"]
    monkeypatch.setenv("ASICMON_FLAG", "off")
    assert project_settings.env_bool("ASICMON_FLAG", True) is False


def test_runner_starts_a_throwaway_redis_when_none_answers():
    silent = f"redis://127.0.0.1:{backing_services.free_port()}/0"
    env = {"REDIS_URL": silent}
    started = backing_services.resolve_services(env)
    try:
        assert len(started) == 1
        assert env["REDIS_URL"] != silent
        assert backing_services.redis_answers(env["REDIS_URL"])
    finally:
        for proc in started:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_configured_postgres_that_does_not_answer_stops_the_start_with_its_reason(capsys):
    """Never a quiet fallback: the stack once switched to SQLite when PostgreSQL was slow."""
    silent = f"postgres://postgres:pg-secret-9@127.0.0.1:{backing_services.free_port()}/asicmon"
    env = {"DATABASE_URL": silent, "DATABASE_WAIT": "1.5", "REDIS_URL": "redis://127.0.0.1:6379/0"}
    began = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        backing_services.resolve_services(env)
    assert 1.5 <= time.monotonic() - began < 10
    message = str(stopped.value.code)
    assert "did not answer within 1.5 s" in message and "Connection refused" in message, message
    assert env["DATABASE_URL"] == silent  # not swapped for SQLite
    said = capsys.readouterr().out
    assert "waiting up to 1.5 s" in said and "SQLite" not in said
    assert "pg-secret-9" not in message + said


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_postgres_that_answers_late_is_waited_for(monkeypatch):
    answers = iter(["connection refused", "connection refused", None])
    monkeypatch.setattr(backing_services, "postgres_refusal", lambda url: next(answers))
    monkeypatch.setattr(backing_services, "ensure_postgres_database", lambda url: None)
    monkeypatch.setattr(backing_services, "redis_answers", lambda url: True)
    env = {"DATABASE_URL": "postgres://postgres@db:5432/asicmon", "DATABASE_WAIT": "30"}
    assert backing_services.resolve_services(env) == []
    assert env["DATABASE_URL"] == "postgres://postgres@db:5432/asicmon"


def test_sqlite_only_when_no_database_is_configured(capsys, monkeypatch):
    monkeypatch.setattr(backing_services, "redis_answers", lambda url: True)
    env = {}
    backing_services.resolve_services(env)
    assert "DATABASE_URL" not in env
    assert "Database: SQLite" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="DATABASE_WAIT='soon' is not a number of seconds"):
        backing_services.resolve_services({"DATABASE_URL": "postgres://db/asicmon", "DATABASE_WAIT": "soon"})


@pytest.mark.django_db
def test_ensure_admin_prints_a_generated_password_once(monkeypatch):
    from io import StringIO

    from django.contrib.auth import authenticate
    from django.core.management import call_command

    monkeypatch.delenv("ASICMON_ADMIN_PASSWORD", raising=False)
    first, second = StringIO(), StringIO()
    call_command("ensure_admin", "--username", "root-admin", stdout=first)
    password = first.getvalue().split("password: ")[1].split()[0]
    assert authenticate(username="root-admin", password=password) is not None
    call_command("ensure_admin", "--username", "root-admin", stdout=second)
    assert password not in second.getvalue()
    assert "password set earlier" in second.getvalue()


def test_runner_creates_a_missing_postgres_database():
    import uuid

    import psycopg

    server = "postgres://postgres@127.0.0.1:5432"
    if not backing_services.postgres_answers(f"{server}/postgres"):
        missing("no PostgreSQL at 127.0.0.1:5432 on this machine")
    name = f"asicmon_runner_{uuid.uuid4().hex[:8]}"
    try:
        done = subprocess.run([sys.executable, "-m", "dashboard.stack", "database"], cwd=backing_services.ROOT,
                              env={**os.environ, "DATABASE_URL": f"{server}/{name}"}, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0 and f"created PostgreSQL database {name}" in done.stdout, done.stdout + done.stderr
        backing_services.ensure_postgres_database(f"{server}/{name}")  # a second time changes nothing
        with psycopg.connect(f"{server}/{name}") as conn:
            assert conn.execute("SELECT current_database()").fetchone()[0] == name
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_ci_creates_its_database_before_anything_connects_to_it():
    steps = [line.split(None, 1)[1] for line in (backing_services.ROOT / ".ci" / "run").read_text().splitlines()
             if line.startswith("step ")]
    assert steps[0] == "make database" and {"make lint", "make test"} <= set(steps[1:])
    makefile = (backing_services.ROOT / "Makefile").read_text()
    assert "database: $(VENV)/.runtime\n\t$(BIN)/python -m dashboard.stack database\n" in makefile


def test_runner_starts_victoria_metrics_when_no_store_answers_and_its_data_outlive_it(tmp_path):
    import time

    from fleet.tsdb.client import Client
    from fleet.tsdb.series import DeviceKey
    from fleet.tsdb.writes import Encoder

    silent = f"http://127.0.0.1:{backing_services.free_port()}"
    env = {"TSDB_URL": silent, "SAMPLE_RETENTION_DAYS": "7"}
    started = backing_services.resolve_tsdb(env, tmp_path / "tsdb")
    now = time.time() // 5 * 5
    try:
        assert len(started) == 1 and "-retentionPeriod=7d" in started[0].args
        assert env["TSDB_URL"] == env["TSDB_WRITE_URL"] == silent  # on the port asked for
        batch = Encoder().batch(now, "test", [(DeviceKey("h", 1, "S", "video", "V"), {"power_w": 12.5})])
        Client(silent).write(batch.body)
    finally:
        backing_services.stop(started)
    assert not backing_services.tsdb_answers(silent)
    again = backing_services.resolve_tsdb(dict(env), tmp_path / "tsdb")  # `make run` another day
    try:
        found = Client(silent).query("asicmon_power_w[1m]", now + 1)
        assert [s.points for s in found] == [[(now, 12.5)]]
    finally:
        backing_services.stop(again)


def test_a_test_runs_own_store_never_takes_the_shared_address(tmp_path):
    """`make test` starts a throwaway store when none answers: on a port of its own, else other
    test runs on the machine would find it at TSDB_URL and lose it when this run ends."""
    silent = f"http://127.0.0.1:{backing_services.free_port()}"
    env = {"TSDB_URL": silent}
    started = backing_services.resolve_tsdb(env, tmp_path / "tsdb", on_asked_port=False)
    try:
        assert env["TSDB_URL"] != silent and env["TSDB_WRITE_URL"] == env["TSDB_URL"]
        assert backing_services.tsdb_answers(env["TSDB_URL"]) and not backing_services.tsdb_answers(silent)
    finally:
        backing_services.stop(started)


def test_runner_uses_the_store_that_answers_and_refuses_a_bad_retention(tmp_path, monkeypatch):
    monkeypatch.setattr(backing_services, "tsdb_answers", lambda url: url == "http://store:8428")
    env = {"TSDB_URL": "http://store:8428", "TSDB_WRITE_URL": "http://vminsert:8480/insert/0/prometheus"}
    assert backing_services.resolve_tsdb(env, tmp_path) == []
    assert env["TSDB_WRITE_URL"] == "http://vminsert:8480/insert/0/prometheus"
    with pytest.raises(SystemExit, match="SAMPLE_RETENTION_DAYS='a month' is not a number of days"):
        backing_services.resolve_tsdb({"TSDB_URL": "http://silent:1", "SAMPLE_RETENTION_DAYS": "a month"}, tmp_path)


def test_vmalert_gets_the_stores_urls_and_the_poll_interval(tmp_path):
    argv = backing_services.vmalert_argv(tmp_path / "rules.yml", "http://vmselect/select/0/prometheus",
                              "http://mimir/api/v1/push", 5.0, 8880)
    assert argv is not None
    assert "-datasource.url=http://vmselect/select/0/prometheus" in argv
    assert "-remoteWrite.url=http://mimir/api/v1/push" in argv and "-remoteWrite.disablePathAppend" in argv
    assert "-evaluationInterval=5s" in argv and "-datasource.queryStep=10s" in argv
