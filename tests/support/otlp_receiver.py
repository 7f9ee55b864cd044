"""A tiny OTLP/HTTP metrics receiver, run as a process of its own by the tests:

    python -m tests.support.otlp_receiver      # prints its port, then serves

POST /v1/metrics (an ExportMetricsServiceRequest in protobuf, gzip or not) is parsed and kept;
GET /points returns every data point kept (metric name, unit, kind: gauge or sum, monotonic
or not, attributes, value and time) and each request's headers, as JSON. A body it cannot
parse gets HTTP 400, as a collector answers.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(any_value: AnyValue):
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


def parse(body: bytes) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    return request


def decode(body: bytes | ExportMetricsServiceRequest) -> list[dict]:
    request = parse(body) if isinstance(body, bytes) else body
    points = []
    for resource_metrics in request.resource_metrics:
        resource = {a.key: _value(a.value) for a in resource_metrics.resource.attributes}
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                data = getattr(metric, kind)
                for point in getattr(data, "data_points", ()):
                    points.append({
                        "name": metric.name, "unit": metric.unit, "kind": kind,
                        "monotonic": bool(getattr(data, "is_monotonic", False)),
                        "temporality": int(getattr(data, "aggregation_temporality", 0)),
                        "attributes": {a.key: _value(a.value) for a in point.attributes},
                        "value": point.as_double if point.WhichOneof("value") == "as_double" else point.as_int,
                        "time_unix_nano": point.time_unix_nano, "resource": resource,
                        "scope": scope_metrics.scope.name,
                    })
    return points


def main() -> None:
    lock = threading.Lock()
    requests: list[ExportMetricsServiceRequest] = []  # decoded into points when asked for
    headers: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/metrics":
                    raise ValueError(f"no such path {self.path}")
                found = parse(body)
            except Exception as exc:  # noqa: BLE001 - any undecodable body is the sender's fault
                self._answer(400, str(exc).encode(), "text/plain")
                return
            with lock:
                requests.append(found)
                headers.append({k.lower(): v for k, v in self.headers.items()})
            self._answer(200, ExportMetricsServiceResponse().SerializeToString(), "application/x-protobuf")

        def do_GET(self):  # noqa: N802
            with lock:
                points = [point for request in requests for point in decode(request)]
                body = json.dumps({"points": points, "headers": headers}).encode()
            self._answer(200, body, "application/json")

        def _answer(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
