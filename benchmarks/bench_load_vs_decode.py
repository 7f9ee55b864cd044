"""Atrace's load against the decode of the same bytes, in one process (issue 40).

    python benchmarks/bench_load_vs_decode.py [--events 1000000] [--shape kineto] [--repeat 2]
                                              [--trace FILE | --tile REAL] [--profile]

Generates a Kineto-shaped trace (tests.support.tracegen: three-decimal epoch times, ac2g
and fwdbwd flows, deep stacks, operator and kernel args) under benchmarks/out/ unless
``--trace`` names one, or ``--tile`` a real trace (by default ``ddp_nccl_rank0``: fractional
times on every event, ac2g and fwdbwd flows, real operator stacks and args) repeated end to
end, its times shifted exactly and its ids kept distinct, to about ``--events``; reads its
bytes once, then times, best of ``--repeat``:

* ``orjson``: ``orjson.loads`` of the bytes (every event a dict);
* ``msgspec``: a typed msgspec decode of the bytes into structs (ph, name, cat, ts, dur,
  pid, tid, with args left as raw JSON text), the floor for any decoder that keeps what
  Atrace keeps;
Batches are decoded by the event scanner where it is built (``ATRACE_NO_NATIVE=1``: by
msgspec alone, as before it):

* ``load``: ``read_trace`` of the bytes in this process (one process, from memory, so
  no file system and no second process in the figure);
* ``load_file``: ``read_trace`` of the file as it chooses (two processes for a large file).

It prints load / orjson and load / msgspec (issue 40's goals: at most 0.25 and 1.5), and with
``--profile`` the top of a cProfile of one in-process load.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import time
from pathlib import Path

import msgspec
import orjson
from harness import HERE, load_average

from traces.atrace import read_trace
from traces.atrace.io.chrome import native


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    args: msgspec.Raw = msgspec.Raw(b"")


class _File(msgspec.Struct, gc=False):
    traceEvents: list[_Event]  # noqa: N815 - the JSON key


_DECODER = msgspec.json.Decoder(_File)


def trace_for(n: int, shape: str) -> Path:
    from tests.support.tracegen import write_kineto_trace

    folder = HERE / "out" / f"{shape}_{n}"
    path = folder / "rank0.trace.json"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        count = write_kineto_trace(path, n, seed=n, shape=shape)
        print(f"generated {path} ({count:,} events)", flush=True)
    return path


def tiled_real_trace(name: str, n: int) -> Path:
    """The real trace ``name`` repeated until it holds about ``n`` events: each copy later
    by the trace's span (times added as exact decimals, written back as the same text), its
    flow, correlation and External ids offset; metadata once."""
    import gzip
    import json
    from decimal import Decimal

    from tests.support.traces import REAL_TRACES

    path = HERE / "out" / f"tile_{name}_{n}" / "rank0.trace.json"
    if path.exists():
        return path
    with gzip.open(REAL_TRACES / f"{name}.json.gz") as f:
        doc = json.load(f, parse_float=Decimal)
    events = doc.pop("traceEvents")
    timed = [e for e in events if "ts" in e]
    start = min(Decimal(e["ts"]) for e in timed)
    span = max(Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in timed) - start + 1000
    copies = max(1, round(n / len(events)))

    def number(value):
        if isinstance(value, Decimal):
            return float(value)
        raise TypeError(type(value))

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write(json.dumps(doc, default=number)[:-1] + ', "traceEvents": [\n')
        sep = ""
        for k in range(copies):
            for e in events:
                if k and e.get("ph") == "M":
                    continue
                e = dict(e)
                exact = {}
                for key, shift in (("ts", k * span), ("dur", 0)):
                    if isinstance(e.get(key), (Decimal, int)):
                        exact[key] = str(Decimal(e[key]) + shift)
                        e[key] = f"@{key}@"
                if isinstance(e.get("id"), int):
                    e["id"] += k * 10_000_000
                if isinstance(e.get("args"), dict):
                    e["args"] = {a: v + k * 10_000_000 if a in ("correlation", "External id") and isinstance(v, int)
                                 else v for a, v in e["args"].items()}
                text = json.dumps(e, default=number)
                for key, value in exact.items():
                    text = text.replace(f'"@{key}@"', value)
                out.write(sep + text)
                sep = ",\n"
        out.write("\n]}\n")
    print(f"generated {path} ({copies} copies of {name})", flush=True)
    return path


def best_of(repeat: int, fn) -> tuple[float, float]:
    """The fastest of ``repeat`` runs: (wall seconds, CPU seconds of this process and
    its children). On a shared machine the CPU time is the steadier figure."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        gc.collect()
        kids = os.times()
        t0, c0 = time.perf_counter(), kids.user + kids.system + kids.children_user + kids.children_system
        result = fn()
        done = os.times()
        wall = time.perf_counter() - t0
        cpu = done.user + done.system + done.children_user + done.children_system - c0
        best = min(best, (wall, cpu))
        del result
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--shape", default="kineto", choices=["kineto", "compact"])
    parser.add_argument("--trace", type=Path, help="time this trace instead of a generated one")
    parser.add_argument("--tile", nargs="?", const="ddp_nccl_rank0", metavar="REAL",
                        help="time a real trace (ddp_nccl_rank0 unless named) repeated to about --events")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one in-process load")
    parser.add_argument("--no-file", action="store_true", help="skip the load of the file (as read_trace chooses)")
    args = parser.parse_args()

    path = args.trace or (tiled_real_trace(args.tile, args.events) if args.tile else trace_for(args.events, args.shape))
    data = path.read_bytes()
    print(f"{path}: {len(data) / 1e6:.0f} MB; load average {load_average()} on {os.cpu_count()} CPUs")
    scanner = "the event scanner (C)" if native.scan is not None else "msgspec alone (the event scanner is not built, or ATRACE_NO_NATIVE is set)"
    print(f"  batches decoded by {scanner}")

    events = len(_DECODER.decode(data).traceEvents)
    figures = {
        "orjson": best_of(args.repeat, lambda: orjson.loads(data)),
        "msgspec": best_of(args.repeat, lambda: _DECODER.decode(data)),
        "load": best_of(args.repeat, lambda: read_trace(io.BytesIO(data))),
    }
    if not args.no_file:
        figures["load_file"] = best_of(args.repeat, lambda: read_trace(path))
    for k, (wall, cpu) in figures.items():
        print(f"  {k:<10} {wall:7.3f} s wall {cpu:7.3f} s CPU")
    for k, name in ((0, "wall"), (1, "CPU")):
        line = [f"  {name}:"]
        for step in ("load", "load_file"):
            if step in figures:
                line.append(f"{step} / orjson = {figures[step][k] / figures['orjson'][k]:.2f}, "
                            f"{step} / msgspec = {figures[step][k] / figures['msgspec'][k]:.2f};")
        print(" ".join(line))
    print(f"  {events:,} events; goals (issue 40): load <= 0.25 x orjson and <= 1.5 x msgspec")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        read_trace(io.BytesIO(data))
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
