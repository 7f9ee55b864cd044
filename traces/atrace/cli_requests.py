"""``python -m traces.atrace requests TRACE --spans SPANS.json [--json]``: why each request
of a serving run was slow, from its spans (OTLP JSON, the Collector's file format) and the
device trace of the same run."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any

from .analysis.requests.grammars import grammars, load
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
    r.add_argument("--grammars", default=None, metavar="FILE",
                   help="more step grammars (JSON, the format of traces/atrace/analysis/requests/step_grammars.json), "
                        "tried before the table's")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--top", type=int, default=None, help="rows of the request table in --json (default all)")
    r.set_defaults(run=partial(run, table=table))


def run(args: argparse.Namespace, table: Callable[..., str]) -> dict[str, Any] | str:
    forms = (*load(args.grammars), *grammars()) if args.grammars else None
    result = analyse_requests(read_trace(args.file), read_otlp_json(args.spans), mode=args.mode, grammars=forms)
    if args.json:
        if args.top:
            result["rows"] = sorted(result["rows"], key=lambda r: -r["latency_ms"])[: args.top]
        return result
    join = result["join"]
    read_by = ", ".join(f"{g} ({n:,} step{'s' if n != 1 else ''})" for g, n in join["grammars"].items())
    mode = "time and phase" if join["mode"] == "time" else join["mode"]
    lines = [
        f"{result['requests']} requests over {result['steps']} engine steps, read by the step grammar {read_by}",
        f"joined by {mode} (confidence {join['confidence']}): {join['why']}",
        f"work measured on the {join['basis']}" + (f"; {join['note']}" if join["note"] else ""),
        *(f"note: {n}" for n in join["step_notes"]),
        "latency: " + ", ".join(f"{k} {v:,.1f} ms" for k, v in result["latency_ms"].items()),
        "",
        "slowest requests:",
        table([{**w, **w["split_ms"]} for w in result["worst"]], WORST_COLUMNS, width=90),
    ]
    return "\n".join(lines)
