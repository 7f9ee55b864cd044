"""Trace-view figures at a million events: what the worker stores once, what a request costs.

    .venv/bin/python benchmarks/bench_trace_views.py [--events 1000000] [--repeat 7]

Generates two Kineto traces of about ``--events`` events each (cached under
var/bench/trace_views/), then prints:

* worker side, per trace: read, operator breakdown, critical path, every stored view
  (flame, per-step critical-path tables, correlation, comparison table, timeline layout)
  and writing them — the part of "upload to ready" that this project's views add;
* request side, from the stored files only: a timeline window (whole span, 10 %, 1 %,
  0.1 %) for a 1,600-pixel view, with its bar count; the flame document; the comparison
  of the two traces; one event's details. Median and worst of ``--repeat`` runs, each
  including JSON encoding of the answer.

Times are wall-clock on this machine (the analysis line adds its CPU time, which a loaded
machine distorts less); say how loaded it was when quoting them.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import orjson
from harness import ROOT, median

from tests.support.tracegen import write_kineto_trace
from traces.atrace import critical_path, operator_breakdown, read_trace
from traces.atrace.analysis.comparison import compare_tables
from traces.atrace.render.page_data import compute_page_data, load_document, load_timeline
from traces.atrace.render.timeline import window
from traces.store.page_limits import MAX_BARS, MAX_EDGES, STORED

# The generator writes flow and metadata records too; this many written make ~1 read.
WRITTEN_PER_EVENT = 1.53


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _repeat(fn, n: int) -> tuple[float, float, object]:
    times, out = [], None
    for _ in range(n):
        out, dt = _timed(fn)
        times.append(dt)
    return median(times) * 1000, max(times) * 1000, out


def prepare(directory: Path, events: int, seed: int) -> Path:
    raw = directory / f"kineto_{events}_{seed}.json"
    views = directory / f"views_{events}_{seed}"
    if not raw.exists():
        write_kineto_trace(raw, int(events * WRITTEN_PER_EVENT), seed=seed)
    cpu0 = time.process_time()
    trace, t_read = _timed(lambda: read_trace(raw))
    bd, t_bd = _timed(lambda: operator_breakdown(trace))
    cp, t_cp = _timed(lambda: critical_path(trace))
    views_obj, t_views = _timed(lambda: compute_page_data(trace, STORED, breakdown=bd, path=cp))
    shutil.rmtree(views, ignore_errors=True)  # no files of an earlier run counted
    _, t_save = _timed(lambda: views_obj.save(views))
    cpu = time.process_time() - cpu0
    print(
        f"trace seed {seed}: {len(trace):,} events, {raw.stat().st_size / 1e6:.0f} MB JSON\n"
        f"  read {t_read:.2f} s  breakdown {t_bd:.2f} s  critical path {t_cp:.2f} s  "
        f"views {t_views:.2f} s  store {t_save:.2f} s  "
        f"-> analysis with views {t_read + t_bd + t_cp + t_views + t_save:.2f} s (CPU {cpu:.2f} s)"
    )
    print("  views by part: " + ", ".join(f"{k} {v:.2f} s" for k, v in views_obj.seconds.items()))
    size = sum(f.stat().st_size for f in views.rglob("*") if f.is_file())
    print(f"  stored views: {size / 1e6:.0f} MB, {len(views_obj.documents['paths']['valid_steps'])} step paths")
    return views


def requests(views_a: Path, views_b: Path, repeat: int) -> None:
    layout = load_timeline(views_a)
    t0, t1 = layout.span_ns
    print(f"requests (median / worst of {repeat}, JSON encoding included):")
    for frac in (1.0, 0.1, 0.01, 0.001):
        start = t0 + int((t1 - t0) * (1 - frac) / 2)
        end = start + max(int((t1 - t0) * frac), 1)

        def one(start=start, end=end):
            lay = load_timeline(views_a)  # as a request would: memory-mapped, not cached
            return orjson.dumps(window(lay, start, end, 1600, max_bars=MAX_BARS, max_edges=MAX_EDGES).to_dict())

        med, worst, body = _repeat(one, repeat)
        doc = orjson.loads(body)
        print(
            f"  timeline {frac:>6.1%} of the span, 1600 px: {med:6.1f} / {worst:6.1f} ms, "
            f"{len(doc['bars']['row']):,} bars for {doc['events_in_window']:,} events, "
            f"{len(body) / 1e3:.0f} kB"
        )
    med, worst, body = _repeat(lambda: orjson.dumps(load_document(views_a, "flame")), repeat)
    print(f"  flame (both sides): {med:6.1f} / {worst:6.1f} ms, {len(body) / 1e3:.0f} kB")

    def compare_stored():
        a, b = load_document(views_a, "op_table"), load_document(views_b, "op_table")
        return orjson.dumps(compare_tables(a, b))

    med, worst, body = _repeat(compare_stored, repeat)
    print(f"  comparison of the two traces: {med:6.1f} / {worst:6.1f} ms, {len(body) / 1e3:.0f} kB")
    med, worst, _ = _repeat(lambda: orjson.dumps(load_document(views_a, "paths")["whole"]), repeat)
    print(f"  critical-path table: {med:6.1f} / {worst:6.1f} ms")
    event = int(layout.columns["event"][len(layout) // 2])
    med, worst, _ = _repeat(lambda: orjson.dumps(load_timeline(views_a).event_detail(event)), repeat)
    print(f"  one event's details: {med:6.1f} / {worst:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    directory = ROOT / "var" / "bench" / "trace_views"
    directory.mkdir(parents=True, exist_ok=True)
    views_a = prepare(directory, args.events, seed=1)
    views_b = prepare(directory, args.events, seed=2)
    requests(views_a, views_b, args.repeat)


if __name__ == "__main__":
    main()
