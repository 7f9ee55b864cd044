"""No password printed: URLs' passwords masked in the runner's lines and log records (error
pages: test_reporting.py; the administrator's password: management/commands/test_ensure_admin.py)."""

import logging
import logging.config
from io import StringIO

import pytest

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
