"""A real Alertmanager (Debian's prometheus-alertmanager; `make alert-deps`) routing every
alert to a webhook this test process serves, which keeps what it was sent."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.needs import missing
from tests.support.processes import Service, free_port


@dataclass
class Webhook:
    """What Alertmanager posted: each notification's alerts, as (status, labels, annotations)."""

    url: str
    received: list[dict] = field(default_factory=list)

    def alerts(self) -> list[tuple[str, dict, dict]]:
        return [(a["status"], a["labels"], a["annotations"]) for n in list(self.received) for a in n["alerts"]]

    def wait_for(self, condition, timeout_s: float = 30) -> list[tuple[str, dict, dict]]:
        deadline = time.monotonic() + timeout_s
        while not condition(self.alerts()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the webhook never got what was expected: {self.alerts()}")
            time.sleep(0.1)
        return self.alerts()


@contextlib.contextmanager
def webhook() -> Iterator[Webhook]:
    hook = Webhook("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hook.received.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_port}/hook"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield hook
    finally:
        server.shutdown()


@contextlib.contextmanager
def alertmanager(folder: Path, webhook_url: str) -> Iterator[str]:
    """Alertmanager on a free port, every alert to ``webhook_url`` within a second (resolved
    ones too): its URL."""
    server = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if server is None:
        missing("Alertmanager is not installed (make alert-deps: Debian's prometheus-alertmanager)")
    config = folder / "alertmanager.yml"
    config.write_text(json.dumps({
        "route": {"receiver": "hook", "group_by": ["alertname", "serial"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "hook", "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
    }))
    port = free_port()
    service = Service("alertmanager", [server, f"--config.file={config}", f"--storage.path={folder / 'data'}",
                                       f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="], {})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Alertmanager never became ready:\n{service.output()}") from None
                time.sleep(0.2)
        yield url
    finally:
        service.stop()
