"""Reading settings from the environment: each helper parses one kind of value and raises
ImproperlyConfigured, naming the variable, on a value it cannot take (dashboard/settings.py)."""

import ipaddress
import json
import os
import re
import secrets
import urllib.parse
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no)")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_json_object(name: str) -> dict:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, e.g. {{\"leak_critical_s\": 600}}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> tuple:
    """Comma-separated IP addresses or networks (CIDR), e.g. "127.0.0.1,10.0.0.0/8"."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"{name}: {item!r} is not an IP address or network (e.g. 10.0.0.0/8)") from None
    return tuple(networks)


RATE_PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60,
                "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
RATE_OFF = {"off", "none", "0"}


def parse_rate(text: str) -> tuple[int, int] | None:
    """A request rate, "<count>/<period>" with the period s, min, hour or day ("600/min"):
    (count, seconds); None for "off". Raises ValueError on anything else."""
    value = text.strip().lower()
    if value in RATE_OFF:
        return None
    count, _, period = value.partition("/")
    if not count.strip().isdigit() or int(count) < 1 or period.strip() not in RATE_PERIODS:
        raise ValueError(f"{text!r} is not a rate: write <count>/<period> with the period s, min, hour or day "
                         "(e.g. 600/min), or off")
    return int(count), RATE_PERIODS[period.strip()]


def env_rate(name: str, default: str) -> str:
    """A request rate (`parse_rate`), checked at start-up and kept as written."""
    value = os.environ.get(name) or default
    try:
        parse_rate(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    return value


def env_paths(name: str) -> list[Path]:
    """A ":"-separated list of folders, like PATH."""
    raw = os.environ.get(name) or ""
    return [Path(item) for item in raw.split(":") if item.strip()]


def env_host_name(name: str, default: str) -> str:
    """A host's name in the fleet; the default is tidied, a value that is set must be valid."""
    value = os.environ.get(name) or re.sub(r"[^A-Za-z0-9._-]", "-", default)[:128] or "localhost"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", value):
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a host name (letters, digits, '.', '_' and '-', at most 128)"
        )
    return value


def secret_key_file(path: Path) -> str:
    """The key kept in `path`, made (random, readable by this user only) on first use."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


EXPORTER_SPECS = {"dcgm": "dcgm_exporter", "amd": "amd_exporter"}


def env_exporters(name: str) -> tuple[tuple[str, str, str], ...]:
    """Metrics exporters a fleet already runs, joined by URL: comma-separated ``KIND=URL``
    entries, KIND ``dcgm`` (NVIDIA dcgm-exporter) or ``amd`` (AMD device-metrics-exporter),
    e.g. "dcgm=http://node-1:9400/metrics,amd=http://node-2:5000/metrics". Each is one host,
    named ``<address>-<port>`` of its URL; as (spec, url, host name)."""
    found: dict[str, tuple[str, str, str]] = {}
    for item in env_list(name, []):
        kind, sep, url = (part.strip() for part in item.partition("="))
        if not sep or kind not in EXPORTER_SPECS:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not KIND=URL with KIND one of {', '.join(EXPORTER_SPECS)}"
            )
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
        if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
            raise ImproperlyConfigured(f"{name}: {url!r} is not an http(s) URL with a host")
        host = re.sub(r"[^A-Za-z0-9._-]", "-", f"{parts.hostname}-{port}")[:128]
        if host in found:
            raise ImproperlyConfigured(f"{name}: two exporters at {parts.hostname}:{port}")
        found[host] = (EXPORTER_SPECS[kind], url, host)
    return tuple(found.values())
