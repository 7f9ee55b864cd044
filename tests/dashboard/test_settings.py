"""Production settings pass Django's deployment checks; development mode is explicit;
failed sign-ins are throttled; the admin's host delete page stays a few queries."""

import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

from tests.support.processes import ROOT


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "HTTPS"}}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # Django's deploy checks in a fresh interpreter: seconds of CPU (make test runs it, make test-fast does not)
def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING",
        SECRET_KEY=secrets.token_urlsafe(50), HTTPS="true", ALLOWED_HOSTS="asicmon.example.com",
        ASICMON_VAR_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def settings_of(*names: str, **env: str) -> list[str]:
    """The settings as a fresh process reads them from `env` (Django's settings, without
    starting every app as `manage.py shell` would: a third of the time)."""
    show = ("import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'dashboard.settings'; "
            f"from django.conf import settings; print(*(getattr(settings, n) for n in {names!r}))")
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "HTTPS"}}
    done = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env={**clean, **env}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.slow  # settings read in several fresh interpreters: seconds of CPU (make test runs it, make test-fast does not)
def test_debug_is_off_unless_asked_for_and_a_secret_key_is_made_once(tmp_path):
    debug, key = settings_of("DEBUG", "SECRET_KEY", ASICMON_VAR_DIR=str(tmp_path))
    assert debug == "False"
    assert len(key) >= 50 and settings_of("SECRET_KEY", ASICMON_VAR_DIR=str(tmp_path)) == [key]
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0  # readable by its owner only
    assert settings_of("DEBUG", ASICMON_VAR_DIR=str(tmp_path), DEBUG="true") == ["True"]


@pytest.mark.django_db
def test_failed_sign_ins_are_throttled(client, viewer, clean_redis):
    from django.core.cache import cache

    from dashboard.signin import _key

    for _ in range(settings.SIGNIN_MAX_FAILURES):
        response = client.post("/accounts/login/", {"username": viewer.username, "password": "wrong"})
        assert response.status_code == 200
    refused = client.post("/accounts/login/", {"username": viewer.username, "password": "vera-password-123"})
    assert refused.status_code == 429
    assert b"Too many failed sign-ins" in refused.content
    assert "_auth_user_id" not in client.session  # even the right password does not get in
    # The admin's form goes through the same backend.
    admin = client.post("/admin/login/", {"username": viewer.username, "password": "vera-password-123"})
    assert "_auth_user_id" not in client.session and admin.status_code == 200
    cache.delete(_key(refused.wsgi_request, viewer.username))  # the lock-out passes (not cache.clear(): all of Redis)
    assert client.post("/accounts/login/", {"username": viewer.username, "password": "vera-password-123"}).status_code == 302


@pytest.mark.django_db
def test_admin_host_delete_page_is_bounded_and_deletes_the_devices(admin_client, seeded_fleet, clean_redis,
                                                                   django_assert_max_num_queries):
    """Samples live in the time-series store: deleting a polled host is a few queries on
    hosts and devices (their history stays in the store until its retention)."""
    from fleet.models import Device, Host
    from fleet.polling import poller

    for offset in range(3):
        for shard in poller.shards():
            poller.poll_shard(shard, poller.current_cycle() - 5 * offset)
    host = Host.objects.first()
    with django_assert_max_num_queries(40):
        page = admin_client.get(f"/admin/fleet/host/{host.pk}/delete/")
    assert page.status_code == 200 and b"Device" in page.content
    admin_client.post(f"/admin/fleet/host/{host.pk}/delete/", {"post": "yes"})
    assert not Host.objects.filter(pk=host.pk).exists()
    assert not Device.objects.filter(host_id=host.pk).exists()
