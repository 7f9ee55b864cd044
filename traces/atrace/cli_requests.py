"""``python -m traces.atrace requests TRACE --spans SPANS.json [--json]``: why each request
of a serving run was slow, from its spans (OTLP JSON, the Collector's file format) and the
device trace of the same run."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any

from .analysis.requests.report import analyse_requests
from .io.otlp import read_otlp_json
from .io.reader import read_trace

WORST_COLUMNS = [
    ("request_id", "request"), ("latency_ms", "latency ms"), ("queue", "queue"), ("prefill", "prefill"),
    ("decode", "decode"), ("work_ms", "work ms"), ("steps", "steps"), ("reason", "reason"),
]


def add_parser(sub, table: Callable[..., str]) -> None:
    """The ``requests`` command; ``table`` formats rows (the CLI's own table)."""
    r = sub.add_parser("requests", help="join request spans (OTLP JSON) to a trace's engine steps: "
                                        "the slowest requests and why")
    r.add_argument("file", help="the device trace of the serving run")
    r.add_argument("--spans", required=True, help="the run's spans: OTLP JSON, one request a line (.gz too)")
    r.add_argument("--mode", choices=["auto", "ids", "time"], default="auto",
                   help="join by the request ids the steps carry, or by time overlap (auto: ids when present)")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--top", type=int, default=None, help="rows of the request table in --json (default all)")
    r.set_defaults(run=partial(run, table=table))


def run(args: argparse.Namespace, table: Callable[..., str]) -> dict[str, Any] | str:
    result = analyse_requests(read_trace(args.file), read_otlp_json(args.spans), mode=args.mode)
    if args.json:
        if args.top:
            result["rows"] = sorted(result["rows"], key=lambda r: -r["latency_ms"])[: args.top]
        return result
    join = result["join"]
    lines = [
        f"{result['requests']} requests over {result['steps']} engine steps; joined by {join['mode']} "
        f"(confidence {join['confidence']}), work measured on the {join['basis']}",
        "latency: " + ", ".join(f"{k} {v:,.1f} ms" for k, v in result["latency_ms"].items()),
        "",
        "slowest requests:",
        table([{**w, **w["split_ms"]} for w in result["worst"]], WORST_COLUMNS, width=90),
    ]
    return "\n".join(lines)
