"""What Django's error pages show of the settings and a traceback's variables: its own filter
hides names like PASSWORD and TOKEN, and the password of every URL is masked."""

from django.test import RequestFactory
from django.views.debug import get_exception_reporter_filter

from dashboard.reporting import RedactingExceptionReporterFilter


def test_the_project_reports_errors_through_the_redacting_filter():
    reporter = get_exception_reporter_filter(RequestFactory().get("/"))
    assert isinstance(reporter, RedactingExceptionReporterFilter)


def test_error_pages_mask_the_passwords_in_settings_and_variables(settings):
    settings.DATABASE_URL = "postgres://app:pg-pass-3@db/asicmon"
    settings.CELERY_BROKER_URL = "amqp://app:amqp-pass-4@rabbit//"
    settings.CACHES = {
        "default": {"BACKEND": "x", "LOCATION": "redis://:redis-pass-5@cache:6379/0"}
    }
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
    assert (
        dict(reporter.get_traceback_frame_variables(request, frame))["url"]
        == "redis://:***@cache:6379/0"
    )


def test_settings_named_as_secrets_stay_hidden_and_other_values_pass_unchanged(settings):
    settings.ASICMON_API_TOKEN = "tok-123"
    settings.TRACE_STORAGE = "s3://bucket/prefix"
    settings.EXPORTER_PORTS = [9400, 5000]
    shown = RedactingExceptionReporterFilter().get_safe_settings()
    assert shown["ASICMON_API_TOKEN"] == RedactingExceptionReporterFilter.cleansed_substitute
    assert shown["TRACE_STORAGE"] == "s3://bucket/prefix" and shown["EXPORTER_PORTS"] == [
        9400,
        5000,
    ]
