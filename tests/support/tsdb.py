"""The time-series store in tests.

- Every test writes and reads its own series: an autouse fixture (tests/conftest.py) gives
  it a TSDB_LABELS value of its own (`asicmon_test=<random>`), put on every series written
  and in every selector read, so tests share one store (started by `dashboard.stack test`,
  or whatever answers at TSDB_URL) without seeing each other's samples.
- `flush()` makes what was just written readable: VictoriaMetrics keeps fresh samples in
  memory for up to a second and caches query results; Prometheus needs neither.
- `victoria_metrics` and `prometheus_store` (integration tier) start a store of the test's
  own, as a child process, for tests that stop, hang or compare stores.
"""

from __future__ import annotations

import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.support.tiers import starts_processes


def unique_labels() -> str:
    """A TSDB_LABELS value no other test has."""
    return f"asicmon_test={uuid.uuid4().hex[:16]}"


def flush(newest: float | None = None, url: str | None = None) -> None:
    """Make every sample written so far readable, and drop cached query results.

    VictoriaMetrics: /internal/force_flush and /internal/resetRollupResultCache. It also
    leaves out of every query the last second before the query is made (its minimum
    -search.latencyOffset), so this returns only once a second has passed since `newest`,
    the latest timestamp written (now, when not given). A store without these pages
    (Prometheus: a write is readable once answered) is not waited for.
    """
    if url is None:
        from django.conf import settings

        url = settings.TSDB_URL
    newest = time.time() if newest is None else newest
    for path in ("/internal/force_flush", "/internal/resetRollupResultCache"):
        try:
            with urllib.request.urlopen(url.rstrip("/") + path, timeout=30) as answer:
                answer.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (400, 404, 405):
                return  # not VictoriaMetrics
            raise
    time.sleep(max(0.0, newest + VM_LATENCY_S - time.time()))


VM_LATENCY_S = 1.05


ALL_SERIES = "asicmon_.+|DCGM_.+"  # every series the poll writes


def raw_samples(start: float, end: float, names: str = ALL_SERIES) -> list:
    """Every sample the store holds in (start, end] of the test's series whose name matches
    the regular expression `names`, as fleet.tsdb.Series with their raw points."""
    from fleet import tsdb
    from fleet.tsdb.series import selector

    window = max(1, round((end - start) * 1000))
    own = selector("")[1:-1]  # the test's labels
    return tsdb.client().query(f'{{__name__=~"{names}",{own}}}[{window}ms]', end)


def samples_at(cycle: float, names: str = ALL_SERIES) -> dict[tuple[str, str], list[float]]:
    """(series name, device id) → the values stored at exactly `cycle` (one, unless duplicated);
    for the dcgm-exporter series (whose `device` is nvidia<index>) the serial (UUID) stands
    for the device id."""
    found = {}
    for series in raw_samples(cycle - 1, cycle, names):
        values = [v for t, v in series.points if t == cycle]
        if values:
            labels = series.labels
            key = (labels["__name__"], labels["UUID"] if "UUID" in labels else labels.get("device", ""))
            found.setdefault(key, []).extend(values)
    return found


def wait_for_samples(cycle: float, expected: int, timeout: float = 30.0, names: str = ALL_SERIES) -> dict:
    """Wait until `expected` series have a sample at `cycle` (a poll writes its samples last)."""
    deadline = time.time() + timeout
    found = {}
    while time.time() < deadline:
        flush(newest=cycle)
        found = samples_at(cycle, names)
        if len(found) >= expected:
            return found
        time.sleep(0.2)
    raise TimeoutError(f"{len(found)} series of {expected} have a sample at {cycle}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?query=1", timeout=1) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_until_answers(service, url: str, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if answers(url):
            return
        if service.proc.poll() is not None:
            raise RuntimeError(f"{service.name} exited ({service.proc.returncode}):\n{service.output()}")
        time.sleep(0.05)
    raise TimeoutError(f"{service.name} did not answer at {url}:\n{service.output()}")


class Store:
    """A store process of the test's own: its URL, and stop/start/pause to play an outage."""

    def __init__(self, name: str, argv_for_port, data_dir: Path):
        self.name = name
        self.data_dir = data_dir
        self._argv = argv_for_port
        self.service = None
        for _ in range(5):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            if self._launch():
                return
        raise RuntimeError(f"{name} found no free port in five tries:\n{self.service.output()}")

    def start(self) -> None:
        """Start it again on its port (after stop)."""
        if not self._launch():
            raise RuntimeError(f"{self.name} did not start again on port {self.port}:\n{self.service.output()}")

    def _launch(self) -> bool:
        """Start the store on its port; False when the port turned out taken. A free port can
        be taken between free_port() and the store's bind (another test's store, started at
        the same moment, may get the same one): then the other store answers at the URL while
        this one has exited, and a test pausing this one would pause nothing."""
        from tests.support.processes import Service

        self.service = Service(self.name, self._argv(self.port, self.data_dir), {"PATH": "/usr/bin:/bin"})
        try:
            wait_until_answers(self.service, self.url)
        except RuntimeError:  # it exited: the port was taken before it bound it
            return False
        time.sleep(0.2)  # a store that lost the port exits at once, long before another answers
        return self.service.proc.poll() is None

    def stop(self) -> None:
        if self.service is not None:
            self.service.proc.send_signal(signal.SIGCONT)  # a paused store stops too
            self.service.stop()

    def pause(self) -> None:
        """Hang: the process stops answering but keeps its socket (connections wait)."""
        self.service.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.service.proc.send_signal(signal.SIGCONT)


def victoria_metrics_argv(port: int, data_dir: Path) -> list[str]:
    from dashboard.backing_services import victoria_metrics_argv as argv

    return [*argv(data_dir, port, 30), "-search.disableCache"]


def prometheus_argv(port: int, data_dir: Path) -> list[str]:
    server = shutil.which("prometheus")
    if server is None:
        pytest.fail("prometheus is missing: `make prometheus-deps` (or .ci/run) installs Debian's prometheus package")
    config = data_dir.parent / f"{data_dir.name}.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    return [server, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}", "--web.enable-remote-write-receiver",
            "--storage.tsdb.retention.time=30d", "--log.level=warn"]


@pytest.fixture
@starts_processes
def victoria_metrics(tmp_path, settings):
    """A VictoriaMetrics of this test's own (as `make run` starts one), the settings pointed at it."""
    store = Store("victoria-metrics", victoria_metrics_argv, tmp_path / "vm")
    settings.TSDB_URL = settings.TSDB_WRITE_URL = store.url
    yield store
    store.stop()


@pytest.fixture
@starts_processes
def prometheus_store(tmp_path, settings):
    """A Prometheus taking remote writes, the settings pointed at it."""
    store = Store("prometheus", prometheus_argv, tmp_path / "prometheus")
    settings.TSDB_URL = settings.TSDB_WRITE_URL = store.url
    yield store
    store.stop()


class StoreProxy:
    """A real HTTP proxy in front of a store, as a misconfigured one would stand there: it
    answers every request with `status` (401 after a credential rotation, 404 when misrouted,
    …), or 413 for a body larger than `max_body` (a proxy's body limit), and forwards the rest
    to the store, answering with the store's answer. `answered` counts what it answered."""

    def __init__(self, upstream: str):
        import http.server
        import threading

        self.upstream = upstream.rstrip("/")
        self.status: int | None = None
        self.max_body: int | None = None
        self.answered: Counter = Counter()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (the standard library's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, payload = proxy.answer(self.path, body, self.headers)
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # a client gone after its timeout: not news
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Polling for shutdown every 50 ms: at the default 0.5 s, close() waited half a second.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="store-proxy", daemon=True)
        self.thread.start()

    def answer(self, path: str, body: bytes, headers) -> tuple[int, bytes]:
        if self.status is not None:
            status, payload = self.status, f"refused by the test's proxy: HTTP {self.status}".encode()
        elif self.max_body is not None and len(body) > self.max_body:
            status, payload = 413, b"request entity too large"
        else:
            status, payload = self.forward(path, body, headers)
        self.answered[status] += 1
        return status, payload

    def forward(self, path: str, body: bytes, headers) -> tuple[int, bytes]:
        request = urllib.request.Request(self.upstream + path, data=body if body else None, method=self.command_of(body))
        for name in ("Content-Type", "Content-Encoding", "X-Prometheus-Remote-Write-Version"):
            if headers.get(name):
                request.add_header(name, headers[name])
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError as exc:  # the store is away: what a proxy answers then
            return 502, f"bad gateway: {exc}".encode()

    @staticmethod
    def command_of(body: bytes) -> str:
        return "POST" if body else "GET"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def store_proxy(settings):
    """A StoreProxy in front of the store the settings name, the writes pointed at it."""
    proxy = StoreProxy(settings.TSDB_WRITE_URL)
    settings.TSDB_WRITE_URL = proxy.url
    yield proxy
    proxy.close()
