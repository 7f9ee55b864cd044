"""Passwords out of what is said: a URL's password masked wherever a URL is printed or logged.

Plain Python (the stack runner uses it before Django is configured); the logging filter and
the debug page's settings filter (dashboard/settings.py) use the same two functions.
"""

import logging
import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# scheme://user:password@host or scheme://:password@host: the password runs to the last "@"
# before the authority ends (a "/" or whitespace), as URL parsers read an unquoted "@".
_CREDENTIALS = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:@/]*:)(?P<password>[^\s/]+)(?=@)")


def redact_url(url: str) -> str:
    """`url` with its password, if any, replaced by ***; anything that is not a URL unchanged."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return redact_text(url)
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def redact_text(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***."""
    if "://" not in text:
        return text
    return _CREDENTIALS.sub(lambda m: m.group("head") + MASK, text)


class RedactingFilter(logging.Filter):
    """A logging filter that masks URLs' passwords in every record it passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:  # a traceback's message may hold a URL too
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return True


# The processes' logging (the LOGGING setting): plain lines on the console at a level, every
# record through RedactingFilter, the chattiest libraries turned down.
QUIET = {
    "django.channels.server": "WARNING",
    "daphne": "WARNING",
    # One line per task received and succeeded drowns the poll summaries.
    "celery.app.trace": "WARNING",
    "celery.worker.strategy": "WARNING",
}


def logging_config(level: str) -> dict:
    """A logging.config.dictConfig configuration with ``level`` at the root."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"}},
        "filters": {"redact": {"()": "dashboard.redaction.RedactingFilter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {name: {"level": quiet} for name, quiet in QUIET.items()},
    }
