"""What Django's error pages and reports show of the settings and a traceback's variables:
its own filter (names like PASSWORD, SECRET, TOKEN hidden), and the password of every URL
(DATABASE_URL, REDIS_URL, CELERY_BROKER_URL, the caches and channel layer built from them)
masked."""

from django.views.debug import SafeExceptionReporterFilter

from dashboard.redaction import redact_text


class RedactingExceptionReporterFilter(SafeExceptionReporterFilter):
    def cleanse_setting(self, key, value):
        cleansed = super().cleanse_setting(key, value)
        return redact_text(cleansed) if isinstance(cleansed, str) else cleansed

    def cleanse_special_types(self, request, value):
        cleansed = super().cleanse_special_types(request, value)
        return redact_text(cleansed) if isinstance(cleansed, str) else cleansed
