"""No password printed: URLs' passwords masked in the runner's lines, log records and error
pages; the administrator's password from the environment passes the validators."""

import logging
import logging.config
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import RequestFactory
from django.views.debug import get_exception_reporter_filter

from dashboard import backing_services
from dashboard.redaction import RedactingFilter, logging_config, redact_text, redact_url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("postgres://asicmon:s3cr%40t@db:5432/asicmon", "postgres://asicmon:***@db:5432/asicmon"),
        ("redis://:hunter2@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("amqp://guest:guest@rabbit:5672//", "amqp://guest:***@rabbit:5672//"),
        ("rediss://user:p@ss:w0rd@cache:6380/1", "rediss://user:***@cache:6380/1"),
        ("postgres://postgres@127.0.0.1:5432/asicmon", "postgres://postgres@127.0.0.1:5432/asicmon"),
        ("http://127.0.0.1:8428", "http://127.0.0.1:8428"),
        ("sqlite:////var/db.sqlite3", "sqlite:////var/db.sqlite3"),
    ],
)
def test_a_urls_password_is_masked_and_nothing_else_changes(url, said):
    assert redact_url(url) == said
    assert redact_text(f"Broker: {url}, then more") == f"Broker: {said}, then more"


def test_every_url_in_a_line_is_masked():
    line = "from redis://:one@a:1/0 to amqp://u:two@b// via http://x:three@c/path?q=1"
    assert redact_text(line) == "from redis://:***@a:1/0 to amqp://u:***@b// via http://x:***@c/path?q=1"


def test_the_runners_lines_mask_passwords(capsys):
    backing_services.say("Redis: redis://:hunter2@127.0.0.1:6379/0")
    assert capsys.readouterr().out.endswith("Redis: redis://:***@127.0.0.1:6379/0\n")


def test_log_records_and_their_tracebacks_mask_passwords():
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("asicmon.test.redaction")
    log.addHandler(handler)
    try:
        log.error("cannot reach %s", "postgres://app:pg-pass-1@db/asicmon")
        try:
            raise ConnectionError("redis://:redis-pass-2@cache:6379/0 refused")
        except ConnectionError:
            log.exception("broker down")
    finally:
        log.removeHandler(handler)
    written = stream.getvalue()
    assert "postgres://app:***@db/asicmon" in written and "redis://:***@cache:6379/0 refused" in written
    assert "pg-pass-1" not in written and "redis-pass-2" not in written


def test_the_projects_logging_masks_passwords():
    from django.conf import settings

    assert "redact" in settings.LOGGING["handlers"]["console"]["filters"]


def test_error_pages_mask_the_passwords_in_settings_and_variables(settings):
    settings.DATABASE_URL = "postgres://app:pg-pass-3@db/asicmon"
    settings.CELERY_BROKER_URL = "amqp://app:amqp-pass-4@rabbit//"
    settings.CACHES = {"default": {"BACKEND": "x", "LOCATION": "redis://:redis-pass-5@cache:6379/0"}}
    request = RequestFactory().get("/")
    reporter = get_exception_reporter_filter(request)
    shown = repr(reporter.get_safe_settings())
    for secret in ("pg-pass-3", "amqp-pass-4", "redis-pass-5"):
        assert secret not in shown
    assert "amqp://app:***@rabbit//" in shown

    def failing(url):
        raise RuntimeError("cannot connect")

    try:
        failing("redis://:redis-pass-6@cache:6379/0")
    except RuntimeError as exc:
        frame = exc.__traceback__.tb_next.tb_frame
    assert dict(reporter.get_traceback_frame_variables(request, frame))["url"] == "redis://:***@cache:6379/0"


@pytest.mark.django_db
def test_a_weak_admin_password_from_the_environment_is_refused_with_the_validators_reasons(monkeypatch):
    from django.contrib.auth.models import User

    monkeypatch.setenv("ASICMON_ADMIN_PASSWORD", "secret")
    with pytest.raises(CommandError) as refused:
        call_command("ensure_admin", "--username", "weak-admin", stdout=StringIO())
    message = str(refused.value)
    assert "ASICMON_ADMIN_PASSWORD is refused by the password validators" in message
    assert "too common" in message and "too short" in message
    assert not User.objects.filter(username="weak-admin").exists()


@pytest.mark.django_db
def test_a_strong_admin_password_from_the_environment_is_used_and_not_printed(monkeypatch):
    from django.contrib.auth import authenticate

    monkeypatch.setenv("ASICMON_ADMIN_PASSWORD", "correct-horse-battery-77")
    out = StringIO()
    call_command("ensure_admin", "--username", "strong-admin", stdout=out)
    assert "with the password from ASICMON_ADMIN_PASSWORD" in out.getvalue()
    assert "correct-horse-battery-77" not in out.getvalue()
    assert authenticate(username="strong-admin", password="correct-horse-battery-77") is not None


def test_log_records_go_out_at_the_level_with_urls_passwords_masked(capsys):
    logging.config.dictConfig(logging_config("INFO"))
    try:
        log = logging.getLogger("asicmon.test.logs")
        log.info("connecting to postgres://fleet:hunter2@db:5432/asicmon")
        log.debug("not shown at INFO")
        logging.getLogger("celery.app.trace").info("task succeeded")  # turned down
        err = capsys.readouterr().err
        assert "INFO    asicmon.test.logs: connecting to postgres://fleet:***@db:5432/asicmon" in err
        assert "hunter2" not in err and "not shown" not in err and "task succeeded" not in err
    finally:
        from django.conf import settings

        logging.config.dictConfig(settings.LOGGING)


def test_the_logging_setting_is_this_configuration():
    from django.conf import settings

    assert logging_config(settings.LOG_LEVEL) == settings.LOGGING
