"""Analysis results of one trace, as files beside it, so that no request re-reads the raw trace.

Files of the trace's folder (traces/store/files.py):

``summary.json``
    The header (events, span, kinds, metadata), the operator breakdown of both sides
    (one row per (side, kind, operator type), with ``first``/``n``: where its instances
    lie in the instance file), and the string tables the instance file refers to.
``instances.bin``
    One fixed-width record per counted event (:data:`RECORD`), sorted by breakdown row and,
    within a row, by duration (longest first): a drill-down page is one contiguous read.
``args.bin``
    The events' argument dicts as JSON, concatenated (in the trace's event order); each
    record has the offset and length of its own.
``chrome.json.gz``
    The trace as Chrome trace JSON with the critical path marked (written after the rest).

Everything here takes the trace's :class:`~traces.store.files.TraceFiles`; nothing reads the database.
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from traces import atrace
from traces.atrace.io import blocks
from traces.store.files import ARGS, CHROME, INSTANCES, SUMMARY, TraceFiles, reading_result

RECORD = np.dtype(
    [
        ("ts", "<i8"),  # ns, trace clock
        ("dur", "<i8"),  # ns
        ("self", "<i8"),  # ns
        ("args_off", "<i8"),  # byte offset in args.bin
        ("args_len", "<i4"),
        ("name", "<i4"),  # index into summary["strings"]
        ("track", "<i4"),  # index into summary["tracks"]
        ("launcher", "<i4"),  # host operator that launched it (index into strings), -1
    ]
)
HISTOGRAM_BINS = 30


# -- writing (in the worker) -----------------------------------------------------------
@dataclass
class Written:
    events: int
    span_us: float
    start_us: float
    bytes: int


def _launchers(trace: atrace.Trace, corr: atrace.Correlation | None = None) -> np.ndarray:
    """Per event: the framework operator whose runtime call launched it (-1 if none)."""
    corr = corr if corr is not None else atrace.correlate(trace)
    out = np.full(len(trace), -1, np.int64)
    has_op = corr.host_op >= 0
    out[corr.device_events[has_op]] = corr.host_op[has_op]
    return out


def _local_strings(trace: atrace.Trace, name_ids: np.ndarray) -> tuple[list[str], np.ndarray]:
    """A small string table for the names used, and each id mapped into it."""
    used = np.flatnonzero(np.bincount(name_ids, minlength=len(trace.strings)))
    lookup = np.full(len(trace.strings), -1, np.int32)
    lookup[used] = np.arange(len(used), dtype=np.int32)
    strings = trace.strings.strings
    return [strings[i] for i in used.tolist()], lookup[name_ids]


def write_results(
    files: TraceFiles, trace: atrace.Trace, bd: atrace.Breakdown | None = None,
    corr: atrace.Correlation | None = None,
) -> Written:
    """Analyse ``trace`` and store summary, instances and args; returns the sizes (a
    breakdown and correlation already computed are reused)."""
    bd = bd if bd is not None else atrace.operator_breakdown(trace)
    order = np.lexsort((-trace.dur[bd.events], bd.group))
    events = bd.events[order]
    group = bd.group[order]

    launcher_ev = _launchers(trace, corr)[events]
    name_ids = np.concatenate([trace.name[events], trace.name[np.maximum(launcher_ev, 0)]])
    strings, local = _local_strings(trace, name_ids)

    records = np.zeros(len(events), RECORD)
    records["ts"] = trace.ts[events]
    records["dur"] = trace.dur[events]
    records["self"] = bd.self_ns[order]
    records["name"] = local[: len(events)]
    records["track"] = trace.track[events]
    records["launcher"] = np.where(launcher_ev >= 0, local[len(events) :], -1)
    # The args stay in the engine's order (one write, no copy); records point into them.
    args_blob = trace.args.blob
    records["args_off"] = trace.args.offsets[events]
    records["args_len"] = trace.args.offsets[events + 1] - records["args_off"]

    first = np.searchsorted(group, np.arange(len(bd.keys)))
    summary = _summary(trace, bd, first, strings)
    sizes = [
        files.save(INSTANCES, records.tobytes()),
        files.save(ARGS, blocks.compress(args_blob)),  # 12-20x smaller; read by block
        files.save(SUMMARY, orjson.dumps(summary)),
    ]
    return Written(
        events=len(trace),
        span_us=summary["header"]["span_us"],
        start_us=summary["header"]["start_us"],
        bytes=sum(sizes),
    )


def _summary(trace: atrace.Trace, bd: atrace.Breakdown, first: np.ndarray, strings: list[str]):
    index = {key: g for g, key in enumerate(bd.keys)}
    rows = []
    for side in ("host", "device"):
        for row in bd.rows(side):
            g = index[(row["side"], row["kind"], row["op"])]
            rows.append({**row, "group": g, "first": int(first[g])})
    header = trace.summary()
    meta = {k: v for k, v in trace.meta.items() if isinstance(v, str | int | float | bool)}
    return {
        "header": header,
        "meta": meta,
        "span_us": bd.span_ns / 1000,
        "busy_us": {k: v / 1000 for k, v in bd.busy_ns.items()},
        "rows": rows,
        "strings": strings,
        "tracks": [t.label for t in trace.tracks],
        "steps": atrace.steps(trace),
    }


def critical_path_or_none(trace: atrace.Trace):
    try:
        return atrace.critical_path(trace)
    except atrace.TraceError:
        return None  # nothing to build a path from


def write_chrome(files: TraceFiles, trace: atrace.Trace, path=None) -> int:
    """The Chrome trace export with the critical path marked, gzipped."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1) as gz:
        atrace.write_chrome_trace(trace, gz, critical_path=path, gzip_output=False)
    return files.save(CHROME, buf.getvalue())


# -- reading (in requests) -------------------------------------------------------------
def read_summary(files: TraceFiles) -> dict[str, Any]:
    with reading_result(files.owner, "summary"), files.open(SUMMARY) as f:
        return orjson.loads(f.read())


def read_records(files: TraceFiles, first: int, count: int) -> np.ndarray:
    """Records ``first`` .. ``first + count`` of the instance file: one ranged read."""
    with reading_result(files.owner, "instances"):
        with files.open(INSTANCES) as f:
            f.seek(first * RECORD.itemsize)
            data = f.read(count * RECORD.itemsize)
        if len(data) != count * RECORD.itemsize:
            raise ValueError(f"the instance file ends {count * RECORD.itemsize - len(data)} bytes short of record {first + count}")
        return np.frombuffer(data, RECORD)


def read_args(files: TraceFiles, records: np.ndarray) -> list[dict[str, Any]]:
    """The argument dicts of ``records``: memory-mapped where the storage is a local file
    system, else one ranged read spanning them."""
    if not len(records):
        return []
    with reading_result(files.owner, "arguments"):
        return _read_args(files, records["args_off"].tolist(), records["args_len"].tolist())


def _read_args(files: TraceFiles, offsets: list[int], lengths: list[int]) -> list[dict[str, Any]]:
    """The args of each (offset, length) of the uncompressed blob. The file is block-compressed
    (`traces.atrace.io.blocks`): the spans are read in the blob's order, so each block they
    span is read and decompressed once. A trace stored before the format has the blob plain:
    memory-mapped where the storage is a local file system, else one ranged read spanning them."""
    spans = list(zip(offsets, lengths, strict=True))
    folder = files.local_folder()
    with (folder / ARGS).open("rb") if folder is not None else files.open(ARGS) as f:
        if blocks.is_blocks(f.read(len(blocks.MAGIC))):
            blob = blocks.BlockBytes(lambda offset, size: _read_at(f, offset, size))
            out: list[dict[str, Any]] = [{} for _ in spans]  # one dict each: a caller may fill them
            for k in sorted(range(len(spans)), key=offsets.__getitem__):
                o, n = spans[k]
                if n:
                    out[k] = orjson.loads(blob[o : o + n])
            return out
        if folder is not None and os.fstat(f.fileno()).st_size:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as plain:
                return [orjson.loads(plain[o : o + n]) if n else {} for o, n in spans]
        lo = min(offsets)
        hi = max(o + n for o, n in spans)
        f.seek(lo)
        blob = f.read(hi - lo)
    return [orjson.loads(blob[o - lo : o - lo + n]) if n else {} for o, n in spans]


def _read_at(f, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)


def histogram(dur_ns: np.ndarray, bins: int = HISTOGRAM_BINS) -> dict[str, list[float]]:
    """Counts of durations in equal-width bins (µs edges)."""
    if not len(dur_ns):
        return {"edges_us": [], "counts": []}
    counts, edges = np.histogram(dur_ns / 1000.0, bins=bins)
    return {"edges_us": [round(float(e), 3) for e in edges], "counts": counts.tolist()}
