"""Alertmanager's API v2, as a rule evaluator (Prometheus, vmalert) speaks it: the alerts
firing are POSTed to /api/v2/alerts again every evaluation with an ``endsAt`` a few
intervals ahead (an evaluator that stops leaves them to resolve by themselves), and an alert
that stopped firing is sent once more with ``endsAt`` now (resolved). Django-free."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


class AlertmanagerError(Exception):
    """Alertmanager did not take the alerts, said in words."""


@dataclass(frozen=True)
class Alert:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """One alert's identity: its name and labels (Alertmanager's fingerprint is of these)."""
        return json.dumps({"alertname": self.name, **self.labels}, sort_keys=True)


def payload(firing: list[Alert], resolved_keys: list[str], now: datetime, hold: timedelta,
            generator_url: str = "") -> list[dict]:
    """The body of one POST: the firing alerts (ending ``hold`` from now unless sent again),
    and those that stopped, ending now."""
    stamp = lambda t: t.astimezone(UTC).isoformat().replace("+00:00", "Z")  # noqa: E731
    body = [{"labels": {"alertname": a.name, **a.labels}, "annotations": a.annotations, "startsAt": stamp(now),
             "endsAt": stamp(now + hold), **({"generatorURL": generator_url} if generator_url else {})}
            for a in firing]
    body += [{"labels": json.loads(key), "endsAt": stamp(now)} for key in resolved_keys]
    return body


def post(url: str, body: list[dict], timeout_s: float = 5.0) -> None:
    """POST the alerts to Alertmanager at ``url`` (its base URL)."""
    request = urllib.request.Request(url.rstrip("/") + "/api/v2/alerts", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        said = exc.read().decode(errors="replace")[:300]
        raise AlertmanagerError(f"Alertmanager at {url} answered {exc.code}: {said}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AlertmanagerError(f"Alertmanager at {url} did not answer: {reason}") from None
