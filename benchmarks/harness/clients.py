"""Clients that benchmarks drive a running stack with: a fleet page's websocket, and trace
uploads through the API (one multipart POST, or resumable in chunks), retrying on 429 as a
client should."""

from __future__ import annotations

import collections
import json
import threading
import time
from pathlib import Path

CHUNK = 16 << 20
BOUNDARY = "bench-boundary"
BUSY: collections.Counter = (
    collections.Counter()
)  # 429 answers (each retried after its Retry-After), by sender
PHASES: dict[
    str, float
] = {}  # the last send_chunked's seconds: sending the chunks, making the trace of them


class FleetSocket(threading.Thread):
    """One fleet page's websocket (websocket-client): subscribes to its rows, then records
    what arrives and when, ``received[(shard, cycle)] = (first arrival, device ids)``."""

    def __init__(self, url: str, origin: str, cookie: str, rows: list[int]):
        import websocket

        super().__init__(daemon=True)
        self.rows = rows
        self.socket = websocket.create_connection(url, timeout=30, cookie=cookie, origin=origin)
        self.socket.send(json.dumps({"type": "subscribe", "devices": rows}))
        answer = json.loads(self.socket.recv())
        assert answer == {"type": "subscribed", "devices": len(set(rows))}, answer
        self.received: dict[tuple[int, int], tuple[float, set[int]]] = {}
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self):
        import websocket

        self.socket.settimeout(0.5)
        while not self.stopping.is_set():
            try:
                frame = self.socket.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except (websocket.WebSocketException, OSError) as exc:
                if not self.stopping.is_set():
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            at = time.time()
            if not frame:
                self.errors.append("closed by the server")
                return
            message = json.loads(frame)
            if message.get("type") != "fleet.polled":
                self.errors.append(f"unexpected {message}")
                continue
            key = (message["shard"], round(message["cycle"]))
            _, ids = self.received.setdefault(key, (at, set()))
            ids.update(line["id"] for line in message["devices"])

    def stop(self):
        """Ends the socket without the closing handshake (the server sees it gone at once)."""
        self.stopping.set()
        self.join(timeout=5)
        self.socket.shutdown()


class MultipartFile:
    """A multipart/form-data body of one file, read from disk as it is sent, with a length
    (so the client declares Content-Length rather than sending it chunked)."""

    def __init__(self, path: Path) -> None:
        self.head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
            "Content-Type: application/json\r\n\r\n"
        ).encode()
        self.tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        self.file = path.open("rb")
        self.size = len(self.head) + path.stat().st_size + len(self.tail)
        self.parts = [self.head]

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        if self.parts:
            return self.parts.pop()
        data = self.file.read(max(n, 1 << 20))
        if data:
            return data
        tail, self.tail = self.tail, b""
        return tail


def send_plain(url: str, token: str, path: Path) -> tuple[int, str, int | None]:
    """One multipart POST of the file: (status, the answer's start, the trace id if 201)."""
    import requests

    for _ in range(120):
        body = MultipartFile(path)
        r = requests.post(
            f"{url}/api/traces/",
            data=body,
            timeout=600,
            headers={
                "Authorization": f"Token {token}",
                "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
            },
        )
        body.file.close()
        if r.status_code != 429:
            return r.status_code, r.text[:200], r.json().get("id") if r.status_code == 201 else None
        BUSY["send_plain"] += 1
        time.sleep(float(r.headers.get("Retry-After", 2)))
    return 429, "still 429 after 120 tries", None


def send_chunked(url: str, token: str, path: Path) -> tuple[int, str, int | None]:
    """The resumable upload API, `CHUNK` bytes a PUT, then the trace made of it: as
    `send_plain`; its phases' seconds go to `PHASES`."""
    import requests

    auth = {"Authorization": f"Token {token}"}
    size = path.stat().st_size
    r = requests.post(
        f"{url}/api/uploads/", json={"filename": path.name, "size": size}, headers=auth, timeout=60
    )
    if r.status_code != 201:
        return r.status_code, r.text[:200], None
    upload = r.json()
    offset, tries = 0, 0
    started = time.perf_counter()
    with path.open("rb") as f:
        while offset < size:
            f.seek(offset)
            r = requests.put(
                f"{url}{upload['url']}?offset={offset}",
                data=f.read(CHUNK),
                headers=auth,
                timeout=600,
            )
            if r.status_code == 429 and tries < 600:
                tries += 1
                BUSY["send_chunked"] += 1
                time.sleep(float(r.headers.get("Retry-After", 2)))
                continue
            if r.status_code != 200:
                requests.delete(f"{url}{upload['url']}", headers=auth, timeout=60)
                return r.status_code, r.text[:200], None
            offset = r.json()["received"]
    PHASES["chunks"] = time.perf_counter() - started
    started = time.perf_counter()
    r = requests.post(f"{url}{upload['url']}finish/", json={"size": size}, headers=auth, timeout=60)
    if r.status_code != 200:
        return r.status_code, r.text[:200], None
    r = requests.post(
        f"{url}/api/traces/", json={"upload": upload["id"]}, headers=auth, timeout=600
    )
    PHASES["make"] = time.perf_counter() - started
    if r.status_code != 201:  # drop it: it holds room in the budget
        requests.delete(f"{url}{upload['url']}", headers=auth, timeout=60)
    return r.status_code, r.text[:200], r.json().get("id") if r.status_code == 201 else None
