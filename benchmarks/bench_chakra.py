"""Chakra export and import: a Kineto trace written as Chakra protobuf (.et) and JSON, and
read back, at several sizes. Prints wall and CPU seconds, nodes per CPU second, file sizes
and peak memory.

    .venv/bin/python benchmarks/bench_chakra.py [--sizes 10000 100000] [--json out.json]

Each size runs in a fresh process (so peak memory is that step's own). Traces are generated
under benchmarks/out/ (tests.support.tracegen.write_kineto_trace) and kept for reruns.
"""

from __future__ import annotations

import argparse
import json
import sys

from harness import OUT, Report, peak_rss_mb, run_json, timed

CPU: dict[str, float] = {}


def _timed(fn, name: str = ""):
    """(value, wall seconds); the process's CPU seconds go to CPU[name] (on a shared machine
    wall time includes waiting for a core, CPU time does not)."""
    timing = timed(fn, 1)
    CPU[name] = round(timing.cpu[0], 3)
    return timing.value, timing.wall[0]


def run_one(size: int) -> dict:
    """Export and import one trace size in this process."""
    from tests.support.tracegen import write_kineto_trace
    from traces.atrace import read_trace, write_chakra, write_chakra_et

    OUT.mkdir(parents=True, exist_ok=True)
    source = OUT / f"kineto_{size}.json"
    if not source.exists():
        write_kineto_trace(source, size, seed=1)
    trace, load_s = _timed(lambda: read_trace(source))
    et, js = OUT / f"chakra_{size}.et", OUT / f"chakra_{size}.chakra.json"
    _, write_et_s = _timed(lambda: write_chakra_et(trace, et), "write_et")
    _, write_json_s = _timed(lambda: write_chakra(trace, js))
    from_et, read_et_s = _timed(lambda: read_trace(et), "read_et")
    _, read_json_s = _timed(lambda: read_trace(js))
    nodes = len(from_et)
    return {
        "events": len(trace),
        "nodes": nodes,
        "edges": len(from_et.edge_src),
        "kineto_load_s": round(load_s, 3),
        "write_et_s": round(write_et_s, 3),
        "read_et_s": round(read_et_s, 3),
        "write_json_s": round(write_json_s, 3),
        "read_json_s": round(read_json_s, 3),
        "write_et_cpu_s": CPU["write_et"],
        "read_et_cpu_s": CPU["read_et"],
        "read_et_nodes_per_cpu_s": round(nodes / max(CPU["read_et"], 1e-9)),
        "write_et_nodes_per_cpu_s": round(nodes / max(CPU["write_et"], 1e-9)),
        "et_mb": round(et.stat().st_size / 1e6, 1),
        "json_mb": round(js.stat().st_size / 1e6, 1),
        "peak_rss_mb": round(peak_rss_mb()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # run one size, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return
    rows = []
    for size in args.sizes:
        row = run_json([sys.executable, __file__, "--one", str(size)])
        if "error" in row:
            raise SystemExit(f"size {size}: {row['error']}")
        rows.append(row)
    columns = ["nodes", "edges", "write_et_s", "write_et_cpu_s", "read_et_s", "read_et_cpu_s",
               "write_json_s", "read_json_s", "read_et_nodes_per_cpu_s", "et_mb", "json_mb", "peak_rss_mb"]
    report = Report("Chakra export/import of synthetic Kineto traces (one process per size)")
    report.table(["figure", *(f"{row['events']:,} events" for row in rows)], [[c, *(row[c] for row in rows)] for c in columns])
    if args.json:
        report.write_json(args.json, rows)


if __name__ == "__main__":
    main()
